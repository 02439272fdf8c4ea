//! Instrument sets: inference (GenAI semantic conventions), RL, Gym and
//! training (`nv.dl.*`) metrics.
//!
//! Each set is a struct holding its instruments, created once per [`Meter`]
//! with `::new(&meter)` (keep it next to the meter, e.g. in a `OnceLock` or a
//! field of your trainer), and recorded through a record struct of `Option`
//! fields, so a caller records only what it has:
//!
//! ```
//! use lens::{metrics::InferenceMetrics, metrics::InferenceRecord};
//! let meter = lens::otel::global::meter("doc");
//! let inference = InferenceMetrics::new(&meter);
//! inference.record(&InferenceRecord {
//!     duration_s: Some(0.2),
//!     input_tokens: Some(100),
//!     output_tokens: Some(20),
//!     model: Some("llama"),
//!     ..Default::default()
//! });
//! ```
//!
//! Recording allocates nothing beyond what the SDK needs for a new attribute
//! set: the attribute arrays are built when a set is created (the inference
//! set caches one array per operation / provider / model combination, up to
//! [`MAX_INFERENCE_ATTRIBUTE_SETS`]). Names come from [`crate::api::semconv`];
//! `docs/guide/metrics.md` has the full table.
//!
//! Choices the design left open, for the training set: the names are
//! `nv.dl.*` (the counter `nv.dl.iterations` counts what step spans number
//! with `dl.iteration`, the Python library's attribute); the step duration
//! is in seconds (`nv.dl.step.duration`, as OpenTelemetry recommends for
//! durations) while the `rl.*` / `gym.*` durations keep the
//! `_ms` names and `ms` unit of the Python library. The instruments the
//! Python library also creates (`rl.*`, `gym.*`, `gen_ai.server.request.duration`,
//! `gen_ai.client.token.usage`) are its exactly: no unit where it gives none,
//! and the SDK's default histogram boundaries ([`SDK_DEFAULT_BUCKETS`]), so
//! one series holds both languages' points; `NEMO_LENS_FINE_BUCKETS` opts
//! into finer boundaries ([`fine_bucket_boundaries`]). Loss, gradient norm and
//! learning rate are dimensionless gauges (`1`) holding the last step's
//! value; TFLOP/s uses the UCUM annotation form `{TFLOP}/s`.

mod common;
mod gym;
mod inference;
mod rl;
mod training;

