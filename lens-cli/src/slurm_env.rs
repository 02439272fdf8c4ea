//! `lens slurm-env`: the SLURM job's resource attributes for any
//! OpenTelemetry SDK, as one `export OTEL_RESOURCE_ATTRIBUTES='…'` line to
//! `eval` (the Python library's `set-slurm-resource-attrs`).
//!
//! The job attributes carry the names and read the variables of lens's own
//! resource detection; the task stage adds per-task ones. Attributes already
//! in `OTEL_RESOURCE_ATTRIBUTES` are kept as they are (running it at both
//! stages adds nothing twice); values are percent-encoded as the
//! OpenTelemetry specification asks for that variable, and the line is
//! single-quoted for the shell.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use lens::semconv;
use percent_encoding::{percent_decode_str, percent_encode, AsciiSet, CONTROLS};

use crate::cli::{SlurmEnvArgs, SlurmStage};
use crate::Failure;

/// The variable this command extends.
const VAR: &str = "OTEL_RESOURCE_ATTRIBUTES";

/// Attribute and the variables it is read from, first set wins.
type Source = (&'static str, &'static [&'static str]);

/// Job-level attributes: the variables lens's resource detection reads.
const JOB: &[Source] = semconv::SLURM_JOB_SOURCES;

/// The training rank (`nv.dl.rank`) is left to each rank's own launcher
/// detection, since under `torchrun` a SLURM task is a node, not a rank.
const TASK: &[Source] = &[
    (semconv::SLURM_PROCID, &["SLURM_PROCID"]),
    (semconv::SLURM_LOCALID, &["SLURM_LOCALID"]),
    (semconv::SLURM_NODEID, &["SLURM_NODEID"]),
    (semconv::SLURM_NODE_NAME, &["SLURMD_NODENAME"]),
    (semconv::SLURM_STEP_ID, &["SLURM_STEP_ID", "SLURM_STEPID"]),
];

/// Bytes escaped in a value: controls, space, `"`, `,`, `;`, `\` (outside
/// the W3C Baggage value octets the specification refers to), `%` (the
/// escape itself) and `=` (some parsers split a member at every `=`);
/// non-ASCII bytes always are.
const VALUE: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'%')
    .add(b',')
    .add(b';')
    .add(b'=')
    .add(b'\\');

/// Runs `lens slurm-env`: prints the `export` line on stdout.
pub(crate) fn run(args: &SlurmEnvArgs) -> Result<(), Failure> {
    let lookup = |v: &str| std::env::var_os(v);
    let existing = lookup(VAR).unwrap_or_default();
    let value = if in_job(lookup) {
        extend(existing.as_bytes(), args.stage, lookup)
    } else {
        eprintln!(
            "lens slurm-env: not in a SLURM job (SLURM_JOB_ID is not set); \
             {VAR} is left as it is"
        );
        existing.into_vec()
    };
    crate::to_stdout(|out| out.write_all(&export_line(&value)))
}

/// Whether this is a SLURM job: one of `slurm.job.id`'s variables is set
/// and not blank (an empty `SLURM_JOB_ID` is unset, as resource detection
/// reads it, so the two agree on being in a job).
fn in_job(lookup: impl Fn(&str) -> Option<OsString>) -> bool {
    JOB[0]
        .1
        .iter()
        .any(|v| lookup(v).is_some_and(|s| !trim(s.as_bytes()).is_empty()))
}

/// `existing` with the stage's attributes appended (those found in the
/// environment and not already in `existing`).
fn extend(
    existing: &[u8],
    stage: SlurmStage,
    lookup: impl Fn(&str) -> Option<OsString>,
) -> Vec<u8> {
    let present = keys(existing);
    let per_task: &[Source] = match stage {
        SlurmStage::Sbatch => &[],
        SlurmStage::Task => TASK,
    };
    let mut out = existing.to_vec();
    for (key, vars) in JOB.iter().chain(per_task) {
        if present.contains(*key) {
            continue;
        }
        let Some(raw) = vars
            .iter()
            .find_map(|v| lookup(v).filter(|s| !trim(s.as_bytes()).is_empty()))
        else {
            continue;
        };
        if !out.is_empty() && !out.ends_with(b",") {
            out.push(b',');
        }
        out.extend_from_slice(key.as_bytes());
        out.push(b'=');
        out.extend(percent_encode(trim(raw.as_bytes()), VALUE).flat_map(str::bytes));
    }
    out
}

/// The keys of an `OTEL_RESOURCE_ATTRIBUTES` value, percent-decoded.
fn keys(value: &[u8]) -> HashSet<String> {
    String::from_utf8_lossy(value)
        .split(',')
        .filter_map(|member| member.split_once('='))
        .map(|(k, _)| {
            percent_decode_str(k.trim())
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect()
}

/// `value` without leading and trailing ASCII whitespace (as lens's
/// resource detection reads variables).
fn trim(value: &[u8]) -> &[u8] {
    value.trim_ascii()
}

/// `export OTEL_RESOURCE_ATTRIBUTES='…'` and a newline; a `'` inside is
/// written `'\''`, so the line is one shell word whatever the bytes.
fn export_line(value: &[u8]) -> Vec<u8> {
    let mut line = format!("export {VAR}='").into_bytes();
    for &b in value {
        if b == b'\'' {
            line.extend_from_slice(b"'\\''");
        } else {
            line.push(b);
        }
    }
    line.extend_from_slice(b"'\n");
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lookup over fixed pairs.
    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |v| pairs.iter().find(|(k, _)| *k == v).map(|(_, x)| x.into())
    }

    #[test]
    fn values_are_percent_encoded_and_present_keys_kept() {
        let vars = [
            ("SLURM_JOB_ID", " 77 "),
            ("SLURM_JOB_NAME", "a b,c=d;\"e\"\\%f'g é"),
            ("SLURM_NODELIST", "n[1-2]"),
            ("SLURM_PROCID", "3"),
            ("SLURM_LOCALID", ""),
        ];
        let out = extend(b"team=x,slurm.job.id=1", SlurmStage::Task, env(&vars));
        assert_eq!(
            String::from_utf8(out).expect("ASCII"),
            "team=x,slurm.job.id=1,slurm.job.name=a%20b%2Cc%3Dd%3B%22e%22%5C%25f'g%20%C3%A9,\
             slurm.nodelist=n[1-2],slurm.procid=3"
        );
        let sbatch = extend(b"", SlurmStage::Sbatch, env(&vars));
        assert_eq!(sbatch, b"slurm.job.id=77,slurm.job.name=a%20b%2Cc%3Dd%3B%22e%22%5C%25f'g%20%C3%A9,slurm.nodelist=n[1-2]");
    }

    /// An empty or blank `SLURM_JOB_ID` is not a job, as for resource
    /// detection (which then records no `slurm.*`); the older alias counts.
    #[test]
    fn a_blank_job_id_is_not_a_job() {
        let others = [("SLURM_NTASKS", "16"), ("SLURM_JOB_PARTITION", "batch")];
        assert!(!in_job(env(&others)));
        assert!(!in_job(env(&[("SLURM_JOB_ID", ""), others[0], others[1]])));
        assert!(!in_job(env(&[("SLURM_JOB_ID", "  "), others[0]])));
        assert!(in_job(env(&[("SLURM_JOB_ID", "77")])));
        assert!(in_job(env(&[("SLURM_JOB_ID", ""), ("SLURM_JOBID", "77")])));
    }

    #[test]
    fn the_export_line_single_quotes_everything() {
        assert_eq!(
            export_line(b"a='b'"),
            b"export OTEL_RESOURCE_ATTRIBUTES='a='\\''b'\\'''\n"
        );
        assert_eq!(
            keys(b" a%2Eb =1,,c=2,bad"),
            HashSet::from(["a.b".into(), "c".into()])
        );
    }
}
