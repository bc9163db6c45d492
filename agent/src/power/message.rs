//! What each IOKit system-power message means and whether it must be
//! answered. Pure, compiled and tested on every OS; `macos.rs` only calls
//! [`decode`] from its callback and asserts these numbers against
//! `objc2-io-kit`'s at compile time.
//!
//! Numbers from `IOKit/IOMessage.h`: `iokit_common_msg(message)` is
//! `sys_iokit | sub_iokit_common | message` with `sys_iokit =
//! err_system(0x38) = 0x38 << 26 = 0xE0000000` and `sub_iokit_common =
//! err_sub(0) = 0` (`IOKit/IOReturn.h`, `mach/error.h`). Meanings and the
//! duty to answer from `IOKit/pwr_mgt/IOPMLib.h` (`IORegisterForSystemPower`,
//! `IOAllowPowerChange`): a registered process that does not answer
//! `kIOMessageCanSystemSleep` or `kIOMessageSystemWillSleep` holds the sleep
//! up for 30 s; it must not answer the others.

use super::Notice;

/// `sys_iokit | sub_iokit_common`.
const IOKIT_COMMON: u32 = 0xE000_0000;

/// `kIOMessageCanSystemSleep`: idle sleep is being considered (vetoable).
pub const CAN_SYSTEM_SLEEP: u32 = IOKIT_COMMON | 0x270;
/// `kIOMessageSystemWillSleep`: sleep is happening (not vetoable).
pub const SYSTEM_WILL_SLEEP: u32 = IOKIT_COMMON | 0x280;
/// `kIOMessageSystemWillNotSleep`: a considered idle sleep was vetoed.
pub const SYSTEM_WILL_NOT_SLEEP: u32 = IOKIT_COMMON | 0x290;
/// `kIOMessageSystemHasPoweredOn`: the wake is complete.
pub const SYSTEM_HAS_POWERED_ON: u32 = IOKIT_COMMON | 0x300;
/// `kIOMessageSystemWillPowerOn`: early in the wake, before the hardware.
pub const SYSTEM_WILL_POWER_ON: u32 = IOKIT_COMMON | 0x320;

/// What to do with one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// Answer it with `IOAllowPowerChange(port, argument)`.
    pub allow: bool,
    /// What it tells the detector, if anything.
    pub notice: Option<Notice>,
}

/// The handling of message type `message`. The agent never vetoes: the
/// assertion (`prevent_sleep`) is the way to keep the machine awake, and a
/// sleep that happens anyway is recorded, not fought.
pub fn decode(message: u32) -> Decoded {
    match message {
        CAN_SYSTEM_SLEEP => Decoded {
            allow: true,
            notice: None,
        },
        SYSTEM_WILL_SLEEP => Decoded {
            allow: true,
            notice: Some(Notice::WillSleep),
        },
        SYSTEM_HAS_POWERED_ON => Decoded {
            allow: false,
            notice: Some(Notice::HasPoweredOn),
        },
        // Will-not-sleep, will-power-on and the rest: only listened to.
        _ => Decoded {
            allow: false,
            notice: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_iomessage_h() {
        // The literal values printed by a C program including IOMessage.h
        // (and found in every power-watch sample that logs them).
        assert_eq!(CAN_SYSTEM_SLEEP, 0xE000_0270);
        assert_eq!(SYSTEM_WILL_SLEEP, 0xE000_0280);
        assert_eq!(SYSTEM_WILL_NOT_SLEEP, 0xE000_0290);
        assert_eq!(SYSTEM_HAS_POWERED_ON, 0xE000_0300);
        assert_eq!(SYSTEM_WILL_POWER_ON, 0xE000_0320);
    }

    #[test]
    fn sleep_messages_are_allowed_and_the_rest_are_not_answered() {
        let d = decode(CAN_SYSTEM_SLEEP);
        assert!(d.allow);
        assert_eq!(d.notice, None);
        let d = decode(SYSTEM_WILL_SLEEP);
        assert!(d.allow);
        assert_eq!(d.notice, Some(Notice::WillSleep));
        let d = decode(SYSTEM_HAS_POWERED_ON);
        assert!(!d.allow);
        assert_eq!(d.notice, Some(Notice::HasPoweredOn));
        for m in [SYSTEM_WILL_NOT_SLEEP, SYSTEM_WILL_POWER_ON, 0, u32::MAX] {
            assert_eq!(
                decode(m),
                Decoded {
                    allow: false,
                    notice: None
                },
                "{m:#x}"
            );
        }
    }
}
