//! Reading runs: finds the files, streams them line by line (plain or
//! gzip), parses each line as OTLP/JSON and hands spans and metrics to a
//! [`Sink`]. Bad input is reported as `file:line: what`, skipped and counted.

mod carrier;
mod fast;
pub(crate) mod files;
pub(crate) mod otlp;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

pub(crate) use files::{discover, Found, InputError};
use otlp::{Envelope, KeyValue};

/// The longest line read; longer lines are skipped and reported.
const MAX_LINE: usize = 256 << 20;
/// How many problems are printed before the rest are only counted.
const MAX_PRINTED: u64 = 20;
/// A file none of whose first this many non-empty lines is OTLP/JSON is
/// not OTLP/JSON lines: it is reported once, by name, and skipped.
const SNIFF_LINES: usize = 5;

/// Who emitted a batch: the resource attributes the readers use.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Origin {
    /// `nv.dl.rank`, else `dl.rank` (what the Python library 0.1.0
    /// writes), else the `-rank<N>` of the file name, else 0.
    pub(crate) rank: i64,
    /// `nv.dl.world_size`, else `dl.world_size`, when present.
    pub(crate) world_size: Option<i64>,
    /// `host.name`.
    pub(crate) host: String,
    /// `process.pid`.
    pub(crate) pid: Option<i64>,
    /// `nemo.run.id`.
    pub(crate) run_id: String,
    /// `service.name`.
    pub(crate) service: String,
}

