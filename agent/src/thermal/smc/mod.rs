//! Apple SMC temperature keys, the pure part: key codes, the layout of the
//! AppleSMC user-client struct, value decoders, which keys are CPU and GPU
//! temperatures, and their sensor names. No I/O: the IOKit calls live in
//! the child `iokit` (macOS only); this file is unit-tested on every OS,
//! on bytes captured from real Macs (`agent/tests/fixtures/macos/smc/`).
//!
//! Why the SMC and not IOHID: the HID services `sysinfo` reads are die
//! aggregates whose duplicate names collapse, and on M4 they read 8-10 °C
//! below the SMC core keys. macmon and others read the SMC keys as a normal
//! user; so do we, falling back to HID where AppleSMC does not open.
//!
//! Which keys: nobody outside Apple documents them. Public readers agree on
//! `Tp*`, `Te*` (performance and efficiency cores) and `Ts*` for the CPU
//! and `Tg*` for the GPU on Apple Silicon; we take those, as macmon does.
//! Power-gated clusters report fixed sub-ambient sentinels (0, 4.6 .. 8.4
//! °C in the M2 Max capture); the shared sanity filter
//! ([`super::MIN_CELSIUS`]) drops them per key.

use std::fmt;

use super::SensorSet;

/// `IOConnectCallStructMethod` selector of the AppleSMC user client
/// (`kSMCHandleYPCEvent`); the command goes in [`KeyDataLayout::DATA8`].
pub const SELECTOR: u32 = 2;
/// Command: read a key's bytes.
pub const CMD_READ_BYTES: u8 = 5;
/// Command: the key at an index (`data32`), for enumeration.
pub const CMD_READ_INDEX: u8 = 8;
/// Command: a key's size and data type.
pub const CMD_READ_KEYINFO: u8 = 9;
/// SMC result byte: success.
pub const RESULT_SUCCESS: u8 = 0;
/// SMC result byte: no such key.
pub const RESULT_KEY_NOT_FOUND: u8 = 0x84;
/// The key whose value is the number of keys.
pub const KEY_COUNT: FourCc = FourCc(*b"#KEY");

/// At most this many keys are enumerated (Apple Silicon Macs have 1,500 to
/// 3,000); a larger `#KEY` is clamped, bounding start-up work.
pub const MAX_KEYS: u32 = 8192;
/// At most this many temperature keys are read per reading.
pub const MAX_SENSORS: usize = 128;

/// Offsets and size of `SMCKeyData_t`, the 80-byte struct passed both ways
/// through selector 2. Public readers (devnull's smc.h and its
/// descendants, macmon) declare it as: `key` u32; `vers` {4 × u8, u16};
/// `pLimitData` {u16, u16, 3 × u32}; `keyInfo` {u32 dataSize, u32
/// dataType, u8 dataAttributes}; u8 `result`, `status`, `data8`; u32
/// `data32`; 32 `bytes`; natural C alignment. The macOS struct is asserted
/// against these at compile time.
#[derive(Debug)]
pub struct KeyDataLayout;

impl KeyDataLayout {
    /// `sizeof(SMCKeyData_t)`.
    pub const SIZE: usize = 80;
    /// `key`.
    pub const KEY: usize = 0;
    /// `vers`.
    pub const VERS: usize = 4;
    /// `pLimitData`.
    pub const P_LIMIT_DATA: usize = 12;
    /// `keyInfo.dataSize`.
    pub const KEY_INFO: usize = 28;
    /// `keyInfo.dataType`.
    pub const KEY_INFO_TYPE: usize = 32;
    /// `result`.
    pub const RESULT: usize = 40;
    /// `data8`, the command.
    pub const DATA8: usize = 42;
    /// `data32`, the index of [`CMD_READ_INDEX`].
    pub const DATA32: usize = 44;
    /// `bytes`.
    pub const BYTES: usize = 48;
    /// Length of `bytes`.
    pub const BYTES_LEN: usize = 32;
}

/// A four-character SMC code (a key such as `Tp01`, or a data type such as
/// `flt `). On the wire it is a u32 whose most significant byte is the
/// first character.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FourCc(pub [u8; 4]);

impl FourCc {
    /// From the u32 the SMC struct carries.
    pub const fn from_u32(v: u32) -> FourCc {
        FourCc(v.to_be_bytes())
    }

