//! The messages of the `Telemetry` gRPC service as it reads them, so
//! batches arrive as raw bytes (the service itself is [`super::service`]).
//!
//! The generated server would decode every `Record` into the generated type,
//! and prost drops fields it does not know, so a payload kind added by a
//! newer agent would be lost before it reached the store. These message
//! types are wire-compatible with `AgentMessage` and `RecordBatch` but keep
//! each record as its encoded bytes (a slice of the received frame);
//! [`super::validate`] decodes each record once, for the checks and the
//! metrics, and the store keeps the bytes.

use boltwatch_proto::v1::{CollectorMessage, Hello};
use tokio_stream::wrappers::ReceiverStream;

/// `AgentMessage` with the batch kept raw.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RawAgentMessage {
    /// The message.
    #[prost(oneof = "RawMsg", tags = "1, 2")]
    pub msg: Option<RawMsg>,
}

/// `AgentMessage.msg`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum RawMsg {
    /// The stream's first message.
    #[prost(message, tag = "1")]
    Hello(Hello),
    /// Records.
    #[prost(message, tag = "2")]
    Batch(RawRecordBatch),
}

/// `RecordBatch` whose records are the encoded `Record` messages.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RawRecordBatch {
    /// Each encoded `Record`, exactly as sent: a slice of the received
    /// frame (decoded from tonic's buffer, `Bytes` share it: no copy and no
    /// allocation per record).
    #[prost(bytes = "bytes", repeated, tag = "1")]
    pub records: Vec<prost::bytes::Bytes>,
}

/// The stream of answers sent back to one agent.
pub type Responses = ReceiverStream<Result<CollectorMessage, tonic::Status>>;

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::v1::{agent_message, AgentMessage, Record, RecordBatch};
    use prost::Message;

    #[test]
    fn raw_messages_are_wire_compatible() {
        let rec = Record {
            node: "a".into(),
            boot_id: "b".into(),
            seq: 3,
            unix_ns: 4,
            payload: None,
        };
        let msg = AgentMessage {
            msg: Some(agent_message::Msg::Batch(RecordBatch {
                records: vec![rec.clone(), rec.clone()],
            })),
        };
        let raw = RawAgentMessage::decode(msg.encode_to_vec().as_slice()).unwrap();
        let Some(RawMsg::Batch(b)) = raw.msg else {
            panic!("not a batch")
        };
        assert_eq!(b.records, vec![rec.encode_to_vec(); 2]);
        let hello = AgentMessage {
            msg: Some(agent_message::Msg::Hello(Hello {
                node: "a".into(),
                ..Default::default()
            })),
        };
        let raw = RawAgentMessage::decode(hello.encode_to_vec().as_slice()).unwrap();
        assert!(matches!(raw.msg, Some(RawMsg::Hello(h)) if h.node == "a"));
    }
}