impl Origin {
    fn from_attrs(attrs: &[KeyValue<'_>], file_rank: Option<i64>) -> Self {
        let mut o = Origin::default();
        // [nv.dl.*, dl.*]: lens's (and Nightly's) name wins, in any order
        let (mut rank, mut world) = ([None; 2], [None; 2]);
        for kv in attrs {
            match kv.key.as_ref() {
                "nv.dl.rank" => rank[0] = kv.value.as_i64().or(rank[0]),
                "dl.rank" => rank[1] = kv.value.as_i64().or(rank[1]),
                "nv.dl.world_size" => world[0] = kv.value.as_i64(),
                "dl.world_size" => world[1] = kv.value.as_i64(),
                "host.name" => o.host = kv.value.as_str().unwrap_or("").to_owned(),
                "process.pid" => o.pid = kv.value.as_i64(),
                "nemo.run.id" => o.run_id = kv.value.as_str().unwrap_or("").to_owned(),
                "service.name" => o.service = kv.value.as_str().unwrap_or("").to_owned(),
                _ => {}
            }
        }
        o.rank = rank.into_iter().flatten().next().or(file_rank).unwrap_or(0);
        o.world_size = world.into_iter().flatten().next();
        o
    }
}

/// Receives what the reader parses, one resource batch at a time.
pub(crate) trait Sink {
    /// Spans of one resource batch.
    fn spans(&mut self, origin: &Origin, spans: &[otlp::Span<'_>]);
    /// Metrics of one resource batch.
    fn metrics(&mut self, _origin: &Origin, _metrics: &[otlp::Metric<'_>]) {}
    /// Log records of one resource batch (counted only).
    fn logs(&mut self, _origin: &Origin, _count: usize) {}
    /// A new file starts; `index` is its position in the list read.
    fn file(&mut self, _index: usize, _path: &Path) {}
}

/// Counts of what was read and what was skipped.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(crate) struct Diagnostics {
    /// Files read.
    pub(crate) files: u64,
    /// Lines read (including skipped ones).
    pub(crate) lines: u64,
    /// Lines skipped: bad JSON, wrong encoding, too long.
    pub(crate) skipped_lines: u64,
    /// Files whose reading stopped early (I/O or gzip errors) or that
    /// could not be opened.
    pub(crate) broken_files: u64,
    /// Folders (or their entries) below the named folders that could not
    /// be read, skipped.
    pub(crate) unreadable_paths: u64,
    /// Files that are not OTLP/JSON lines (none of their first 5 non-empty
    /// lines is), reported once and skipped; their lines read so far are
    /// counted in `skipped_lines`.
    pub(crate) not_otlp_files: u64,
    /// Spans read.
    pub(crate) spans: u64,
    /// Metric points read.
    pub(crate) metric_points: u64,
    /// Log records read.
    pub(crate) log_records: u64,
    /// Problems are counted but not printed (for a second pass).
    #[serde(skip)]
    quiet: bool,
    /// The progress bar, hidden while a problem is printed.
    #[serde(skip)]
    bar: Option<indicatif::ProgressBar>,
}

impl Diagnostics {
    fn problem(&mut self, path: &Path, line: u64, what: &str) {
        let place = format!("{}:{line}", crate::term::path(path));
        self.report(&place, what);
    }

    /// Prints `lens: PLACE: WHAT` (the first [`MAX_PRINTED`] problems).
    fn report(&mut self, place: &str, what: &str) {
        let n = self.skipped_lines + self.broken_files + self.not_otlp_files;
        if self.quiet {
            return;
        }
        let print = || {
            if n < MAX_PRINTED {
                eprintln!("lens: {place}: {}", crate::term::printable(what));
            } else if n == MAX_PRINTED {
                eprintln!("lens: more problems follow; only counting them from now on");
            }
        };
        match &self.bar {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }

    /// True when nothing at all was read.
    pub(crate) fn is_empty(&self) -> bool {
        self.spans == 0 && self.metric_points == 0 && self.log_records == 0
    }
}

/// Reads every file in order into `sink`, with a progress bar on stderr
/// when it is a terminal.
pub(crate) fn read_all(files: &[PathBuf], sink: &mut dyn Sink) -> Diagnostics {
    read(files, sink, false)
}

/// [`read_all`] of what [`discover`] found, counting what it skipped.
pub(crate) fn read_found(found: &Found, sink: &mut dyn Sink) -> Diagnostics {
    let mut diag = read(&found.files, sink, false);
    diag.unreadable_paths = found.unreadable;
    diag
}

/// Like [`read_all`], without printing problems (they were printed by an
/// earlier pass over the same files).
pub(crate) fn reread_quietly(files: &[PathBuf], sink: &mut dyn Sink) -> Diagnostics {
    read(files, sink, true)
}

fn read(files: &[PathBuf], sink: &mut dyn Sink, quiet: bool) -> Diagnostics {
    let mut diag = Diagnostics {
        quiet,
        ..Diagnostics::default()
    };
    let total: u64 = files
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let bar = progress_bar(total);
    diag.bar = Some(bar.clone());
    for (index, path) in files.iter().enumerate() {
        sink.file(index, path);
        diag.files += 1;
        match std::fs::File::open(path) {
            Ok(f) => read_file(path, bar.wrap_read(f), sink, &mut diag),
            Err(e) => {
                diag.problem(path, 0, &format!("cannot open: {e}"));
                diag.broken_files += 1;
            }
        }
    }
    bar.finish_and_clear();
    diag.bar = None;
    diag
}

fn progress_bar(total: u64) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    ) {
        bar.set_style(style);
    }
    bar
}

/// The `N` of a `…-rank<N>….` file name.
fn rank_from_name(path: &Path) -> Option<i64> {
    let name = path.file_name()?.to_str()?;
    let at = name.rfind("rank")?;
    let digits: String = name[at + 4..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn read_file(path: &Path, raw: impl Read, sink: &mut dyn Sink, diag: &mut Diagnostics) {
    let mut raw = BufReader::with_capacity(1 << 18, raw);
    let gz = matches!(raw.fill_buf(), Ok(b) if b.starts_with(&[0x1f, 0x8b]));
    if gz {
        let dec = flate2::bufread::MultiGzDecoder::new(raw);
        read_lines(path, BufReader::with_capacity(1 << 18, dec), sink, diag);
    } else {
        read_lines(path, raw, sink, diag);
    }
}

/// The first lines of a file, until one is OTLP/JSON: their problems are
/// held back, so that a file that is not OTLP/JSON lines at all is reported
/// once by name instead of line by line.
#[derive(Default)]
struct Sniff {
    /// A line was OTLP/JSON: problems are reported per line.
    otlp: bool,
    /// Non-empty lines seen that were not OTLP/JSON: line number, problem,
    /// and whether it is a skipped line (not so for JSON that parses but
    /// carries nothing OTLP, which is only evidence).
    held: Vec<(u64, String, bool)>,
}

impl Sniff {
    /// A bad line (`skipped`) or a line without OTLP content. Returns
    /// true when the file is not OTLP/JSON lines: reported, stop reading.
    fn bad(
        &mut self,
        diag: &mut Diagnostics,
        path: &Path,
        line: u64,
        what: String,
        skipped: bool,
    ) -> bool {
        if skipped {
            diag.skipped_lines += 1;
        }
        if self.otlp {
            if skipped {
                diag.problem(path, line, &what);
            }
            return false;
        }
        self.held.push((line, what, skipped));
        if self.held.len() < SNIFF_LINES {
            return false;
        }
        self.not_otlp(diag, path);
        true
    }

    /// A line was OTLP/JSON: the problems held back are reported now.
    fn good(&mut self, diag: &mut Diagnostics, path: &Path) {
        if self.otlp {
            return;
        }
        self.otlp = true;
        for (line, what, skipped) in std::mem::take(&mut self.held) {
            if skipped {
                diag.problem(path, line, &what);
            }
        }
    }

    /// The file ended (or stopped) before any OTLP/JSON line.
    fn end(&mut self, diag: &mut Diagnostics, path: &Path) {
        if !self.otlp && !self.held.is_empty() {
            self.not_otlp(diag, path);
        }
    }

    fn not_otlp(&mut self, diag: &mut Diagnostics, path: &Path) {
        let Some((line, what, _)) = self.held.first() else {
            return;
        };
        let what = what
            .strip_suffix(", line skipped")
            .or_else(|| what.strip_suffix(", skipped"))
            .unwrap_or(what);
        diag.report(
            &crate::term::path(path),
            &format!("not OTLP/JSON lines (first bad line {line}: {what}), skipped"),
        );
        diag.not_otlp_files += 1;
        // every held line counts as skipped, whatever it was
        let unskipped = self.held.iter().filter(|h| !h.2).count() as u64;
        diag.skipped_lines += unskipped;
        self.held.clear();
        self.otlp = true;
    }
}

fn read_lines(path: &Path, r: impl BufRead, sink: &mut dyn Sink, diag: &mut Diagnostics) {
    let mut sniff = Sniff::default();
    read_lines_sniffed(path, r, sink, diag, &mut sniff);
    sniff.end(diag, path);
}

fn read_lines_sniffed(
    path: &Path,
    mut r: impl BufRead,
    sink: &mut dyn Sink,
    diag: &mut Diagnostics,
    sniff: &mut Sniff,
) {
    let file_rank = rank_from_name(path);
    let mut buf = Vec::with_capacity(1 << 16);
    let mut lineno = 0u64;
    loop {
        buf.clear();
        let read = (&mut r)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf);
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                sniff.end(diag, path);
                diag.problem(
                    path,
                    lineno + 1,
                    &format!("read error, rest of file skipped: {e}"),
                );
                diag.broken_files += 1;
                break;
            }
        }
        lineno += 1;
        diag.lines += 1;
        if buf.len() > MAX_LINE && buf.last() != Some(&b'\n') {
            let what = "line longer than 256 MiB, skipped".to_owned();
            if sniff.bad(diag, path, lineno, what, true) || skip_to_newline(&mut r).is_err() {
                break;
            }
            continue;
        }
        let mut line = buf.trim_ascii();
        if lineno == 1 {
            // a UTF-8 byte order mark is allowed at the start of a file
            line = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line);
        }
        if line.is_empty() {
            continue;
        }
        let text = match std::str::from_utf8(line) {
            Ok(t) => t,
            Err(e) => {
                let hint = if line.contains(&0) {
                    ", looks like UTF-16"
                } else {
                    ""
                };
                let msg = format!(
                    "not UTF-8 (byte {}{hint}), line skipped",
                    e.valid_up_to() + 1
                );
                if sniff.bad(diag, path, lineno, msg, true) {
                    return;
                }
                continue;
            }
        };
        // the fast path reads common span lines; what it is unsure of goes
        // to serde_json (from_str: the text is known to be UTF-8, so
        // serde_json skips validating it again in every string)
        let parsed = match fast::envelope(text) {
            Some(env) => Ok(env),
            None => serde_json::from_str::<Envelope<'_>>(text),
        };
        match parsed {
            Ok(env) if sniff.otlp || carries_otlp(&env) => {
                sniff.good(diag, path);
                deliver(&env, file_rank, sink, diag);
            }
            Ok(_) => {
                let what =
                    "JSON without resourceSpans, resourceMetrics, resourceLogs or lensProfile";
                if sniff.bad(diag, path, lineno, what.to_owned(), false) {
                    return;
                }
            }
            Err(e) => {
                let what = format!("{e}");
                let what = what.split(" at line ").next().unwrap_or("");
                let msg = format!(
                    "not an OTLP/JSON line ({what} at column {}), skipped",
                    e.column()
                );
                if sniff.bad(diag, path, lineno, msg, true) {
                    return;
                }
            }
        }
    }
}

/// Whether a parsed line holds anything OTLP (or a Lens profile).
fn carries_otlp(env: &Envelope<'_>) -> bool {
    !env.resource_spans.is_empty()
        || !env.resource_metrics.is_empty()
        || !env.resource_logs.is_empty()
        || env.lens_profile.is_some()
}

fn skip_to_newline(r: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let (done, used) = {
            let b = r.fill_buf()?;
            if b.is_empty() {
                return Ok(());
            }
            match memchr_nl(b) {
                Some(i) => (true, i + 1),
                None => (false, b.len()),
            }
        };
        r.consume(used);
        if done {
            return Ok(());
        }
    }
}

