//! A real synchronized data-parallel job: the `ddp_sync` example in its
//! launcher mode starts one process per rank, the ranks meet in a TCP
//! barrier inside `allreduce.grads` every step, and faults are injected from
//! the environment (`DDP_SLOW_*`, `DDP_HANG_*`, `DDP_JITTER_MS`; see the
//! example's header). Every rank exports OTLP JSON lines to
//! `lens-telemetry/` in the job's working directory (`all_ranks`).
//!
//! The first tests check the job itself: its spans, that a slow rank's delay
//! becomes the other ranks' wait, and that a hang leaves truncated spans.
//! The diagnosis tests (issue 40) run `lens report --json` on the files and
//! check the first suspect (rank, phase, kind), and that balanced runs with
//! jitter name nobody:
//!
//! ```text
//! cargo build -p nemo-lens --example ddp_sync && cargo build -p nemo-lens-cli
//! cargo test -p tests --test sync_job
//! ```
//!
//! Jobs run one at a time (a lock), so their timings are not disturbed by
//! each other on a small machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tests::{clean_job_command, example_binary, lens_cli_binary, run_with_timeout_and, Finished};

/// The phases of a step, in order: the direct children of `train.step`.
const PHASES: [&str; 4] = [
    "data.next_batch",
    "forward_backward",
    "allreduce.grads",
    "optimizer.step",
];

/// One job at a time: the machine may have two cores, and the slow-rank
/// timings must not depend on another job running beside it.
static JOBS: Mutex<()> = Mutex::new(());

/// The longest a job may take (a normal one takes about a second).
const TIMEOUT: Duration = Duration::from_secs(90);

/// What to do while the job runs.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// Let it finish.
    Never,
    /// Once every rank has joined the barrier, wait this long, then send
    /// SIGTERM to the launcher (which forwards it to the ranks).
    TermAfter(Duration),
}

/// A fresh empty directory for one job.
fn job_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "lens-sync-job-{}-{}-{tag}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// The launcher, with telemetry on for every rank and group (file exporter)
/// and nothing from the developer's shell: no rank variables, no faults.
fn job_command(world: u32, steps: u64, envs: &[(&str, &str)], cwd: &Path) -> Command {
    let mut cmd = clean_job_command(example_binary("ddp_sync"));
    cmd.current_dir(cwd)
        .args(["--world", &world.to_string(), "--steps", &steps.to_string()])
        .env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_EXPORTER", "file")
        .env("NEMO_LENS_EXPORT_STRATEGY", "all_ranks")
        .env("NEMO_LENS_SPAN_GROUPS", "all")
        .env("NEMO_LENS_QUIET", "1");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

/// Runs the job in launcher mode in a fresh directory; returns the folder of
/// its OTLP JSON lines files and what the launcher did.
fn run_job(world: u32, steps: u64, envs: &[(&str, &str)]) -> (PathBuf, Finished) {
    run_job_with(world, steps, envs, Stop::Never)
}

fn run_job_with(world: u32, steps: u64, envs: &[(&str, &str)], stop: Stop) -> (PathBuf, Finished) {
    let cwd = job_dir("run");
    let mut cmd = job_command(world, steps, envs, &cwd);
    let _one_at_a_time = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let finished = run_with_timeout_and(&mut cmd, TIMEOUT, |child, wait_line| {
        if let Stop::TermAfter(after) = stop {
            let joined = (0..world).all(|_| wait_line("barrier connected"));
            if joined {
                std::thread::sleep(after);
            }
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        }
    });
    assert!(
        !finished.timed_out,
        "the job did not end in {TIMEOUT:?}\nstdout:\n{}\nstderr:\n{}",
        finished.stdout, finished.stderr
    );
    (cwd.join("lens-telemetry"), finished)
}

/// Panics with the launcher's output unless it succeeded.
#[track_caller]
fn assert_ok(f: &Finished) {
    assert!(
        f.status.success(),
        "the job failed ({:?}, took {:?})\nstdout:\n{}\nstderr:\n{}",
        f.status,
        f.took,
        f.stdout,
        f.stderr
    );
}

/// One span of one rank's file.
#[derive(Debug, Clone)]
struct Sp {
    name: String,
    id: String,
    parent: String,
    start_ns: u64,
    end_ns: u64,
    iteration: Option<i64>,
    truncated: bool,
}

impl Sp {
    fn ms(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e6
    }
}

fn num(v: &serde_json::Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

/// Every rank's spans, by rank (from the file name `<run>-rank<r>.otlp.jsonl`).
fn read_ranks(dir: &Path) -> BTreeMap<u32, Vec<Sp>> {
    let mut out = BTreeMap::new();
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("no telemetry folder {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".otlp.jsonl") else {
            continue;
        };
        let rank: u32 = stem
            .rsplit_once("-rank")
            .and_then(|(_, r)| r.parse().ok())
            .unwrap_or_else(|| panic!("no rank in the file name {name}"));
        let text = std::fs::read_to_string(&path).unwrap();
        let spans: &mut Vec<Sp> = out.entry(rank).or_default();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{name}: a line is not JSON ({e}): {line}"));
            for rs in v["resourceSpans"].as_array().into_iter().flatten() {
                for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                    for s in ss["spans"].as_array().into_iter().flatten() {
                        let attr = |key: &str| {
                            s["attributes"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .find(|kv| kv["key"] == key)
                                .map(|kv| kv["value"].clone())
                        };
                        spans.push(Sp {
                            name: s["name"].as_str().unwrap_or_default().to_owned(),
                            id: s["spanId"].as_str().unwrap_or_default().to_owned(),
                            parent: s["parentSpanId"].as_str().unwrap_or_default().to_owned(),
                            start_ns: num(&s["startTimeUnixNano"]).unwrap_or(0),
                            end_ns: num(&s["endTimeUnixNano"]).unwrap_or(0),
                            iteration: attr("dl.iteration")
                                .and_then(|v| num(&v["intValue"]))
                                .map(|i| i as i64),
                            truncated: attr("nemo.span.truncated")
                                .and_then(|v| v["boolValue"].as_bool())
                                .unwrap_or(false),
                        });
                    }
                }
            }
        }
    }
    out
}