    /// The u32 the SMC struct carries.
    pub const fn to_u32(self) -> u32 {
        u32::from_be_bytes(self.0)
    }

    /// The code as text, when all four bytes are printable ASCII (every
    /// real key is; anything else is not turned into a sensor name).
    pub fn as_str(&self) -> Option<&str> {
        if self.0.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
            std::str::from_utf8(&self.0).ok()
        } else {
            None
        }
    }
}

impl fmt::Debug for FourCc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_str() {
            Some(s) => write!(f, "{s:?}"),
            None => write!(f, "{:#010x}", self.to_u32()),
        }
    }
}

impl fmt::Display for FourCc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A key's size and data type, from [`CMD_READ_KEYINFO`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyInfo {
    /// Bytes of the value (`dataSize`).
    pub size: u32,
    /// Its encoding (`dataType`).
    pub data_type: FourCc,
}

/// Why a value did not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Not a numeric type we decode.
    #[error("SMC data type {0} is not a number we decode")]
    UnknownType(FourCc),
    /// The key's declared size does not fit its type.
    #[error("SMC data type {data_type} with size {size}")]
    SizeMismatch {
        /// The type.
        data_type: FourCc,
        /// The declared size.
        size: u32,
    },
    /// Fewer bytes than the size says.
    #[error("SMC value of {need} bytes, {got} given")]
    Short {
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        got: usize,
    },
}

/// A numeric SMC encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `flt `: IEEE 754 single, little-endian (Apple Silicon).
    Float,
    /// `fpXY` / `spXY`: 16-bit big-endian fixed point, `frac` fraction
    /// bits (the hex digit Y), signed for `sp` (`sp78`: 1+7+8 bits;
    /// `fpe2`: 14+2).
    Fixed {
        /// `sp` rather than `fp`.
        signed: bool,
        /// Fraction bits.
        frac: u8,
    },
    /// `ioft`: unsigned 48.16 fixed point, 8 little-endian bytes (Apple
    /// Silicon).
    Ioft,
    /// `ui8 `, `ui16`, `ui32`: big-endian unsigned integer of this many
    /// bytes.
    Unsigned(u8),
}

impl Encoding {
    /// The encoding of `data_type`, if we decode it.
    pub fn of(data_type: FourCc) -> Option<Encoding> {
        let [a, b, c, d] = data_type.0;
        match &data_type.0 {
            b"flt " => return Some(Encoding::Float),
            b"ioft" => return Some(Encoding::Ioft),
            b"ui8 " => return Some(Encoding::Unsigned(1)),
            b"ui16" => return Some(Encoding::Unsigned(2)),
            b"ui32" => return Some(Encoding::Unsigned(4)),
            _ => {}
        }
        let signed = match (a, b) {
            (b'f', b'p') => false,
            (b's', b'p') => true,
            _ => return None,
        };
        let int = char::from(c).to_digit(16)?;
        let frac = char::from(d).to_digit(16)?;
        // The bits must fill the 16-bit word exactly, or it is not this
        // family (`sp78`: 1 + 7 + 8).
        (int + frac + u32::from(signed) == 16).then_some(Encoding::Fixed {
            signed,
            frac: frac as u8,
        })
    }

    /// Bytes a value of this encoding takes.
    pub fn size(self) -> usize {
        match self {
            Encoding::Float => 4,
            Encoding::Fixed { .. } => 2,
            Encoding::Ioft => 8,
            Encoding::Unsigned(n) => usize::from(n),
        }
    }
}

/// Decodes the value of a key of `info` from the bytes the SMC returned.
pub fn decode(info: KeyInfo, bytes: &[u8]) -> Result<f64, DecodeError> {
    let enc = Encoding::of(info.data_type).ok_or(DecodeError::UnknownType(info.data_type))?;
    let need = enc.size();
    if usize::try_from(info.size).ok() != Some(need) {
        return Err(DecodeError::SizeMismatch {
            data_type: info.data_type,
            size: info.size,
        });
    }
    let b = bytes.get(..need).ok_or(DecodeError::Short {
        need,
        got: bytes.len(),
    })?;
    Ok(match enc {
        Encoding::Float => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Encoding::Fixed { signed, frac } => {
            let raw = [b[0], b[1]];
            let v = if signed {
                f64::from(i16::from_be_bytes(raw))
            } else {
                f64::from(u16::from_be_bytes(raw))
            };
            v / f64::from(1u32 << frac)
        }
        Encoding::Ioft => {
            let mut w = [0u8; 8];
            w.copy_from_slice(b);
            u64::from_le_bytes(w) as f64 / 65536.0
        }
        Encoding::Unsigned(_) => b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x)) as f64,
    })
}

