//! The iperf3 control protocol as bytes and JSON: cookies, state bytes,
//! length-prefixed JSON frames, the parameter and result documents, the UDP
//! "connect" handshake and the UDP payload header, plus the receiver's UDP
//! loss/jitter bookkeeping.
//!
//! Pure: no sockets. The client and server drive these over their own
//! connections, so every wire detail that must match a stock iperf3 (3.12 in
//! Debian bookworm) is pinned down here and unit-tested on byte fixtures.

use rand::Rng;
use serde::{Deserialize, Deserializer, Serialize};

/// Cookie length on the wire: 36 characters plus a NUL.
pub const COOKIE_SIZE: usize = 37;
/// Largest parameter document a server accepts (iperf3's
/// `MAX_PARAMS_JSON_STRING`).
pub const MAX_PARAMS_JSON: usize = 8 * 1024;
/// Largest results document we accept; results may embed the peer's whole
/// text output, so the cap is looser than for parameters.
pub const MAX_RESULTS_JSON: usize = 4 * 1024 * 1024;
/// What a UDP client sends to open a stream (`UDP_CONNECT_MSG`).
pub const UDP_CONNECT_MSG: u32 = 0x3637_3839;
/// The server's answer to [`UDP_CONNECT_MSG`] (`UDP_CONNECT_REPLY`).
pub const UDP_CONNECT_REPLY: u32 = 0x3938_3736;
/// The answer older servers send (`LEGACY_UDP_CONNECT_REPLY`).
pub const LEGACY_UDP_CONNECT_REPLY: u32 = 987_654_321;
/// iperf3's default TCP block (`DEFAULT_TCP_BLKSIZE`).
pub const DEFAULT_TCP_BLKSIZE: usize = 128 * 1024;

const COOKIE_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567";

/// Errors decoding protocol bytes or documents.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CodecError {
    /// A length prefix larger than the cap for that document.
    #[error("JSON frame of {len} bytes exceeds the {cap}-byte cap")]
    FrameTooLong {
        /// Announced length.
        len: usize,
        /// Allowed maximum.
        cap: usize,
    },
    /// A zero-length frame (iperf3 never sends one).
    #[error("empty JSON frame")]
    EmptyFrame,
    /// A state byte iperf3 does not define.
    #[error("unknown state byte {0}")]
    UnknownState(i8),
    /// The JSON did not parse into the expected document.
    #[error("malformed JSON document: {0}")]
    Json(String),
    /// A buffer too short for the structure.
    #[error("truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes required.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}

/// The one-byte states of the control channel (`src/iperf_api.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Server → client: streams exist, initialise the test.
    TestStart,
    /// Server → client: data may flow.
    TestRunning,
    /// Client → server: the test time is over.
    TestEnd,
    /// Server → client: send your parameters.
    ParamExchange,
    /// Server → client: open the data streams.
    CreateStreams,
    /// Server → client: the server is going away.
    ServerTerminate,
    /// Client → server: the client is going away.
    ClientTerminate,
    /// Server → client: swap result documents.
    ExchangeResults,
    /// Server → client: results are in, print them.
    DisplayResults,
    /// Client → server: all done.
    IperfDone,
    /// Server → client: another test is running (or bad cookie).
    AccessDenied,
    /// Server → client: followed by two big-endian i32s (i_errno, errno).
    ServerError,
}

impl State {
    /// The signed byte on the wire.
    pub fn to_byte(self) -> u8 {
        let v: i8 = match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
        };
        v as u8
    }

    /// Decodes a state byte.
    pub fn from_byte(b: u8) -> Result<State, CodecError> {
        Ok(match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            other => return Err(CodecError::UnknownState(other)),
        })
    }
}

/// A fresh test cookie: 36 characters of `[a-z2-7]` and a NUL.
pub fn make_cookie<R: Rng + ?Sized>(rng: &mut R) -> [u8; COOKIE_SIZE] {
    let mut c = [0u8; COOKIE_SIZE];
    for b in c.iter_mut().take(COOKIE_SIZE - 1) {
        *b = COOKIE_CHARS[rng.random_range(0..COOKIE_CHARS.len())];
    }
    c
}

/// Frames a JSON document: 4-byte big-endian length, then the bytes.
pub fn encode_frame(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 4);
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(json);
    out
}

/// Checks a frame's length prefix against `cap` before any allocation.
pub fn frame_len(header: [u8; 4], cap: usize) -> Result<usize, CodecError> {
    let len = u32::from_be_bytes(header) as usize;
    if len == 0 {
        return Err(CodecError::EmptyFrame);
    }
    if len > cap {
        return Err(CodecError::FrameTooLong { len, cap });
    }
    Ok(len)
}

