//! Command-line definitions.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// The exit-status table of the commands that read runs (a macro, so that
/// `REPORT_AFTER` can end with the same text).
macro_rules! exit_read {
    () => {
        "\
Exit status:
  0  done (also when stdout is closed early, e.g. `lens report RUN | head -1`)
  1  the command failed: an output could not be written, an input could not be read at all
  2  usage error: an unknown option, a bad value or a missing argument
  3  the input held nothing to report: no input files, or no spans, metrics or logs in them"
    };
}

/// The exit statuses `lens exec` and `lens record` pass on from their
/// command.
macro_rules! exit_child {
    () => {
        "  N      the command exited with code N
  128+N  signal N killed the command
  126    the command exists but cannot be executed
  127    the command is not found or cannot be started
"
    };
}

/// Exit status of the commands that read runs (`report`, `perfetto`).
pub(crate) const EXIT_READ: &str = exit_read!();

/// `lens report --help`'s end: the filters, then the exit status.
pub(crate) const REPORT_AFTER: &str = concat!(
    "\
Filters (--name, --rank):
  They restrict the tables: spans by name (and --csv), truncated and ERROR spans, ranks,
  metrics, and the same parts of --json (`by_name`, `truncated`, `errors`, `ranks`,
  `metrics`, with `filter` saying what was selected) and of the --html page. The share of a
  span name is over the selected ranks' wall time. The diagnosis, the step table and the
  whole-step stragglers always read every span of every rank (a rank's wait is only told
  from its work against the other ranks' steps), as do the first line's totals, the
  missing ranks and the HTML timeline.

",
    exit_read!()
);

/// Exit status of `lens --help`: every command's.
pub(crate) const EXIT_ALL: &str = "\
Exit status:
  0  done (also when stdout is closed early, e.g. `lens report RUN | head -1`)
  1  the command failed: an output could not be written, telemetry could not be set up or
     exported (emit-spans)
  2  usage error: an unknown option, a bad value or a missing argument
  3  the input held nothing to report (report, perfetto): no input files, or no spans,
     metrics or logs in them
  lens exec and lens record exit with their command's status instead: the command's exit
  code, 128+N when signal N killed it, 126 when it cannot be executed, 127 when it is not
  found";

/// Exit status of `lens record`.
pub(crate) const EXIT_RECORD: &str = concat!(
    "Exit status (the command's, as a shell reports it, whatever the report found):\n",
    exit_child!(),
    "  2      usage error of lens record itself, or --out is not empty (before the command runs)"
);

/// Exit status of `lens emit-spans`.
pub(crate) const EXIT_EMIT: &str = "\
Exit status:
  0  every span was exported
  1  telemetry could not be set up, or spans could not be exported
  2  usage error: an unknown option, a bad or missing --span (syntax, END before START,
     duplicate name, unknown parent, cycle) or an empty --service";

/// Exit status of `lens slurm-env`.
pub(crate) const EXIT_SLURM: &str = "\
Exit status:
  0  done (also outside a SLURM job, and when stdout is closed early)
  1  the line could not be written
  2  usage error: an unknown option, a bad value or a missing argument";

/// Exit status of `lens exec`.
pub(crate) const EXIT_EXEC: &str = concat!(
    "Exit status (the command's, as a shell reports it):\n",
    exit_child!(),
    "  2      usage error of lens exec itself (before the command runs)"
);

/// Look at Lens runs (summaries, HTML timelines, Perfetto traces) and add
/// spans from outside Rust programs (launchers, shell steps, SLURM).
#[derive(Debug, Parser)]
#[command(name = "lens", version, after_help = EXIT_ALL)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Summarize a run: span statistics, steps, stragglers, problems, metrics.
    #[command(after_help = REPORT_AFTER)]
    Report(ReportArgs),
    /// Convert a run to a Perfetto trace (ui.perfetto.dev) or Chrome JSON.
    #[command(after_help = EXIT_READ)]
    Perfetto(PerfettoArgs),
    /// Write a synthetic multi-rank run (for tests and benchmarks).
    ///
    /// Hidden from `lens --help` (a test tool), still callable: `lens synth
    /// --help` documents it.
    #[command(hide = true)]
    Synth(SynthArgs),
    /// Run a command under a root span and hand its trace to the command
    /// (TRACEPARENT), e.g. `lens exec -- srun python train.py`.
    ///
    /// Configured by the `NEMO_LENS_*` / `OTEL_*` variables (telemetry off:
    /// the command just runs). The span joins an incoming TRACEPARENT and
    /// records the exit code or signal. SIGTERM, SIGINT, SIGHUP, SIGQUIT,
    /// SIGUSR1 and SIGUSR2 are forwarded to the command. Exits with the
    /// command's code, 128+N when signal N killed it, 127 when it cannot
    /// start. With the file exporter `{rank}` in NEMO_LENS_FILE_PATH
    /// becomes `exec`.
    #[command(after_help = EXIT_EXEC)]
    Exec(ExecArgs),
    /// Run a command with telemetry on, then print its report:
    /// `lens record -- cargo run --release`, `lens record -- mpirun -np 4 ./train`.
    ///
    /// The command and every rank it starts get the file exporter into a
    /// fresh run directory (`--out`, default `lens-runs/<run id>`), every
    /// rank exporting (`all_ranks`), the signal flush, one run id, and,
    /// unless already set, NEMO_LENS_SPAN_GROUPS=all, NEMO_LENS_LOGS_ENABLED=true
    /// and OTEL_METRIC_EXPORT_INTERVAL=1000; other NEMO_LENS_* / OTEL_*
    /// variables are kept. When it ends, the report (with its diagnosis)
    /// is printed and the HTML page written to `<run dir>/report.html`.
    /// Signals are forwarded and the exit status is the command's, as
    /// with `lens exec`.
    #[command(after_help = EXIT_RECORD)]
    Record(RecordArgs),
    /// Emit spans with given start and end times (shell steps of a job).
    ///
    /// Always enabled (whatever NEMO_LENS_ENABLED says); exporter settings
    /// from the environment. The spans form one trace: TRACEPARENT's when
    /// set, else under a root named after --service when several have no
    /// parent. Any bad --span (syntax, END before START, duplicate name,
    /// unknown parent, cycle) is an error and nothing is emitted.
    #[command(after_help = EXIT_EMIT)]
    EmitSpans(EmitSpansArgs),
    /// Print `export OTEL_RESOURCE_ATTRIBUTES=…` with the SLURM job's
    /// attributes added, for `eval` in a job script.
    ///
    /// Usage: `eval "$(lens slurm-env --stage task)"`. Attributes already
    /// set are kept; values are percent-encoded and the line single-quoted.
    /// Outside a SLURM job the value is printed unchanged.
    #[command(after_help = EXIT_SLURM)]
    SlurmEnv(SlurmEnvArgs),
}

