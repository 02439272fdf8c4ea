//! A failed setup returned from `main` prints as one sentence (Rust prints
//! `Error: {e:?}`), with the underlying error once: tested on a real
//! process, `lens-main`, whose `main` returns `Box<dyn Error>`.

use std::process::Command;

const MAIN: &str = env!("CARGO_BIN_EXE_lens-main");

/// Runs `lens-main` with `vars` (and lens on); its exit status and stderr.
fn run(vars: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(MAIN);
    for (k, _) in std::env::vars() {
        if k.starts_with("NEMO_LENS_") || k.starts_with("OTEL_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_QUIET", "1");
    cmd.envs(vars.iter().copied());
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_bad_variable_prints_one_sentence_naming_the_variable_value_and_choices() {
    let (code, stderr) = run(&[("NEMO_LENS_EXPORTER", "zipkin")]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stderr,
        "Error: invalid value \"zipkin\" for NEMO_LENS_EXPORTER; expected one of: otlp, \
         console, file, perfetto\n"
    );
}

#[test]
fn span_path_context_and_span_limits_are_strict() {
    for (var, value, expected) in [
        ("NEMO_LENS_SPAN_PATH", "fast", "one of: lens, sdk"),
        ("NEMO_LENS_OTEL_CONTEXT", "none", "one of: full, ids"),
        (
            "OTEL_SPAN_EVENT_COUNT_LIMIT",
            "-1",
            "a whole number from 0 to 4294967295",
        ),
    ] {
        let (code, stderr) = run(&[("NEMO_LENS_EXPORTER", "console"), (var, value)]);
        assert_eq!(code, 1, "{stderr}");
        assert_eq!(
            stderr,
            format!("Error: invalid value \"{value}\" for {var}; expected {expected}\n")
        );
    }
}

#[test]
fn a_wrapped_error_prints_its_source_once() {
    // the span-group error is the config error's source: printed once,
    // after the config error's own words
    let (code, stderr) = run(&[("NEMO_LENS_SPAN_GROUPS", "default,stpe")]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.starts_with(
            "Error: invalid value \"default,stpe\" for NEMO_LENS_SPAN_GROUPS: unknown span \
             group or preset `stpe`; valid names are: "
        ),
        "{stderr}"
    );
    assert_eq!(stderr.matches("stpe").count(), 2, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn an_exporter_that_cannot_start_keeps_the_operating_system_s_error() {
    let (code, stderr) = run(&[
        ("NEMO_LENS_EXPORTER", "file"),
        ("NEMO_LENS_FILE_PATH", "/proc/no/such/dir/run.jsonl"),
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stderr,
        "Error: cannot start telemetry export: cannot open /proc/no/such/dir/run.jsonl (from \
         NEMO_LENS_FILE_PATH): No such file or directory (os error 2)\n"
    );
}

#[test]
fn a_good_setup_exits_zero() {
    let (code, stderr) = run(&[("NEMO_LENS_EXPORTER", "console")]);
    assert_eq!((code, stderr.as_str()), (0, ""));
}
