//! Prometheus remote write 1.0 on the wire: the few `prometheus.WriteRequest`
//! messages (declared with prost derive, field numbers as in Prometheus's
//! `remote.proto`/`types.proto`) and the snappy block-format body. Pure.

use prost::Message;

/// The request headers remote write 1.0 requires besides `User-Agent`.
pub const HEADERS: &[(&str, &str)] = &[
    ("Content-Encoding", "snappy"),
    ("Content-Type", "application/x-protobuf"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

/// `prometheus.WriteRequest`.
#[derive(Clone, PartialEq, Message)]
pub struct WriteRequest {
    /// One entry per series.
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// `prometheus.TimeSeries`: labels sorted by name, samples by time.
#[derive(Clone, PartialEq, Message)]
pub struct TimeSeries {
    /// Including `__name__`.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// In timestamp order.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

/// `prometheus.Label`.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    /// Label name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Label value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `prometheus.Sample`.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// Value.
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Unix milliseconds.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// The request body: protobuf, then snappy's block format (not framed).
pub fn encode(req: &WriteRequest) -> Result<Vec<u8>, snap::Error> {
    snap::raw::Encoder::new().compress_vec(&req.encode_to_vec())
}

/// Decodes a body (tests and the receiver side of round trips).
pub fn decode(body: &[u8]) -> Result<WriteRequest, String> {
    let raw = snap::raw::Decoder::new()
        .decompress_vec(body)
        .map_err(|e| e.to_string())?;
    WriteRequest::decode(raw.as_slice()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_snappy_block_format() {
        let req = WriteRequest {
            timeseries: vec![TimeSeries {
                labels: vec![
                    Label {
                        name: "__name__".into(),
                        value: "boltwatch_x".into(),
                    },
                    Label {
                        name: "node".into(),
                        value: "a".into(),
                    },
                ],
                samples: vec![Sample {
                    value: 1.5,
                    timestamp: 1_700_000_000_123,
                }],
            }],
        };
        let body = encode(&req).unwrap();
        // Block format: starts with the uncompressed length as a varint, no
        // stream identifier chunk (0xff 0x06 0x00 0x00 "sNaPpY").
        assert_ne!(body[0], 0xff);
        assert_eq!(decode(&body).unwrap(), req);
    }
}
