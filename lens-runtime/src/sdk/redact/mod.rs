//! Redaction at the last point before export, for every signal.
//!
//! One rule decides which keys are sensitive: the default rule of
//! [`is_redacted_key`](crate::api::attr::is_redacted_key) plus the extra keys of a
//! [`Redactor`] (`NEMO_LENS_REDACT_KEYS`, `TelemetryBuilder::redact_keys`),
//! matched as [`is_redacted_key_with`] describes. Under a sensitive key,
//! string values and string arrays become [`REDACTED`]; numbers and booleans
//! (e.g. `token = 42`, a token count) are kept. It is applied to:
//!
//! * span attributes, event attributes and link attributes:
//!   [`Redactor::redact_span`], applied by lens's batch span processor
//!   ([`BatchProcessor`](crate::sdk::export::batch::BatchProcessor)) to
//!   every span before its exporter sees it;
//! * log record attributes: the [`RedactLogs`] exporter wrapper;
//! * metric attributes: [`RedactingMeterProvider`], at the measurement (the
//!   SDK's aggregated metrics cannot be edited);
//! * resource attributes: [`Redactor::redact_attributes`] before the
//!   resource is built, [`Redactor::redact_resource`] for a built one.
//!
//! Free text (error messages, log bodies, event and span names) is not
//! scanned.

mod logs;
mod metrics;
mod rule;

