//! `lens record`: runs a command with telemetry on, then reports on it.
//!
//! One command to record and look, as `nsys profile ./app` or `py-spy
//! record -- cmd` are: the command runs with every `NEMO_LENS_*` setting a
//! first look needs (the file exporter into a fresh run directory, every
//! rank exporting, every span group, its logs, a metric interval of one second, the
//! signal flush, no per-rank banner), and when it has ended the run's report is printed and
//! its HTML page written beside the files. What the user set otherwise is
//! kept: `NEMO_LENS_SPAN_GROUPS`, the run id, the metric interval, the
//! `tracing` bridge's routes, resource attributes and the rest.
//!
//! The command's ranks are whatever it starts: a program that sets
//! telemetry up itself (`cargo run …`), `mpirun -np 4 …`, or a launcher in
//! the style of `torchrun` / `srun` whose ranks inherit the environment.
//! Each rank writes `rank<N>.otlp.jsonl` into the run directory, and all
//! of them share one run id (handed down as `NEMO_LENS_RUN_ID`).
//! Termination signals are forwarded to the command as `lens exec` does,
//! and `lens record` exits with the command's status, so a failed job still
//! fails (and is still reported on: a job stopped with Ctrl-C or SIGTERM
//! shows where each rank was).

use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Parser as _;

use crate::cli::{Cli, RecordArgs};
use crate::exec::{self, signals, Outcome};
use crate::telemetry::{self, RUN_ID_VAR};

/// Exit code of a usage error found before the command runs.
const EXIT_USAGE: u8 = 2;

/// Where run directories go by default (relative to the working directory).
pub(crate) const RUNS_DIR: &str = "lens-runs";

/// The HTML page's file name inside the run directory.
pub(crate) const HTML_FILE: &str = "report.html";

/// The value of one variable the command is given.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Setting {
    /// The variable.
    var: &'static str,
    /// Its value.
    value: String,
    /// Set even when the user set it otherwise: what `lens record` is
    /// (files in the run directory, from every rank); the rest are
    /// defaults that the user's own value replaces.
    forced: bool,
}

/// The environment `lens record` gives the command, for run directory `dir`
/// and run id `run_id`.
fn settings(dir: &Path, run_id: &str) -> Vec<Setting> {
    let forced = |var, value: &str| Setting {
        var,
        value: value.to_owned(),
        forced: true,
    };
    let default = |var, value: &str| Setting {
        var,
        value: value.to_owned(),
        forced: false,
    };
    vec![
        forced("NEMO_LENS_ENABLED", "true"),
        forced("NEMO_LENS_EXPORTER", "file"),
        forced(
            "NEMO_LENS_FILE_PATH",
            &dir.join("rank{rank}.otlp.jsonl").to_string_lossy(),
        ),
        forced("NEMO_LENS_EXPORT_STRATEGY", "all_ranks"),
        default("NEMO_LENS_SPAN_GROUPS", "all"),
        // the job's log records beside its spans (the report counts them per rank)
        default("NEMO_LENS_LOGS_ENABLED", "true"),
        default(RUN_ID_VAR, run_id),
        // a short job's metrics are more than its first and last point
        default("OTEL_METRIC_EXPORT_INTERVAL", "1000"),
        // Ctrl-C or a scheduler's SIGTERM on a hung job still leaves the
        // open spans (marked truncated) for the report to point at
        default("NEMO_LENS_FLUSH_ON_SIGNAL", "true"),
        // each rank's line naming its file: the run directory is printed once
        default("NEMO_LENS_QUIET", "true"),
    ]
}

/// Applies `settings` to `cmd` given the user's environment (`lookup`);
/// returns one note per user value that a forced setting replaced.
fn apply(
    cmd: &mut Command,
    settings: &[Setting],
    lookup: impl Fn(&str) -> Option<OsString>,
) -> Vec<String> {
    let mut notes = Vec::new();
    for s in settings {
        match lookup(s.var) {
            // the user's value is inherited as it is
            Some(_) if !s.forced => {}
            Some(user) if user != OsStr::new(&s.value) => {
                notes.push(format!(
                    "{}={} is replaced by {} (lens record writes every rank's files into the run directory)",
                    s.var,
                    user.to_string_lossy(),
                    s.value
                ));
                cmd.env(s.var, &s.value);
            }
            _ => {
                cmd.env(s.var, &s.value);
            }
        }
    }
    notes
}

/// The run id the command's ranks share: `NEMO_LENS_RUN_ID` or the
/// launcher's job id as the library reads them, else a new one.
fn run_id() -> String {
    let cfg = lens::LensConfig::from_env().unwrap_or_default();
    telemetry::resolve_run_id(&cfg, |v| std::env::var(v).ok()).id
}

