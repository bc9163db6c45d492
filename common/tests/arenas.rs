//! The arena cap holds: with it set first (as `daemon::run` does, before
//! any thread starts), threads allocating at once share at most
//! `memory::ARENAS` arenas, counted from glibc's own `malloc_info`. A
//! test binary of its own, so no other test's threads made arenas first.
#![cfg(all(target_os = "linux", target_env = "gnu"))]
// malloc_info and its memory stream are C calls.
#![allow(unsafe_code)]

use std::sync::Barrier;

use boltwatch_common::memory;

/// The arenas glibc reports (`<heap nr="N">` elements of `malloc_info`).
fn arenas() -> usize {
    let mut buf: *mut libc::c_char = std::ptr::null_mut();
    let mut len: libc::size_t = 0;
    // SAFETY: open_memstream returns a FILE writing into a buffer it
    // allocates; after fclose `buf` holds `len` bytes, freed with free().
    let xml = unsafe {
        let f = libc::open_memstream(&mut buf, &mut len);
        assert!(!f.is_null(), "open_memstream");
        assert_eq!(libc::malloc_info(0, f), 0, "malloc_info");
        libc::fclose(f);
        let xml = std::slice::from_raw_parts(buf as *const u8, len).to_vec();
        libc::free(buf.cast());
        xml
    };
    String::from_utf8(xml).unwrap().matches("<heap nr=").count()
}

#[test]
fn threads_allocating_at_once_share_at_most_the_cap() {
    assert!(memory::cap_arenas());
    let threads = 16;
    let start = Barrier::new(threads);
    std::thread::scope(|s| {
        for i in 0..threads {
            let start = &start;
            s.spawn(move || {
                start.wait();
                // Bounded churn: 2000 rounds of 64 small blocks each.
                let mut total = 0usize;
                for round in 0..2000usize {
                    let v: Vec<Vec<u8>> = (0..64)
                        .map(|k| vec![(i + k) as u8; 64 + round % 512])
                        .collect();
                    total += v.len();
                }
                assert_eq!(total, 2000 * 64);
            });
        }
    });
    let n = arenas();
    assert!(
        (1..=memory::ARENAS as usize).contains(&n),
        "{n} arenas for {threads} threads, cap {}",
        memory::ARENAS
    );
}
