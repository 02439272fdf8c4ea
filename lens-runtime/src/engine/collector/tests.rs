#[cfg(lens_loom)]
mod loom_model;

use super::queue::submit_to;
use super::SpanSink;
use crate::engine::record::{FinishedBatch, Record, RecordSettings};
use crate::engine::to_span_data::{address, sort_out, Builder};
use opentelemetry_sdk::trace::SpanData;
use std::sync::LazyLock;
use std::sync::Mutex;

static SETTINGS: LazyLock<RecordSettings> = LazyLock::new(|| RecordSettings::new("t", None));

fn rec(i: u64, sampled: bool) -> Record {
    Record::for_test(i, sampled)
}

/// A sink that builds what it is given, in export batches of `max`, and
/// keeps (span ids, capacity) per export batch.
struct Kept {
    max: usize,
    got: Mutex<Vec<(Vec<u64>, usize)>>,
}

impl SpanSink for Kept {
    fn submit(&self, batches: Vec<FinishedBatch>) {
        let builder = Builder::new(self.max, &|_| {});
        builder.build(batches, &mut |spans| {
            let ids = spans
                .iter()
                .map(|s| u64::from_be_bytes(s.span_context.span_id().to_bytes()) - 1)
                .collect();
            self.got.lock().unwrap().push((ids, spans.capacity()));
            true
        });
    }
}

/// Held by the tests that set the process's sink.
static GLOBAL_SINK: Mutex<()> = Mutex::new(());

fn kept() -> Kept {
    Kept {
        max: 2048,
        got: Mutex::new(Vec::new()),
    }
}

fn batch(from: u64, n: u64) -> FinishedBatch {
    (from..from + n).map(|i| rec(i, true)).collect()
}

/// The records of the batches a sink is given are built into export
/// batches of the sink's size, across the batches, in order, unsampled
/// records left out; each export batch is made once with room for what
/// is left (up to that size) and never grown.
#[test]
fn records_are_built_into_full_export_batches_made_to_size() {
    let sink = kept();
    let mixed = FinishedBatch::from(vec![rec(2148, false), rec(2149, true)]);
    let batches = (0..4).map(|k| batch(k * 512, 512));
    sink.submit(batches.chain([batch(2048, 100), mixed]).collect());
    sink.submit(vec![batch(3000, 3)]);
    sink.submit(vec![batch(4000, 2500)]);
    let got = sink.got.lock().unwrap();
    let shape: Vec<(usize, usize)> = got.iter().map(|(ids, cap)| (ids.len(), *cap)).collect();
    assert_eq!(
        shape,
        [(2048, 2048), (101, 102), (3, 3), (2048, 2048), (452, 452)]
    );
    assert_eq!(got[0].0, (0..2048).collect::<Vec<_>>());
    assert_eq!(got[1].0, (2048..2148).chain([2149]).collect::<Vec<_>>());
    assert_eq!(got[4].0, (6048..6500).collect::<Vec<_>>());
}

/// Once the exporter side says stop (a shutdown gave up), the records
/// left are dropped unbuilt.
#[test]
fn records_left_after_a_stop_are_not_built() {
    let mut calls = 0;
    let builder = Builder::new(10, &|_| {});
    builder.build(vec![batch(0, 25), batch(25, 30)], &mut |spans| {
        calls += 1;
        assert_eq!(spans.len(), 10);
        false
    });
    assert_eq!(calls, 1);
}

/// The collector hands the sink the batches as they came, in order,
/// without the empty ones (and nothing when all are empty).
#[test]
fn the_collector_hands_batches_over_as_they_came() {
    #[derive(Default)]
    struct Lens(Mutex<Vec<Vec<usize>>>);
    impl SpanSink for Lens {
        fn submit(&self, batches: Vec<FinishedBatch>) {
            self.0
                .lock()
                .unwrap()
                .push(batches.iter().map(FinishedBatch::len).collect());
        }
    }
    let sink = Lens::default();
    submit_to(&sink, vec![batch(0, 3), Vec::new().into(), batch(3, 2)]);
    submit_to(&sink, vec![Vec::new().into()]);
    submit_to(&sink, Vec::new());
    assert_eq!(*sink.0.lock().unwrap(), [vec![3, 2]]);
}

