//! `LensConfig` parsing and validation, every error path.

use lens::{ConfigError, ExporterKind, LensConfig, OtelContext, SpanPath};
use std::collections::HashMap;

fn from(vars: &[(&str, &str)]) -> Result<LensConfig, ConfigError> {
    from_with(&["NEMO_LENS_"], &[], vars)
}

fn from_with(
    prefixes: &[&str],
    families: &[&'static lens::SpanGroupFamily],
    vars: &[(&str, &str)],
) -> Result<LensConfig, ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    LensConfig::from_lookup(prefixes, families, |k| map.get(k).cloned())
}

fn err(vars: &[(&str, &str)]) -> String {
    from(vars).unwrap_err().to_string()
}

#[test]
fn defaults_match_the_python_library() {
    let c = from(&[]).unwrap();
    assert!(!c.enabled);
    assert_eq!(c.service_name, "nemo");
    assert_eq!(c.export_strategy, "single_rank");
    assert_eq!(c.export_rank, -1);
    assert_eq!(c.export_sample_rate, 1.0);
    assert!(!c.sampler_enabled);
    assert!(c.traces_enabled && c.metrics_enabled && !c.logs_enabled);
    assert_eq!(c.span_groups, "default");
    assert_eq!(c.exporter, ExporterKind::Otlp);
    assert_eq!(c.run_id, None);
    assert_eq!(c.user, None);
    // unset: setup reads the unprefixed variable, else the default
    assert_eq!((c.span_path, c.otel_context), (None, None));
    c.validate().unwrap();
}

#[test]
fn span_path_and_otel_context_are_read_strictly_under_each_prefix() {
    let c = from(&[
        ("NEMO_LENS_SPAN_PATH", " SDK "),
        ("NEMO_LENS_OTEL_CONTEXT", "Ids"),
    ])
    .unwrap();
    assert_eq!(c.span_path, Some(SpanPath::Sdk));
    assert_eq!(c.otel_context, Some(OtelContext::Ids));
    let c = from_with(
        &["MEGATRON_OTEL_", "NEMO_LENS_"],
        &[],
        &[
            ("MEGATRON_OTEL_SPAN_PATH", "lens"),
            ("NEMO_LENS_SPAN_PATH", "sdk"),
        ],
    )
    .unwrap();
    assert_eq!(c.span_path, Some(SpanPath::Lens), "the first prefix wins");
    assert_eq!(
        err(&[("NEMO_LENS_SPAN_PATH", "fast")]),
        "invalid value \"fast\" for NEMO_LENS_SPAN_PATH; expected one of: lens, sdk"
    );
    assert_eq!(
        err(&[("NEMO_LENS_OTEL_CONTEXT", "none")]),
        "invalid value \"none\" for NEMO_LENS_OTEL_CONTEXT; expected one of: full, ids"
    );
}

#[test]
fn every_variable_is_read() {
    let c = from(&[
        ("NEMO_LENS_ENABLED", "TRUE"),
        ("OTEL_SERVICE_NAME", "trainer"),
        ("NEMO_LENS_EXPORT_STRATEGY", "All_Ranks"),
        ("NEMO_LENS_EXPORT_RANK", "3"),
        ("NEMO_LENS_EXPORT_SAMPLE_RATE", "0.25"),
        ("NEMO_LENS_SAMPLER_ENABLED", "on"),
        ("NEMO_LENS_TRACES_ENABLED", "no"),
        ("NEMO_LENS_METRICS_ENABLED", "0"),
        ("NEMO_LENS_LOGS_ENABLED", "Yes"),
        ("NEMO_LENS_SPAN_GROUPS", "default, STEP"),
        ("NEMO_LENS_EXPORTER", "File"),
        ("NEMO_LENS_RUN_ID", "run-42"),
        ("NEMO_LENS_USER_ID", "alice"),
        ("WANDB_ENTITY", "team"),
        ("WANDB_PROJECT", "proj"),
    ])
    .unwrap();
    assert!(c.enabled && c.sampler_enabled && c.logs_enabled);
    assert!(!c.traces_enabled && !c.metrics_enabled);
    assert_eq!(c.service_name, "trainer");
    assert_eq!(c.export_strategy, "all_ranks");
    assert_eq!(c.export_rank, 3);
    assert_eq!(c.export_sample_rate, 0.25);
    assert_eq!(c.span_groups, "default, STEP");
    assert_eq!(c.exporter, ExporterKind::File);
    assert_eq!(c.run_id.as_deref(), Some("run-42"));
    assert_eq!(c.user.as_deref(), Some("alice"));
    assert_eq!(c.wandb_entity.as_deref(), Some("team"));
    assert_eq!(c.wandb_project.as_deref(), Some("proj"));
    assert!(c
        .resolve_span_groups()
        .unwrap()
        .contains(&lens::groups::STEP));
}

#[test]
fn booleans_accept_every_documented_spelling() {
    for (v, want) in [
        ("1", true),
        ("true", true),
        ("YES", true),
        ("On", true),
        ("0", false),
        ("False", false),
        ("no", false),
        ("OFF", false),
        (" true ", true),
    ] {
        assert_eq!(
            from(&[("NEMO_LENS_ENABLED", v)]).unwrap().enabled,
            want,
            "{v}"
        );
    }
}

#[test]
fn blank_values_keep_defaults() {
    let c = from(&[("NEMO_LENS_ENABLED", ""), ("NEMO_LENS_SPAN_GROUPS", "  ")]).unwrap();
    assert!(!c.enabled);
    assert_eq!(c.span_groups, "default");
}

