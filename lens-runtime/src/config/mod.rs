//! `LensConfig`: the same fields and `NEMO_LENS_*` variables as the Python
//! library's `NemoLensConfig`, parsed strictly and validated up front; the
//! `OTEL_*` settings lens applies itself; export strategies.

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
pub use lens::{ExporterKind, LensConfig};
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
