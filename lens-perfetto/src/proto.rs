//! The subset of Perfetto's trace protos that lens writes
//! (field numbers from `protos/perfetto/trace/perfetto_trace.proto`, checked
//! against the `perfetto` PyPI package's `perfetto_trace_pb2` descriptor).

#![allow(missing_docs)]

use prost::encoding::{encode_key, encode_varint, encoded_len_varint, WireType};

/// `TracePacket.sequence_flags`: incremental state was cleared.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `TracePacket.sequence_flags`: the packet uses interned data.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;
/// `TrackEvent.Type.TYPE_SLICE_BEGIN`.
pub const TYPE_SLICE_BEGIN: i32 = 1;
/// `TrackEvent.Type.TYPE_SLICE_END`.
pub const TYPE_SLICE_END: i32 = 2;
/// `TrackEvent.Type.TYPE_INSTANT`.
pub const TYPE_INSTANT: i32 = 3;
/// `TrackEvent.Type.TYPE_COUNTER`.
pub const TYPE_COUNTER: i32 = 4;

/// `perfetto.protos.TracePacket` (the fields used here).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    #[prost(bool, optional, tag = "87")]
    pub first_packet_on_sequence: Option<bool>,
}

/// `perfetto.protos.TrackEvent`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    #[prost(double, optional, tag = "44")]
    pub double_counter_value: Option<f64>,
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `perfetto.protos.DebugAnnotation`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    #[prost(bool, optional, tag = "2")]
    pub bool_value: Option<bool>,
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    #[prost(double, optional, tag = "5")]
    pub double_value: Option<f64>,
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
    #[prost(uint64, optional, tag = "7")]
    pub pointer_value: Option<u64>,
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
}

/// `perfetto.protos.TrackDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
}

/// `perfetto.protos.ProcessDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, repeated, tag = "2")]
    pub cmdline: Vec<String>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `perfetto.protos.ThreadDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `perfetto.protos.CounterDescriptor` (no fields needed: a plain counter).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CounterDescriptor {}

/// `perfetto.protos.InternedData`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<EventName>,
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<DebugAnnotationName>,
}

/// `perfetto.protos.EventName`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EventName {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

/// `perfetto.protos.DebugAnnotationName`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotationName {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

/// Appends `Trace.packet` (field 1) holding a slice END on `track` at `ts`,
/// the same bytes prost writes for the equivalent [`TracePacket`] but
/// without building one: half of all packets are these.
pub fn encode_slice_end(buf: &mut Vec<u8>, sequence: u32, ts: u64, track: u64) {
    // TrackEvent { type = 9: END, track_uuid = 11 }
    let event_len = 2 + 1 + encoded_len_varint(track);
    let packet_len = 1
        + encoded_len_varint(ts)
        + 1
        + encoded_len_varint(u64::from(sequence))
        + 1
        + encoded_len_varint(event_len as u64)
        + event_len
        + 2;
    encode_key(1, WireType::LengthDelimited, buf);
    encode_varint(packet_len as u64, buf);
    encode_key(8, WireType::Varint, buf);
    encode_varint(ts, buf);
    encode_key(10, WireType::Varint, buf);
    encode_varint(u64::from(sequence), buf);
    encode_key(11, WireType::LengthDelimited, buf);
    encode_varint(event_len as u64, buf);
    encode_key(9, WireType::Varint, buf);
    encode_varint(TYPE_SLICE_END as u64, buf);
    encode_key(11, WireType::Varint, buf);
    encode_varint(track, buf);
    encode_key(13, WireType::Varint, buf);
    encode_varint(u64::from(SEQ_NEEDS_INCREMENTAL_STATE), buf);
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn hand_encoded_end_matches_prost() {
        for (ts, track) in [(0, 1), (1_796_000_000_123_456_789, 3), (u64::MAX, u64::MAX)] {
            let p = TracePacket {
                timestamp: Some(ts),
                trusted_packet_sequence_id: Some(1),
                track_event: Some(TrackEvent {
                    r#type: Some(TYPE_SLICE_END),
                    track_uuid: Some(track),
                    ..Default::default()
                }),
                sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
                ..Default::default()
            };
            let mut want = vec![0x0a];
            p.encode_length_delimited(&mut want).unwrap_or_default();
            let mut got = Vec::new();
            encode_slice_end(&mut got, 1, ts, track);
            assert_eq!(got, want);
        }
    }
}