pub use common::{
    fine_bucket_boundaries, DURATION_MS_BUCKETS, GEN_AI_DURATION_BUCKETS_S, GEN_AI_TOKEN_BUCKETS,
    GEN_AI_TPOT_BUCKETS_S, GEN_AI_TTFT_BUCKETS_S, MAX_INFERENCE_ATTRIBUTE_SETS,
    SDK_DEFAULT_BUCKETS, STEP_DURATION_BUCKETS_S,
};
pub use gym::{GymMetrics, GymRecord};
pub use inference::{InferenceMetrics, InferenceRecord, TokenTimer};
pub use rl::{RlMetrics, RlRecord};
pub use training::{TrainingMetrics, TrainingRecord};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::semconv as sc;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry::KeyValue;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData};

    use crate::metrics_test_support::{collect, flat, provider};

    fn find<'a>(metrics: &[&'a Metric], name: &str) -> &'a Metric {
        metrics
            .iter()
            .rev()
            .find(|m| m.name() == name)
            .copied()
            .unwrap_or_else(|| panic!("no {name}"))
    }

    fn attrs(it: impl Iterator<Item = KeyValue>) -> Vec<(String, String)> {
        let mut v: Vec<_> = it
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect();
        v.sort();
        v
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[test]
    fn inference_histograms_carry_genai_attributes_and_buckets() {
        let (p, e) = provider();
        let m = InferenceMetrics::new(&p.meter("t"));
        m.record(&InferenceRecord {
            duration_s: Some(0.2),
            input_tokens: Some(100),
            output_tokens: Some(20),
            model: Some("llama"),
            ..Default::default()
        });
        m.record(&InferenceRecord {
            duration_s: Some(3.0),
            operation: Some("chat"),
            provider: Some("vllm"),
            ..Default::default()
        });
        let rms = collect(&p, &e);
        let all = flat(&rms);
        let d = find(&all, sc::METRIC_GEN_AI_SERVER_REQUEST_DURATION);
        assert_eq!(d.unit(), "s");
        let AggregatedMetrics::F64(MetricData::Histogram(h)) = d.data() else {
            panic!("duration is not an f64 histogram: {:?}", d.data());
        };
        let mut points: Vec<_> = h
            .data_points()
            .map(|p| (attrs(p.attributes().cloned()), p.count()))
            .collect();
        points.sort();
        assert_eq!(
            points,
            vec![
                (
                    vec![
                        kv(sc::GEN_AI_OPERATION_NAME, "chat"),
                        kv(sc::GEN_AI_PROVIDER_NAME, "vllm"),
                    ],
                    1
                ),
                (
                    vec![
                        kv(sc::GEN_AI_OPERATION_NAME, "text_completion"),
                        kv(sc::GEN_AI_PROVIDER_NAME, "nemo"),
                        kv(sc::GEN_AI_REQUEST_MODEL, "llama"),
                    ],
                    1
                ),
            ]
        );
        let bounds: Vec<f64> = h.data_points().next().unwrap().bounds().collect();
        // the Python library's boundaries (the SDK's), unless fine buckets
        assert_eq!(bounds, SDK_DEFAULT_BUCKETS);

        let t = find(&all, sc::METRIC_GEN_AI_CLIENT_TOKEN_USAGE);
        assert_eq!(t.unit(), "{token}");
        let AggregatedMetrics::U64(MetricData::Histogram(h)) = t.data() else {
            panic!("token usage is not a u64 histogram");
        };
        let mut points: Vec<_> = h
            .data_points()
            .map(|p| (attrs(p.attributes().cloned()), p.sum()))
            .collect();
        points.sort();
        let base = |t: &str| {
            vec![
                kv(sc::GEN_AI_OPERATION_NAME, "text_completion"),
                kv(sc::GEN_AI_PROVIDER_NAME, "nemo"),
                kv(sc::GEN_AI_REQUEST_MODEL, "llama"),
                kv(sc::GEN_AI_TOKEN_TYPE, t),
            ]
        };
        assert_eq!(points, vec![(base("input"), 100), (base("output"), 20)]);
        let bounds: Vec<f64> = h.data_points().next().unwrap().bounds().collect();
        assert_eq!(bounds, SDK_DEFAULT_BUCKETS);
    }

    #[test]
    fn time_to_first_token_and_per_output_token() {
        let (p, e) = provider();
        let m = InferenceMetrics::new(&p.meter("t"));
        m.record(&InferenceRecord {
            time_to_first_token_s: Some(0.03),
            time_per_output_token_s: Some(0.02),
            model: Some("llama"),
            ..Default::default()
        });
        // a streamed generation timed by TokenTimer
        let mut timer = TokenTimer::start();
        assert!(timer.token());
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(!timer.token());
        timer.tokens_now(2);
        let r = timer.finish(InferenceRecord {
            model: Some("llama"),
            ..Default::default()
        });
        assert_eq!(r.output_tokens, Some(4));
        let (ttft, tpot) = (
            r.time_to_first_token_s.unwrap(),
            r.time_per_output_token_s.unwrap(),
        );
        assert!(ttft <= r.duration_s.unwrap());
        assert!(
            tpot * 3.0 >= 0.002,
            "3 tokens after the first, 2 ms apart at least: {tpot}"
        );
        m.record(&r);
        let rms = collect(&p, &e);
        let all = flat(&rms);
        for (name, bounds, sum) in [
            (
                sc::METRIC_GEN_AI_SERVER_TIME_TO_FIRST_TOKEN,
                &GEN_AI_TTFT_BUCKETS_S[..],
                0.03 + ttft,
            ),
            (
                sc::METRIC_GEN_AI_SERVER_TIME_PER_OUTPUT_TOKEN,
                &GEN_AI_TPOT_BUCKETS_S[..],
                0.02 + tpot,
            ),
        ] {
            let h = find(&all, name);
            assert_eq!(h.unit(), "s", "{name}");
            let AggregatedMetrics::F64(MetricData::Histogram(h)) = h.data() else {
                panic!("{name} is not an f64 histogram");
            };
            let points: Vec<_> = h.data_points().collect();
            assert_eq!(points.len(), 1, "{name}: one attribute set");
            assert_eq!(points[0].count(), 2, "{name}");
            assert!((points[0].sum() - sum).abs() < 1e-9, "{name}");
            assert_eq!(points[0].bounds().collect::<Vec<_>>(), bounds, "{name}");
        }
    }

    #[test]
    fn inference_caches_attribute_sets_up_to_the_cap() {
        let (p, _e) = provider();
        let m = InferenceMetrics::new(&p.meter("t"));
        let names: Vec<String> = (0..MAX_INFERENCE_ATTRIBUTE_SETS + 10)
            .map(|i| format!("m{i}"))
            .collect();
        for n in &names {
            for _ in 0..3 {
                m.record(&InferenceRecord {
                    duration_s: Some(0.1),
                    model: Some(n),
                    ..Default::default()
                });
            }
        }
        assert_eq!(m.attribute_sets(), MAX_INFERENCE_ATTRIBUTE_SETS);
        // a record with nothing to record builds no set
        m.record(&InferenceRecord::default());
    }

    fn gauge_value(all: &[&Metric], name: &str) -> (String, f64) {
        let m = find(all, name);
        match m.data() {
            AggregatedMetrics::F64(MetricData::Gauge(g)) => {
                (m.unit().to_owned(), g.data_points().next().unwrap().value())
            }
            AggregatedMetrics::U64(MetricData::Gauge(g)) => (
                m.unit().to_owned(),
                g.data_points().next().unwrap().value() as f64,
            ),
            other => panic!("{name} is not a gauge: {other:?}"),
        }
    }

    fn histogram_unit_count(all: &[&Metric], name: &str) -> (String, u64) {
        let m = find(all, name);
        let AggregatedMetrics::F64(MetricData::Histogram(h)) = m.data() else {
            panic!("{name} is not an f64 histogram");
        };
        let p = h.data_points().next().unwrap();
        (m.unit().to_owned(), p.count())
    }

    #[test]
    fn rl_gym_training_sets_record_only_what_is_given() {
        let (p, e) = provider();
        let meter = p.meter("t");
        let rl = RlMetrics::with_attributes(&meter, [KeyValue::new("algo", "grpo")]);
        rl.record(&RlRecord {
            reward_mean: Some(0.5),
            kl_divergence: Some(0.01),
            policy_loss: Some(0.2),
            value_loss: Some(0.3),
            entropy: Some(1.1),
            response_length_mean: Some(250.0),
            grad_norm: Some(0.9),
            learning_rate: Some(1e-6),
            tokens_per_sec: Some(5000.0),
            generation_duration_ms: Some(1200.0),
            rollout_duration_ms: Some(3400.0),
        });
        let gym = GymMetrics::new(&meter);
        gym.record(&GymRecord {
            request_duration_ms: Some(12.0),
            servers_active: Some(3),
            ..Default::default()
        });
        let train = TrainingMetrics::new(&meter);
        for _ in 0..3 {
            train.record(&TrainingRecord {
                step_duration_s: Some(1.5),
                loss: Some(2.0),
                iterations: Some(1),
                ..Default::default()
            });
        }
        let rms = collect(&p, &e);
        let all = flat(&rms);
        for (name, unit, v) in [
            (sc::METRIC_RL_REWARD_MEAN, "", 0.5),
            (sc::METRIC_RL_KL_DIVERGENCE, "", 0.01),
            (sc::METRIC_RL_POLICY_LOSS, "", 0.2),
            (sc::METRIC_RL_VALUE_LOSS, "", 0.3),
            (sc::METRIC_RL_ENTROPY, "", 1.1),
            (sc::METRIC_RL_RESPONSE_LENGTH_MEAN, "", 250.0),
            (sc::METRIC_RL_GRAD_NORM, "", 0.9),
            (sc::METRIC_RL_LEARNING_RATE, "", 1e-6),
            (sc::METRIC_RL_THROUGHPUT_TOKENS_PER_SEC, "{token}/s", 5000.0),
            (sc::METRIC_GYM_SERVERS_ACTIVE, "", 3.0),
            (sc::METRIC_NV_DL_LOSS, "1", 2.0),
        ] {
            assert_eq!(gauge_value(&all, name), (unit.to_owned(), v), "{name}");
        }
        for (name, unit, n) in [
            (sc::METRIC_RL_GENERATION_DURATION_MS, "ms", 1),
            (sc::METRIC_RL_ROLLOUT_DURATION_MS, "ms", 1),
            (sc::METRIC_GYM_SERVER_REQUEST_DURATION_MS, "ms", 1),
            (sc::METRIC_NV_DL_STEP_DURATION, "s", 3),
        ] {
            assert_eq!(
                histogram_unit_count(&all, name),
                (unit.to_owned(), n),
                "{name}"
            );
        }
        // the rl set carries its constant attribute
        let m = find(&all, sc::METRIC_RL_REWARD_MEAN);
        let AggregatedMetrics::F64(MetricData::Gauge(g)) = m.data() else {
            unreachable!()
        };
        assert_eq!(
            attrs(g.data_points().next().unwrap().attributes().cloned()),
            vec![kv("algo", "grpo")]
        );
        // not given: not recorded
        for name in [
            sc::METRIC_GYM_ROLLOUT_DURATION_MS,
            sc::METRIC_GYM_VERIFY_DURATION_MS,
            sc::METRIC_GYM_VERIFY_SUCCESS_RATE,
            sc::METRIC_NV_DL_GRAD_NORM,
            sc::METRIC_NV_DL_THROUGHPUT_TFLOPS,
        ] {
            assert!(all.iter().all(|m| m.name() != name), "{name} was recorded");
        }
        let it = find(&all, sc::METRIC_NV_DL_ITERATIONS);
        assert_eq!(it.unit(), "{iteration}");
        let AggregatedMetrics::U64(MetricData::Sum(s)) = it.data() else {
            panic!("iterations is not a u64 sum");
        };
        assert!(s.is_monotonic());
        assert_eq!(s.data_points().next().unwrap().value(), 3);
    }
}
