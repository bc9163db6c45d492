//! The allocator's share of a daemon's memory: on glibc, at most
//! [`ARENAS`] malloc arenas.
//!
//! glibc gives threads that meet a locked arena one of their own, up to
//! eight per core, and keeps what is freed in each for reuse by its
//! threads. A collector restarted on a large store rebuilds `/metrics` on
//! blocking threads while the agents deliver their spools, so each of a
//! dozen threads grows an arena to its burst and keeps it: the 60-minute
//! chaos soak saw 4-7 MB of freed memory held that way beside 1.4-4 MB in
//! use (bench/chaos-results.md), and RSS that rose with every restart
//! until the count of arenas ran out. Both daemons do little at once (the
//! collector's store has one writer thread), so two arenas cost nothing
//! measurable (bench/store.sh) and bound the freed memory held to two
//! bursts. macOS's allocator has no per-thread arenas of this kind, and
//! other C libraries keep their own defaults.

/// Malloc arenas at most (glibc's `M_ARENA_MAX`): the main one and one
/// more.
pub const ARENAS: i32 = 2;

/// Caps the allocator's arenas at [`ARENAS`]; called before the daemon
/// starts its threads (arenas that exist stay). Returns whether the cap
/// was set (false where the C library has no such knob).
pub fn cap_arenas() -> bool {
    imp::cap_arenas()
}

/// Hands the allocator's free pages back to the kernel (glibc's
/// `malloc_trim(0)`, which also releases whole free pages inside a heap),
/// after a burst whose memory is all freed (the collector's start-up
/// rebuild). Returns whether any memory went back.
pub fn release_free() -> bool {
    imp::release_free()
}

// The two calls into glibc are the whole of this module's FFI.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod imp {
    pub fn cap_arenas() -> bool {
        // SAFETY: mallopt only sets a parameter of the allocator; glibc
        // takes its own lock for it, so any thread may call it at any time.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, super::ARENAS) == 1 }
    }

    pub fn release_free() -> bool {
        // SAFETY: malloc_trim only returns free memory; it locks each arena.
        unsafe { libc::malloc_trim(0) == 1 }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    pub fn cap_arenas() -> bool {
        false
    }

    pub fn release_free() -> bool {
        false
    }
}
