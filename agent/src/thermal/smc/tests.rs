//! Decoders on bytes real Macs returned (the captures under
//! `agent/tests/fixtures/macos/smc/`, cited in its README), plus vectors
//! derived from the documented encodings where no capture was found.

use super::*;
use crate::thermal::{FilterStats, SensorSet};

/// One line of an `smc -l` style dump: `  Tp01  [flt ]  6.7 (bytes: 66 66 D6 40)`.
#[derive(Debug)]
struct Line {
    key: FourCc,
    info: KeyInfo,
    printed: f64,
    bytes: Vec<u8>,
}

fn four(s: &str) -> FourCc {
    FourCc(s.as_bytes().try_into().expect("four bytes"))
}

/// A key of `size` bytes and SMC type `data_type`.
fn info(size: u32, data_type: &str) -> KeyInfo {
    KeyInfo {
        size,
        data_type: four(data_type),
    }
}

/// Parses a capture; comment lines start with `#` in column 0 (data lines
/// are indented, so `  #KEY` is data).
fn capture(text: &str) -> Vec<Line> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let l = l.trim_start();
            let key = four(&l[..4]);
            let open = l.find('[').expect("[type]");
            let data_type = four(&l[open + 1..open + 5]);
            let rest = &l[open + 6..];
            let (printed, bytes) = rest.split_once('(').expect("(bytes");
            let bytes = bytes
                .trim_end_matches(')')
                .trim_start_matches("bytes")
                .trim_start_matches(':');
            let bytes: Vec<u8> = bytes
                .split_whitespace()
                .map(|h| u8::from_str_radix(h, 16).expect("hex byte"))
                .collect();
            Line {
                key,
                info: KeyInfo {
                    size: bytes.len() as u32,
                    data_type,
                },
                printed: printed.trim().parse().expect("printed value"),
                bytes,
            }
        })
        .collect()
}

const M2_MAX: &str = include_str!("../../../tests/fixtures/macos/smc/m2-max-tp-flt.txt");
const SP78: &str = include_str!("../../../tests/fixtures/macos/smc/intel-tg-sp78.txt");
const M1: &str = include_str!("../../../tests/fixtures/macos/smc/m1-smc-l.txt");

#[test]
fn flt_decodes_as_the_capturing_tool_printed() {
    let lines = capture(M2_MAX);
    assert_eq!(lines.len(), 26);
    for l in &lines {
        let v = decode(l.info, &l.bytes).unwrap();
        // The tool printed one decimal.
        assert!(
            (v - l.printed).abs() < 0.05,
            "{}: {v} vs {}",
            l.key,
            l.printed
        );
    }
    let ftp0 = lines.iter().find(|l| l.key == four("ftp0")).unwrap();
    let v = decode(ftp0.info, &ftp0.bytes).unwrap();
    assert!((v - 30.759).abs() < 1e-3, "{v}");
}

#[test]
fn m2_max_capture_selects_tp_keys_and_the_filter_drops_the_sentinels() {
    let lines = capture(M2_MAX);
    let keys = select(lines.iter().map(|l| (l.key, l.info)));
    // 24 Tp keys; ftP0 and ftp0 are not temperature keys.
    assert_eq!(keys.len(), 24);
    assert!(keys.iter().all(|k| k.group == Group::Cpu));
    assert!(keys.windows(2).all(|w| w[0].key < w[1].key), "sorted");
    let mut stats = FilterStats::default();
    let mut set = SensorSet::new(&mut stats);
    let decoded = add_readings(&keys, &mut set, |k| {
        let l = lines.iter().find(|l| l.key == k.key).unwrap();
        Ok::<_, String>(l.bytes.clone())
    });
    assert_eq!(decoded, 24, "every key read and decoded");
    // Every Tp value in this capture is 0 or a 4.6 .. 8.4 °C power-gating
    // sentinel: all dropped, none exported as a temperature.
    assert!(set.is_empty());
    assert_eq!(stats.out_of_range, 24);
}