#[test]
fn bad_boolean_names_variable_value_and_choices() {
    for var in [
        "NEMO_LENS_ENABLED",
        "NEMO_LENS_SAMPLER_ENABLED",
        "NEMO_LENS_TRACES_ENABLED",
        "NEMO_LENS_METRICS_ENABLED",
        "NEMO_LENS_LOGS_ENABLED",
    ] {
        let e = err(&[(var, "maybe")]);
        assert!(e.contains(var), "{e}");
        assert!(e.contains("\"maybe\""), "{e}");
        assert!(e.contains("yes, no, on, off"), "{e}");
    }
}

#[test]
fn bad_numbers_and_ranges() {
    let e = err(&[("NEMO_LENS_EXPORT_RANK", "last")]);
    assert!(
        e.contains("NEMO_LENS_EXPORT_RANK") && e.contains("\"last\"") && e.contains(">= -1"),
        "{e}"
    );
    let e = err(&[("NEMO_LENS_EXPORT_RANK", "-2")]);
    assert!(
        e.contains("NEMO_LENS_EXPORT_RANK") && e.contains("-2"),
        "{e}"
    );
    for bad in ["1.5", "-0.1", "NaN", "half"] {
        let e = err(&[("NEMO_LENS_EXPORT_SAMPLE_RATE", bad)]);
        assert!(
            e.contains("NEMO_LENS_EXPORT_SAMPLE_RATE") && e.contains("[0, 1]"),
            "{e}"
        );
    }
    assert_eq!(
        from(&[("NEMO_LENS_EXPORT_SAMPLE_RATE", "0")])
            .unwrap()
            .export_sample_rate,
        0.0
    );
    assert_eq!(
        from(&[("NEMO_LENS_EXPORT_SAMPLE_RATE", "1")])
            .unwrap()
            .export_sample_rate,
        1.0
    );
}

#[test]
fn bad_exporter_and_strategy() {
    let e = err(&[("NEMO_LENS_EXPORTER", "jaeger")]);
    assert!(
        e.contains("NEMO_LENS_EXPORTER")
            && e.contains("\"jaeger\"")
            && e.contains("otlp, console, file"),
        "{e}"
    );
    let e = err(&[("NEMO_LENS_EXPORT_STRATEGY", "every_rank")]);
    assert!(
        e.contains("NEMO_LENS_EXPORT_STRATEGY")
            && e.contains("all_ranks, single_rank, sampled, first_rank_per_node"),
        "{e}"
    );
}

#[test]
fn unknown_span_group_is_caught_in_the_config() {
    let e = from(&[("NEMO_LENS_SPAN_GROUPS", "default,stpe")]).unwrap_err();
    match &e {
        ConfigError::UnknownSpanGroup {
            variable,
            value,
            reason,
        } => {
            assert_eq!(variable, "NEMO_LENS_SPAN_GROUPS");
            assert_eq!(value, "default,stpe");
            assert_eq!(reason.name(), "stpe");
            assert!(reason.valid_names().contains(&"step"));
        }
        other => panic!("unexpected {other:?}"),
    }
    // one line names the variable, the value and the valid names, with
    // `{e}` as with `{e:?}`
    let msg = e.to_string();
    assert!(
        msg.starts_with(r#"invalid value "default,stpe" for NEMO_LENS_SPAN_GROUPS: "#)
            && msg.contains("stpe")
            && msg.contains("forward_backward"),
        "{msg}"
    );
    assert_eq!(format!("{e:?}"), msg);
    // megatron groups are unknown to the base family, known with it
    assert!(from(&[("NEMO_LENS_SPAN_GROUPS", "microbatch")]).is_err());
    let c = from_with(
        &["NEMO_LENS_"],
        &[&lens::megatron::FAMILY],
        &[("NEMO_LENS_SPAN_GROUPS", "microbatch")],
    )
    .unwrap();
    assert!(c
        .resolve_span_groups()
        .unwrap()
        .contains(&lens::megatron::MICROBATCH));
}

#[test]
fn prefix_with_fallback() {
    let prefixes = ["MEGATRON_OTEL_", "NEMO_LENS_"];
    let c = from_with(
        &prefixes,
        &[&lens::megatron::FAMILY],
        &[
            ("MEGATRON_OTEL_ENABLED", "1"),
            ("NEMO_LENS_ENABLED", "0"),
            ("NEMO_LENS_EXPORT_RANK", "0"),
            ("MEGATRON_OTEL_SPAN_GROUPS", "per_step"),
        ],
    )
    .unwrap();
    assert!(c.enabled, "own prefix wins");
    assert_eq!(c.export_rank, 0, "falls back to NEMO_LENS_");
    assert!(c
        .resolve_span_groups()
        .unwrap()
        .contains(&lens::megatron::COMMUNICATION));
    // errors name the variable that was actually read
    let e = from_with(&prefixes, &[], &[("MEGATRON_OTEL_LOGS_ENABLED", "perhaps")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("MEGATRON_OTEL_LOGS_ENABLED"), "{e}");
}

#[test]
fn validate_checks_programmatic_configs() {
    let mut c = LensConfig::default();
    c.validate().unwrap();
    c.export_sample_rate = f64::NAN;
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("export_sample_rate"));
    c.export_sample_rate = 0.5;
    c.export_rank = -5;
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("export_rank"));
    c.export_rank = 0;
    c.span_groups = "all,nope".into();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("span_groups") && e.contains("nope"), "{e}");
    c.span_groups = "all".into();
    c.export_strategy = "bogus".into();
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("export_strategy"));
    c.export_strategy = "sampled".into();
    c.service_name = " ".into();
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("service_name"));
}
