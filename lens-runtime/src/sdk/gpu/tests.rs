//! GPU metrics over the fake NVML (`crate::gpu_fake`): MIG, the energy
//! baseline under delta temporality, a hung device, warnings; which GPUs
//! are reported (issue 15's table, a property test) is in `visible`.

mod visible;

use super::*;
use crate::host::gpu_fake::{uuid, Fake, FakeGpu, FAST};
use crate::host::gpu_worker::visible_count;
use crate::metrics_test_support::{collect, flat, provider};
use crate::test_rng::Rng;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{
    InMemoryMetricExporter, PeriodicReader, SdkMeterProvider, Temporality,
};
use std::time::{Duration, Instant};

/// Generous: only a hang (forever) or a broken sampler gets near it.
const PATIENCE: Duration = Duration::from_secs(20);

/// Waits until `f` holds; false after [`PATIENCE`].
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + PATIENCE;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// `(hw.id, value)` of every point of metric `name` in `rms`'s last export.
fn points(rms: &[ResourceMetrics], name: &str) -> Vec<(String, String)> {
    let Some(last) = rms.last() else {
        return Vec::new();
    };
    let ms: Vec<&Metric> = flat(std::slice::from_ref(last));
    let mut out = Vec::new();
    for m in ms.into_iter().filter(|m| m.name() == name) {
        let id = |mut attrs: Box<dyn Iterator<Item = &KeyValue> + '_>| {
            attrs
                .find(|kv| kv.key.as_str() == sc::HW_ID)
                .map(|kv| kv.value.to_string())
                .unwrap_or_default()
        };
        match m.data() {
            AggregatedMetrics::F64(MetricData::Gauge(g)) => {
                for p in g.data_points() {
                    out.push((id(Box::new(p.attributes())), p.value().to_string()));
                }
            }
            AggregatedMetrics::F64(MetricData::Sum(s)) => {
                for p in s.data_points() {
                    out.push((id(Box::new(p.attributes())), p.value().to_string()));
                }
            }
            AggregatedMetrics::I64(MetricData::Sum(s)) => {
                for p in s.data_points() {
                    out.push((id(Box::new(p.attributes())), p.value().to_string()));
                }
            }
            other => panic!("{}: unexpected {other:?}", m.name()),
        }
    }
    out.sort();
    out
}

