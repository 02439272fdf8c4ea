//! The record of a span of lens's own path: what it has gathered while
//! open, and the finished span its sink turns into the SDK's `SpanData`;
//! the sink it goes to. Limits are the provider's: the SDK's defaults (128
//! attributes, events and links per span, 128 attributes per event and
//! link), or what `OTEL_SPAN_*_COUNT_LIMIT` sets, read as the SDK reads it.

use crate::engine::attrs::Attrs;
use crate::engine::clock::{self, Stamp};
use crate::engine::names;
use crate::engine::open::slab::Finished;
use opentelemetry::trace::{
    Event, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanEvents, SpanLimits, SpanLinks};
use std::borrow::Cow;
use std::sync::{Arc, Weak};
use std::time::SystemTime;

/// Where finished records go.
pub(crate) trait SpanSink: Send + Sync + 'static {
    /// Takes batches of finished records, in the order they were handed
    /// over; never blocks. The sink builds them into the SDK's spans where
    /// it exports them ([`Builder`](crate::engine::to_span_data::Builder)), from where
    /// they lie.
    fn submit(&self, batches: Vec<FinishedBatch>);
}

/// Finished records of one list, handed over together: those that ended
/// where they were recorded, in the slots they were taken with (the
/// sink builds them there, on its exporter's thread, unless they take
/// much more room than the records: [`compact`](FinishedBatch::compact)), and the
/// list's records set aside (ended by truncation, and those that had ended
/// in the slab before it: all older than the slots' finished ones, which
/// ended after truncation emptied the slab).
pub(crate) struct FinishedBatch {
    slots: Option<Finished<Record>>,
    records: Vec<Record>,
}

impl FinishedBatch {
    /// The finished records of a list: `slots` (those that ended in its
    /// slab) after `records` (older: ended by truncation, or before it).
    pub(crate) fn new(slots: Option<Finished<Record>>, records: Vec<Record>) -> FinishedBatch {
        FinishedBatch { slots, records }
    }

    /// The records in the order they ended: the list's records set aside,
    /// then those of the slots (in the order they ended). For the rare
    /// paths that regroup records; a sink builds a batch where its records
    /// lie ([`consume`](Self::consume)).
    pub(crate) fn into_records(self) -> Vec<Record> {
        let FinishedBatch { slots, records } = self;
        match slots {
            Some(slots) => slots.into_vec_in(records),
            None => records,
        }
    }

    /// Hands each record to `take`, in the order they ended, where it
    /// lies: no copy of the batch is made (on the collector, such a copy
    /// costs CPU off the calling thread on every span: reading the slots
    /// the ending thread wrote, and writing a vector the exporter's thread
    /// reads again).
    ///
    /// # Safety
    ///
    /// `take` moves the record it is handed out (`ptr::read`) or drops it
    /// in place, and does not use it after. If `take` panics, that record
    /// is leaked, never dropped twice, and so are the truncated records not
    /// handed out yet; the slots' records not handed out yet are dropped.
    pub(crate) unsafe fn consume(self, mut take: impl FnMut(&mut Record)) {
        let FinishedBatch { slots, mut records } = self;
        let n = records.len();
        let base = records.as_mut_ptr();
        // SAFETY: the vector forgets its records first; each of the `n`
        // is then handed out once, where it lies (`take` moves it out or
        // drops it: the caller's promise)
        unsafe {
            records.set_len(0);
            for i in 0..n {
                take(&mut *base.add(i));
            }
        }
        if let Some(slots) = slots {
            // SAFETY: as promised by the caller
            unsafe { slots.consume(take) };
        }
    }

    /// The batch as it is, unless its slots take much more room than its
    /// records (a thread that keeps many spans open hands over the slots
    /// of those too, emptied, with each batch; a slab grown by doubling
    /// has spare room): then its records are read out into a vector of
    /// their own, so that a queued record never holds more than about two
    /// slots (the export queue's bound counts records).
    pub(crate) fn compact(self) -> FinishedBatch {
        let n = self.len();
        match &self.slots {
            Some(s) if s.room() > 2 * n + 8 => FinishedBatch::from(self.into_records()),
            _ => self,
        }
    }

    /// How many slots it has room for (0 with no slots).
    #[cfg(test)]
    pub(crate) fn slot_room(&self) -> usize {
        self.slots.as_ref().map_or(0, Finished::room)
    }

    /// Whether its records are in a vector of their own (no slots).
    #[cfg(test)]
    pub(crate) fn is_compact(&self) -> bool {
        self.slots.is_none()
    }

    /// How many records it holds.
    pub(crate) fn len(&self) -> usize {
        self.records.len() + self.slots.as_ref().map_or(0, Finished::len)
    }