/// The run directory: `--out` when given (it must not hold files yet),
/// else `lens-runs/<run id>` (with `-2`, `-3`, … when that exists).
/// Created here; an error is a usage error naming the path.
fn run_dir(out: Option<&Path>, run_id: &str) -> Result<PathBuf, String> {
    let dir = match out {
        Some(dir) => {
            let has_files = std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some());
            if has_files {
                return Err(format!(
                    "--out {} is not empty: lens record writes a fresh run directory \
                     (remove it, or pick another)",
                    dir.display()
                ));
            }
            dir.to_path_buf()
        }
        None => {
            let mut name = lens::file_safe_run_id(run_id);
            if name.trim_matches('.').is_empty() {
                // `.` and `..` are file-safe characters, not a directory's name
                name = format!("run{name}");
            }
            let base = Path::new(RUNS_DIR).join(name);
            let mut dir = base.clone();
            let mut n = 2;
            while dir.exists() {
                dir = PathBuf::from(format!("{}-{n}", base.display()));
                n += 1;
            }
            dir
        }
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create the run directory {}: {e}", dir.display()))?;
    // the ranks may change their working directory: give them an absolute path
    std::fs::canonicalize(&dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// Runs `lens record` (see the module docs); exits with the command's
/// status, or 2 when the run directory cannot be made.
pub(crate) fn run(args: &RecordArgs) -> ExitCode {
    let Some((program, rest)) = args.command.split_first() else {
        eprintln!("lens record: no command given");
        return ExitCode::from(EXIT_USAGE);
    };
    let run_id = run_id();
    let dir = match run_dir(args.out.as_deref(), &run_id) {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("lens record: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut cmd = Command::new(program);
    cmd.args(rest);
    for note in apply(&mut cmd, &settings(&dir, &run_id), |v| std::env::var_os(v)) {
        eprintln!("lens record: note: {note}");
    }
    signals::install();
    let outcome = exec::run_child(&mut cmd, "record", program, &lens::SpanGuard::none());
    if !matches!(outcome, Outcome::NotStarted(_)) {
        report(&dir, program, args.open);
    }
    ExitCode::from(outcome.exit_code())
}

/// Prints the run's report and writes its HTML page; says on stderr why
/// when there is nothing to report (the command's exit status is kept
/// either way).
fn report(dir: &Path, program: &OsStr, open: bool) {
    let html = dir.join(HTML_FILE);
    let argv: [&OsStr; 5] = [
        OsStr::new("lens"),
        OsStr::new("report"),
        dir.as_os_str(),
        OsStr::new("--html"),
        html.as_os_str(),
    ];
    let args = match Cli::try_parse_from(argv).map(|c| c.command) {
        Ok(crate::cli::Command::Report(a)) => a,
        // the arguments above are fixed: not reachable
        _ => return,
    };
    match crate::run_report(&args) {
        Ok(()) => {}
        Err(crate::Failure::Empty(_)) => {
            eprintln!(
                "lens record: {} wrote no telemetry into {}. A Rust program records when it \
                 calls lens::setup_telemetry_from_env() (or TelemetryBuilder) and keeps the \
                 handle until the end of main; a launcher must pass its environment to the ranks.",
                Path::new(program).display(),
                dir.display()
            );
            return;
        }
        Err(crate::Failure::ClosedOutput) => return,
        Err(crate::Failure::Usage(e) | crate::Failure::Other(e)) => {
            eprintln!("lens record: the report failed: {e}");
            return;
        }
    }
    let said = writeln!(
        std::io::stdout(),
        "\nRun directory: {}\nHTML report:   {}",
        dir.display(),
        html.display()
    );
    if said.is_err() {
        return;
    }
    if open {
        open_page(&html);
    }
}

/// Opens `page` in the user's browser: `$BROWSER`, else `xdg-open`
/// (`open` on macOS); a failure is one line on stderr.
fn open_page(page: &Path) {
    let opener = std::env::var_os("BROWSER").unwrap_or_else(|| {
        OsString::from(if cfg!(target_os = "macos") {
            "open"
        } else {
            "xdg-open"
        })
    });
    let started = Command::new(&opener)
        .arg(page)
        .stdin(std::process::Stdio::null())
        .spawn();
    if let Err(e) = started {
        eprintln!(
            "lens record: cannot open {} with {}: {e} (set BROWSER, or open it yourself)",
            page.display(),
            opener.to_string_lossy()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(cmd: &Command, var: &str) -> Option<String> {
        cmd.get_envs()
            .find(|(k, _)| *k == OsStr::new(var))
            .and_then(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
    }

    #[test]
    fn forced_settings_replace_the_users_and_say_so_defaults_keep_the_users() {
        let dir = Path::new("/runs/r1");
        let mut cmd = Command::new("true");
        let user = |var: &str| match var {
            "NEMO_LENS_EXPORTER" => Some(OsString::from("otlp")),
            "NEMO_LENS_SPAN_GROUPS" => Some(OsString::from("per_step")),
            "NEMO_LENS_ENABLED" => Some(OsString::from("true")),
            _ => None,
        };
        let notes = apply(&mut cmd, &settings(dir, "abc"), user);
        assert_eq!(env_of(&cmd, "NEMO_LENS_EXPORTER").as_deref(), Some("file"));
        assert_eq!(
            env_of(&cmd, "NEMO_LENS_FILE_PATH").as_deref(),
            Some("/runs/r1/rank{rank}.otlp.jsonl")
        );
        // the user's groups are inherited, not set
        assert_eq!(env_of(&cmd, "NEMO_LENS_SPAN_GROUPS"), None);
        assert_eq!(env_of(&cmd, "NEMO_LENS_RUN_ID").as_deref(), Some("abc"));
        assert_eq!(
            env_of(&cmd, "OTEL_METRIC_EXPORT_INTERVAL").as_deref(),
            Some("1000")
        );
        // one note: the exporter (ENABLED had the same value)
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("NEMO_LENS_EXPORTER=otlp is replaced by file"));
    }

    #[test]
    fn a_given_out_directory_must_be_empty() {
        let base = std::env::temp_dir().join(format!("lens-record-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let fresh = run_dir(Some(&base.join("a")), "x").unwrap();
        assert!(fresh.is_absolute() && fresh.is_dir());
        std::fs::write(fresh.join("f"), "").unwrap();
        let e = run_dir(Some(&base.join("a")), "x").unwrap_err();
        assert!(e.contains("is not empty"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }
}