/// A sink that builds the records it is given, and counts the spans it
/// built that belong to the other pipeline of the test (whose scope is
/// the other's name).
struct Marking {
    name: &'static str,
    foreign: std::sync::atomic::AtomicUsize,
    got: std::sync::atomic::AtomicUsize,
}

impl SpanSink for Marking {
    fn submit(&self, batches: Vec<FinishedBatch>) {
        use std::sync::atomic::Ordering::Relaxed;
        // as lens's sink does: another pipeline's records go back first
        let batches = sort_out(batches, address(self));
        let builder = Builder::new(1 << 20, &|_| {});
        builder.build(batches, &mut |spans| {
            // (spans of other tests, ended meanwhile, may come too)
            let other = |s: &&SpanData| {
                let scope = s.instrumentation_scope.name();
                ["a", "b"].contains(&scope) && scope != self.name
            };
            let foreign = spans.iter().filter(other).count();
            self.foreign.fetch_add(foreign, Relaxed);
            self.got.fetch_add(spans.len(), Relaxed);
            true
        });
    }
}

/// A record reaches only its own pipeline's sink, whichever sink is in use
/// when it is handed over: a re-init's new sink sends the records of the
/// pipeline it replaced back to that pipeline's sink as it builds them
/// (its exporters would otherwise export them, redacted with its keys,
/// not theirs). Here a thread hands over records of both pipelines, and
/// another releases either sink, as often as they can while the sink in
/// use is replaced, many times.
#[test]
fn a_record_reaches_only_its_own_pipeline_s_sink() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;
    let _g = GLOBAL_SINK.lock().unwrap_or_else(|e| e.into_inner());
    let marking = |name| {
        Arc::new(Marking {
            name,
            foreign: AtomicUsize::new(0),
            got: AtomicUsize::new(0),
        })
    };
    let (a, b) = (marking("a"), marking("b"));
    let sinks: [Arc<dyn SpanSink>; 2] = [a.clone(), b.clone()];
    let leak = |c| -> &'static RecordSettings { Box::leak(Box::new(c)) };
    let commons = [
        leak(RecordSettings::new("a", None).with_sink(&sinks[0])),
        leak(RecordSettings::new("b", None).with_sink(&sinks[1])),
    ];
    super::set_sink(sinks[1].clone(), std::time::Duration::from_secs(1));
    let (stop, looks) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let looker = {
        let (stop, looks) = (stop.clone(), looks.clone());
        std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                if let Some(_submitting) = super::try_lock(&super::locks().submitting) {
                    let i = looks.fetch_add(1, Relaxed) as u64;
                    let records = (0..2).map(|k| {
                        let mut r = rec(i * 2 + k, true);
                        r.settings = commons[k as usize];
                        r
                    });
                    super::submit(vec![records.collect::<Vec<_>>().into()]);
                }
            }
        })
    };
    // and a shutdown of either pipeline, meanwhile, as often as it can
    let releaser = {
        let (stop, sinks) = (stop.clone(), sinks.clone());
        std::thread::spawn(move || {
            let mut j = 0;
            while !stop.load(Relaxed) {
                super::release_sink(&sinks[j % 2]);
                j += 1;
            }
        })
    };
    while looks.load(Relaxed) == 0 {
        std::thread::yield_now();
    }
    for k in 0..20_000 {
        super::set_sink(sinks[k % 2].clone(), std::time::Duration::from_secs(1));
    }
    stop.store(true, Relaxed);
    looker.join().unwrap();
    releaser.join().unwrap();
    super::set_sink(sinks[1].clone(), std::time::Duration::from_secs(1));
    super::release_sink(&sinks[1]);
    assert!(a.got.load(Relaxed) > 0 && b.got.load(Relaxed) > 0);
    assert_eq!(
        (a.foreign.load(Relaxed), b.foreign.load(Relaxed)),
        (0, 0),
        "spans of the other pipeline"
    );
}

