//! `lens`: the command-line reader of Lens for Rust runs.
//!
//! Reads the OTLP/JSON-lines files Lens's file exporter writes (one per
//! rank, optionally gzip-compressed) and prints a summary (`lens report`),
//! writes a self-contained HTML timeline (`--html`) or a Perfetto trace
//! (`lens perfetto`). `lens synth` writes synthetic runs for tests and
//! benchmarks. Memory stays bounded whatever the input size.
//!
//! It also adds spans from outside Rust programs, through the lens library
//! and its `NEMO_LENS_*` configuration: `lens exec` runs a command (a
//! launcher) under a root span whose trace the command's ranks join,
//! `lens record` runs a command with telemetry on and reports on it,
//! `lens emit-spans` emits spans with given times (shell steps), and
//! `lens slurm-env` prints the SLURM job's resource attributes for
//! `OTEL_RESOURCE_ATTRIBUTES`.

// signals and child processes go through signal-hook and nix
#![forbid(unsafe_code)]

mod cli;
mod emit_spans;
mod exec;
#[cfg(test)]
mod fuzz;
mod html;
mod input;
mod perfetto;
mod record;
mod report;
mod sketch;
mod slurm_env;
mod synth;
mod telemetry;
mod term;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

/// Exit codes (the table in `lens --help`; `lens exec` exits with its
/// command's status instead).
mod exit {
    /// The command failed: I/O, an output that cannot be written.
    pub(crate) const FAILED: u8 = 1;
    /// Usage error: what clap reports, and the arguments `lens` checks
    /// itself (emit-spans' `--span` list).
    pub(crate) const USAGE: u8 = 2;
    /// The input held nothing to report.
    pub(crate) const EMPTY: u8 = 3;
}

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Report(a) => run_report(&a),
        cli::Command::Perfetto(a) => perfetto::run(&a),
        cli::Command::Synth(a) => synth::run(&a).map_err(Failure::from),
        cli::Command::Exec(a) => return exec::run(&a),
        cli::Command::Record(a) => return record::run(&a),
        cli::Command::EmitSpans(a) => emit_spans::run(&a),
        cli::Command::SlurmEnv(a) => slurm_env::run(&a),
    };
    let (code, msg) = match result {
        Ok(()) | Err(Failure::ClosedOutput) => return ExitCode::SUCCESS,
        Err(Failure::Empty(msg)) => (exit::EMPTY, msg),
        Err(Failure::Usage(msg)) => (exit::USAGE, msg),
        Err(Failure::Other(msg)) => (exit::FAILED, msg),
    };
    eprintln!("lens: {msg}");
    ExitCode::from(code)
}

/// Why a command did not finish normally.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Nothing usable in the input (exit code 3).
    Empty(String),
    /// Bad arguments that clap cannot check (exit code 2).
    Usage(String),
    /// The reader of the output went away (EPIPE, `| head`): the command
    /// ends quietly with exit code 0, as `git` and `rg` do.
    ClosedOutput,
    /// Anything else (exit code 1).
    Other(String),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Failure::ClosedOutput;
        }
        Failure::Other(e.to_string())
    }
}

impl Failure {
    /// A failure writing `what` (an output file): quiet when its reader
    /// went away (a pipe, `-o /dev/stdout`), else `what: error`.
    pub(crate) fn writing(what: &std::path::Path, e: &std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Failure::ClosedOutput;
        }
        Failure::Other(format!("{}: {e}", what.display()))
    }
}

impl From<input::InputError> for Failure {
    fn from(e: input::InputError) -> Self {
        match e {
            input::InputError::NoFiles(_) => Failure::Empty(e.to_string()),
            input::InputError::Missing(..) => Failure::Other(e.to_string()),
        }
    }
}

/// Fails with exit code 3 when nothing was read.
pub(crate) fn check_not_empty(diag: &input::Diagnostics) -> Result<(), Failure> {
    if diag.is_empty() {
        return Err(Failure::Empty(format!(
            "no spans, metrics or logs found in {} file(s) ({} line(s), {} skipped)",
            diag.files, diag.lines, diag.skipped_lines
        )));
    }
    Ok(())
}

/// Writes to stdout through a buffer and flushes it; a closed stdout
/// (EPIPE) is [`Failure::ClosedOutput`].
pub(crate) fn to_stdout(
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Failure> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    write(&mut out)?;
    out.flush()?;
    Ok(())
}

fn run_report(a: &cli::ReportArgs) -> Result<(), Failure> {
    let found = input::discover(&a.paths)?;
    let settings = report::Settings {
        straggler_pct: a.straggler_pct,
        straggler_share: a.straggler_share,
    };
    let filter = report::Filter {
        names: a.names.clone(),
        ranks: a.ranks.iter().flat_map(|l| l.0.iter().copied()).collect(),
    };
    let agg = report::Aggregator::new(filter);
    let (report, timeline) = if a.html.is_some() {
        let mut sink = html::Collector::new(agg, a.html_steps);
        let diag = input::read_found(&found, &mut sink);
        check_not_empty(&diag)?;
        let (agg, tl) = sink.into_parts();
        (agg.finish(diag, settings), Some(tl))
    } else {
        let mut agg = agg;
        let diag = input::read_found(&found, &mut agg);
        check_not_empty(&diag)?;
        (agg.finish(diag, settings), None)
    };
    if let (Some(path), Some(tl)) = (&a.html, timeline) {
        let page = html::render(&report, &tl);
        std::fs::write(path, page).map_err(|e| Failure::writing(path, &e))?;
    }
    to_stdout(|out| {
        if a.json {
            serde_json::to_writer_pretty(&mut *out, &report)?;
            writeln!(out)
        } else if a.csv {
            use std::io::IsTerminal as _;
            let escape = std::io::stdout().is_terminal();
            out.write_all(report::render_csv(&report, escape).as_bytes())
        } else {
            out.write_all(report::render_text(&report, a.max_rows).as_bytes())
        }
    })
}
