//! Keeps the load generator's own CPU cost low, so that on a shared machine
//! the server gets the cores: requests are encoded once as templates whose
//! span ids are rewritten in place, and large responses are counted
//! without being materialized. The server still decodes, validates, stores
//! and encodes everything in full.

use std::collections::HashMap;

use crate::connection::AuthChannel;
use http::uri::PathAndQuery;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message;
use prost::bytes::{Buf, BufMut, Bytes};
use prost::encoding::{DecodeContext, WireType};
use tonic::{Response, Status};
use tonic_prost::ProstCodec;

use lightning_store_proto as pb;

const ADD_SPANS: &str = "/lightningstore.v1.LightningStoreService/AddSpans";
const QUERY_SPANS: &str = "/lightningstore.v1.LightningStoreService/QuerySpans";
const EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// A message whose encoding is already known: its bytes are sent as they are.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Encoded(pub Bytes);

impl Message for Encoded {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.0);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        prost::encoding::skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        self.0.len()
    }

    fn clear(&mut self) {
        self.0 = Bytes::new();
    }
}

/// A message of which every field is skipped while decoding: a repeated
/// field of these counts the items without building them.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Skipped {}

/// `AddSpansResponse` with its echoed spans counted, not built (same field numbers).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AddSpansAck {
    /// One entry per stored span.
    #[prost(message, repeated, tag = "1")]
    pub spans: Vec<Skipped>,
    /// Spans ignored as duplicates.
    #[prost(int64, tag = "2")]
    pub duplicates: i64,
}

impl AddSpansAck {
    /// Returns an error unless all `expected` spans were stored.
    pub fn check(&self, expected: usize) -> Result<(), Status> {
        if self.duplicates == 0 && self.spans.len() == expected {
            Ok(())
        } else {
            Err(Status::internal(format!(
                "stored {} of {expected} spans ({} duplicates)",
                self.spans.len(),
                self.duplicates
            )))
        }
    }
}

/// `QuerySpansResponse` with its spans counted, not built (same field numbers).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SpanPage {
    /// One entry per returned span.
    #[prost(message, repeated, tag = "1")]
    pub spans: Vec<Skipped>,
}

/// A client for the calls whose requests or responses are large.
#[derive(Clone)]
pub struct LeanClient {
    grpc: tonic::client::Grpc<AuthChannel>,
}

impl LeanClient {
    /// Returns a client on `channel` that accepts responses of any size.
    pub fn new(channel: AuthChannel) -> Self {
        Self {
            grpc: tonic::client::Grpc::new(channel).max_decoding_message_size(usize::MAX),
        }
    }

    /// Sends an encoded `AddSpansRequest`.
    pub async fn add_spans(&mut self, request: Bytes) -> Result<Response<AddSpansAck>, Status> {
        self.unary(ADD_SPANS, Encoded(request)).await
    }

    /// Sends a `QuerySpansRequest` and counts the returned spans.
    pub async fn query_spans(
        &mut self,
        request: &pb::QuerySpansRequest,
    ) -> Result<Response<SpanPage>, Status> {
        self.unary(QUERY_SPANS, Encoded(request.encode_to_vec().into()))
            .await
    }

    /// Sends an encoded OTLP `ExportTraceServiceRequest`.
    pub async fn export(
        &mut self,
        request: Bytes,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        self.unary(EXPORT, Encoded(request)).await
    }

    async fn unary<D>(
        &mut self,
        path: &'static str,
        request: Encoded,
    ) -> Result<Response<D>, Status>
    where
        D: Message + Default + Send + 'static,
    {
        self.grpc
            .ready()
            .await
            .map_err(|e| Status::unavailable(format!("the channel is not ready: {e}")))?;
        let codec: ProstCodec<Encoded, D> = ProstCodec::default();
        self.grpc
            .unary(
                tonic::Request::new(request),
                PathAndQuery::from_static(path),
                codec,
            )
            .await
    }
}

