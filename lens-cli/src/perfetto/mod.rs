//! `lens perfetto`: streams a run into a Perfetto protobuf trace (one
//! process track per rank, one thread track per `thread.id`, spans as
//! slices with attributes as debug annotations, links and cross-rank
//! parents as flows, metrics as counter tracks) or Chrome Trace Event JSON.

mod chrome;
mod flows;
mod merge;
mod writer;

use std::fs::File;
use std::io::BufWriter;

use crate::cli::{PerfettoArgs, TraceFormat};
use crate::input::files::{file_id, FileId};
use crate::input::otlp::{KeyValue, Metric};
use crate::input::{Origin, Sink};
use crate::Failure;
use writer::ProtoSink;
/// `Span.flags` bits: "has is-remote" and "parent is remote".
pub(crate) const REMOTE_PARENT: u32 = 0x300;

/// Runs `lens perfetto`.
pub(crate) fn run(a: &PerfettoArgs) -> Result<(), Failure> {
    let mut paths = a.paths.clone();
    paths.extend(a.merge.iter().cloned());
    if paths.is_empty() {
        // clap requires one of them
        return Err(Failure::Usage("give input files or --merge DIR".to_owned()));
    }
    // `.pftrace` files (the runtime's `perfetto` exporter) are merged as
    // they are; JSON-lines files are converted
    let mut inputs = merge::split(&paths)?;
    // the output is never an input, whatever name lists it (a rerun with it
    // in the merged folder, a link to it, `./`): it is told apart by
    // (device, inode), before it is truncated and again once it is open
    let before = std::fs::metadata(&a.out).ok().map(|m| file_id(&m));
    not_the_output(&mut inputs, before);
    if inputs.traces.is_empty() && inputs.lines.is_empty() {
        return Err(crate::input::InputError::NoFiles(paths).into());
    }
    if !inputs.traces.is_empty() && a.format != TraceFormat::Proto {
        return Err(Failure::Other(format!(
            "{} is a Perfetto trace; it can only be merged into a proto trace (drop --format)",
            crate::term::path(&inputs.traces[0])
        )));
    }
    let out = File::create(&a.out).map_err(|e| Failure::writing(&a.out, &e))?;
    not_the_output(&mut inputs, out.metadata().ok().map(|m| file_id(&m)));
    let (traces, files) = (&inputs.traces, &inputs.lines);
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let (copied, unopened) =
        merge::append(traces, &mut out).map_err(|e| Failure::writing(&a.out, &e))?;
    if files.is_empty() {
        use std::io::Write as _;
        out.flush().map_err(|e| Failure::writing(&a.out, &e))?;
        eprintln!(
            "lens perfetto: {} trace file(s), {copied} bytes, merged into {}{}",
            traces.len() as u64 - unopened,
            a.out.display(),
            skipped_note(inputs.unreadable + unopened)
        );
        return Ok(());
    }
    let (diag, written) = match a.format {
        TraceFormat::Proto => {
            let mut sink = ProtoSink::new(out);
            let diag = convert(files, &mut sink);
            (diag, sink.finish())
        }
        TraceFormat::ChromeJson => {
            let mut sink = chrome::ChromeSink::new(out);
            let diag = convert(files, &mut sink);
            (diag, sink.finish())
        }
    };
    written.map_err(|e| Failure::writing(&a.out, &e))?;
    crate::check_not_empty(&diag)?;
    eprintln!(
        "lens perfetto: {} spans from {} file(s) written to {}{}",
        diag.spans,
        diag.files,
        a.out.display(),
        skipped_note(inputs.unreadable + unopened)
    );
    Ok(())
}

/// Drops the inputs that are the file `out` identifies.
fn not_the_output(inputs: &mut merge::Inputs, out: Option<FileId>) {
    let Some(out) = out else {
        return;
    };
    for list in [&mut inputs.traces, &mut inputs.lines] {
        list.retain(|p| {
            let same = std::fs::metadata(p).is_ok_and(|m| file_id(&m) == out);
            if same {
                eprintln!(
                    "lens perfetto: {} is the output file; not read",
                    crate::term::path(p)
                );
            }
            !same
        });
    }
}

fn skipped_note(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} unreadable path(s) skipped, see above)")
    }
}

/// Both conversions of `files` into memory (for the fuzz test).
#[cfg(test)]
pub(crate) fn convert_in_memory(files: &[std::path::PathBuf]) {
    let mut proto = ProtoSink::new(Vec::new());
    convert(files, &mut proto);
    proto.finish().expect("a trace in memory");
    let mut chrome = chrome::ChromeSink::new(Vec::new());
    convert(files, &mut chrome);
    chrome.finish().expect("a trace in memory");
}

/// A writer that starts flows in a second pass (see [`flows`]).
trait TwoPass: Sink {
    /// The flow edges.
    fn flows(&mut self) -> &mut flows::Flows;
    /// From now on only flow sources are written.
    fn begin_second_pass(&mut self);
}

/// Reads the files into `sink`, then re-reads the files that may hold
/// flow sources.
fn convert(files: &[std::path::PathBuf], sink: &mut impl TwoPass) -> crate::input::Diagnostics {
    let diag = crate::input::read_all(files, sink);
    if sink.flows().pending() > 0 {
        let again = sink.flows().files_to_reread(files);
        sink.begin_second_pass();
        crate::input::reread_quietly(&again, sink);
    }
    let (pending, dropped) = (sink.flows().pending(), sink.flows().dropped);
    if pending > 0 || dropped > 0 {
        eprintln!(
            "lens perfetto: {pending} flow source(s) not found in the input, {dropped} edge(s) over the cap"
        );
    }
    diag
}

/// Thread id of a span: its `thread.id` attribute, when present.
pub(crate) fn thread_of(attrs: &[KeyValue<'_>]) -> Option<i64> {
    attrs
        .iter()
        .find(|kv| kv.key == "thread.id")
        .and_then(|kv| kv.value.as_i64())
}

/// Thread name of a span: its `thread.name` attribute, when present.
pub(crate) fn thread_name_of<'a>(attrs: &'a [KeyValue<'_>]) -> Option<&'a str> {
    attrs
        .iter()
        .find(|kv| kv.key == "thread.name")
        .and_then(|kv| kv.value.as_str())
}

/// The process name of a rank's track.
pub(crate) fn process_name(o: &Origin) -> String {
    if o.host.is_empty() {
        format!("rank {}", o.rank)
    } else {
        format!("rank {} @ {}", o.rank, o.host)
    }
}

/// Calls `f(name, time, value)` for each gauge/sum point and histogram mean.
pub(crate) fn each_point(metrics: &[Metric<'_>], mut f: impl FnMut(&str, u64, f64)) {
    for m in metrics {
        for pts in [&m.gauge, &m.sum].into_iter().flatten() {
            for p in pts.data_points.iter().filter(|p| p.attributes.is_empty()) {
                if let Some(v) = p.as_double.or(p.as_int.map(|i| i as f64)) {
                    f(&m.name, p.time_unix_nano, v);
                }
            }
        }
        if let Some(h) = &m.histogram {
            for p in h
                .data_points
                .iter()
                .filter(|p| p.attributes.is_empty() && p.count > 0)
            {
                if let Some(sum) = p.sum {
                    f(&m.name, p.time_unix_nano, sum / p.count as f64);
                }
            }
        }
    }
}