/// The distinct `hw.id`s of every `hw.*` point of the last export.
fn metric_ids(rms: &[ResourceMetrics]) -> Vec<String> {
    let mut ids: Vec<String> = INSTRUMENTS
        .iter()
        .flat_map(|i| points(rms, i.name))
        .map(|(id, _)| id)
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// `host.gpu.count` and the `hw.id`s of the metric points, for `fake` and
/// `CUDA_VISIBLE_DEVICES=raw`: both from one worker, as setup does.
fn count_and_ids(fake: &Fake, raw: Option<&str>) -> (Option<usize>, Vec<String>) {
    let (w, _) = fake.worker(raw, FAST);
    let count = visible_count(raw, Some(&w));
    let (p, e) = provider();
    let registered = register_on(&p.meter("t"), &w);
    let ids = metric_ids(&collect(&p, &e));
    assert_eq!(registered, !ids.is_empty(), "{raw:?}");
    w.stop();
    (count, ids)
}

// ------------------------------------------------------------------ MIG

#[test]
fn mig_instance_is_reported_as_its_parent_gpu() {
    let fake = Fake::gpus(3);
    fake.edit(1, |g| {
        g.migs = vec!["MIG-aaaa0001-0000".into(), "MIG-aaaa0002-0000".into()]
    });
    fake.edit(2, |g| g.migs = vec!["MIG-bbbb0001-0000".into()]);
    assert_eq!(
        count_and_ids(&fake, Some("MIG-aaaa0002-0000")),
        (Some(1), vec![uuid(1)])
    );
    assert_eq!(
        count_and_ids(&fake, Some("MIG-bbbb,MIG-aaaa0001")),
        (Some(1), vec![uuid(2)]),
        "one MIG instance per process, as CUDA enumerates"
    );
    let (count, ids) = count_and_ids(&fake, None);
    assert_eq!((count, ids.len()), (Some(3), 3));
    // the parent's readings, power included
    let (w, _) = fake.worker(Some("MIG-bbbb0001-0000"), FAST);
    let (p, e) = provider();
    assert!(register_on(&p.meter("t"), &w));
    let rms = collect(&p, &e);
    assert_eq!(
        points(&rms, sc::METRIC_HW_POWER),
        [(uuid(2), "350.5".into())]
    );
    w.stop();
}

// ---------------------------------------------- readings and attributes

#[test]
fn instruments_convert_nvml_units_and_skip_unsupported_readings() {
    let fake = Fake::gpus(2);
    fake.edit(1, |g| {
        g.memory = (0, 0);
        g.unsupported = vec!["utilization", "energy", "name"];
        g.power_mw = 90_000;
        g.temperature_c = 40;
    });
    let (w, warnings) = fake.worker(None, FAST);
    let (p, e) = provider();
    assert!(register_on(&p.meter("t"), &w));
    let rms = collect(&p, &e);
    let (a, b) = (uuid(0), uuid(1));
    let pt = |id: &str, v: &str| (id.to_owned(), v.to_owned());
    assert_eq!(
        points(&rms, sc::METRIC_HW_GPU_UTILIZATION),
        [pt(&a, "0.75")]
    );
    assert_eq!(
        points(&rms, sc::METRIC_HW_GPU_MEMORY_UTILIZATION),
        [pt(&a, "0.5")]
    );
    let used = (40u64 << 30).to_string();
    let total = (80u64 << 30).to_string();
    assert_eq!(
        points(&rms, sc::METRIC_HW_GPU_MEMORY_USAGE),
        [pt(&a, &used), pt(&b, "0")]
    );
    assert_eq!(
        points(&rms, sc::METRIC_HW_GPU_MEMORY_LIMIT),
        [pt(&a, &total), pt(&b, "0")]
    );
    assert_eq!(
        points(&rms, sc::METRIC_HW_POWER),
        [pt(&a, "350.5"), pt(&b, "90")]
    );
    assert_eq!(points(&rms, sc::METRIC_HW_ENERGY), [pt(&a, "0")]);
    assert_eq!(
        points(&rms, sc::METRIC_HW_TEMPERATURE),
        [pt(&a, "61"), pt(&b, "40")]
    );
    // attributes, units, instrument kinds
    let last = rms.last().unwrap();
    let all = flat(std::slice::from_ref(last));
    for spec in INSTRUMENTS {
        let m = all.iter().find(|m| m.name() == spec.name).unwrap();
        assert_eq!(m.unit(), spec.unit, "{}", spec.name);
    }
    let util = all
        .iter()
        .find(|m| m.name() == sc::METRIC_HW_GPU_UTILIZATION)
        .unwrap();
    let AggregatedMetrics::F64(MetricData::Gauge(g)) = util.data() else {
        panic!("utilization is not an f64 gauge");
    };
    let mut attrs: Vec<String> = g
        .data_points()
        .flat_map(|p| p.attributes().map(|kv| format!("{}={}", kv.key, kv.value)))
        .collect();
    attrs.sort();
    assert_eq!(
        attrs,
        [
            "hw.driver_version=570.86.15".to_owned(),
            "hw.gpu.task=general".into(),
            format!("hw.id={a}"),
            "hw.model=NVIDIA H200".into(),
            "hw.name=gpu0".into(),
            "hw.type=gpu".into(),
            "hw.vendor=NVIDIA".into(),
        ]
    );
    assert!(
        warnings.lock().unwrap().is_empty(),
        "unsupported is not a warning"
    );
    w.stop();
}

// -------------------------------------------------------- energy baseline

#[test]
fn energy_counts_from_registration_under_delta_temporality() {
    let exporter = opentelemetry_sdk::metrics::InMemoryMetricExporterBuilder::new()
        .with_temporality(Temporality::Delta)
        .build();
    let p = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let fake = Fake::gpus(1);
    let (w, warnings) = fake.worker(None, FAST);
    assert!(register_on(&p.meter("t"), &w));
    let energy = |e: &InMemoryMetricExporter| {
        p.force_flush().unwrap();
        points(&e.get_finished_metrics().unwrap(), sc::METRIC_HW_ENERGY)
    };
    let sampled = |mj: u64| w.readings().energy_mj.first().copied().flatten() == Some(mj);
    let lifetime = 9_000_000_000;
    // 5 J since registration: the first delta is 5 J, not the lifetime's
    fake.edit(0, |g| g.energy_mj = lifetime + 5_000);
    assert!(eventually(|| sampled(lifetime + 5_000)));
    assert_eq!(energy(&exporter), [(uuid(0), "5".into())]);
    // a failed read: the point keeps its value (delta 0), nothing repeats
    fake.edit(0, |g| {
        g.failing = vec!["energy"];
        g.energy_mj = lifetime + 8_000;
    });
    let after = w.sweeps() + 2;
    assert!(eventually(|| w.sweeps() >= after));
    assert_eq!(energy(&exporter), [(uuid(0), "0".into())]);
    assert_eq!(energy(&exporter), [(uuid(0), "0".into())]);
    // the read works again: the 3 J of the gap, once
    fake.edit(0, |g| g.failing.clear());
    assert!(eventually(|| sampled(lifetime + 8_000)));
    assert_eq!(energy(&exporter), [(uuid(0), "3".into())]);
    assert_eq!(energy(&exporter), [(uuid(0), "0".into())]);
    let warned = warnings.lock().unwrap().clone();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("energy failed (Unknown Error)"),
        "{warned:?}"
    );
    w.stop();
}

// -------------------------------------------------------------- hangs