/// The direct children of `step`, in start order.
fn children<'a>(spans: &'a [Sp], step: &Sp) -> Vec<&'a Sp> {
    let mut c: Vec<&Sp> = spans.iter().filter(|s| s.parent == step.id).collect();
    c.sort_by_key(|s| s.start_ns);
    c
}

fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "median of nothing");
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Durations (ms) of `phase` on `rank`, one per step.
fn phase_ms(ranks: &BTreeMap<u32, Vec<Sp>>, rank: u32, phase: &str) -> Vec<f64> {
    ranks[&rank]
        .iter()
        .filter(|s| s.name == phase)
        .map(Sp::ms)
        .collect()
}

#[test]
fn balanced_run_writes_one_file_per_rank_with_every_step_and_its_phases() {
    let (world, steps) = (4, 12);
    let (dir, f) = run_job(world, steps, &[]);
    assert_ok(&f);
    let ranks = read_ranks(&dir);
    assert_eq!(
        ranks.keys().copied().collect::<Vec<_>>(),
        (0..world).collect::<Vec<_>>(),
        "one file per rank in {}",
        dir.display()
    );
    for (rank, spans) in &ranks {
        let mut step_spans: Vec<&Sp> = spans.iter().filter(|s| s.name == "train.step").collect();
        step_spans.sort_by_key(|s| s.iteration);
        let iterations: Vec<i64> = step_spans.iter().filter_map(|s| s.iteration).collect();
        assert_eq!(
            iterations,
            (0..steps as i64).collect::<Vec<_>>(),
            "rank {rank}: one train.step per step, with dl.iteration"
        );
        for step in step_spans {
            let names: Vec<&str> = children(spans, step)
                .iter()
                .map(|s| s.name.as_str())
                .collect();
            assert_eq!(
                names, PHASES,
                "rank {rank} step {:?}: the phases are the step's direct children, in order",
                step.iteration
            );
            assert!(!step.truncated);
        }
    }
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn a_slow_rank_makes_the_others_wait_in_the_allreduce() {
    let (world, steps, slow, delay_ms) = (4, 24, 2, 10.0);
    let (dir, f) = run_job(
        world,
        steps,
        &[
            ("DDP_SLOW_RANK", "2"),
            ("DDP_SLOW_PHASE", "data.next_batch"),
            ("DDP_SLOW_MS", "10"),
        ],
    );
    assert_ok(&f);
    let ranks = read_ranks(&dir);
    assert_eq!(ranks.len(), world as usize);
    let slow_data = median(phase_ms(&ranks, slow, "data.next_batch"));
    let slow_wait = median(phase_ms(&ranks, slow, "allreduce.grads"));
    let others_wait = median(
        (0..world)
            .filter(|r| *r != slow)
            .map(|r| median(phase_ms(&ranks, r, "allreduce.grads")))
            .collect(),
    );
    let steps_ms: Vec<f64> = (0..world)
        .map(|r| median(phase_ms(&ranks, r, "train.step")))
        .collect();
    let extra = others_wait - slow_wait;
    eprintln!(
        "slow rank {slow}: data.next_batch {slow_data:.2} ms, allreduce.grads {slow_wait:.2} ms; \
         the others' allreduce.grads {others_wait:.2} ms: they wait {extra:.2} ms more \
         (injected {delay_ms} ms); median step per rank {steps_ms:.2?} ms"
    );
    assert!(
        slow_data >= delay_ms,
        "the delay is inside the slow rank's phase: {slow_data:.2} ms"
    );
    assert!(
        extra > 0.6 * delay_ms && extra < 1.6 * delay_ms,
        "the others wait about the injected {delay_ms} ms longer than the slow rank: \
         {others_wait:.2} - {slow_wait:.2} = {extra:.2} ms"
    );
    // synchronized: every rank's step takes about as long
    let (lo, hi) = steps_ms
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
    assert!(
        hi - lo < 0.5 * delay_ms,
        "steps are synchronized: {steps_ms:.2?}"
    );
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn a_hung_rank_leaves_truncated_spans_inside_its_phase_and_the_others_in_the_allreduce() {
    let (world, hung, hang_step) = (4, 2, 3);
    let (dir, f) = run_job_with(
        world,
        40,
        &[
            ("DDP_HANG_RANK", "2"),
            ("DDP_HANG_PHASE", "forward_backward"),
            ("DDP_HANG_STEP", "3"),
            ("NEMO_LENS_FLUSH_ON_SIGNAL", "1"),
        ],
        Stop::TermAfter(Duration::from_secs(2)),
    );
    assert!(
        !f.status.success(),
        "a signalled job fails: {:?}\n{}",
        f.status,
        f.stderr
    );
    let ranks = read_ranks(&dir);
    assert_eq!(
        ranks.len(),
        world as usize,
        "every rank flushed its file on SIGTERM\nstderr:\n{}",
        f.stderr
    );
    for (rank, spans) in &ranks {
        let truncated: Vec<&Sp> = spans.iter().filter(|s| s.truncated).collect();
        let step = truncated
            .iter()
            .find(|s| s.name == "train.step")
            .unwrap_or_else(|| panic!("rank {rank}: no truncated train.step in {truncated:?}"));
        let inner: Vec<&str> = truncated
            .iter()
            .filter(|s| s.parent == step.id)
            .map(|s| s.name.as_str())
            .collect();
        let want = if *rank == hung {
            assert_eq!(step.iteration, Some(hang_step), "rank {rank}");
            "forward_backward"
        } else {
            "allreduce.grads"
        };
        assert_eq!(
            inner,
            [want],
            "rank {rank}: open inside {want} when the job was stopped"
        );
        let done = spans
            .iter()
            .filter(|s| s.name == "train.step" && !s.truncated)
            .count();
        assert_eq!(
            done, hang_step as usize,
            "rank {rank}: the steps before the hang"
        );
    }
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

// ------------------------------------------------------------------------
// Diagnosis (issue 40): `lens report --json` names the rank and the phase.

const WORLD: u32 = 8;
const STEPS: u64 = 40;

/// `suspects` of `lens report --json` on the files of a job with `envs`.
fn suspects_of(envs: &[(&str, &str)], stop: Stop) -> Vec<serde_json::Value> {
    suspects_of_steps(envs, stop, STEPS)
}

/// [`suspects_of`] a job of `steps` steps.
fn suspects_of_steps(envs: &[(&str, &str)], stop: Stop, steps: u64) -> Vec<serde_json::Value> {
    let (dir, f) = run_job_with(WORLD, steps, envs, stop);
    if matches!(stop, Stop::Never) {
        assert_ok(&f);
    }
    let out = Command::new(lens_cli_binary())
        .args(["report", "--json"])
        .arg(&dir)
        .output()
        .expect("run lens report");
    assert!(
        out.status.success(),
        "lens report --json {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("lens report --json prints JSON");
    let suspects = report
        .get("suspects")
        .and_then(|s| s.as_array())
        .unwrap_or_else(|| {
            panic!(
                "the report has no `suspects` array (issue 40); its fields: {:?}\nfiles: {}",
                report
                    .as_object()
                    .map(|o| o.keys().cloned().collect::<Vec<_>>()),
                dir.display()
            )
        })
        .clone();
    eprintln!(
        "{envs:?}: suspects {}\ndiagnosis: verdict {}, waits {}, noise (ms) {}, steps {}",
        serde_json::to_string(&suspects).unwrap(),
        report["diagnosis"]["verdict"],
        report["diagnosis"]["wait_phases"],
        report["diagnosis"]["noise_ms"],
        report["diagnosis"]["steps"],
    );
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
    suspects
}

/// Asserts the first suspect is `rank` in `phase`, of `kind`.
#[track_caller]
fn assert_first(suspects: &[serde_json::Value], rank: u64, phase: &str, kind: &str) {
    let first = suspects
        .first()
        .unwrap_or_else(|| panic!("no suspect; want rank {rank} in {phase}"));
    assert_eq!(first["rank"].as_u64(), Some(rank), "{suspects:#?}");
    assert_eq!(first["phase"].as_str(), Some(phase), "{suspects:#?}");
    assert_eq!(first["kind"].as_str(), Some(kind), "{suspects:#?}");
}

fn slow(
    rank: &'static str,
    phase: &'static str,
    ms: &'static str,
) -> Vec<(&'static str, &'static str)> {
    vec![
        ("DDP_SLOW_RANK", rank),
        ("DDP_SLOW_PHASE", phase),
        ("DDP_SLOW_MS", ms),
    ]
}

#[test]
fn diagnosis_a_slow_data_loader() {
    let s = suspects_of(&slow("5", "data.next_batch", "8"), Stop::Never);
    assert_first(&s, 5, "data.next_batch", "straggler");
}

#[test]
fn diagnosis_b_slow_forward_backward() {
    let s = suspects_of(&slow("3", "forward_backward", "8"), Stop::Never);
    assert_first(&s, 3, "forward_backward", "straggler");
}

#[test]
fn diagnosis_c_slow_optimizer_after_the_sync_point() {
    // the delay comes after the barrier: the others wait for it in the
    // next step's allreduce.grads
    let s = suspects_of(&slow("6", "optimizer.step", "8"), Stop::Never);
    assert_first(&s, 6, "optimizer.step", "straggler");
}

#[test]
fn diagnosis_d_intermittent_every_fourth_step() {
    let mut envs = slow("1", "forward_backward", "12");
    envs.push(("DDP_SLOW_EVERY", "4"));
    let s = suspects_of(&envs, Stop::Never);
    assert_first(&s, 1, "forward_backward", "straggler");
}

#[test]
fn diagnosis_e_a_window_of_steps() {
    let mut envs = slow("7", "data.next_batch", "10");
    envs.push(("DDP_SLOW_STEPS", "10-20"));
    let s = suspects_of(&envs, Stop::Never);
    assert_first(&s, 7, "data.next_batch", "straggler");
}

#[test]
fn diagnosis_f_a_small_delay() {
    // 3 ms on a step of ~15-18 ms (8 ranks on a small machine): 15-20% of a
    // step. On a loaded 2-core machine the job's own scheduling noise can
    // reach that, and the analysis then rightly names nobody (it stays
    // silent within noise): one more run is allowed for silence, never for
    // a wrong suspect
    let mut s = suspects_of_steps(&slow("4", "forward_backward", "3"), Stop::Never, 2 * STEPS);
    if s.is_empty() {
        eprintln!("diagnosis_f: no suspect in the first run (noise); running the job again");
        s = suspects_of_steps(&slow("4", "forward_backward", "3"), Stop::Never, 2 * STEPS);
    }
    assert_first(&s, 4, "forward_backward", "straggler");
}

#[test]
fn diagnosis_g_on_rank_zero() {
    let s = suspects_of(&slow("0", "forward_backward", "8"), Stop::Never);
    assert_first(&s, 0, "forward_backward", "straggler");
}

#[test]
fn diagnosis_h_two_slow_ranks() {
    let mut envs = slow("2", "forward_backward", "12");
    envs.extend([
        ("DDP_SLOW2_RANK", "6"),
        ("DDP_SLOW2_PHASE", "data.next_batch"),
        ("DDP_SLOW2_MS", "6"),
    ]);
    let s = suspects_of(&envs, Stop::Never);
    assert_first(&s, 2, "forward_backward", "straggler");
    assert!(
        s.iter().any(|x| x["rank"].as_u64() == Some(6)),
        "the smaller straggler, rank 6, is listed too: {s:#?}"
    );
}

#[test]
fn diagnosis_i_a_hang() {
    let s = suspects_of(
        &[
            ("DDP_HANG_RANK", "4"),
            ("DDP_HANG_PHASE", "forward_backward"),
            ("DDP_HANG_STEP", "5"),
            ("NEMO_LENS_FLUSH_ON_SIGNAL", "1"),
        ],
        Stop::TermAfter(Duration::from_secs(2)),
    );
    assert_first(&s, 4, "forward_backward", "hang");
}

#[test]
fn diagnosis_j1_balanced_with_jitter_names_nobody() {
    let s = suspects_of(&[("DDP_JITTER_MS", "3")], Stop::Never);
    assert!(s.is_empty(), "a balanced run has no suspect: {s:#?}");
}

#[test]
fn diagnosis_j2_balanced_with_more_jitter_names_nobody() {
    let s = suspects_of(&[("DDP_JITTER_MS", "6")], Stop::Never);
    assert!(s.is_empty(), "a balanced run has no suspect: {s:#?}");
}

/// The default export strategy (`single_rank`: only the last rank exports
/// spans) with the file exporter: the other ranks write their per-step
/// profiles, and the diagnosis still names the slow rank and phase.
#[test]
fn diagnosis_k_default_strategy_with_profiles() {
    let mut envs = slow("5", "data.next_batch", "8");
    envs.push(("NEMO_LENS_EXPORT_STRATEGY", "single_rank"));
    let (dir, f) = run_job_with(WORLD, STEPS, &envs, Stop::Never);
    assert_ok(&f);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("telemetry folder")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let spans = names.iter().filter(|n| n.ends_with(".otlp.jsonl")).count();
    let profiles = names
        .iter()
        .filter(|n| n.ends_with(".profile.jsonl"))
        .count();
    assert_eq!(
        (spans, profiles),
        (1, WORLD as usize - 1),
        "one span file (the last rank), a profile from every other: {names:?}"
    );
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
    let s = suspects_of(&envs, Stop::Never);
    assert_first(&s, 5, "data.next_batch", "straggler");
}

/// A hang under the default strategy: the hung rank's profile holds its
/// open step and phase (the signal flush ends them, truncated).
#[test]
fn diagnosis_l_default_strategy_hang() {
    let s = suspects_of(
        &[
            ("DDP_HANG_RANK", "2"),
            ("DDP_HANG_PHASE", "forward_backward"),
            ("DDP_HANG_STEP", "5"),
            ("NEMO_LENS_FLUSH_ON_SIGNAL", "1"),
            ("NEMO_LENS_EXPORT_STRATEGY", "single_rank"),
        ],
        Stop::TermAfter(Duration::from_secs(2)),
    );
    assert_first(&s, 2, "forward_backward", "hang");
}