    /// Whether `f` holds for every record.
    pub(crate) fn all(&self, f: impl Fn(&Record) -> bool) -> bool {
        self.records.iter().all(&f) && self.slots.as_ref().is_none_or(|s| s.iter().all(&f))
    }

    /// How many of its records are sampled.
    pub(crate) fn sampled(&self) -> u64 {
        let records = self.records.iter();
        let slots = self.slots.iter().flat_map(Finished::iter);
        records.chain(slots).filter(|r| r.is_sampled()).count() as u64
    }

    /// Splits the batch in two at `at` (the first `at` records, in the
    /// order they ended, stay).
    pub(crate) fn split_off(&mut self, at: usize) -> FinishedBatch {
        let mut first = std::mem::take(self).into_records();
        let rest = first.split_off(at.min(first.len()));
        *self = FinishedBatch::from(first);
        FinishedBatch::from(rest)
    }

    /// Whether it holds no record.
    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty() && self.slots.as_ref().is_none_or(Finished::is_empty)
    }
}

#[cfg(test)]
impl FromIterator<Record> for FinishedBatch {
    fn from_iter<I: IntoIterator<Item = Record>>(records: I) -> Self {
        FinishedBatch::from(records.into_iter().collect::<Vec<_>>())
    }
}

impl Default for FinishedBatch {
    fn default() -> Self {
        FinishedBatch::from(Vec::new())
    }
}

impl From<Vec<Record>> for FinishedBatch {
    fn from(records: Vec<Record>) -> Self {
        FinishedBatch {
            slots: None,
            records,
        }
    }
}

/// What the records of one recorder share: its scope, its span limits
/// (the plan's, as the provider's) and its pipeline's sink.
pub(crate) struct RecordSettings {
    /// The scope's name and version: static, so that each span's copy of
    /// the scope is made from them (a few stores), not cloned (the derived
    /// `Clone` clones each field, attributes included, on every span).
    scope: (&'static str, Option<&'static str>),
    pub(crate) limits: SpanLimits,
    /// Where the records go, whatever sink is in use when they are
    /// collected (`None`: the one in use): a record that ends after its
    /// pipeline was shut down or replaced is sent back to its own sink by
    /// the sink it reaches ([`sort_out`](crate::engine::to_span_data::sort_out)), never
    /// queued, built or exported by the next one.
    pub(crate) sink: Option<Weak<dyn SpanSink>>,
}

impl std::fmt::Debug for RecordSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordSettings")
            .field("scope", &self.scope.0)
            .finish()
    }
}

impl RecordSettings {
    /// The scope `name` (at `version`), with the SDK's default span limits
    /// (the plan's come by [`with_limits`](Self::with_limits)).
    pub(crate) fn new(name: &'static str, version: Option<&'static str>) -> RecordSettings {
        RecordSettings {
            scope: (name, version),
            limits: SpanLimits::default(),
            sink: None,
        }
    }

    /// The records keep at most `limits` attributes, events and links.
    pub(crate) fn with_limits(self, limits: SpanLimits) -> RecordSettings {
        RecordSettings { limits, ..self }
    }

    /// The records' instrumentation scope (it has no attributes, so
    /// redaction never changes it).
    #[inline]
    pub(crate) fn scope(&self) -> InstrumentationScope {
        let b = InstrumentationScope::builder(self.scope.0);
        match self.scope.1 {
            Some(v) => b.with_version(v).build(),
            None => b.build(),
        }
    }

    /// The records go to `sink`.
    pub(crate) fn with_sink(self, sink: &Arc<dyn SpanSink>) -> RecordSettings {
        let sink = Some(Arc::downgrade(sink));
        RecordSettings { sink, ..self }
    }
}

/// What a recording span has gathered so far; also the finished span, once
/// `end` is set.
#[derive(Debug)]
pub(crate) struct Record {
    pub(super) trace_id: TraceId,
    pub(super) span_id: SpanId,
    pub(super) flags: TraceFlags,
    pub(super) parent_span_id: SpanId,
    pub(super) parent_is_remote: bool,
    pub(super) kind: SpanKind,
    pub(super) name: Cow<'static, str>,
    pub(super) start: Stamp,
    pub(super) end: Stamp,
    pub(super) attributes: Attrs,
    pub(super) dropped_attributes: u32,
    /// The rest, rare on hot spans: boxed apart, so that the record stays
    /// small (it moves into its list and out again).
    pub(super) rare: Option<Box<RareFields>>,
    pub(super) settings: &'static RecordSettings,
}

#[derive(Debug, Default)]
pub(super) struct RareFields {
    pub(super) trace_state: TraceState,
    pub(super) status: Status,
    pub(super) events: SpanEvents,
    pub(super) links: SpanLinks,
}