pub(crate) use logs::RedactLogs;
pub(crate) use metrics::RedactingMeterProvider;
pub(crate) use rule::Redactor;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::attr::REDACTED;
    use crate::metrics_test_support::{collect, flat, provider};
    use opentelemetry::logs::Severity;
    use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _};
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry::trace::{
        Link, Span as _, SpanContext, TraceFlags, TraceState, Tracer as _, TracerProvider as _,
    };
    use opentelemetry::KeyValue;
    use opentelemetry::{Array, Key, SpanId, TraceId, Value};
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::logs::InMemoryLogExporter;
    use opentelemetry_sdk::logs::{SdkLogRecord, SdkLoggerProvider};
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use opentelemetry_sdk::trace::{SpanData, SpanExporter, SpanProcessor as _};
    use opentelemetry_sdk::Resource;
    use std::borrow::Cow;
    use std::collections::HashMap;

    fn red() -> Value {
        Value::from(REDACTED)
    }

    fn get<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
        attrs
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    }

    fn sensitive() -> Vec<KeyValue> {
        vec![
            KeyValue::new("prompt", "secret text"),
            KeyValue::new("api_key", "x"),
            KeyValue::new("gen_ai.prompt.0.content", "hi"),
            KeyValue::new("user.email", "a@b.c"),
            KeyValue::new("tags.secret", Value::Array(Array::String(vec!["a".into()]))),
            KeyValue::new("token", 42),
            KeyValue::new("token_count", 5),
            KeyValue::new("gen_ai.usage.input_tokens", 7),
            KeyValue::new("tokenizer", "bpe"),
        ]
    }

    fn check(attrs: &[KeyValue]) {
        for k in [
            "prompt",
            "api_key",
            "gen_ai.prompt.0.content",
            "user.email",
            "tags.secret",
        ] {
            assert_eq!(get(attrs, k), Some(&red()), "{k}");
        }
        assert_eq!(get(attrs, "token"), Some(&Value::I64(42)));
        assert_eq!(get(attrs, "token_count"), Some(&Value::I64(5)));
        assert_eq!(
            get(attrs, "gen_ai.usage.input_tokens"),
            Some(&Value::I64(7))
        );
        assert_eq!(get(attrs, "tokenizer"), Some(&Value::from("bpe")));
    }

    fn redactor() -> Redactor {
        Redactor::new(["email"])
    }

    #[test]
    fn redacted_attributes_borrow_when_clean() {
        let r = redactor();
        let clean = [KeyValue::new("token", 1), KeyValue::new("model", "m")];
        assert!(matches!(r.redacted_attributes(&clean), Cow::Borrowed(_)));
        let already = [KeyValue::new("prompt", REDACTED)];
        assert!(matches!(r.redacted_attributes(&already), Cow::Borrowed(_)));
        check(&r.redacted_attributes(&sensitive()));
        let mut attrs = sensitive();
        assert!(r.redact_attributes(&mut attrs));
        check(&attrs);
        assert!(!r.redact_attributes(&mut attrs), "idempotent");
    }

    #[test]
    fn spans_events_links_and_resource_are_redacted() {
        let exporter = InMemorySpanExporter::default();
        let resource = Resource::builder_empty()
            .with_attributes([
                KeyValue::new("deploy.token", "t0k3n"),
                KeyValue::new("service.name", "svc"),
            ])
            .build();
        let provider = SdkTracerProvider::builder()
            .with_resource(resource)
            .with_span_processor(batch_processor(exporter.clone()))
            .build();
        let tracer = provider.tracer("t");
        let linked = SpanContext::new(
            TraceId::from(1),
            SpanId::from(2),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        let mut span = tracer
            .span_builder("s")
            .with_attributes(sensitive())
            .with_links(vec![Link::new(linked, sensitive(), 0)])
            .start(&tracer);
        span.add_event("e", sensitive());
        span.end();
        provider.force_flush().unwrap();
        let spans = exporter.get_finished_spans().unwrap();
        let s = &spans[0];
        check(&s.attributes);
        check(&s.events.events[0].attributes);
        check(&s.links.links[0].attributes);
        assert_eq!(s.name, "s");
        assert_eq!(s.events.events[0].name, "e", "names are not scanned");
        let res = Resource::builder_empty()
            .with_schema_url([KeyValue::new("deploy.token", "t")], "https://s")
            .build();
        let redacted = redactor().redact_resource(&res).unwrap();
        assert_eq!(redacted.get(&Key::from("deploy.token")), Some(red()));
        assert_eq!(redacted.schema_url(), Some("https://s"));
    }

    /// Remembers the resource it was given.
    #[derive(Debug, Default, Clone)]
    struct ResourceProbe(std::sync::Arc<std::sync::Mutex<Option<Resource>>>);

    impl SpanExporter for ResourceProbe {
        async fn export(&self, _: Vec<SpanData>) -> OTelSdkResult {
            Ok(())
        }
        fn set_resource(&mut self, resource: &Resource) {
            if let Ok(mut r) = self.0.lock() {
                *r = Some(resource.clone());
            }
        }
    }

    /// Lens's batch processor over `exporter`, with [`redactor`].
    fn batch_processor<E: SpanExporter + 'static>(
        exporter: E,
    ) -> crate::sdk::export::batch::BatchProcessor {
        let settings = crate::config::otel::BatchSettings {
            max_queue_size: 64,
            max_export_batch_size: 64,
            scheduled_delay: std::time::Duration::from_secs(5),
            flush_timeout: std::time::Duration::from_secs(5),
        };
        crate::sdk::processors::batch_processor(exporter, Default::default(), settings, redactor())
    }

    #[test]
    fn span_exporter_gets_a_redacted_resource() {
        let probe = ResourceProbe::default();
        let mut wrapped = batch_processor(probe.clone());
        let res = Resource::builder_empty()
            .with_attributes([
                KeyValue::new("deploy.token", "t0k3n"),
                KeyValue::new("service.name", "svc"),
            ])
            .build();
        wrapped.set_resource(&res);
        wrapped.force_flush().unwrap();
        let seen = probe.0.lock().unwrap().clone().unwrap();
        assert_eq!(seen.get(&Key::from("deploy.token")), Some(red()));
        assert_eq!(
            seen.get(&Key::from("service.name")),
            Some(Value::from("svc"))
        );
    }

    #[test]
    fn redact_span_reports_changes() {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let mut span = provider.tracer("t").start("clean");
        span.set_attribute(KeyValue::new("n", 1));
        span.end();
        let mut data = exporter.get_finished_spans().unwrap().remove(0);
        assert!(!redactor().redact_span(&mut data));
    }

    #[test]
    fn resource_attributes_before_build() {
        // what setup does with OTEL_RESOURCE_ATTRIBUTES=deploy.token=...
        let mut attrs = vec![
            KeyValue::new("deploy.token", "t0k3n"),
            KeyValue::new("service.name", "svc"),
        ];
        assert!(redactor().redact_attributes(&mut attrs));
        let res = Resource::builder_empty().with_attributes(attrs).build();
        assert_eq!(res.get(&Key::from("deploy.token")), Some(red()));
        assert_eq!(
            res.get(&Key::from("service.name")),
            Some(Value::from("svc"))
        );
        assert!(redactor().redact_resource(&res).is_none());
    }

    fn log_provider(exporter: &InMemoryLogExporter) -> SdkLoggerProvider {
        SdkLoggerProvider::builder()
            .with_resource(
                Resource::builder_empty()
                    .with_attribute(KeyValue::new("deploy.token", "t0k3n"))
                    .build(),
            )
            .with_simple_exporter(RedactLogs::new(exporter.clone(), redactor()))
            .build()
    }

    fn any(record: &SdkLogRecord, key: &str) -> Option<AnyValue> {
        record
            .attributes_iter()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v.clone())
    }

    #[test]
    fn log_records_and_resource_are_redacted() {
        let exporter = InMemoryLogExporter::default();
        let provider = log_provider(&exporter);
        let logger = provider.logger("t");
        let mut rec = logger.create_log_record();
        rec.set_event_name("ev");
        rec.set_target("tgt");
        rec.set_severity_number(Severity::Warn);
        rec.set_severity_text("WARN");
        rec.set_timestamp(std::time::SystemTime::UNIX_EPOCH);
        rec.set_trace_context(TraceId::from(3), SpanId::from(4), Some(TraceFlags::SAMPLED));
        rec.set_body(AnyValue::from("prompt was: tell me")); // free text: kept
        rec.add_attribute("prompt", "secret text");
        rec.add_attribute("api_key", "x");
        rec.add_attribute("token_count", 5);
        rec.add_attribute("user.email", AnyValue::ListAny(Box::new(vec!["a".into()])));
        rec.add_attribute("bytes.secret", AnyValue::Bytes(Box::new(vec![1, 2])));
        let mut map = HashMap::new();
        map.insert(Key::from("hf_token"), AnyValue::from("hf_x"));
        map.insert(Key::from("n"), AnyValue::from("kept"));
        rec.add_attribute("cfg", AnyValue::Map(Box::new(map)));
        rec.add_attribute("model", "m");
        logger.emit(rec);
        // a clean record in another batch goes through as is
        let mut clean = logger.create_log_record();
        clean.add_attribute("model", "m");
        logger.emit(clean);

        let logs = exporter.get_emitted_logs().unwrap();
        let r = &logs[0].record;
        let redacted = Some(AnyValue::from(REDACTED));
        assert_eq!(any(r, "prompt"), redacted);
        assert_eq!(any(r, "api_key"), redacted);
        assert_eq!(any(r, "user.email"), redacted);
        assert_eq!(any(r, "bytes.secret"), redacted);
        assert_eq!(any(r, "token_count"), Some(AnyValue::Int(5)));
        assert_eq!(any(r, "model"), Some(AnyValue::from("m")));
        let Some(AnyValue::Map(m)) = any(r, "cfg") else {
            panic!("cfg is a map")
        };
        assert_eq!(m.get(&Key::from("hf_token")), redacted.as_ref());
        assert_eq!(m.get(&Key::from("n")), Some(&AnyValue::from("kept")));
        assert_eq!(r.attributes_iter().count(), 7, "order and count kept");
        assert_eq!(r.event_name(), Some("ev"));
        assert_eq!(r.target().map(|t| t.as_ref()), Some("tgt"));
        assert_eq!(r.severity_number(), Some(Severity::Warn));
        assert_eq!(r.severity_text(), Some("WARN"));
        assert_eq!(r.timestamp(), Some(std::time::SystemTime::UNIX_EPOCH));
        assert!(r.observed_timestamp().is_some());
        assert_eq!(r.trace_context().map(|c| c.span_id), Some(SpanId::from(4)));
        assert_eq!(r.body(), Some(&AnyValue::from("prompt was: tell me")));
        assert_eq!(any(&logs[1].record, "model"), Some(AnyValue::from("m")));
        assert_eq!(
            logs[0].resource.get(&Key::from("deploy.token")),
            Some(red()),
            "set_resource is redacted"
        );
    }

    #[test]
    fn rebuilt_record_keeps_every_field() {
        let exporter = InMemoryLogExporter::default();
        let provider = SdkLoggerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let logger = provider.logger("t");
        let mut rec = logger.create_log_record();
        rec.set_event_name("ev");
        rec.set_target("tgt");
        rec.set_severity_number(Severity::Error);
        rec.set_severity_text("ERROR");
        rec.set_timestamp(std::time::SystemTime::UNIX_EPOCH);
        rec.set_observed_timestamp(std::time::SystemTime::UNIX_EPOCH);
        rec.set_trace_context(TraceId::from(3), SpanId::from(4), Some(TraceFlags::SAMPLED));
        rec.set_body(AnyValue::from("b"));
        rec.add_attribute("n", 1);
        rec.add_attribute("s", "v");
        logger.emit(rec);
        let original = exporter.get_emitted_logs().unwrap().remove(0).record;
        assert!(!redactor().record_needs(&original));
        assert_eq!(redactor().redact_record(&original), original);
    }

    #[cfg(feature = "logs")]
    #[test]
    fn tracing_event_fields_through_the_log_bridge() {
        use tracing_subscriber::layer::SubscriberExt as _;
        let exporter = InMemoryLogExporter::default();
        let provider = log_provider(&exporter);
        let subscriber = tracing_subscriber::registry().with(
            opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge::new(&provider),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(prompt = "tell me", token_count = 5_i64, "generated");
        });
        let logs = exporter.get_emitted_logs().unwrap();
        let r = &logs[0].record;
        assert_eq!(any(r, "prompt"), Some(AnyValue::from(REDACTED)));
        assert_eq!(any(r, "token_count"), Some(AnyValue::Int(5)));
        assert_eq!(r.body(), Some(&AnyValue::from("generated")));
    }

    fn points(
        rms: &[opentelemetry_sdk::metrics::data::ResourceMetrics],
        name: &str,
    ) -> Vec<Vec<KeyValue>> {
        let metrics = flat(rms);
        let m = metrics
            .iter()
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("no {name}"));
        let attrs = |it: &mut dyn Iterator<Item = &KeyValue>| it.cloned().collect::<Vec<_>>();
        match m.data() {
            AggregatedMetrics::U64(MetricData::Sum(s)) => s
                .data_points()
                .map(|p| attrs(&mut p.attributes()))
                .collect(),
            AggregatedMetrics::F64(MetricData::Histogram(h)) => h
                .data_points()
                .map(|p| attrs(&mut p.attributes()))
                .collect(),
            AggregatedMetrics::I64(MetricData::Gauge(g)) => g
                .data_points()
                .map(|p| attrs(&mut p.attributes()))
                .collect(),
            AggregatedMetrics::F64(MetricData::Sum(s)) => s
                .data_points()
                .map(|p| attrs(&mut p.attributes()))
                .collect(),
            _ => panic!("unexpected data for {name}"),
        }
    }

    #[test]
    fn metric_attributes_are_redacted_at_the_measurement() {
        let (sdk, exporter) = provider();
        let p = RedactingMeterProvider::new(sdk.clone(), redactor());
        let meter = p.meter("t");
        let attrs = [
            KeyValue::new("prompt", "secret text"),
            KeyValue::new("api_key", "x"),
            KeyValue::new("token_count", 5),
            KeyValue::new("gen_ai.token.type", "input"),
        ];
        meter
            .u64_counter("c")
            .with_description("d")
            .with_unit("{req}")
            .build()
            .add(1, &attrs);
        meter
            .f64_histogram("h")
            .with_boundaries(vec![1.0, 2.0])
            .build()
            .record(1.5, &attrs);
        meter.f64_up_down_counter("u").build().add(1.0, &attrs);
        let owned = attrs.to_vec();
        let _g = meter
            .i64_observable_gauge("g")
            .with_callback(move |o| o.observe(3, &owned))
            .build();
        let rms = collect(&sdk, &exporter);
        for name in ["c", "h", "u", "g"] {
            let pts = points(&rms, name);
            assert_eq!(pts.len(), 1, "{name}");
            let got = &pts[0];
            assert_eq!(get(got, "prompt"), Some(&red()), "{name}");
            assert_eq!(get(got, "api_key"), Some(&red()), "{name}");
            assert_eq!(get(got, "token_count"), Some(&Value::I64(5)), "{name}");
            assert_eq!(get(got, "gen_ai.token.type"), Some(&Value::from("input")));
        }
        let metrics = flat(&rms);
        let c = metrics.iter().find(|m| m.name() == "c").unwrap();
        assert_eq!((c.description(), c.unit()), ("d", "{req}"));
        let h = metrics.iter().find(|m| m.name() == "h").unwrap();
        let AggregatedMetrics::F64(MetricData::Histogram(h)) = h.data() else {
            panic!("histogram")
        };
        let bounds: Vec<f64> = h.data_points().next().unwrap().bounds().collect();
        assert_eq!(bounds, [1.0, 2.0], "boundaries kept");
    }
}
