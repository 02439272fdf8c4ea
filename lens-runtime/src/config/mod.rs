//! `LensConfig`: the same fields and `NEMO_LENS_*` variables as the Python
//! library's `NemoLensConfig`, parsed strictly and validated up front; the
//! `OTEL_*` settings lens applies itself; export strategies.

#[cfg(feature = "sdk-core")]
mod check;
mod env;
pub(crate) mod error;
mod lens;
#[cfg(feature = "sdk-core")]
pub(crate) mod otel;
#[cfg(feature = "sdk-core")]
pub(crate) mod plan;
pub(crate) mod strategy;
mod validate;

pub use error::ConfigError;
#[cfg(feature = "sdk-core")]
pub(crate) use lens::DEFAULT_SERVICE_NAME;
pub use lens::{ExporterKind, LensConfig, OtelContext, SpanPath};
pub use validate::ValidConfig;

#[cfg(test)]
mod tests {
    use super::lens::ENV_PREFIX;
    use super::*;

    fn lookup(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |var| {
            vars.iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn otel_signal_exporters_reconciled_with_nemo_lens_exporter() {
        let cfg = |vars: &'static [(&'static str, &'static str)]| {
            LensConfig::from_lookup(&[ENV_PREFIX], &[], lookup(vars))
        };
        let c = cfg(&[
            ("OTEL_METRICS_EXPORTER", "none"),
            ("OTEL_LOGS_EXPORTER", "None"),
        ])
        .unwrap();
        assert!(c.traces_enabled && !c.metrics_enabled && !c.logs_enabled);
        let c = cfg(&[("OTEL_TRACES_EXPORTER", "console")]).unwrap();
        assert_eq!(c.exporter, ExporterKind::Console);
        // NEMO_LENS_EXPORTER wins over the OTEL_* choice
        let c = cfg(&[
            ("OTEL_TRACES_EXPORTER", "console"),
            ("NEMO_LENS_EXPORTER", "file"),
        ])
        .unwrap();
        assert_eq!(c.exporter, ExporterKind::File);
        // one exporter for every signal: disagreeing choices are an error
        let e = cfg(&[
            ("OTEL_TRACES_EXPORTER", "console"),
            ("OTEL_METRICS_EXPORTER", "otlp"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("OTEL_METRICS_EXPORTER") && e.contains("OTEL_TRACES_EXPORTER"),
            "{e}"
        );
        let e = cfg(&[("OTEL_LOGS_EXPORTER", "zipkin")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("OTEL_LOGS_EXPORTER")
                && e.contains("zipkin")
                && e.contains("otlp, console, none"),
            "{e}"
        );
    }

    #[test]
    fn otel_propagators() {
        use super::otel::Propagators;
        let p = |v: &'static str| Propagators::parse(move |_: &str| Some(v.to_owned()));
        let both = Propagators {
            trace_context: true,
            baggage: true,
        };
        assert_eq!(Propagators::parse(|_: &str| None).unwrap(), both);
        assert_eq!(p("tracecontext,baggage").unwrap(), both);
        assert_eq!(
            p(" TraceContext ").unwrap(),
            Propagators {
                trace_context: true,
                baggage: false
            }
        );
        assert_eq!(
            p("none").unwrap(),
            Propagators {
                trace_context: false,
                baggage: false
            }
        );
        let e = p("tracecontext,b3").unwrap_err().to_string();
        assert!(e.contains("OTEL_PROPAGATORS") && e.contains("b3"), "{e}");
    }

    #[test]
    fn otel_sdk_disabled_switches_everything_off() {
        let cfg = |v: &'static str| {
            LensConfig::from_lookup(&[ENV_PREFIX], &[], move |k: &str| match k {
                "NEMO_LENS_ENABLED" => Some("1".to_owned()),
                "OTEL_SDK_DISABLED" => Some(v.to_owned()),
                _ => None,
            })
            .unwrap()
        };
        assert!(!cfg("true").enabled);
        assert!(!cfg("TRUE").enabled);
        assert!(cfg("false").enabled);
        // the specification: anything but `true` is false (with a warning)
        assert!(cfg("1").enabled);
    }

    #[test]
    fn profile_defaults_on_and_parses_strictly() {
        assert!(LensConfig::default().profile);
        let cfg = |v: &'static str| {
            LensConfig::from_lookup(&[ENV_PREFIX], &[], lookup_one("NEMO_LENS_PROFILE", v))
        };
        assert!(cfg("").unwrap().profile, "blank keeps the default");
        assert!(!cfg("0").unwrap().profile);
        assert!(!cfg("Off").unwrap().profile);
        assert!(cfg("yes").unwrap().profile);
        let e = cfg("sometimes").unwrap_err().to_string();
        assert!(
            e.contains("NEMO_LENS_PROFILE") && e.contains("sometimes"),
            "{e}"
        );
    }

    #[test]
    fn span_limits_parse_strictly() {
        use super::otel::span_limits;
        let l = span_limits(|_: &str| None).unwrap();
        assert_eq!(
            (
                l.max_attributes_per_span,
                l.max_events_per_span,
                l.max_links_per_span
            ),
            (128, 128, 128)
        );
        let l = span_limits(lookup(&[
            ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", " 2 "),
            ("OTEL_SPAN_EVENT_COUNT_LIMIT", "0"),
            ("OTEL_SPAN_LINK_COUNT_LIMIT", ""),
        ]))
        .unwrap();
        assert_eq!(
            (
                l.max_attributes_per_span,
                l.max_events_per_span,
                l.max_links_per_span
            ),
            (2, 0, 128),
            "a blank value keeps the default"
        );
        for (var, bad) in [
            ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "-1"),
            ("OTEL_SPAN_EVENT_COUNT_LIMIT", "many"),
            ("OTEL_SPAN_LINK_COUNT_LIMIT", "4294967296"),
        ] {
            let e = span_limits(lookup_one(var, bad)).unwrap_err().to_string();
            assert!(
                e.contains(var) && e.contains(bad) && e.contains("0 to 4294967295"),
                "{e}"
            );
        }
    }

    #[test]
    fn span_path_and_context_parse_strictly_and_code_wins() {
        use super::otel::{span_path_and_context, CodeSettings};
        let none = CodeSettings::default();
        assert_eq!(
            span_path_and_context(&none, |_: &str| None).unwrap(),
            (SpanPath::Lens, OtelContext::Full)
        );
        let both = lookup(&[
            ("NEMO_LENS_SPAN_PATH", " SDK "),
            ("NEMO_LENS_OTEL_CONTEXT", "ids"),
        ]);
        assert_eq!(
            span_path_and_context(&none, &both).unwrap(),
            (SpanPath::Sdk, OtelContext::Ids)
        );
        for (var, choices) in [
            ("NEMO_LENS_SPAN_PATH", "one of: lens, sdk"),
            ("NEMO_LENS_OTEL_CONTEXT", "one of: full, ids"),
        ] {
            let e = span_path_and_context(&none, lookup_one(var, "fast"))
                .unwrap_err()
                .to_string();
            assert_eq!(
                e,
                format!("invalid value \"fast\" for {var}; expected {choices}")
            );
        }
        // a choice in code is taken, its variable not read
        let code = CodeSettings {
            span_path: Some(SpanPath::Lens),
            otel_context: Some(OtelContext::Full),
            ..CodeSettings::default()
        };
        let bad = lookup(&[
            ("NEMO_LENS_SPAN_PATH", "fast"),
            ("NEMO_LENS_OTEL_CONTEXT", "fast"),
        ]);
        assert_eq!(
            span_path_and_context(&code, bad).unwrap(),
            (SpanPath::Lens, OtelContext::Full)
        );
    }

    fn lookup_one(key: &'static str, value: &'static str) -> impl Fn(&str) -> Option<String> {
        move |var| (var == key).then(|| value.to_owned())
    }

    #[test]
    fn redact_keys_default_empty_and_parsed() {
        assert!(LensConfig::default().redact_keys.is_empty());
        let c = LensConfig::from_lookup(&[ENV_PREFIX], &[], lookup(&[])).unwrap();
        assert!(c.redact_keys.is_empty());
        let c = LensConfig::from_lookup(
            &[ENV_PREFIX],
            &[],
            lookup(&[("NEMO_LENS_REDACT_KEYS", " email ,, user.SSN,")]),
        )
        .unwrap();
        assert_eq!(c.redact_keys, ["email", "user.SSN"]);
        c.validate().unwrap();
        let c = LensConfig::from_lookup(
            &["MEGATRON_OTEL_", ENV_PREFIX],
            &[],
            lookup(&[
                ("MEGATRON_OTEL_REDACT_KEYS", "a"),
                ("NEMO_LENS_REDACT_KEYS", "b"),
            ]),
        )
        .unwrap();
        assert_eq!(c.redact_keys, ["a"], "first prefix wins");
    }

    #[test]
    fn bad_redact_keys_name_the_variable() {
        for bad in ["email,api key", "a=b", "x,y\tz"] {
            let e = LensConfig::from_lookup(&[ENV_PREFIX], &[], move |v: &str| {
                (v == "NEMO_LENS_REDACT_KEYS").then(|| bad.to_owned())
            })
            .unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("NEMO_LENS_REDACT_KEYS"), "{msg}");
            assert!(msg.contains("without whitespace or '='"), "{msg}");
        }
        for bad in ["", "a,b", "a b", "k=v"] {
            let c = LensConfig {
                redact_keys: vec!["ok".into(), bad.into()],
                ..LensConfig::default()
            };
            let msg = c.validate().unwrap_err().to_string();
            assert!(msg.contains("redact_keys"), "{msg}");
        }
    }
}