#[test]
fn a_reading_names_keys_and_counts_failures_without_shifting_names() {
    let flt = info(4, "flt ");
    let keys = select([
        (four("Tp01"), flt),
        (four("Tp05"), flt),
        (four("Tp09"), flt),
        (four("Tg0f"), flt),
    ]);
    let mut stats = FilterStats::default();
    let mut set = SensorSet::new(&mut stats);
    // The ftp0 bytes of the M2 Max capture (30.76 °C) stand in for a live
    // core; Tp05 fails to read; Tp09 is the capture's 6.7 °C sentinel.
    let decoded = add_readings(&keys, &mut set, |k| match k.key.as_str() {
        Some("Tp01") | Some("Tg0f") => Ok(vec![0xB0, 0x12, 0xF6, 0x41]),
        Some("Tp09") => Ok(vec![0x66, 0x66, 0xD6, 0x40]),
        _ => Err("SMC key Tp05: result 0x84"),
    });
    assert_eq!(decoded, 3);
    let sensors = set.into_sensors();
    assert_eq!(
        stats,
        FilterStats {
            out_of_range: 1,
            placeholder: 0,
            unreadable: 1
        }
    );
    let names: Vec<_> = sensors.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["smc_Tg0f", "smc_Tp01"]);
    assert!(sensors.iter().all(|s| s.source == "smc"));
    assert!((sensors[1].celsius - 30.759).abs() < 1e-3);

    // Nothing readable: 0, so the macOS reader falls back to IOHID.
    let mut set = SensorSet::new(&mut stats);
    let none = add_readings(&keys, &mut set, |_| Err::<[u8; 4], _>("gone"));
    assert_eq!(none, 0);
    assert!(set.is_empty());
}

#[test]
fn sp78_is_signed_8_8_big_endian() {
    let lines = capture(SP78);
    assert_eq!(lines.len(), 4);
    for l in &lines {
        assert_eq!(l.info.data_type, four("sp78"));
        // The posting tool printed 0x0037 / 16 = 3.4375; as sp78 the bytes
        // 37 00 are 55.0 °C.
        assert_eq!(l.printed, 3.4375);
        assert_eq!(decode(l.info, &l.bytes), Ok(55.0));
    }
    // Tg keys are GPU temperatures, whatever the case of the rest.
    let keys = select(lines.iter().map(|l| (l.key, l.info)));
    assert!(keys.is_empty(), "TG (capital G) is an Intel key, not Tg");
    // Derived vectors: the sign bit and the fraction.
    let sp78 = info(2, "sp78");
    assert_eq!(decode(sp78, &[0xff, 0x80]), Ok(-0.5));
    assert_eq!(decode(sp78, &[0x2d, 0x40]), Ok(45.25));
}

#[test]
fn key_count_and_unsigned_from_the_m1_dump() {
    let lines = capture(M1);
    let count = lines.iter().find(|l| l.key == KEY_COUNT).unwrap();
    assert_eq!(key_count(count.info, &count.bytes), Ok(863));
    for l in &lines {
        assert_eq!(decode(l.info, &l.bytes), Ok(l.printed), "{}", l.key);
    }
    let huge = info(4, "ui32");
    assert_eq!(key_count(huge, &[0xff; 4]), Ok(MAX_KEYS), "clamped");
    let flt = info(4, "flt ");
    assert!(key_count(flt, &[0; 4]).is_err(), "#KEY must be an integer");
}