#[test]
fn a_hung_device_is_stale_and_export_and_shutdown_finish() {
    let fake = Fake::gpus(2);
    let (w, warnings) = fake.worker(None, FAST);
    let (p, e) = provider();
    assert!(register_on(&p.meter("t"), &w));
    // wedge GPU 1: its next call blocks until the gate opens
    fake.close_gate();
    fake.edit(1, |g| g.hangs = true);
    assert!(eventually(|| w.hung() == Some(1)), "the fake never hung");
    let start = Instant::now();
    let rms = collect(&p, &e);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "export waited on NVML"
    );
    let power = points(&rms, sc::METRIC_HW_POWER);
    assert!(power.iter().all(|(id, _)| *id != uuid(1)), "{power:?}");
    // energy keeps its last value rather than vanishing
    let energy = points(&rms, sc::METRIC_HW_ENERGY);
    assert!(energy.iter().any(|(id, _)| *id == uuid(1)), "{energy:?}");
    let warned = warnings.lock().unwrap().clone();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains("has not answered"), "{warned:?}");
    // the call returns: GPU 1 is fresh again, the warning is not repeated
    fake.edit(1, |g| g.hangs = false);
    fake.open_gate();
    assert!(eventually(
        || w.hung().is_none() && w.readings().fresh[1].is_some()
    ));
    let power = points(&collect(&p, &e), sc::METRIC_HW_POWER);
    assert!(power.iter().any(|(id, _)| *id == uuid(1)), "{power:?}");
    assert_eq!(warnings.lock().unwrap().len(), 1);
    // wedge it again, then shut the provider down
    fake.close_gate();
    fake.edit(1, |g| g.hangs = true);
    assert!(eventually(|| w.hung() == Some(1)));
    let start = Instant::now();
    p.shutdown().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "shutdown waited on NVML"
    );
    fake.open_gate();
    w.stop();
}

// ----------------------------------------------------------- failures

#[test]
fn nvml_not_loading_is_one_warning_and_counts_fall_back_to_the_list() {
    let warnings = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = warnings.clone();
    let w = Worker::start(
        Box::new(|| Err("libnvidia-ml.so.1: cannot open shared object file".into())),
        Some("0,1".into()),
        FAST,
        Arc::new(move |m| sink.lock().unwrap().push(m.to_owned())),
    );
    let (p, e) = provider();
    for _ in 0..3 {
        assert!(!register_on(&p.meter("t"), &w));
        assert_eq!(visible_count(Some("0,1"), Some(&w)), Some(2));
        assert_eq!(visible_count(None, Some(&w)), None);
    }
    assert!(flat(&collect(&p, &e)).is_empty(), "no instruments");
    let warned = warnings.lock().unwrap().clone();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("NVML did not load (libnvidia-ml.so.1: cannot open"),
        "{warned:?}"
    );
}

#[test]
fn a_failing_query_is_one_warning_and_leaves_its_points_out() {
    let fake = Fake::gpus(2);
    fake.edit(0, |g| g.failing = vec!["power"]);
    let (w, warnings) = fake.worker(None, FAST);
    let (p, e) = provider();
    assert!(register_on(&p.meter("t"), &w));
    let after = w.sweeps() + 3;
    assert!(eventually(|| w.sweeps() >= after));
    let rms = collect(&p, &e);
    assert_eq!(
        points(&rms, sc::METRIC_HW_POWER),
        [(uuid(1), "350.5".into())]
    );
    assert_eq!(points(&rms, sc::METRIC_HW_TEMPERATURE).len(), 2);
    let warned = warnings.lock().unwrap().clone();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains(&uuid(0)) && warned[0].contains("power failed"));
    w.stop();
}

#[test]
fn nvml_is_loaded_once_and_called_from_one_thread() {
    let fake = Fake::gpus(2);
    let (w, _) = fake.worker(Some("1"), FAST);
    for _ in 0..2 {
        assert_eq!(visible_count(Some("1"), Some(&w)), Some(1));
        let (p, e) = provider();
        assert!(register_on(&p.meter("t"), &w));
        collect(&p, &e);
    }
    assert_eq!(fake.0.loads.load(std::sync::atomic::Ordering::SeqCst), 1);
    let threads = fake.0.threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 1);
    assert!(!threads.contains(&std::thread::current().id()));
    w.stop();
}

#[test]
fn this_machine_without_nvml_gets_false_and_no_instruments() {
    let (p, e) = provider();
    let registered = register_gpu_metrics(&p.meter("t"));
    assert_eq!(registered, !visible_gpus().is_empty());
    if !registered {
        assert!(flat(&collect(&p, &e)).is_empty());
    }
}

#[test]
fn nvml_that_never_answers_does_not_hold_discovery_past_its_deadline() {
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let warnings = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = warnings.clone();
    let w = Worker::start(
        Box::new(move || {
            let _ = wait.recv();
            Err("released".into())
        }),
        Some("0".into()),
        FAST,
        Arc::new(move |m| sink.lock().unwrap().push(m.to_owned())),
    );
    for _ in 0..2 {
        let start = Instant::now();
        assert_eq!(w.devices(Duration::from_millis(50)), None);
        assert!(start.elapsed() < Duration::from_secs(5));
    }
    let warned = warnings.lock().unwrap().clone();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("did not list the GPUs within 0.05 s"),
        "{warned:?}"
    );
    drop(release);
    assert!(eventually(|| w.devices(Duration::ZERO).is_some()));
}
