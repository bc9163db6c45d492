//! Power on macOS: the clock gap (`CLOCK_MONOTONIC_RAW` counts sleep,
//! `CLOCK_UPTIME_RAW` does not: clock_gettime(3), over
//! `mach_continuous_time` and `mach_absolute_time`), the system power
//! notifications of `IORegisterForSystemPower` delivered on this thread's
//! CFRunLoop, and the `PreventUserIdleSystemSleep` assertion.
//!
//! IOKit and CoreFoundation calls go through `objc2-io-kit` and
//! `objc2-core-foundation` (already linked for the SMC reader), which
//! declare them and link the frameworks. No struct crosses into the kernel
//! here: the calls pass a mach port (`io_connect_t`), an assertion id
//! (`IOPMAssertionID`), CF objects by reference and a message number; the
//! asserts below pin the scalar widths and the message numbers
//! [`super::message`] decodes to what the crate declares from the SDK.
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::io;
use std::mem::size_of;
use std::time::Duration;

use nix::time::{clock_gettime, ClockId};
use objc2_core_foundation::{kCFRunLoopDefaultMode, CFRetained, CFRunLoop, CFRunLoopSource, CFString};
use objc2_io_kit::{
    io_connect_t, io_object_t, io_service_t, kIOPMAssertionLevelOn, kIOReturnSuccess,
    IOAllowPowerChange, IODeregisterForSystemPower, IONotificationPort, IONotificationPortRef,
    IOPMAssertionCreateWithName, IOPMAssertionID, IOPMAssertionRelease, IORegisterForSystemPower,
    IOServiceClose,
};

use super::message::{self, decode};
use super::{ClockReading, Notice};

// `IOKit/IOMessage.h`, as `objc2-io-kit` declares it from the SDK.
const _: () = assert!(message::CAN_SYSTEM_SLEEP == objc2_io_kit::kIOMessageCanSystemSleep);
const _: () = assert!(message::SYSTEM_WILL_SLEEP == objc2_io_kit::kIOMessageSystemWillSleep);
const _: () =
    assert!(message::SYSTEM_WILL_NOT_SLEEP == objc2_io_kit::kIOMessageSystemWillNotSleep);
const _: () =
    assert!(message::SYSTEM_HAS_POWERED_ON == objc2_io_kit::kIOMessageSystemHasPoweredOn);
const _: () = assert!(message::SYSTEM_WILL_POWER_ON == objc2_io_kit::kIOMessageSystemWillPowerOn);
// `IOKit/pwr_mgt/IOPMLib.h`: `typedef uint32_t IOPMAssertionID`,
// `kIOPMAssertionLevelOn = 255`; `io_connect_t` is a `mach_port_t`
// (`natural_t`, 32 bits): what the kernel hands back and is handed.
const _: () = assert!(size_of::<IOPMAssertionID>() == 4);
const _: () = assert!(size_of::<io_connect_t>() == 4);
const _: () = assert!(kIOPMAssertionLevelOn == 255);
// The message argument `IOAllowPowerChange` takes back is the callback's
// `void *`, passed as `intptr_t`.
const _: () = assert!(size_of::<isize>() == size_of::<*mut c_void>());

/// `kIOPMAssertPreventUserIdleSystemSleep` (`IOKit/pwr_mgt/IOPMLib.h`:
/// `CFSTR("PreventUserIdleSystemSleep")`, a macro, so not in the crate):
/// no idle system sleep; the display may still sleep, and a user or
/// `pmset sleepnow` still sleeps the machine.
const PREVENT_USER_IDLE_SYSTEM_SLEEP: &str = "PreventUserIdleSystemSleep";

/// The two clocks, read back to back, and the timeline of the second.
pub fn read_clocks() -> io::Result<ClockReading> {
    let ns = |id: libc::clockid_t| -> io::Result<u64> {
        let t = clock_gettime(ClockId::from_raw(id)).map_err(io::Error::from)?;
        Ok((t.tv_sec() as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec() as u64))
    };
    let awake_ns = ns(libc::CLOCK_UPTIME_RAW)?;
    let suspend_ns = ns(libc::CLOCK_MONOTONIC_RAW)?;
    Ok(ClockReading {
        awake_ns,
        suspend_ns,
        // The timeline runs on this very clock (mach_continuous_time): placing the
        // event from this read keeps it on the slept time it measured.
        unix_ns: crate::clock::clock().at(suspend_ns),
    })
}

/// What the callback shares with [`Notifications::wait`], on one thread.
struct Inbox {
    /// The root power domain connection, to answer on.
    port: io_connect_t,
    /// Notices since the last `wait`, with their arrival time.
    notices: Vec<(Notice, u64)>,
}

/// A registration for system power notifications on the calling thread's
/// run loop. Not `Send`: it must be waited on by the thread that opened it.
pub struct Notifications {
    inbox: *mut Inbox,
    notify_port: IONotificationPortRef,
    notifier: io_object_t,
    /// Kept alive while it is on the run loop.
    source: Option<CFRetained<CFRunLoopSource>>,
}