/// Decodes the payload of a `SERVER_ERROR`: (i_errno, errno).
pub fn decode_server_error(bytes: &[u8; 8]) -> (i32, i32) {
    let a = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let b = i32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    (a, b)
}

/// Encodes a `SERVER_ERROR` state byte and its two integers.
pub fn encode_server_error(i_errno: i32, errno: i32) -> [u8; 9] {
    let mut out = [0u8; 9];
    out[0] = State::ServerError.to_byte();
    out[1..5].copy_from_slice(&i_errno.to_be_bytes());
    out[5..9].copy_from_slice(&errno.to_be_bytes());
    out
}

/// iperf3's i_errno for "bad parameters" (`IEBADFORMAT`-like; any non-zero
/// value makes a stock client print an error).
pub const IE_PARAMS: i32 = 104;

/// The parameter document the client sends after `PARAM_EXCHANGE`.
///
/// Only the keys boltwatch uses are typed; a server ignores the rest, as
/// iperf3 does. A key that is missing takes its value from `Default`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Params {
    /// Present (true) for TCP tests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<bool>,
    /// Present (true) for UDP tests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<bool>,
    /// Seconds omitted at the start.
    #[serde(deserialize_with = "lenient_u64")]
    pub omit: u64,
    /// Test length in seconds.
    #[serde(deserialize_with = "lenient_u64")]
    pub time: u64,
    /// Byte budget (0 = time-based).
    #[serde(deserialize_with = "lenient_u64")]
    pub num: u64,
    /// Block budget (0 = time-based).
    #[serde(deserialize_with = "lenient_u64")]
    pub blockcount: u64,
    /// Parallel streams per direction.
    #[serde(deserialize_with = "lenient_u64")]
    pub parallel: u64,
    /// Server sends (iperf3 -R).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverse: Option<bool>,
    /// Both directions at once (iperf3 --bidir).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bidirectional: Option<bool>,
    /// Socket buffer size requested (-w).
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_opt_u64"
    )]
    pub window: Option<u64>,
    /// Block (write) size; for UDP the datagram size.
    #[serde(deserialize_with = "lenient_u64")]
    pub len: u64,
    /// Target rate per stream in bits/s (UDP, or paced TCP).
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_opt_u64"
    )]
    pub bandwidth: Option<u64>,
    /// Pacing timer in microseconds.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_opt_u64"
    )]
    pub pacing_timer: Option<u64>,
    /// Ask the server to embed its output in its results.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_opt_u64"
    )]
    pub get_server_output: Option<u64>,
    /// UDP sequence numbers are 64-bit.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_opt_u64"
    )]
    pub udp_counters_64bit: Option<u64>,
    /// Free-form client version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
}

/// Which side sends data, from the client's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Client sends, server receives (iperf3's default).
    Upload,
    /// Server sends (-R).
    Download,
    /// Both at once (--bidir).
    Bidir,
}

impl Params {
    /// The test mode these parameters ask for.
    pub fn mode(&self) -> Mode {
        if self.bidirectional == Some(true) {
            Mode::Bidir
        } else if self.reverse == Some(true) {
            Mode::Download
        } else {
            Mode::Upload
        }
    }

    /// True for UDP tests.
    pub fn is_udp(&self) -> bool {
        self.udp == Some(true)
    }

    /// Serialises to compact JSON.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses a parameter document.
    pub fn from_json(bytes: &[u8]) -> Result<Params, CodecError> {
        serde_json::from_slice(bytes).map_err(|e| CodecError::Json(e.to_string()))
    }
}

/// One stream's entry in a results document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    /// Stream id (1, 3, 4, 5, ...; see [`stream_id`]).
    #[serde(deserialize_with = "lenient_i64")]
    pub id: i64,
    /// Bytes this side sent (sender) or received (receiver).
    #[serde(default, deserialize_with = "lenient_u64")]
    pub bytes: u64,
    /// TCP retransmits, -1 when not known.
    #[serde(default, deserialize_with = "lenient_i64")]
    pub retransmits: i64,
    /// UDP jitter in seconds (receiver).
    #[serde(default)]
    pub jitter: f64,
    /// UDP datagrams lost (receiver).
    #[serde(default, deserialize_with = "lenient_i64")]
    pub errors: i64,
    /// UDP datagrams: sent (sender) or highest sequence seen (receiver).
    #[serde(default, deserialize_with = "lenient_i64")]
    pub packets: i64,
    /// Stream start, seconds from test start.
    #[serde(default)]
    pub start_time: f64,
    /// Stream end, seconds from test start.
    #[serde(default)]
    pub end_time: f64,
}