/// Keeps at most `limit` of `items`; returns how many were dropped.
pub(super) fn keep_limit<T>(items: &mut Vec<T>, limit: u32) -> u32 {
    let dropped = items.len().saturating_sub(limit as usize) as u32;
    items.truncate(limit as usize);
    dropped
}

pub(super) fn limit_events(mut events: Vec<Event>, l: &SpanLimits) -> SpanEvents {
    let mut out = SpanEvents::default();
    out.dropped_count = keep_limit(&mut events, l.max_events_per_span);
    for e in &mut events {
        e.dropped_attributes_count = keep_limit(&mut e.attributes, l.max_attributes_per_event);
    }
    out.events = events;
    out
}

pub(super) fn limit_links(mut links: Vec<Link>, l: &SpanLimits) -> SpanLinks {
    let mut out = SpanLinks::default();
    out.dropped_count = keep_limit(&mut links, l.max_links_per_span);
    for k in &mut links {
        k.dropped_attributes_count = keep_limit(&mut k.attributes, l.max_attributes_per_link);
    }
    out.links = links;
    out
}

impl Record {
    pub(crate) fn set_attribute(&mut self, attribute: KeyValue) {
        if self.attributes.len() < self.settings.limits.max_attributes_per_span as usize {
            self.attributes.push(attribute);
        } else {
            self.dropped_attributes += 1;
        }
    }

    fn rare_mut(&mut self) -> &mut RareFields {
        self.rare.get_or_insert_with(Box::default)
    }

    pub(crate) fn add_event(
        &mut self,
        name: Cow<'static, str>,
        at: SystemTime,
        mut attributes: Vec<KeyValue>,
    ) {
        let l = &self.settings.limits;
        let events = &mut self.rare_mut().events;
        if events.events.len() < l.max_events_per_span as usize {
            let dropped = keep_limit(&mut attributes, l.max_attributes_per_event);
            events
                .events
                .push(Event::new(name, at, attributes, dropped));
        } else {
            events.dropped_count += 1;
        }
    }

    pub(crate) fn add_link(&mut self, span_context: SpanContext, mut attributes: Vec<KeyValue>) {
        let l = &self.settings.limits;
        let links = &mut self.rare_mut().links;
        if links.links.len() < l.max_links_per_span as usize {
            let dropped = keep_limit(&mut attributes, l.max_attributes_per_link);
            links
                .links
                .push(Link::new(span_context, attributes, dropped));
        } else {
            links.dropped_count += 1;
        }
    }

    pub(crate) fn update_name(&mut self, name: Cow<'static, str>) {
        self.name = name;
    }

    /// Whether this is the record of the span `trace_id`/`span_id`.
    pub(crate) fn is(&self, trace_id: TraceId, span_id: SpanId) -> bool {
        self.span_id == span_id && self.trace_id == trace_id
    }

    pub(crate) fn set_status(&mut self, status: Status) {
        // a total order, as in the SDK: Ok > Error > Unset
        if status > Status::Unset && self.rare.as_ref().is_none_or(|m| status > m.status) {
            self.rare_mut().status = status;
        }
    }

    /// Marks a span ended by telemetry shutdown, now.
    pub(crate) fn truncate(&mut self, reason: &str) {
        self.set_attribute(KeyValue::new(names::SPAN_TRUNCATED, true));
        let attrs = vec![KeyValue::new(
            names::SPAN_TRUNCATED_REASON,
            reason.to_owned(),
        )];
        self.add_event(
            names::SPAN_TRUNCATED.into(),
            opentelemetry::time::now(),
            attrs,
        );
        self.end = clock::now();
    }

    pub(crate) fn is_sampled(&self) -> bool {
        self.flags.is_sampled()
    }
}

#[cfg(test)]
impl Record {
    /// A finished record named `s{i}`, span id `i + 1`, of no pipeline.
    pub(crate) fn for_test(i: u64, sampled: bool) -> Record {
        static SETTINGS: std::sync::LazyLock<RecordSettings> =
            std::sync::LazyLock::new(|| RecordSettings::new("t", None));
        let start = clock::now();
        Record {
            trace_id: TraceId::from(1u128),
            span_id: SpanId::from(i + 1),
            flags: match sampled {
                true => TraceFlags::SAMPLED,
                false => TraceFlags::default(),
            },
            parent_span_id: SpanId::INVALID,
            parent_is_remote: false,
            kind: SpanKind::Internal,
            name: format!("s{i}").into(),
            start,
            end: start,
            attributes: Default::default(),
            dropped_attributes: 0,
            rare: None,
            settings: &SETTINGS,
        }
    }
}
