//! Span-group spec resolution across families.

use lens::groups::{CHECKPOINT, EVALUATE, FORWARD_BACKWARD, JOB, OPTIMIZER, STEP};
use lens::{megatron, nemo_gym, nemo_rl, SpanGroupSet};

#[test]
fn base_presets() {
    let d = SpanGroupSet::resolve("default", &[]).unwrap();
    assert_eq!(d.names(), ["job", "checkpoint", "evaluate"]);
    let p = SpanGroupSet::resolve("per_step", &[]).unwrap();
    assert_eq!(p.names().len(), 8);
    let a = SpanGroupSet::resolve("ALL", &[]).unwrap();
    assert_eq!(a.names(), p.names());
    assert!(SpanGroupSet::resolve("", &[]).unwrap().names().is_empty());
    assert!(SpanGroupSet::resolve(" , ,", &[])
        .unwrap()
        .names()
        .is_empty());
}

#[test]
fn unknown_name_lists_every_valid_name() {
    let e = SpanGroupSet::resolve("default,bogus", &[&megatron::FAMILY]).unwrap_err();
    assert_eq!(e.name(), "bogus");
    for n in ["job", "step", "microbatch", "default", "per_step", "all"] {
        assert!(e.valid_names().contains(&n), "{n} missing");
    }
    assert!(e.to_string().contains("`bogus`"));
}

#[test]
fn megatron_presets() {
    let fam = &[&megatron::FAMILY];
    let d = SpanGroupSet::resolve("default", fam).unwrap();
    assert!(d.contains(&JOB) && d.contains(&CHECKPOINT) && d.contains(&EVALUATE));
    assert!(d.contains(&megatron::INFERENCE));
    assert!(!d.contains(&STEP) && !d.contains(&megatron::LAYER));
    let p = SpanGroupSet::resolve("per_step", fam).unwrap();
    for g in [
        &STEP,
        &FORWARD_BACKWARD,
        &OPTIMIZER,
        &megatron::COMMUNICATION,
        &megatron::DATA_LOADING,
        &megatron::INFERENCE,
    ] {
        assert!(p.contains(g), "{}", g.name());
    }
    assert!(!p.contains(&megatron::LAYER) && !p.contains(&megatron::MICROBATCH));
    let a = SpanGroupSet::resolve("all", fam).unwrap();
    assert_eq!(a.names().len(), 8 + 6);
}

#[test]
fn several_families_at_once() {
    // an RL trainer driving a Megatron backend
    let fams = &[&nemo_rl::FAMILY, &megatron::FAMILY];
    let s = SpanGroupSet::resolve("default, layer, generation", fams).unwrap();
    assert!(s.contains(&megatron::LAYER) && s.contains(&nemo_rl::GENERATION));
    // `default` expands in every family that defines it
    assert!(s.contains(&megatron::INFERENCE) && s.contains(&JOB));
    assert!(!s.contains(&nemo_rl::ROLLOUT) && !s.contains(&nemo_rl::LOGPROB));
    // megatron's `per_step` extends the base one, so the union holds every
    // base group; nemo_rl's adds its eight
    let p = SpanGroupSet::resolve("per_step", fams).unwrap();
    assert!(p.contains(&OPTIMIZER) && p.contains(&nemo_rl::LOGPROB));
    assert!(!p.contains(&megatron::LAYER));
    let all = SpanGroupSet::resolve("all", fams).unwrap();
    assert_eq!(all.names().len(), 8 + 8 + 6);
}

/// The presets of the Python library, exactly (issue 14).
#[test]
fn rl_and_gym_presets_equal_the_python_library() {
    let names = |spec: &str, fam: &'static lens::SpanGroupFamily| {
        SpanGroupSet::resolve(spec, &[fam]).unwrap().names()
    };
    assert_eq!(
        names("default", &nemo_rl::FAMILY),
        ["job", "checkpoint", "evaluate"]
    );
    assert_eq!(
        names("per_step", &nemo_rl::FAMILY),
        [
            "job",
            "checkpoint",
            "evaluate",
            "step",
            "rollout",
            "generation",
            "logprob",
            "reward",
            "advantage",
            "policy_update",
            "reference_policy",
            "data_processing"
        ]
    );
    assert_eq!(names("all", &nemo_rl::FAMILY).len(), 8 + 8);
    assert_eq!(
        names("default", &nemo_gym::FAMILY),
        ["job", "checkpoint", "evaluate", "server"]
    );
    assert_eq!(
        names("per_step", &nemo_gym::FAMILY),
        [
            "job",
            "checkpoint",
            "evaluate",
            "server",
            "rollout_collection",
            "verify",
            "aggregate_metrics"
        ]
    );
    assert_eq!(names("all", &nemo_gym::FAMILY).len(), 8 + 4);
    // megatron extends the base presets (unchanged by issue 14)
    assert_eq!(
        names("default", &megatron::FAMILY),
        ["job", "checkpoint", "evaluate", "inference"]
    );
}