/// The results document each side sends during `EXCHANGE_RESULTS`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Results {
    /// Process CPU, percent of one core.
    pub cpu_util_total: f64,
    /// User part.
    pub cpu_util_user: f64,
    /// System part.
    pub cpu_util_system: f64,
    /// 1 when the sender reports retransmits, 0 when not, -1 when not a
    /// sender.
    #[serde(deserialize_with = "lenient_i64")]
    pub sender_has_retransmits: i64,
    /// TCP congestion control in use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    /// Per-stream figures.
    pub streams: Vec<StreamResult>,
    /// The server's JSON output, when asked for with `get_server_output`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_output_json: Option<serde_json::Value>,
    /// The server's text output, when asked for with `get_server_output`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
}

impl Results {
    /// Serialises to compact JSON.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses a results document.
    pub fn from_json(bytes: &[u8]) -> Result<Results, CodecError> {
        serde_json::from_slice(bytes).map_err(|e| CodecError::Json(e.to_string()))
    }
}

/// The id iperf3 gives the `index`-th stream it creates: 1, 3, 4, 5, ...
/// (an `iperf_add_stream` quirk both sides must reproduce).
pub fn stream_id(index: usize) -> i64 {
    if index == 0 {
        1
    } else {
        index as i64 + 2
    }
}

/// iperf3 prints -1 through cJSON as 18446744073709551615 or as
/// 1.8446744073709552e+19; both mean -1.
fn number_to_i64(v: &serde_json::Value) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    if let Some(u) = v.as_u64() {
        return Some(u as i64);
    }
    let f = v.as_f64()?;
    if f >= 9.2e18 {
        Some(-1)
    } else {
        Some(f as i64)
    }
}

fn lenient_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    match &v {
        serde_json::Value::Bool(b) => Ok(*b as i64),
        serde_json::Value::Null => Ok(0),
        _ => number_to_i64(&v).ok_or_else(|| serde::de::Error::custom("expected a number")),
    }
}

fn lenient_opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    lenient_u64(d).map(Some)
}

fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = lenient_i64(d)?;
    Ok(v.max(0) as u64)
}

/// Size of the UDP payload header for the counter width.
pub fn udp_header_len(counters_64bit: bool) -> usize {
    if counters_64bit {
        16
    } else {
        12
    }
}

/// The header at the start of every UDP datagram: send time and sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// Send time, seconds part.
    pub sec: u32,
    /// Send time, microseconds part.
    pub usec: u32,
    /// Sequence number, starting at 1.
    pub pcount: u64,
}

impl UdpHeader {
    /// Writes the header into the start of `buf` (big-endian fields).
    pub fn encode(&self, buf: &mut [u8], counters_64bit: bool) -> Result<(), CodecError> {
        let need = udp_header_len(counters_64bit);
        if buf.len() < need {
            return Err(CodecError::Truncated {
                need,
                have: buf.len(),
            });
        }
        buf[0..4].copy_from_slice(&self.sec.to_be_bytes());
        buf[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if counters_64bit {
            buf[8..16].copy_from_slice(&self.pcount.to_be_bytes());
        } else {
            buf[8..12].copy_from_slice(&(self.pcount as u32).to_be_bytes());
        }
        Ok(())
    }

    /// Reads the header from the start of a datagram.
    pub fn decode(buf: &[u8], counters_64bit: bool) -> Result<UdpHeader, CodecError> {
        let need = udp_header_len(counters_64bit);
        if buf.len() < need {
            return Err(CodecError::Truncated {
                need,
                have: buf.len(),
            });
        }
        let be32 = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let pcount = if counters_64bit {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[8..16]);
            u64::from_be_bytes(b)
        } else {
            be32(8) as u64
        };
        Ok(UdpHeader {
            sec: be32(0),
            usec: be32(4),
            pcount,
        })
    }

    /// The send time in seconds.
    pub fn time_secs(&self) -> f64 {
        self.sec as f64 + self.usec as f64 / 1e6
    }
}

/// Receiver-side UDP bookkeeping, as iperf3 does it: gaps in the sequence
/// count as loss, a late packet cancels one loss, and jitter is the RFC 1889
/// running estimate over transit-time differences.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UdpReceiverStats {
    /// Highest sequence number seen.
    pub highest: u64,
    /// Datagrams counted lost.
    pub lost: u64,
    /// Datagrams received.
    pub received: u64,
    /// Datagrams that arrived after a higher sequence number.
    pub out_of_order: u64,
    /// Smoothed jitter in seconds.
    pub jitter: f64,
    prev_transit: Option<f64>,
}

