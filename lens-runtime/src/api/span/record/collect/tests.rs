use super::collector::{submit_to, SpanSink};
use super::Record;
use crate::api::attr::Attrs;
use opentelemetry::trace::{SpanId, SpanKind, TraceFlags, TraceId};
use opentelemetry_sdk::trace::SpanData;
use std::sync::LazyLock;
use std::sync::Mutex;

static COMMON: LazyLock<super::super::Common> =
    LazyLock::new(|| super::super::Common::from_env("t", None));

fn rec(i: u64, sampled: bool) -> Record {
    let start = super::super::clock::now();
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
        name: "r".into(),
        start,
        end: start,
        attributes: Attrs::new(),
        dropped_attributes: 0,
        more: None,
        common: &COMMON,
    }
}

/// A sink that keeps what it is given: (spans, capacity) per submit.
struct Kept {
    max: usize,
    got: Mutex<Vec<(Vec<u64>, usize)>>,
}

impl SpanSink for Kept {
    fn submit(&self, spans: Vec<SpanData>) {
        let ids = spans
            .iter()
            .map(|s| u64::from_be_bytes(s.span_context.span_id().to_bytes()) - 1)
            .collect();
        self.got.lock().unwrap().push((ids, spans.capacity()));
    }

    fn redact(&self, _span: &mut SpanData) {}

    fn max_batch(&self) -> usize {
        self.max
    }

    fn spare(&self) -> Option<Vec<SpanData>> {
        None
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

fn batch(from: u64, n: u64) -> Vec<Record> {
    (from..from + n).map(|i| rec(i, true)).collect()
}

/// Batches taken at separate looks fill one export batch, made once with
/// room for the sink's batch size (never grown), and reach the sink only
/// when it is full: the sink gets full batches it need not join.
#[test]
fn looks_fill_one_export_batch_across_calls() {
    let sink = kept();
    let mut spans = Vec::new();
    for k in 0..3 {
        submit_to(&sink, vec![batch(k * 512, 512)], &mut spans, false);
        assert!(sink.got.lock().unwrap().is_empty(), "look {k}");
    }
    // the fourth fills it; the fifth starts the next one
    submit_to(
        &sink,
        vec![batch(1536, 512), batch(2048, 100)],
        &mut spans,
        false,
    );
    {
        let got = sink.got.lock().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, (0..2048).collect::<Vec<_>>());
        assert_eq!(got[0].1, 2048, "made once with room for the batch");
    }
    assert_eq!(spans.len(), 100);
    // a flush sends the rest, unsampled spans left out, in order
    let mixed = vec![rec(2148, false), rec(2149, true)];
    submit_to(&sink, vec![mixed], &mut spans, true);
    let got = sink.got.lock().unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].0, (2048..2148).chain([2149]).collect::<Vec<_>>());
    assert!(spans.is_empty() && spans.capacity() == 0);
}

/// A flush with nothing carried makes its batches to size: a few spans
/// are not given room for a whole export batch.
#[test]
fn a_flush_makes_batches_to_size() {
    let sink = kept();
    submit_to(&sink, vec![batch(0, 3)], &mut Vec::new(), true);
    submit_to(&sink, vec![batch(3, 2500)], &mut Vec::new(), true);
    let got = sink.got.lock().unwrap();
    let shape: Vec<(usize, usize)> = got.iter().map(|(ids, cap)| (ids.len(), *cap)).collect();
    assert_eq!(shape, [(3, 3), (2048, 2048), (452, 452)]);
}

/// A batch a look made for the sink's batch size and a flush sends
/// mostly empty keeps only its size: the export queue may hold many.
#[test]
fn a_mostly_empty_batch_is_flushed_at_its_size() {
    let sink = kept();
    let mut spans = Vec::new();
    submit_to(&sink, vec![batch(0, 512)], &mut spans, false);
    assert_eq!(spans.capacity(), 2048);
    submit_to(&sink, Vec::new(), &mut spans, true);
    let got = sink.got.lock().unwrap();
    assert_eq!((got[0].0.len(), got[0].1), (512, 512));
}

/// Records a collector look took after shutdown's last drain wait in the
/// export batch being filled; releasing the sink hands them to it, so
/// they are not stranded there (or sent to the next pipeline's sink). The
/// look is made here, by hand, between the drain and the release.
#[test]
fn releasing_the_sink_hands_it_the_batch_being_filled() {
    use std::sync::Arc;
    let _g = GLOBAL_SINK.lock().unwrap_or_else(|e| e.into_inner());
    let kept = Arc::new(kept());
    let sink: Arc<dyn SpanSink> = kept.clone();
    super::set_sink(sink.clone(), std::time::Duration::from_secs(1));
    super::drain();
    // the look: fewer records than an export batch stay in it
    submit_to(
        &*sink,
        vec![batch(0, 100)],
        &mut super::lock(&super::shared().submitting),
        false,
    );
    super::release_sink(&sink);
    assert!(super::collector::sink().is_none(), "released");
    // (other tests' spans, if any ended meanwhile, may be there too)
    let got: Vec<u64> = kept
        .got
        .lock()
        .unwrap()
        .iter()
        .flat_map(|(ids, _)| ids.clone())
        .collect();
    assert!(
        (0..100).all(|i| got.contains(&i)),
        "the look's spans: {got:?}"
    );
}

