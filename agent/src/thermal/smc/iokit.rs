//! The AppleSMC user client (macOS only): opens the SMC through IOKit and
//! reads keys with `IOConnectCallStructMethod` selector 2, the way macmon
//! and the public SMC tools do, without root. The struct it passes is
//! defined here and asserted at compile time against
//! [`super::KeyDataLayout`]; everything about what the bytes mean is in
//! that pure parent module.
//!
//! IOKit calls go through `objc2-io-kit` (already linked by `sysinfo`),
//! which declares them and links the framework.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_void, CStr};
use std::mem::{offset_of, size_of};

use objc2_core_foundation::{CFDictionary, CFRetained};
use objc2_io_kit::{
    io_connect_t, io_iterator_t, kIOMainPortDefault, kIOReturnSuccess, IOConnectCallStructMethod,
    IOIteratorNext, IOObjectRelease, IORegistryEntryGetName, IOServiceClose,
    IOServiceGetMatchingServices, IOServiceMatching, IOServiceOpen,
};

use super::{
    self as smc, FourCc, KeyDataLayout as L, KeyInfo, CMD_READ_BYTES, CMD_READ_INDEX,
    CMD_READ_KEYINFO, RESULT_KEY_NOT_FOUND, RESULT_SUCCESS, SELECTOR,
};

/// `SMCKeyData_vers_t`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct Vers {
    major: u8,
    minor: u8,
    build: u8,
    reserved: u8,
    release: u16,
}

/// `SMCKeyData_pLimitData_t`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct PLimitData {
    version: u16,
    length: u16,
    cpu_p_limit: u32,
    gpu_p_limit: u32,
    mem_p_limit: u32,
}

/// `SMCKeyData_keyInfo_t`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct KeyInfoData {
    data_size: u32,
    data_type: u32,
    data_attributes: u8,
}

/// `SMCKeyData_t`, in and out of selector 2.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct KeyData {
    key: u32,
    vers: Vers,
    p_limit_data: PLimitData,
    key_info: KeyInfoData,
    result: u8,
    status: u8,
    data8: u8,
    data32: u32,
    bytes: [u8; L::BYTES_LEN],
}
const _: () = assert!(size_of::<KeyData>() == L::SIZE);
const _: () = assert!(offset_of!(KeyData, key) == L::KEY);
const _: () = assert!(offset_of!(KeyData, vers) == L::VERS);
const _: () = assert!(offset_of!(KeyData, p_limit_data) == L::P_LIMIT_DATA);
const _: () = assert!(offset_of!(KeyData, key_info) == L::KEY_INFO);
const _: () =
    assert!(offset_of!(KeyData, key_info) + offset_of!(KeyInfoData, data_type) == L::KEY_INFO_TYPE);
const _: () = assert!(offset_of!(KeyData, result) == L::RESULT);
const _: () = assert!(offset_of!(KeyData, data8) == L::DATA8);
const _: () = assert!(offset_of!(KeyData, data32) == L::DATA32);
const _: () = assert!(offset_of!(KeyData, bytes) == L::BYTES);

/// Why an SMC call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SmcError {
    /// No AppleSMC service (a VM, or a future macOS without it).
    #[error("no AppleSMC service")]
    NoService,
    /// An IOKit call returned this `kern_return_t`.
    #[error("{call} returned {code:#x}")]
    Kern {
        /// The call.
        call: &'static str,
        /// Its return code.
        code: i32,
    },
    /// The SMC answered with a non-zero result byte.
    #[error("SMC key {key}: result {result:#x}")]
    Smc {
        /// The key asked for.
        key: FourCc,
        /// The SMC's result byte ([`RESULT_KEY_NOT_FOUND`] and others).
        result: u8,
    },
    /// The value did not decode.
    #[error(transparent)]
    Decode(#[from] smc::DecodeError),
}

/// An open connection to the AppleSMC user client; closed on drop.
#[derive(Debug)]
pub(crate) struct Smc {
    conn: io_connect_t,
}

/// The service to open among those matching `AppleSMC`: on Apple Silicon
/// several match and the keys live behind `AppleSMCKeysEndpoint`; Intel
/// Macs have one, named `AppleSMC`.
const KEYS_ENDPOINT: &CStr = c"AppleSMCKeysEndpoint";