impl UdpReceiverStats {
    /// Accounts one datagram with sequence `pcount` whose transit time
    /// (arrival minus send stamp, any common offset) is `transit` seconds.
    pub fn on_packet(&mut self, pcount: u64, transit: f64) {
        self.received += 1;
        if pcount > self.highest {
            self.lost += pcount - 1 - self.highest;
            self.highest = pcount;
        } else {
            self.out_of_order += 1;
            self.lost = self.lost.saturating_sub(1);
        }
        let prev = self.prev_transit.unwrap_or(transit);
        let d = (transit - prev).abs();
        self.prev_transit = Some(transit);
        self.jitter += (d - self.jitter) / 16.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn state_bytes_match_iperf_api_h() {
        let table: &[(State, u8)] = &[
            (State::TestStart, 1),
            (State::TestRunning, 2),
            (State::TestEnd, 4),
            (State::ParamExchange, 9),
            (State::CreateStreams, 10),
            (State::ServerTerminate, 11),
            (State::ClientTerminate, 12),
            (State::ExchangeResults, 13),
            (State::DisplayResults, 14),
            (State::IperfDone, 16),
            (State::AccessDenied, 0xff),
            (State::ServerError, 0xfe),
        ];
        for &(s, b) in table {
            assert_eq!(s.to_byte(), b);
            assert_eq!(State::from_byte(b), Ok(s));
        }
        for unused in [0u8, 3, 5, 6, 7, 8, 15, 17, 0x80] {
            assert!(State::from_byte(unused).is_err(), "{unused}");
        }
    }

    #[test]
    fn cookie_is_36_base32_chars_and_nul() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let a = make_cookie(&mut rng);
        let b = make_cookie(&mut rng);
        assert_eq!(a.len(), 37);
        assert_eq!(a[36], 0);
        assert!(a[..36].iter().all(|c| COOKIE_CHARS.contains(c)));
        assert_ne!(a, b);
        // Over many cookies every alphabet character shows up and nothing else.
        let mut seen = [false; 256];
        for _ in 0..200 {
            for &c in &make_cookie(&mut rng)[..36] {
                seen[c as usize] = true;
            }
        }
        for (c, &s) in seen.iter().enumerate() {
            assert_eq!(s, COOKIE_CHARS.contains(&(c as u8)), "char {c}");
        }
    }

    #[test]
    fn frame_is_big_endian_length_prefixed() {
        let f = encode_frame(b"{\"a\":1}");
        assert_eq!(&f[..4], &[0, 0, 0, 7]);
        assert_eq!(&f[4..], b"{\"a\":1}");
        assert_eq!(frame_len([0, 0, 0, 7], MAX_PARAMS_JSON), Ok(7));
        assert_eq!(frame_len([0, 0, 0x20, 0], MAX_PARAMS_JSON), Ok(8192));
        assert_eq!(
            frame_len([0, 0, 0x20, 1], MAX_PARAMS_JSON),
            Err(CodecError::FrameTooLong {
                len: 8193,
                cap: 8192
            })
        );
        assert_eq!(
            frame_len([0xff, 0xff, 0xff, 0xff], MAX_RESULTS_JSON),
            Err(CodecError::FrameTooLong {
                len: u32::MAX as usize,
                cap: MAX_RESULTS_JSON
            })
        );
        assert_eq!(frame_len([0; 4], 10), Err(CodecError::EmptyFrame));
    }

    #[test]
    fn server_error_round_trip() {
        let b = encode_server_error(104, 11);
        assert_eq!(b, [0xfe, 0, 0, 0, 104, 0, 0, 0, 11]);
        let mut tail = [0u8; 8];
        tail.copy_from_slice(&b[1..]);
        assert_eq!(decode_server_error(&tail), (104, 11));
    }

    /// Exactly what iperf3 3.12 sent for `-t 1 -P 2` (captured with --debug).
    const PARAMS_312: &str = r#"{"tcp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":2,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#;