/// A sink that marks each span it redacts as built for it, and counts the
/// spans it is given that another sink built (and redacted, with its own
/// keys).
struct Marking {
    name: &'static str,
    foreign: std::sync::atomic::AtomicUsize,
    got: std::sync::atomic::AtomicUsize,
}

impl SpanSink for Marking {
    fn submit(&self, spans: Vec<SpanData>) {
        use std::sync::atomic::Ordering::Relaxed;
        let foreign = spans.iter().filter(|s| s.name != self.name).count();
        self.foreign.fetch_add(foreign, Relaxed);
        self.got.fetch_add(spans.len(), Relaxed);
    }

    fn redact(&self, span: &mut SpanData) {
        span.name = self.name.into();
    }

    fn max_batch(&self) -> usize {
        1 << 20
    }

    fn spare(&self) -> Option<Vec<SpanData>> {
        None
    }
}

/// A re-init's new sink never gets spans built (and redacted) for the
/// sink it replaces: a collector look between the old sink's last drain
/// and the new sink's install would leave them in the export batch being
/// filled, for the new sink's next submit (its exporter would see them
/// redacted with the old pipeline's keys only); nor does a sink released
/// (shut down) meanwhile get the new sink's. Here a thread looks, and
/// another releases either sink, as often as they can while the sink is
/// replaced, many times.
#[test]
fn a_new_sink_never_gets_spans_built_for_the_old_one() {
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
    super::set_sink(sinks[1].clone(), std::time::Duration::from_secs(1));
    let (stop, looks) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let looker = {
        let (stop, looks) = (stop.clone(), looks.clone());
        std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                if let Some(mut spans) = super::try_lock(&super::shared().submitting) {
                    let i = looks.fetch_add(1, Relaxed) as u64;
                    super::submit(vec![batch(i, 1)], &mut spans, false);
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
    assert!(a.got.load(Relaxed) + b.got.load(Relaxed) > 0);
    assert_eq!(
        (a.foreign.load(Relaxed), b.foreign.load(Relaxed)),
        (0, 0),
        "spans built for the other sink"
    );
}

/// A sink that keeps the spans it is given, each marked by its `redact`.
#[derive(Default)]
struct KeepSpans(Mutex<Vec<SpanData>>);

impl SpanSink for KeepSpans {
    fn submit(&self, spans: Vec<SpanData>) {
        self.0.lock().unwrap().extend(spans);
    }
    fn redact(&self, span: &mut SpanData) {
        span.attributes
            .push(opentelemetry::KeyValue::new("redacted", true));
    }
    fn max_batch(&self) -> usize {
        3
    }
    fn spare(&self) -> Option<Vec<SpanData>> {
        None
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
    use super::super::data::More;
    use opentelemetry::trace::{Event, Link, SpanContext, Status, TraceState};
    use opentelemetry::{KeyValue, StringValue};
    use std::sync::Arc;
    let shared: Arc<str> = "shared".into();
    let v = || StringValue::from(shared.clone());
    // 1 + 1 (inline) or 1 + 2 (spilled) attributes + 1 in the event + 1 in the link
    let full = |i: u64, sampled: bool, common: &'static super::super::Common| {
        let mut r = rec(i, sampled);
        r.common = common;
        r.name = format!("span-{i}").into();
        for k in 0..(1 + i % 2) {
            r.attributes.push(KeyValue::new(format!("k{k}"), v()));
        }
        let mut more = More {
            trace_state: TraceState::from_key_value([("vendor", format!("v{i}"))]).unwrap(),
            status: Status::error(format!("e{i}")),
            ..More::default()
        };
        let at = std::time::SystemTime::now();
        let attrs = vec![KeyValue::new("a", v())];
        more.events
            .events
            .push(Event::new(format!("ev{i}"), at, attrs, 0));
        let link = vec![KeyValue::new("l", v())];
        more.links
            .links
            .push(Link::new(SpanContext::empty_context(), link, 0));
        r.more = Some(Box::new(more));
        r
    };
    let own_kept = Arc::new(KeepSpans::default());
    let own: Arc<dyn SpanSink> = own_kept.clone();
    let gone: Arc<dyn SpanSink> = Arc::new(KeepSpans::default());
    let leak = |c| -> &'static super::super::Common { Box::leak(Box::new(c)) };
    let of_own = leak(super::super::Common::from_env("own", None).with_sink(&own));
    let of_gone = leak(super::super::Common::from_env("gone", None).with_sink(&gone));
    drop(gone);
    let sink = KeepSpans::default();
    let mut spans = Vec::new();
    let records: Vec<Record> = (0..8).map(|i| full(i, i % 3 != 0, &COMMON)).collect();
    let others = vec![
        full(8, true, of_own),
        full(9, true, of_gone),
        full(10, true, &COMMON),
    ];
    submit_to(&sink, vec![records, others], &mut spans, true);
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