/// A sink that keeps the spans it is given, each marked by its `redact`.
#[derive(Default)]
struct KeepSpans(Mutex<Vec<SpanData>>);

impl SpanSink for KeepSpans {
    fn submit(&self, batches: Vec<FinishedBatch>) {
        let redact = |span: &mut SpanData| {
            span.attributes
                .push(opentelemetry::KeyValue::new("redacted", true));
        };
        let batches = sort_out(batches, address(self));
        Builder::new(3, &redact).build(batches, &mut |spans| {
            self.0.lock().unwrap().extend(spans);
            true
        });
    }
}

/// Each record's owned parts (name, attributes inline or spilled, events,
/// links, status, tracestate) come out whole in its span, built where the
/// record lies and redacted there by the sink it goes to: the sink in use,
/// or the sink of its own pipeline. Unsampled records, and records whose
/// pipeline is gone, are dropped, each part once: the shared value every
/// record holds is back to one owner at the end (a part dropped twice, or
/// leaked, would show in that count).
#[test]
fn records_move_into_spans_whole_and_unsampled_ones_are_dropped_once() {
    use crate::engine::record::RareFields;
    use opentelemetry::trace::{Event, Link, SpanContext, Status, TraceState};
    use opentelemetry::{KeyValue, StringValue};
    use std::sync::Arc;
    let shared: Arc<str> = "shared".into();
    let v = || StringValue::from(shared.clone());
    // 1 + 1 (inline) or 1 + 2 (spilled) attributes + 1 in the event + 1 in the link
    let full = |i: u64, sampled: bool, settings: &'static RecordSettings| {
        let mut r = rec(i, sampled);
        r.settings = settings;
        r.name = format!("span-{i}").into();
        for k in 0..(1 + i % 2) {
            r.attributes.push(KeyValue::new(format!("k{k}"), v()));
        }
        let mut rare = RareFields {
            trace_state: TraceState::from_key_value([("vendor", format!("v{i}"))]).unwrap(),
            status: Status::error(format!("e{i}")),
            ..RareFields::default()
        };
        let at = std::time::SystemTime::now();
        let attrs = vec![KeyValue::new("a", v())];
        rare.events
            .events
            .push(Event::new(format!("ev{i}"), at, attrs, 0));
        let link = vec![KeyValue::new("l", v())];
        rare.links
            .links
            .push(Link::new(SpanContext::empty_context(), link, 0));
        r.rare = Some(Box::new(rare));
        r
    };
    let own_kept = Arc::new(KeepSpans::default());
    let own: Arc<dyn SpanSink> = own_kept.clone();
    let gone: Arc<dyn SpanSink> = Arc::new(KeepSpans::default());
    let leak = |c| -> &'static RecordSettings { Box::leak(Box::new(c)) };
    let of_own = leak(RecordSettings::new("own", None).with_sink(&own));
    let of_gone = leak(RecordSettings::new("gone", None).with_sink(&gone));
    drop(gone);
    let sink = KeepSpans::default();
    let records: Vec<Record> = (0..8).map(|i| full(i, i % 3 != 0, &SETTINGS)).collect();
    let others = vec![
        full(8, true, of_own),
        full(9, true, of_gone),
        full(10, true, &SETTINGS),
    ];
    sink.submit(vec![records.into(), others.into()]);
    let got = std::mem::take(&mut *sink.0.lock().unwrap());
    let id = |s: &SpanData| u64::from_be_bytes(s.span_context.span_id().to_bytes()) - 1;
    let ids: Vec<u64> = got.iter().map(id).collect();
    assert_eq!(ids, [1, 2, 4, 5, 7, 10]);
    let own_got = std::mem::take(&mut *own_kept.0.lock().unwrap());
    assert_eq!(own_got.iter().map(id).collect::<Vec<_>>(), [8]);
    for s in got.iter().chain(&own_got) {
        let i = id(s);
        let n = 1 + i as usize % 2;
        assert_eq!(s.name, format!("span-{i}"));
        assert_eq!(
            s.attributes.len(),
            n + 1,
            "span {i}: its attributes, then the mark"
        );
        assert_eq!(s.attributes[n - 1].key.as_str(), format!("k{}", n - 1));
        assert_eq!(s.attributes[n - 1].value.as_str(), "shared");
        assert_eq!(
            s.attributes[n].key.as_str(),
            "redacted",
            "redacted in place"
        );
        assert_eq!(s.events.events[0].name, format!("ev{i}"));
        assert_eq!(s.links.links[0].attributes[0].value.as_str(), "shared");
        assert_eq!(s.status, Status::error(format!("e{i}")));
        let vendor = s.span_context.trace_state().get("vendor");
        assert_eq!(vendor, Some(format!("v{i}").as_str()));
        let scope = if i == 8 { "own" } else { "t" };
        assert_eq!(s.instrumentation_scope.name(), scope);
    }
    // each exported span holds its 1 or 2 attributes' values, its event's
    // and its link's; the others' were dropped
    let held: usize = got
        .iter()
        .chain(&own_got)
        .map(|s| 3 + id(s) as usize % 2)
        .sum();
    assert_eq!(Arc::strong_count(&shared), 1 + held);
    drop((got, own_got));
    assert_eq!(Arc::strong_count(&shared), 1);
}