    #[test]
    fn parses_stock_parameters() {
        let p = Params::from_json(PARAMS_312.as_bytes()).unwrap();
        assert_eq!(p.tcp, Some(true));
        assert_eq!(p.time, 1);
        assert_eq!(p.parallel, 2);
        assert_eq!(p.len, 131072);
        assert_eq!(p.mode(), Mode::Upload);
        assert!(!p.is_udp());
        // Our own serialisation is byte-identical for the same fields.
        assert_eq!(String::from_utf8(p.to_json()).unwrap(), PARAMS_312);

        let r = Params::from_json(br#"{"udp":true,"time":2,"parallel":1,"reverse":true,"len":32768,"bandwidth":50000000,"unknown_key":[1,2]}"#).unwrap();
        assert!(r.is_udp());
        assert_eq!(r.mode(), Mode::Download);
        assert_eq!(r.bandwidth, Some(50_000_000));
        let b = Params::from_json(br#"{"tcp":true,"bidirectional":true,"parallel":1}"#).unwrap();
        assert_eq!(b.mode(), Mode::Bidir);
        assert!(Params::from_json(b"[1]").is_err());
    }

    /// A results document from iperf3 3.12 with -1 printed both ways cJSON
    /// prints it.
    const RESULTS_312: &str = r#"{"cpu_util_total":65.88,"cpu_util_user":3.05,"cpu_util_system":62.82,"sender_has_retransmits":1.8446744073709552e+19,"congestion_used":"bbr","streams":[{"id":1,"bytes":2033713152,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1.000031},{"id":3,"bytes":5,"retransmits":7,"jitter":4.1e-05,"errors":2,"packets":382,"start_time":0,"end_time":1.0}]}"#;

    #[test]
    fn parses_stock_results_with_minus_one_quirks() {
        let r = Results::from_json(RESULTS_312.as_bytes()).unwrap();
        assert_eq!(r.sender_has_retransmits, -1);
        assert_eq!(r.streams.len(), 2);
        assert_eq!(r.streams[0].id, 1);
        assert_eq!(r.streams[0].bytes, 2_033_713_152);
        assert_eq!(r.streams[0].retransmits, -1);
        assert_eq!(r.streams[1].id, 3);
        assert_eq!(r.streams[1].retransmits, 7);
        assert_eq!(r.streams[1].errors, 2);
        assert_eq!(r.streams[1].packets, 382);
        assert!((r.streams[1].jitter - 4.1e-5).abs() < 1e-12);
        let again = Results::from_json(&r.to_json()).unwrap();
        assert_eq!(again, r);
    }

    #[test]
    fn stream_ids_follow_the_iperf_add_stream_quirk() {
        let ids: Vec<i64> = (0..5).map(stream_id).collect();
        assert_eq!(ids, vec![1, 3, 4, 5, 6]);
    }

    #[test]
    fn udp_header_fixture_32_and_64_bit() {
        let h = UdpHeader {
            sec: 0x0102_0304,
            usec: 999_999,
            pcount: 0x0a0b_0c0d,
        };
        let mut b = [0u8; 16];
        h.encode(&mut b, false).unwrap();
        assert_eq!(
            &b[..12],
            &[1, 2, 3, 4, 0x00, 0x0f, 0x42, 0x3f, 0x0a, 0x0b, 0x0c, 0x0d]
        );
        assert_eq!(UdpHeader::decode(&b, false).unwrap(), h);
        let h64 = UdpHeader {
            pcount: 0x0102_0304_0506_0708,
            ..h
        };
        h64.encode(&mut b, true).unwrap();
        assert_eq!(&b[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(UdpHeader::decode(&b, true).unwrap(), h64);
        assert!(UdpHeader::decode(&b[..11], false).is_err());
        assert!(h.encode(&mut [0u8; 15], true).is_err());
    }

    #[test]
    fn udp_connect_magic_bytes_on_little_endian() {
        // iperf3 writes the int in host order; on x86/arm64 these are the bytes.
        assert_eq!(UDP_CONNECT_MSG.to_le_bytes(), *b"9876");
        assert_eq!(UDP_CONNECT_REPLY.to_le_bytes(), *b"6789");
    }

    #[test]
    fn udp_loss_and_reordering_like_iperf3() {
        let mut s = UdpReceiverStats::default();
        for seq in [1, 2, 3, 6, 7] {
            s.on_packet(seq, 0.001);
        }
        assert_eq!((s.highest, s.lost, s.received), (7, 2, 5));
        s.on_packet(4, 0.001); // late: cancels one loss
        assert_eq!((s.lost, s.out_of_order, s.received), (1, 1, 6));
        assert_eq!(s.jitter, 0.0);
    }

    #[test]
    fn udp_jitter_is_rfc1889_running_estimate() {
        let mut s = UdpReceiverStats::default();
        s.on_packet(1, 0.010);
        s.on_packet(2, 0.026); // d = 0.016 -> jitter = 0.001
        assert!((s.jitter - 0.001).abs() < 1e-12);
        s.on_packet(3, 0.026); // d = 0 -> jitter = 0.001 - 0.001/16
        assert!((s.jitter - 0.001 * 15.0 / 16.0).abs() < 1e-12);
    }
}