/// `lens exec`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExecArgs {
    /// Name of the root span (default: `exec <command's file name>`).
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// The command and its arguments, after `--`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub(crate) command: Vec<OsString>,
}

/// `lens record`.
#[derive(Debug, clap::Args)]
pub(crate) struct RecordArgs {
    /// The run directory to create (it must be empty or not exist);
    /// default `lens-runs/<run id>`.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Open the HTML report in a browser afterwards (`$BROWSER`, else
    /// `xdg-open`).
    #[arg(long)]
    pub(crate) open: bool,
    /// The command and its arguments, after `--`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub(crate) command: Vec<OsString>,
}

/// `lens emit-spans`.
#[derive(Debug, clap::Args)]
pub(crate) struct EmitSpansArgs {
    /// `service.name` of the spans.
    #[arg(long)]
    pub(crate) service: String,
    /// A span: NAME, START and END in seconds since the epoch (decimals
    /// allowed: `date +%s.%N`), and optionally the NAME of its parent, one
    /// of the other `--span`s. Repeat for more spans.
    #[arg(long = "span", value_name = "NAME,START,END[,PARENT]", required = true)]
    pub(crate) spans: Vec<String>,
}

/// When `lens slurm-env` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SlurmStage {
    /// In the batch script: the job's attributes.
    Sbatch,
    /// In a task (under `srun`): the job's and the task's attributes.
    Task,
}

/// `lens slurm-env`.
#[derive(Debug, clap::Args)]
pub(crate) struct SlurmEnvArgs {
    /// Where it runs: the batch script or a task.
    #[arg(long, value_enum)]
    pub(crate) stage: SlurmStage,
}

/// `lens report`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// Files or directories of `*.otlp.jsonl` (optionally `.gz`).
    /// Directories are searched recursively without entering symlinked
    /// directories; each file is read once, whatever its names; what
    /// cannot be read is reported and skipped.
    #[arg(required = true)]
    pub(crate) paths: Vec<PathBuf>,
    /// Print one versioned JSON document instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Print the spans-by-name table as CSV instead of text: a header row,
    /// then name,count,total_ns,mean_ns,min_ns,p50_ns,p95_ns,p99_ns,
    /// max_ns,share (durations in ns, share a fraction), names quoted as
    /// RFC 4180 asks (control characters escaped when stdout is a terminal).
    #[arg(long, conflicts_with = "json")]
    pub(crate) csv: bool,
    /// Restrict the tables to spans whose name matches PATTERN: a glob when
    /// it has `*` or `?` (`allreduce*`, matched against the whole name),
    /// else a substring. Repeat for any of several. See FILTERS below.
    #[arg(long = "name", value_name = "PATTERN")]
    pub(crate) names: Vec<String>,
    /// Restrict the tables to these ranks, e.g. `0,3,5-7`. Repeat to add.
    /// See FILTERS below.
    #[arg(long = "rank", value_name = "RANKS", value_parser = parse_ranks)]
    pub(crate) ranks: Vec<RankList>,
    /// Also write a self-contained HTML timeline to this file. Text from
    /// the input (attribute keys and values, span names, status messages)
    /// is cut to 256 bytes in the page, ending in `… (truncated, N bytes)`.
    #[arg(long, value_name = "OUT.html")]
    pub(crate) html: Option<PathBuf>,
    /// A rank is slow in a step when it exceeds the step median by this percent.
    #[arg(long, default_value_t = 10.0, value_parser = non_negative)]
    pub(crate) straggler_pct: f64,
    /// A rank is a straggler when slow in at least this share of its steps.
    #[arg(long, default_value_t = 0.5, value_parser = share)]
    pub(crate) straggler_share: f64,
    /// Rows shown per long table in the text output.
    #[arg(long, default_value_t = 20)]
    pub(crate) max_rows: usize,
    /// Steps per rank drawn in the HTML timeline (half from the start, half from the end).
    #[arg(long, default_value_t = 16)]
    pub(crate) html_steps: usize,
}