/// Where a sink is handed records, the records of another live pipeline
/// go to that pipeline's sink at once (grouped, in order); records of a
/// pipeline that is gone and unsampled ones are dropped; the sink keeps
/// its own, in order, and batches that are all its own as they came.
#[test]
fn records_are_sorted_out_before_they_are_queued() {
    use std::sync::Arc;
    let other_kept = Arc::new(KeepSpans::default());
    let other: Arc<dyn SpanSink> = other_kept.clone();
    let gone: Arc<dyn SpanSink> = Arc::new(KeepSpans::default());
    let me: Arc<dyn SpanSink> = Arc::new(KeepSpans::default());
    let leak = |c| -> &'static RecordSettings { Box::leak(Box::new(c)) };
    let of = |s: &Arc<dyn SpanSink>| leak(RecordSettings::new("x", None).with_sink(s));
    let (of_me, of_other, of_gone) = (of(&me), of(&other), of(&gone));
    drop(gone);
    let with = |i, sampled, settings| {
        let mut r = rec(i, sampled);
        r.settings = settings;
        r
    };
    let all_mine: Vec<Record> = (0..3).map(|i| with(i, true, of_me)).collect();
    let first = all_mine.as_ptr();
    let mixed = vec![
        with(3, true, of_other),
        with(4, true, of_me),
        with(5, true, of_gone),
        with(6, false, of_me),
        rec(7, true), // of no pipeline: the sink in use's
        with(8, true, of_other),
    ];
    let only_others = vec![with(9, true, of_other)];
    let kept = sort_out(
        vec![all_mine.into(), mixed.into(), only_others.into()],
        address(&*me),
    );
    let kept: Vec<Vec<Record>> = kept.into_iter().map(FinishedBatch::into_records).collect();
    let id = |r: &Record| u64::from_be_bytes(r.span_id.to_bytes()) - 1;
    let ids: Vec<Vec<u64>> = kept.iter().map(|b| b.iter().map(id).collect()).collect();
    assert_eq!(ids, [vec![0, 1, 2], vec![4, 7]]);
    assert_eq!(
        kept[0].as_ptr(),
        first,
        "a batch all its own is kept as it came"
    );
    let sent = |s: &SpanData| u64::from_be_bytes(s.span_context.span_id().to_bytes()) - 1;
    let got: Vec<u64> = other_kept.0.lock().unwrap().iter().map(sent).collect();
    assert_eq!(got, [3, 8, 9]);
}
