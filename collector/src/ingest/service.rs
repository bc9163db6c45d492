//! The `Telemetry` gRPC service, hand-wired so batches arrive as raw bytes
//! ([`super::raw`]'s messages) and go to [`Ingest`].

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::codegen::{http, Body, BoxFuture, StdError};
use tonic::server::{Grpc, NamedService, StreamingService};

use boltwatch_proto::v1::CollectorMessage;

use super::raw::{RawAgentMessage, Responses};
use super::Ingest;

/// The tower service serving `/boltwatch.v1.Telemetry/Stream`.
#[derive(Clone)]
pub struct TelemetryService {
    ingest: Arc<Ingest>,
    max_message_bytes: usize,
}

impl TelemetryService {
    /// Serves `ingest`, refusing messages larger than `max_message_bytes`.
    pub fn new(ingest: Ingest, max_message_bytes: usize) -> Self {
        TelemetryService {
            ingest: Arc::new(ingest),
            max_message_bytes,
        }
    }
}

impl NamedService for TelemetryService {
    const NAME: &'static str = "boltwatch.v1.Telemetry";
}

struct StreamSvc(Arc<Ingest>);

impl StreamingService<RawAgentMessage> for StreamSvc {
    type Response = CollectorMessage;
    type ResponseStream = Responses;
    type Future = BoxFuture<tonic::Response<Responses>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<tonic::Streaming<RawAgentMessage>>) -> Self::Future {
        let ingest = Arc::clone(&self.0);
        Box::pin(async move { ingest.stream(request).await })
    }
}

impl<B> tonic::codegen::Service<http::Request<B>> for TelemetryService
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() != "/boltwatch.v1.Telemetry/Stream" {
            return Box::pin(async {
                Ok(tonic::Status::unimplemented("unknown method").into_http())
            });
        }
        let ingest = Arc::clone(&self.ingest);
        let max = self.max_message_bytes;
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<CollectorMessage, RawAgentMessage>::default();
            let mut grpc = Grpc::new(codec).apply_max_message_size_config(Some(max), None);
            Ok(grpc.streaming(StreamSvc(ingest), req).await)
        })
    }
}