/// An encoded request in which some byte ranges (slots) are rewritten for
/// each copy, for example the span ids.
pub struct Template {
    bytes: Vec<u8>,
    /// (offset, marker index) of every slot, in offset order.
    slots: Vec<(usize, usize)>,
    slot_len: usize,
}

impl Template {
    /// Encodes `message` and finds the slots: each of `markers` (all of one
    /// length) must occur exactly `per_marker` times, or `None` is returned.
    pub fn new(message: &impl Message, markers: &[Vec<u8>], per_marker: usize) -> Option<Self> {
        let bytes = message.encode_to_vec();
        let slot_len = markers.first()?.len();
        if markers.iter().any(|m| m.len() != slot_len) {
            return None;
        }
        // One pass over the encoding: windows starting with the markers'
        // common prefix are looked up by content.
        let prefix_len = markers
            .iter()
            .map(|m| {
                m.iter()
                    .zip(&markers[0])
                    .take_while(|(a, b)| a == b)
                    .count()
            })
            .min()?;
        let prefix = &markers[0][..prefix_len];
        let index_of: HashMap<&[u8], usize> = markers
            .iter()
            .enumerate()
            .map(|(index, marker)| (marker.as_slice(), index))
            .collect();
        let mut slots = Vec::with_capacity(markers.len() * per_marker);
        let mut found = vec![0; markers.len()];
        for (offset, window) in bytes.windows(slot_len).enumerate() {
            if window.starts_with(prefix)
                && let Some(&index) = index_of.get(window)
            {
                slots.push((offset, index));
                found[index] += 1;
            }
        }
        if found.iter().any(|&n| n != per_marker) {
            return None;
        }
        Some(Self {
            bytes,
            slots,
            slot_len,
        })
    }

    /// Returns a copy with each slot filled by `fill(marker index, slot)`.
    pub fn render(&self, mut fill: impl FnMut(usize, &mut [u8])) -> Bytes {
        let mut bytes = self.bytes.clone();
        for &(offset, index) in &self.slots {
            fill(index, &mut bytes[offset..offset + self.slot_len]);
        }
        Bytes::from(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lean_responses_count_what_the_full_ones_hold() {
        let span = pb::Span {
            name: "x".to_owned(),
            attributes: vec![pb::KeyValue {
                key: "k".to_owned(),
                value: None,
            }],
            ..Default::default()
        };
        let full = pb::AddSpansResponse {
            spans: vec![span.clone(); 3],
            duplicates: 2,
            ..Default::default()
        };
        let lean = AddSpansAck::decode(full.encode_to_vec().as_slice()).unwrap();
        assert_eq!((lean.spans.len(), lean.duplicates), (3, 2));

        let page = pb::QuerySpansResponse {
            spans: vec![span; 5],
            limit: -1,
            offset: 0,
            total: 5,
        };
        let lean = SpanPage::decode(page.encode_to_vec().as_slice()).unwrap();
        assert_eq!(lean.spans.len(), 5);
    }

    #[test]
    fn templates_rewrite_every_slot() {
        let request = pb::AddSpansRequest {
            spans: (0..2)
                .map(|i| pb::Span {
                    span_id: format!("marker{i}"),
                    name: format!("marker{i}"),
                    ..Default::default()
                })
                .collect(),
            owner_epoch: None,
            ..Default::default()
        };
        let markers = vec![b"marker0".to_vec(), b"marker1".to_vec()];
        let template = Template::new(&request, &markers, 2).unwrap();
        let bytes = template
            .render(|index, slot| slot.copy_from_slice(format!("filled{index}").as_bytes()));
        let decoded = pb::AddSpansRequest::decode(bytes).unwrap();
        assert_eq!(decoded.spans[1].span_id, "filled1");
        assert_eq!(decoded.spans[1].name, "filled1");
        assert!(Template::new(&request, &markers, 1).is_none());
    }
}
