//! `lens record -- CMD`, from outside, as a user runs it: a torchrun-style
//! launcher (the `ddp_sync` example starts one process per rank) recorded
//! and diagnosed, a hung job stopped with SIGTERM, the command's exit status
//! passed through, an uninstrumented command named, the run directory's
//! rules. `mpirun` under `lens record` is in `tests/mpi.rs`.
//!
//! ```text
//! cargo build -p nemo-lens --example ddp_sync && cargo build -p nemo-lens-cli
//! cargo test -p tests --test record
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tests::{clean_job_command, example_binary, lens_cli_binary, run_with_timeout_and, Finished};

/// One job at a time: the slow-rank timings must not depend on another job
/// running beside it on a small machine.
static JOBS: Mutex<()> = Mutex::new(());

const TIMEOUT: Duration = Duration::from_secs(90);

/// A fresh empty working directory.
fn work_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "lens-record-{}-{}-{tag}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// `lens record ARGS…` in `cwd` with nothing from the developer's shell
/// (no `NEMO_LENS_*`, `OTEL_*`, rank or fault variables) but `envs`.
fn record(cwd: &Path, args: &[&str], envs: &[(&str, &str)]) -> Command {
    let mut cmd = clean_job_command(lens_cli_binary());
    cmd.current_dir(cwd).arg("record").args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

/// Runs `cmd`; with `term_after`, sends SIGTERM to `lens record` that long
/// after the job's `world` ranks joined the barrier.
fn run(cmd: &mut Command, term_after: Option<(u32, Duration)>) -> Finished {
    let _one_at_a_time = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let f = run_with_timeout_and(cmd, TIMEOUT, |child, wait_line| {
        if let Some((world, after)) = term_after {
            if (0..world).all(|_| wait_line("barrier connected")) {
                std::thread::sleep(after);
            }
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        }
    });
    assert!(
        !f.timed_out,
        "lens record did not end in {TIMEOUT:?}: {f:?}"
    );
    f
}

/// The `Diagnosis:` line of a text report.
fn diagnosis(stdout: &str) -> &str {
    stdout
        .lines()
        .find(|l| l.starts_with("Diagnosis:"))
        .unwrap_or_else(|| panic!("no Diagnosis line in:\n{stdout}"))
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_launched_job_is_recorded_from_every_rank_and_the_slow_rank_is_named() {
    let cwd = work_dir("slow");
    let ddp = example_binary("ddp_sync");
    let ddp = ddp.to_str().unwrap();
    let f = run(
        &mut record(
            &cwd,
            &["--out", "run", "--", ddp, "--world", "4", "--steps", "30"],
            &[
                // the user's exporter: replaced, and said so
                ("NEMO_LENS_EXPORTER", "otlp"),
                ("DDP_SLOW_RANK", "2"),
                ("DDP_SLOW_PHASE", "data.next_batch"),
                ("DDP_SLOW_MS", "8"),
            ],
        ),
        None,
    );
    assert!(f.status.success(), "{f:?}");
    let run = cwd.join("run");
    assert_eq!(
        files_in(&run),
        [
            "rank0.otlp.jsonl",
            "rank1.otlp.jsonl",
            "rank2.otlp.jsonl",
            "rank3.otlp.jsonl",
            "report.html"
        ],
        "{f:?}"
    );
    let d = diagnosis(&f.stdout);
    assert!(
        d.contains("rank 2") && d.contains("data.next_batch"),
        "{d}\n{f:?}"
    );
    assert!(f.stdout.contains("from 4 rank(s)"), "{f:?}");
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("</html>"), "the page is whole");
    let canonical = run.canonicalize().unwrap();
    assert!(
        f.stdout.contains(&format!(
            "HTML report:   {}",
            canonical.join("report.html").display()
        )),
        "{f:?}"
    );
    assert!(
        f.stderr
            .contains("NEMO_LENS_EXPORTER=otlp is replaced by file"),
        "{f:?}"
    );
    // one run id for the whole job, every rank's banner quiet
    assert!(!f.stderr.contains("rank 0 of 4: spans"), "{f:?}");
    let _ = std::fs::remove_dir_all(&cwd);
}

#[test]
fn a_hung_job_stopped_with_sigterm_is_reported_with_the_hung_rank_and_the_signal_status() {
    let cwd = work_dir("hang");
    let ddp = example_binary("ddp_sync");
    let f = run(
        &mut record(
            &cwd,
            &[
                "--out",
                "run",
                "--",
                ddp.to_str().unwrap(),
                "--world",
                "4",
                "--steps",
                "400",
            ],
            &[
                ("DDP_HANG_RANK", "1"),
                ("DDP_HANG_PHASE", "forward_backward"),
                ("DDP_HANG_STEP", "5"),
            ],
        ),
        Some((4, Duration::from_millis(1500))),
    );
    // the launcher was stopped: not a success, whatever code it chose
    assert!(!f.status.success(), "{f:?}");
    let d = diagnosis(&f.stdout);
    assert!(
        d.contains("rank 1") && d.contains("forward_backward"),
        "{d}\n{f:?}"
    );
    assert!(cwd.join("run/report.html").is_file());
    let _ = std::fs::remove_dir_all(&cwd);
}

#[test]
fn the_commands_exit_status_is_kept_and_a_command_without_telemetry_is_named() {
    let cwd = work_dir("status");
    let f = run(&mut record(&cwd, &["--", "sh", "-c", "exit 7"], &[]), None);
    assert_eq!(f.status.code(), Some(7), "{f:?}");
    assert!(
        f.stderr.contains("sh wrote no telemetry into")
            && f.stderr.contains("setup_telemetry_from_env"),
        "{f:?}"
    );
    let f = run(&mut record(&cwd, &["--", "/no/such/command"], &[]), None);
    assert_eq!(f.status.code(), Some(127), "{f:?}");
    assert!(
        f.stderr
            .contains("lens record: cannot run /no/such/command"),
        "{f:?}"
    );
    let f = run(
        &mut record(&cwd, &["--", "sh", "-c", "kill -TERM $$"], &[]),
        None,
    );
    assert_eq!(f.status.code(), Some(143), "{f:?}");
    let _ = std::fs::remove_dir_all(&cwd);
}

#[test]
fn run_directories_are_fresh_named_after_the_run_id_and_an_out_with_files_is_refused() {
    let cwd = work_dir("dirs");
    let env = [("NEMO_LENS_RUN_ID", "job/42")];
    for _ in 0..2 {
        let f = run(&mut record(&cwd, &["--", "true"], &env), None);
        assert!(f.status.success(), "{f:?}");
    }
    assert_eq!(files_in(&cwd.join("lens-runs")), ["job-42", "job-42-2"]);
    // the command sees its run directory and run id
    let f = run(
        &mut record(
            &cwd,
            &[
                "--out",
                "mine",
                "--",
                "sh",
                "-c",
                "echo \"$NEMO_LENS_FILE_PATH $NEMO_LENS_RUN_ID\"",
            ],
            &env,
        ),
        None,
    );
    let mine = cwd.join("mine").canonicalize().unwrap();
    assert!(
        f.stdout.contains(&format!(
            "{}/rank{{rank}}.otlp.jsonl job/42",
            mine.display()
        )),
        "{f:?}"
    );
    // `mine` is empty still (the command wrote nothing): a second run may use it;
    // once it holds a file, lens record refuses before running the command
    std::fs::write(mine.join("rank0.otlp.jsonl"), "").unwrap();
    let f = run(
        &mut record(&cwd, &["--out", "mine", "--", "touch", "ran"], &env),
        None,
    );
    assert_eq!(f.status.code(), Some(2), "{f:?}");
    assert!(f.stderr.contains("is not empty"), "{f:?}");
    assert!(!cwd.join("ran").exists(), "the command must not have run");
    let _ = std::fs::remove_dir_all(&cwd);
}

#[test]
fn open_shows_the_page_with_the_users_browser() {
    let cwd = work_dir("open");
    let browser = cwd.join("browser.sh");
    std::fs::write(
        &browser,
        "#!/bin/sh\necho \"$1\" > \"$(dirname \"$0\")/opened\"\n",
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", browser.to_str().unwrap()])
        .status()
        .unwrap();
    let ddp = example_binary("ddp_sync");
    let f = run(
        &mut record(
            &cwd,
            &[
                "--open",
                "--out",
                "run",
                "--",
                ddp.to_str().unwrap(),
                "--world",
                "2",
                "--steps",
                "3",
            ],
            &[("BROWSER", browser.to_str().unwrap())],
        ),
        None,
    );
    assert!(f.status.success(), "{f:?}");
    let page = cwd.join("run/report.html").canonicalize().unwrap();
    // the browser is started, not waited for
    let opened = cwd.join("opened");
    for _ in 0..100 {
        if opened.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let got = std::fs::read_to_string(&opened).unwrap_or_default();
    assert_eq!(got.trim(), page.to_str().unwrap(), "{f:?}");
    let _ = std::fs::remove_dir_all(&cwd);
}