/// No capture with raw bytes was found for these: vectors derived from the
/// encodings (fpe2: unsigned 14.2 big-endian; ioft: unsigned 48.16
/// little-endian).
#[test]
fn fpe2_and_ioft_derived_vectors() {
    let fpe2 = info(2, "fpe2");
    assert_eq!(decode(fpe2, &[0x17, 0x70]), Ok(1500.0));
    assert_eq!(decode(fpe2, &[0x00, 0x03]), Ok(0.75));
    let ioft = info(8, "ioft");
    assert_eq!(decode(ioft, &[0x00, 0x80, 0x2d, 0, 0, 0, 0, 0]), Ok(45.5));
    assert_eq!(
        Encoding::of(four("sp5a")),
        Some(Encoding::Fixed {
            signed: true,
            frac: 10
        })
    );
    assert_eq!(
        Encoding::of(four("fp88")),
        Some(Encoding::Fixed {
            signed: false,
            frac: 8
        })
    );
    assert_eq!(
        Encoding::of(four("sp88")),
        None,
        "17 bits is not this family"
    );
    assert_eq!(Encoding::of(four("spzz")), None);
    assert_eq!(Encoding::of(four("flag")), None);
}

#[test]
fn decode_rejects_wrong_sizes_unknown_types_and_short_buffers() {
    assert_eq!(
        decode(info(2, "flt "), &[0; 4]),
        Err(DecodeError::SizeMismatch {
            data_type: four("flt "),
            size: 2
        })
    );
    assert_eq!(
        decode(info(1, "hex_"), &[0]),
        Err(DecodeError::UnknownType(four("hex_")))
    );
    assert_eq!(
        decode(info(4, "flt "), &[0; 3]),
        Err(DecodeError::Short { need: 4, got: 3 })
    );
}

#[test]
fn classification_names_and_selection() {
    assert_eq!(classify(four("Tp01")), Some(Group::Cpu));
    assert_eq!(classify(four("Te05")), Some(Group::Cpu));
    assert_eq!(classify(four("Ts0P")), Some(Group::Cpu));
    assert_eq!(classify(four("Tg0f")), Some(Group::Gpu));
    for other in ["TCMb", "TG0D", "ftp0", "#KEY", "tp01"] {
        assert_eq!(classify(four(other)), None, "{other}");
    }
    assert_eq!(classify(FourCc([b'T', b'p', 0, 1])), None, "unprintable");
    assert_eq!(sensor_name(four("Tp0a")), "smc_Tp0a");
    assert_eq!(sensor_group("smc_Tp0a"), Some(Group::Cpu));
    assert_eq!(sensor_group("smc_Tg0f"), Some(Group::Gpu));
    for other in ["Tp0a", "smc_TCMb", "smc_Tp0", "smc_Tp0aa", "PMU tdie1"] {
        assert_eq!(sensor_group(other), None, "{other}");
    }
    assert_ne!(sensor_name(four("Tp0a")), sensor_name(four("Tp0A")));
    assert_eq!(FourCc::from_u32(0x5470_3031), four("Tp01"));
    assert_eq!(four("flt ").to_u32(), 1_718_383_648);
    assert_eq!(format!("{}", FourCc([1, 2, 3, 4])), "0x01020304");

    let flt = info(4, "flt ");
    let keys = select([
        (four("Tg0f"), flt),
        (four("Tp01"), flt),
        (four("Tp01"), flt),
        (four("Tp02"), KeyInfo { size: 2, ..flt }),
        (four("Tp03"), info(1, "ui8 ")),
        (four("TCMb"), flt),
    ]);
    let names: Vec<_> = keys.iter().map(|k| sensor_name(k.key)).collect();
    assert_eq!(names, ["smc_Tg0f", "smc_Tp01"]);
    assert_eq!(keys[0].group, Group::Gpu);
    let many = (0..300u32).map(|i| {
        (
            FourCc([b'T', b'p', b'0' + (i / 64) as u8, b'0' + (i % 64) as u8]),
            flt,
        )
    });
    assert_eq!(select(many).len(), MAX_SENSORS);
}

#[test]
fn layout_constants_are_consistent() {
    assert_eq!(
        KeyDataLayout::BYTES + KeyDataLayout::BYTES_LEN,
        KeyDataLayout::SIZE
    );
    assert_eq!(KeyDataLayout::KEY_INFO_TYPE, KeyDataLayout::KEY_INFO + 4);
    assert_eq!(KeyDataLayout::DATA32 % 4, 0);
}