#[test]
fn each_family_has_its_own_word_and_bits_are_distinct() {
    for fam in [
        &lens::groups::FAMILY,
        &megatron::FAMILY,
        &nemo_rl::FAMILY,
        &nemo_gym::FAMILY,
    ] {
        let masks: Vec<u64> = fam.groups().iter().map(|g| g.__mask()).collect();
        for (i, m) in masks.iter().enumerate() {
            assert_eq!(m.count_ones(), 1);
            assert!(!masks[..i].contains(m));
        }
    }
}

#[test]
fn macro_base_table_matches_the_runtime() {
    let names: Vec<&str> = lens::groups::FAMILY
        .groups()
        .iter()
        .map(|g| g.name())
        .collect();
    assert_eq!(
        names,
        [
            "job",
            "checkpoint",
            "evaluate",
            "model_init",
            "load_checkpoint",
            "step",
            "forward_backward",
            "optimizer"
        ]
    );
    // every base name is accepted by the macros as a literal and maps to the
    // runtime group of the same name
    lens::set_enabled_span_groups(&SpanGroupSet::resolve("all", &[]).unwrap());
    // one site per base group literal, in declaration order
    let sites = || {
        [
            !lens::managed_span!("job", "x").is_none(),
            !lens::managed_span!("checkpoint", "x").is_none(),
            !lens::managed_span!("evaluate", "x").is_none(),
            !lens::managed_span!("model_init", "x").is_none(),
            !lens::managed_span!("load_checkpoint", "x").is_none(),
            !lens::managed_span!("step", "x").is_none(),
            !lens::managed_span!("forward_backward", "x").is_none(),
            !lens::managed_span!("optimizer", "x").is_none(),
        ]
    };
    assert!(sites().iter().all(|s| *s));
    for (i, g) in lens::groups::FAMILY.groups().iter().enumerate() {
        let one = SpanGroupSet::resolve(g.name(), &[]).unwrap();
        lens::set_enabled_span_groups(&one);
        for (j, o) in sites().iter().enumerate() {
            assert_eq!(*o, i == j, "literal {j} vs group {}", g.name());
        }
    }
    lens::set_enabled_span_groups(&SpanGroupSet::none());
}

#[test]
fn macro_redaction_table_matches_the_runtime() {
    use lens::otel::trace::TraceContextExt;
    assert_eq!(
        lens::REDACTED_KEYS,
        [
            "prompt",
            "input_text",
            "output_text",
            "text",
            "password",
            "token",
            "secret",
            "key"
        ]
    );
    // literal keys are decided by the macro at compile time: each of the
    // runtime's keys must be redacted by it too, and a near-miss must not.
    let exporter = lens::otel_sdk::trace::InMemorySpanExporter::default();
    let provider = lens::otel_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    lens::set_tracer_provider(&provider);
    {
        let g = lens::span_cm!(
            "r",
            prompt = "v",
            input_text = "v",
            output_text = "v",
            text = "v",
            password = "v",
            token = "v",
            secret = "v",
            key = "v",
            keys = "v"
        );
        assert!(g.context().span().is_recording());
    }
    // other tests of this binary may end spans into the same provider
    // meanwhile (it is process-wide): pick this test's span by name
    let spans = exporter.get_finished_spans().unwrap();
    let span = spans.iter().find(|s| s.name == "r").expect("span r");
    for kv in &span.attributes {
        let want = if kv.key.as_str() == "keys" {
            "v"
        } else {
            "[REDACTED]"
        };
        assert_eq!(kv.value.as_str(), want, "{}", kv.key);
    }
    assert_eq!(span.attributes.len(), 9);
    lens::clear_tracer_provider();
}