impl Smc {
    /// Opens the SMC.
    pub(crate) fn open() -> Result<Smc, SmcError> {
        // SAFETY: the argument is a NUL-terminated static string.
        let matching =
            unsafe { IOServiceMatching(c"AppleSMC".as_ptr()) }.ok_or(SmcError::NoService)?;
        let matching = CFRetained::<CFDictionary>::from(&matching);
        let mut iter: io_iterator_t = 0;
        // SAFETY: `matching` is a valid dictionary whose reference the call
        // consumes; `iter` is a valid out-pointer. kIOMainPortDefault is an
        // immutable IOKit constant.
        let kr =
            unsafe { IOServiceGetMatchingServices(kIOMainPortDefault, Some(matching), &mut iter) };
        if kr != kIOReturnSuccess {
            return Err(SmcError::Kern {
                call: "IOServiceGetMatchingServices",
                code: kr,
            });
        }
        // Prefer the keys endpoint; else the first service.
        let mut chosen = 0;
        loop {
            let service = IOIteratorNext(iter);
            if service == 0 {
                break;
            }
            let mut name = [0 as c_char; 128];
            // SAFETY: `name` is the 128-byte io_name_t buffer the call
            // fills with a NUL-terminated string; it outlives the call.
            let kr = unsafe { IORegistryEntryGetName(service, &mut name) };
            // SAFETY: on success `name` holds a NUL-terminated string
            // within its 128 bytes.
            let endpoint =
                kr == kIOReturnSuccess && unsafe { CStr::from_ptr(name.as_ptr()) } == KEYS_ENDPOINT;
            if chosen == 0 || endpoint {
                if chosen != 0 {
                    IOObjectRelease(chosen);
                }
                chosen = service;
            } else {
                IOObjectRelease(service);
            }
            if endpoint {
                break;
            }
        }
        IOObjectRelease(iter);
        if chosen == 0 {
            return Err(SmcError::NoService);
        }
        let mut conn: io_connect_t = 0;
        // SAFETY: `chosen` is a live service object we hold a reference
        // to; mach_task_self() is this task's port; `conn` is a valid
        // out-pointer.
        let kr = unsafe { IOServiceOpen(chosen, mach2::traps::mach_task_self(), 0, &mut conn) };
        IOObjectRelease(chosen);
        if kr != kIOReturnSuccess {
            return Err(SmcError::Kern {
                call: "IOServiceOpen",
                code: kr,
            });
        }
        Ok(Smc { conn })
    }

    /// One selector-2 call.
    fn call(&self, key: FourCc, input: &KeyData) -> Result<KeyData, SmcError> {
        let mut output = KeyData::default();
        let mut out_len = size_of::<KeyData>();
        // SAFETY: input and output are `SMCKeyData_t` (layout asserted
        // above), live for the call, with their true sizes; `conn` is open
        // until drop.
        let kr = unsafe {
            IOConnectCallStructMethod(
                self.conn,
                SELECTOR,
                (input as *const KeyData).cast::<c_void>(),
                size_of::<KeyData>(),
                (&mut output as *mut KeyData).cast::<c_void>(),
                &mut out_len,
            )
        };
        if kr != kIOReturnSuccess {
            return Err(SmcError::Kern {
                call: "IOConnectCallStructMethod",
                code: kr,
            });
        }
        if out_len != size_of::<KeyData>() {
            // A short answer is not a struct we can read.
            return Err(SmcError::Kern {
                call: "IOConnectCallStructMethod (short output)",
                code: i32::try_from(out_len).unwrap_or(i32::MAX),
            });
        }
        if output.result != RESULT_SUCCESS {
            return Err(SmcError::Smc {
                key,
                result: output.result,
            });
        }
        Ok(output)
    }

    /// The size and type of `key`.
    pub(crate) fn key_info(&self, key: FourCc) -> Result<KeyInfo, SmcError> {
        let out = self.call(
            key,
            &KeyData {
                key: key.to_u32(),
                data8: CMD_READ_KEYINFO,
                ..KeyData::default()
            },
        )?;
        Ok(KeyInfo {
            size: out.key_info.data_size,
            data_type: FourCc::from_u32(out.key_info.data_type),
        })
    }

    /// The raw value of `key`, whose info is `info`.
    pub(crate) fn read(&self, key: FourCc, info: KeyInfo) -> Result<[u8; L::BYTES_LEN], SmcError> {
        let out = self.call(
            key,
            &KeyData {
                key: key.to_u32(),
                key_info: KeyInfoData {
                    data_size: info.size,
                    data_type: info.data_type.to_u32(),
                    data_attributes: 0,
                },
                data8: CMD_READ_BYTES,
                ..KeyData::default()
            },
        )?;
        Ok(out.bytes)
    }

    /// The key at `index` of the SMC's key table.
    fn key_at(&self, index: u32) -> Result<FourCc, SmcError> {
        let out = self.call(
            smc::KEY_COUNT,
            &KeyData {
                data8: CMD_READ_INDEX,
                data32: index,
                ..KeyData::default()
            },
        )?;
        Ok(FourCc::from_u32(out.key))
    }

    /// Every key with its info, at most [`smc::MAX_KEYS`]; keys that fail
    /// are skipped (counted in the returned number).
    pub(crate) fn enumerate(&self) -> Result<(Vec<(FourCc, KeyInfo)>, u32), SmcError> {
        let info = self.key_info(smc::KEY_COUNT)?;
        let count = smc::key_count(info, &self.read(smc::KEY_COUNT, info)?)?;
        let mut keys = Vec::with_capacity(count as usize);
        let mut failed = 0;
        for i in 0..count {
            match self.key_at(i).and_then(|k| Ok((k, self.key_info(k)?))) {
                Ok(pair) => keys.push(pair),
                Err(SmcError::Smc {
                    result: RESULT_KEY_NOT_FOUND,
                    ..
                }) => failed += 1,
                Err(e) => {
                    tracing::debug!(index = i, error = %e, "SMC key enumeration");
                    failed += 1;
                }
            }
        }
        Ok((keys, failed))
    }
}

impl Drop for Smc {
    fn drop(&mut self) {
        IOServiceClose(self.conn);
    }
}