fn memchr_nl(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

fn deliver(
    env: &Envelope<'_>,
    file_rank: Option<i64>,
    sink: &mut dyn Sink,
    diag: &mut Diagnostics,
) {
    for rs in &env.resource_spans {
        let origin = Origin::from_attrs(&rs.resource.attributes, file_rank);
        for ss in &rs.scope_spans {
            if !ss.spans.iter().any(carrier::is_carrier) {
                diag.spans += ss.spans.len() as u64;
                sink.spans(&origin, &ss.spans);
                continue;
            }
            // profile lines gathered from the ranks that do not export:
            // each is a step and its phases, of the rank it names
            for run in ss.spans.split(carrier::is_carrier) {
                if !run.is_empty() {
                    diag.spans += run.len() as u64;
                    sink.spans(&origin, run);
                }
            }
            for c in ss.spans.iter().filter(|s| carrier::is_carrier(s)) {
                let (_, skipped) = carrier::for_each_line(c, |p| {
                    let (origin, spans) = profile_spans(p, None);
                    diag.spans += spans.len() as u64;
                    sink.spans(&origin, &spans);
                });
                diag.skipped_lines += skipped;
            }
        }
    }
    for rm in &env.resource_metrics {
        let origin = Origin::from_attrs(&rm.resource.attributes, file_rank);
        for sm in &rm.scope_metrics {
            for m in &sm.metrics {
                let n = m.gauge.as_ref().map_or(0, |g| g.data_points.len())
                    + m.sum.as_ref().map_or(0, |g| g.data_points.len())
                    + m.histogram.as_ref().map_or(0, |g| g.data_points.len());
                diag.metric_points += n as u64;
            }
            sink.metrics(&origin, &sm.metrics);
        }
    }
    for rl in &env.resource_logs {
        let origin = Origin::from_attrs(&rl.resource.attributes, file_rank);
        let n: usize = rl.scope_logs.iter().map(|s| s.log_records.len()).sum();
        diag.log_records += n as u64;
        sink.logs(&origin, n);
    }
    if let Some(p) = &env.lens_profile {
        let (origin, spans) = profile_spans(p, file_rank);
        diag.spans += spans.len() as u64;
        sink.spans(&origin, &spans);
    }
}

/// A profiled step as the spans it stands for: the step (with its
/// iteration) and its direct children, each marked truncated when it was
/// still open. Child ids are made from the step's id and the child's place.
fn profile_spans<'a>(
    p: &'a otlp::Profile<'a>,
    file_rank: Option<i64>,
) -> (Origin, Vec<otlp::Span<'a>>) {
    use std::borrow::Cow;
    let origin = Origin {
        rank: p.rank.or(file_rank).unwrap_or(0),
        world_size: p.world,
        host: p.host.to_string(),
        run_id: p.run.to_string(),
        ..Origin::default()
    };
    let truncated = |open: bool| {
        open.then(|| otlp::KeyValue {
            key: Cow::Borrowed("nemo.span.truncated"),
            value: otlp::AnyValue {
                bool_value: Some(true),
                ..Default::default()
            },
        })
    };
    let step_id = otlp::span_id_u64(&p.id);
    let end = p.t.saturating_add(p.d);
    let mut spans = Vec::with_capacity(p.phases.len() + 1);
    for (i, ph) in p.phases.iter().enumerate() {
        let start = p.t.saturating_add(ph.o);
        let id = step_id ^ ((i as u64 + 1) << 56) ^ 0x5a5a_0000_0000_0000;
        spans.push(otlp::Span {
            span_id: Cow::Owned(format!("{id:016x}")),
            parent_span_id: Cow::Owned(format!("{step_id:016x}")),
            flags: 0,
            name: Cow::Borrowed(&ph.n),
            start_time_unix_nano: start,
            end_time_unix_nano: start.saturating_add(ph.d),
            attributes: truncated(ph.open).into_iter().collect(),
            links: Vec::new(),
            status: otlp::Status::default(),
        });
    }
    let mut attrs: Vec<otlp::KeyValue<'a>> =
        p.it.map(|it| otlp::KeyValue {
            key: Cow::Borrowed(lens::semconv::DL_ITERATION),
            value: otlp::AnyValue {
                int_value: Some(it),
                ..Default::default()
            },
        })
        .into_iter()
        .collect();
    attrs.extend(truncated(p.open));
    spans.push(otlp::Span {
        span_id: Cow::Owned(format!("{step_id:016x}")),
        parent_span_id: Cow::Borrowed(""),
        flags: 0,
        name: Cow::Borrowed(&p.step),
        start_time_unix_nano: p.t,
        end_time_unix_nano: end,
        attributes: attrs,
        links: Vec::new(),
        status: otlp::Status::default(),
    });
    (origin, spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(u64, Vec<i64>);

    impl Sink for Count {
        fn spans(&mut self, origin: &Origin, spans: &[otlp::Span<'_>]) {
            self.0 += spans.len() as u64;
            self.1.push(origin.rank);
        }
    }

    #[test]
    fn rank_comes_from_the_resource_else_the_file_name() {
        assert_eq!(
            rank_from_name(Path::new("/x/abc-rank12.otlp.jsonl.gz")),
            Some(12)
        );
        assert_eq!(rank_from_name(Path::new("/x/abc.otlp.jsonl")), None);
        let line = br#"{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"spans":[{"spanId":"01","name":"a","startTimeUnixNano":5,"endTimeUnixNano":"9"}]}]}]}"#;
        let mut sink = Count(0, Vec::new());
        let mut diag = Diagnostics::default();
        read_lines(
            Path::new("run-rank7.otlp.jsonl"),
            &line[..],
            &mut sink,
            &mut diag,
        );
        assert_eq!((sink.0, sink.1.as_slice()), (1, &[7][..]));
        assert_eq!(diag.skipped_lines, 0);
    }

    #[test]
    fn carrier_spans_deliver_their_profile_lines_not_themselves() {
        let line = |it: u64| {
            format!(
                r#"{{"lensProfile":{{"v":1,"run":"r","rank":5,"world":8,"host":"h","step":"train.step","id":"00000000000000{it:02x}","it":{it},"t":"1000","d":100,"phases":[{{"n":"data.next_batch","o":0,"d":60}},{{"n":"allreduce.grads","o":60,"d":40}}]}}}}"#
            )
        };
        let values: Vec<serde_json::Value> = [line(1), line(2), "not a profile".to_owned()]
            .into_iter()
            .map(|l| serde_json::json!({ "stringValue": l }))
            .collect();
        let carrier = serde_json::json!({
            "spanId": "00000000000000ff", "name": "lens.profile",
            "startTimeUnixNano": "5", "endTimeUnixNano": "5",
            "attributes": [{"key": "lens.profile.lines", "value": {"arrayValue": {"values": values}}}]
        });
        let plain = serde_json::json!({"spanId": "01", "name": "a", "startTimeUnixNano": 5, "endTimeUnixNano": "9"});
        let env = serde_json::json!({"resourceSpans": [{"resource": {"attributes": [
            {"key": "nv.dl.rank", "value": {"intValue": "7"}}]},
            "scopeSpans": [{"spans": [plain.clone(), carrier, plain]}]}]});
        let text = format!("{env}\n");
        let mut sink = Count(0, Vec::new());
        let mut diag = Diagnostics::default();
        read_lines(
            Path::new("run-rank7.otlp.jsonl"),
            text.as_bytes(),
            &mut sink,
            &mut diag,
        );
        // two plain spans of rank 7; two steps of rank 5, each with two phases
        assert_eq!(sink.0, 2 + 2 * 3);
        assert_eq!(diag.spans, 8);
        assert_eq!(sink.1, [7, 7, 5, 5]);
        assert_eq!(diag.skipped_lines, 1, "the line that is not a profile");
        // a span named so but without the attribute is a span
        let odd = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"01","name":"lens.profile"}]}]}]}"#;
        let mut sink = Count(0, Vec::new());
        read_lines(
            Path::new("x-rank1.otlp.jsonl"),
            odd.as_bytes(),
            &mut sink,
            &mut diag,
        );
        assert_eq!(sink.0, 1);
    }

    #[test]
    fn int64_fields_accept_strings_and_numbers_but_not_garbage() {
        let ok = r#"{"name":"a","startTimeUnixNano":"18446744073709551615","endTimeUnixNano":3,"attributes":[{"key":"k","value":{"intValue":"-4"}}]}"#;
        let s: otlp::Span<'_> = serde_json::from_str(ok).expect("valid span");
        assert_eq!(s.start_time_unix_nano, u64::MAX);
        assert_eq!(s.attributes[0].value.as_i64(), Some(-4));
        let bad = r#"{"name":"a","startTimeUnixNano":"12x"}"#;
        assert!(serde_json::from_str::<otlp::Span<'_>>(bad).is_err());
        let neg = r#"{"name":"a","startTimeUnixNano":"-1"}"#;
        assert!(serde_json::from_str::<otlp::Span<'_>>(neg).is_err());
    }

    #[test]
    fn escaped_strings_are_decoded() {
        let line = r#"{"name":"a\"b\u00e9","spanId":"00000000000000aa"}"#;
        let s: otlp::Span<'_> = serde_json::from_str(line).expect("valid span");
        assert_eq!(s.name, "a\"bé");
        assert_eq!(otlp::span_id_u64(&s.span_id), 0xaa);
    }
}