/// Output format of `lens perfetto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TraceFormat {
    /// Perfetto protobuf `Trace` (TrackEvent).
    Proto,
    /// Chrome Trace Event JSON.
    ChromeJson,
}

/// `lens perfetto`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).multiple(true).args(["paths", "merge"])))]
pub(crate) struct PerfettoArgs {
    /// Files or directories of `*.otlp.jsonl` (optionally `.gz`).
    pub(crate) paths: Vec<PathBuf>,
    /// Combine every rank's files in this directory into one timeline.
    #[arg(long, value_name = "DIR")]
    pub(crate) merge: Option<PathBuf>,
    /// Output file. It is never read as an input (told apart by device
    /// and inode), even when it lies in the merged directory.
    #[arg(short, long, value_name = "OUT")]
    pub(crate) out: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TraceFormat::Proto)]
    pub(crate) format: TraceFormat,
}

/// `lens synth`.
#[derive(Debug, clap::Args)]
pub(crate) struct SynthArgs {
    /// Number of ranks (one file each).
    #[arg(long, default_value_t = 4)]
    pub(crate) ranks: u32,
    /// Training steps per rank.
    #[arg(long, default_value_t = 100)]
    pub(crate) steps: u64,
    /// Output directory.
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Make RANK's PHASE slower by PCT percent in every step, e.g. `3:forward_backward:40`.
    #[arg(long, value_name = "RANK:PHASE:PCT", value_parser = parse_straggler)]
    pub(crate) straggler: Vec<(u32, String, f64)>,
    /// Hang RANK inside `forward_backward` half-way through the run: the
    /// other ranks wait in that step's `allreduce` until the job is killed,
    /// and every rank's open spans are exported as truncated (the signal
    /// flush). With several, the lowest rank hangs.
    #[arg(long, value_name = "RANK")]
    pub(crate) truncate: Vec<u32>,
    /// Ranks that do not synchronize: the `allreduce` waits for nobody, so
    /// a straggler's whole step is slower (the model of `lens report`'s
    /// whole-step straggler table). By default every step ends in an
    /// `allreduce` that no rank leaves before the last one arrived.
    #[arg(long)]
    pub(crate) unsynchronized: bool,
    /// Microbatches per step (each a span with two children).
    #[arg(long, default_value_t = 1)]
    pub(crate) microbatches: u32,
    /// Gzip the output files.
    #[arg(long)]
    pub(crate) gzip: bool,
}

fn parse_straggler(s: &str) -> Result<(u32, String, f64), String> {
    let mut it = s.splitn(3, ':');
    let (Some(r), Some(p), Some(pct)) = (it.next(), it.next(), it.next()) else {
        return Err(format!("expected RANK:PHASE:PCT, got {s:?}"));
    };
    let r = r.parse().map_err(|_| format!("bad rank {r:?}"))?;
    let pct: f64 = pct.parse().map_err(|_| format!("bad percent {pct:?}"))?;
    if !(0.0..=10_000.0).contains(&pct) {
        return Err(format!("percent {pct} is not in 0..=10000"));
    }
    if !crate::synth::PHASES.contains(&p) {
        return Err(format!(
            "unknown phase {p:?}; one of {:?}",
            crate::synth::PHASES
        ));
    }
    Ok((r, p.to_owned(), pct))
}

/// The ranks of one `--rank` (inclusive ranges).
#[derive(Debug, Clone)]
pub(crate) struct RankList(pub(crate) Vec<[i64; 2]>);

fn parse_ranks(s: &str) -> Result<RankList, String> {
    crate::report::parse_ranks(s).map(RankList)
}

fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("expected a number >= 0, got {s:?}")),
    }
}

fn share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("expected a share in 0..=1, got {s:?}")),
    }
}