/// Called by IOKit from inside [`CFRunLoop::run_in_mode`] on the thread that
/// registered, for every system power message.
unsafe extern "C-unwind" fn on_message(
    refcon: *mut c_void,
    _service: io_service_t,
    message_type: u32,
    argument: *mut c_void,
) {
    // SAFETY: `refcon` is the `Inbox` of a live `Notifications` (it is
    // freed only after the registration is removed), touched only by this
    // thread, and only here while the run loop runs.
    let inbox = unsafe { &mut *refcon.cast::<Inbox>() };
    let d = decode(message_type);
    if let Some(n) = d.notice {
        inbox.notices.push((n, crate::clock::now_ns()));
    }
    if d.allow {
        // Unanswered, the sleep would wait 30 s for this process.
        IOAllowPowerChange(inbox.port, argument as isize);
    }
}

impl Notifications {
    /// Registers with the root power domain and adds its source to this
    /// thread's run loop.
    pub fn open() -> io::Result<Notifications> {
        let inbox = Box::into_raw(Box::new(Inbox {
            port: 0,
            notices: Vec::new(),
        }));
        let mut notify_port: IONotificationPortRef = std::ptr::null_mut();
        let mut notifier: io_object_t = 0;
        // SAFETY: the out-pointers are live locals; `inbox` stays valid
        // until `Drop` (or the failure path below) frees it.
        let port = unsafe {
            IORegisterForSystemPower(
                inbox.cast(),
                &mut notify_port,
                Some(on_message),
                &mut notifier,
            )
        };
        if port == 0 || notify_port.is_null() {
            // SAFETY: registration failed, so nothing else holds `inbox`.
            drop(unsafe { Box::from_raw(inbox) });
            return Err(io::Error::other("IORegisterForSystemPower failed"));
        }
        // SAFETY: `inbox` is ours; no callback runs before the run loop does.
        unsafe { (*inbox).port = port };
        // From here on, dropping `n` deregisters and frees the inbox.
        let mut n = Notifications {
            inbox,
            notify_port,
            notifier,
            source: None,
        };
        // SAFETY: `notify_port` came from the successful call above.
        let source = unsafe { IONotificationPort::run_loop_source(notify_port) }
            .ok_or_else(|| io::Error::other("IONotificationPortGetRunLoopSource failed"))?;
        let run_loop =
            CFRunLoop::current().ok_or_else(|| io::Error::other("CFRunLoopGetCurrent failed"))?;
        // SAFETY: reading an immutable CoreFoundation constant.
        run_loop.add_source(Some(&source), unsafe { kCFRunLoopDefaultMode });
        n.source = Some(source);
        Ok(n)
    }

    /// Runs this thread's run loop for up to `timeout` and returns the
    /// notices that arrived meanwhile, oldest first.
    pub fn wait(&mut self, timeout: Duration) -> Vec<(Notice, u64)> {
        // SAFETY: reading an immutable CoreFoundation constant.
        let mode = unsafe { kCFRunLoopDefaultMode };
        CFRunLoop::run_in_mode(mode, timeout.as_secs_f64(), false);
        // SAFETY: the callback ran (if at all) inside `run_in_mode`, on
        // this thread, and is done.
        std::mem::take(unsafe { &mut (*self.inbox).notices })
    }
}

impl Drop for Notifications {
    fn drop(&mut self) {
        // SAFETY: the handles came from `open`; deregistering first means
        // no callback can reach `inbox` after it is freed. Order as
        // IOPMLib.h asks: deregister, close the connection, destroy the port.
        unsafe {
            IODeregisterForSystemPower(&mut self.notifier);
            IOServiceClose((*self.inbox).port);
            IONotificationPort::destroy(self.notify_port);
            drop(Box::from_raw(self.inbox));
        }
    }
}

/// A held `PreventUserIdleSystemSleep` assertion, released on drop (and by
/// the OS if the process dies).
#[derive(Debug)]
pub struct Assertion(IOPMAssertionID);

impl Assertion {
    /// Takes the assertion, named `name` in `pmset -g assertions`.
    pub fn take(name: &str) -> io::Result<Assertion> {
        let kind = CFString::from_static_str(PREVENT_USER_IDLE_SYSTEM_SLEEP);
        let name = CFString::from_str(name);
        let mut id: IOPMAssertionID = 0;
        // SAFETY: both strings are live CF objects; `id` is a live local.
        let rc = unsafe {
            IOPMAssertionCreateWithName(Some(&kind), kIOPMAssertionLevelOn, Some(&name), &mut id)
        };
        if rc != kIOReturnSuccess {
            return Err(io::Error::other(format!(
                "IOPMAssertionCreateWithName failed: IOReturn {rc:#x}"
            )));
        }
        Ok(Assertion(id))
    }
}

impl Drop for Assertion {
    fn drop(&mut self) {
        IOPMAssertionRelease(self.0);
    }
}