/// The number of keys from the value of [`KEY_COUNT`], clamped to
/// [`MAX_KEYS`].
pub fn key_count(info: KeyInfo, bytes: &[u8]) -> Result<u32, DecodeError> {
    let n = match Encoding::of(info.data_type) {
        Some(Encoding::Unsigned(_)) => decode(info, bytes)?,
        _ => return Err(DecodeError::UnknownType(info.data_type)),
    };
    Ok((n as u64).min(u64::from(MAX_KEYS)) as u32)
}

/// What a temperature key measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// `Tp*`, `Te*`, `Ts*`.
    Cpu,
    /// `Tg*`.
    Gpu,
}

/// The group of `key`, or `None` when it is not a CPU or GPU temperature
/// key (or not printable).
pub fn classify(key: FourCc) -> Option<Group> {
    key.as_str()?;
    match &key.0[..2] {
        b"Tp" | b"Te" | b"Ts" => Some(Group::Cpu),
        b"Tg" => Some(Group::Gpu),
        _ => None,
    }
}

/// The sensor name of `key`: `smc_Tp01`. The key is the only stable
/// identity the SMC gives (case matters: `Tp0a` and `Tp0A` differ).
pub fn sensor_name(key: FourCc) -> String {
    format!("smc_{}", key.as_str().unwrap_or("????"))
}

/// The group of a sensor named by [`sensor_name`]; `None` for any other
/// name (IOHID sensors, sysfs).
pub fn sensor_group(name: &str) -> Option<Group> {
    let key: [u8; 4] = name.strip_prefix("smc_")?.as_bytes().try_into().ok()?;
    classify(FourCc(key))
}

/// A temperature key chosen for reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TempKey {
    /// The key.
    pub key: FourCc,
    /// Its size and type.
    pub info: KeyInfo,
    /// CPU or GPU.
    pub group: Group,
}

/// Picks the temperature keys from an enumeration: CPU and GPU keys whose
/// type we decode at its size, sorted by key (a stable reading order),
/// without duplicates, at most [`MAX_SENSORS`].
pub fn select(keys: impl IntoIterator<Item = (FourCc, KeyInfo)>) -> Vec<TempKey> {
    let mut out: Vec<TempKey> =
        keys.into_iter()
            .filter_map(|(key, info)| {
                let group = classify(key)?;
                let enc = Encoding::of(info.data_type)?;
                let numeric = !matches!(enc, Encoding::Unsigned(_));
                (numeric && usize::try_from(info.size).ok() == Some(enc.size()))
                    .then_some(TempKey { key, info, group })
            })
            .collect();
    out.sort_by_key(|k| k.key);
    out.dedup_by_key(|k| k.key);
    out.truncate(MAX_SENSORS);
    out
}

/// Adds one reading of `keys` to `set`: each key's bytes from `read`,
/// decoded and named [`sensor_name`] (label the key, source `smc`), then
/// through the set's sanity filter. A failed read or a value that does
/// not decode keeps its name reserved and counts as unreadable. Returns
/// how many keys read and decoded (filtered or not): 0 means the SMC gave
/// nothing this time.
pub fn add_readings<B: AsRef<[u8]>, E: fmt::Display>(
    keys: &[TempKey],
    set: &mut SensorSet<'_>,
    mut read: impl FnMut(TempKey) -> Result<B, E>,
) -> usize {
    let mut decoded = 0;
    for k in keys {
        let name = sensor_name(k.key);
        let value = match read(*k) {
            Ok(bytes) => decode(k.info, bytes.as_ref()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match value {
            Ok(celsius) => {
                decoded += 1;
                let label = k.key.as_str().unwrap_or_default();
                set.add(label, &name, celsius, "smc", 0.0);
            }
            Err(error) => {
                tracing::debug!(key = %k.key, %error, "SMC temperature unreadable");
                set.unreadable(&name);
            }
        }
    }
    decoded
}

#[cfg(target_os = "macos")]
pub(crate) mod iokit;
#[cfg(test)]
mod tests;
