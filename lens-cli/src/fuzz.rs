//! A fuzz test over the reader and the analysis (issue 39, item 3): hostile
//! OTLP/JSON lines, generated from a grammar of OTLP/JSON with extreme
//! values and mutated real lines of `lens synth`, run in-process through
//! the whole pipeline: file discovery and reading (plain and gzip), the
//! report aggregation, its text, JSON and HTML renderings, and the Perfetto
//! and Chrome conversions. Nothing may panic.
//!
//! Seeded and bounded: [`CASES`] cases or [`BUDGET`], whichever ends first.
//! `LENS_FUZZ_SEED=N` starts from another seed and `LENS_FUZZ_CASES=N`
//! runs N cases (without the time bound), e.g. for a longer run:
//! `LENS_FUZZ_SEED=$RANDOM LENS_FUZZ_CASES=20000 cargo test -p
//! nemo-lens-cli fuzz`. A failing case is kept on disk and its path and
//! seed printed.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Cases per run when `LENS_FUZZ_CASES` is not set.
const CASES: u64 = 400;
/// Time per run when `LENS_FUZZ_CASES` is not set.
pub(crate) const BUDGET: Duration = Duration::from_secs(4);

/// SplitMix64: small, seedable, good enough to pick among choices.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// 0..n (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Integers at and around the edges, as numbers or strings.
fn int(r: &mut Rng) -> Value {
    let v: i128 = match r.below(10) {
        0 => i128::from(i64::MIN),
        1 => i128::from(i64::MAX),
        2 => i128::from(u64::MAX),
        3 => -1,
        4 => i128::from(r.next() as i64),
        5 => i128::from(i64::MAX) - r.below(3) as i128,
        6 => i128::from(i64::MIN) + r.below(3) as i128,
        _ => r.below(40) as i128,
    };
    match r.below(8) {
        0 => json!(v.to_string() + "0"),
        1 => json!(*r.pick(&["", "12x", "-0", "1e400", "NaN", "0x10", " 1", "١٢"])),
        2 => json!(1.5),
        3 => Value::Null,
        4 | 5 => json!(v.to_string()),
        _ => serde_json::Number::from_i128(v).map_or(Value::Null, Value::Number),
    }
}

/// Strings: ordinary, empty, control characters, long, odd Unicode.
fn text(r: &mut Rng) -> String {
    match r.below(9) {
        0 => String::new(),
        1 => "\u{1b}]0;title\u{7}\u{1b}[2J\u{9b}\u{202e}\r\n\t\0".to_owned(),
        2 => "x".repeat(r.below(70_000) as usize),
        3 => "é✓😀".repeat(r.below(100) as usize),
        4 => "<script>&\"'".to_owned(),
        5 => format!("{:x}", r.next()),
        _ => r
            .pick(&[
                "train.step",
                "forward_backward",
                "optimizer_step",
                "microbatch",
                "checkpoint.save",
                "dataloader.next",
            ])
            .to_string(),
    }
}

/// An `AnyValue`: one field as it should be, several, none, or wrong types.
fn any_value(r: &mut Rng, depth: u32) -> Value {
    let mut v = serde_json::Map::new();
    let fields = if r.chance(85) { 1 } else { 3 };
    for _ in 0..=r.below(fields) {
        let (k, x) = match r.below(if depth > 3 { 5 } else { 7 }) {
            0 => ("stringValue", json!(text(r))),
            1 | 2 => ("intValue", int(r)),
            3 => (
                "doubleValue",
                r.pick(&[
                    json!(0.5),
                    json!("NaN"),
                    json!("Infinity"),
                    json!("-Infinity"),
                    json!(1e308),
                    json!("x"),
                ])
                .clone(),
            ),
            4 => (
                "boolValue",
                r.pick(&[json!(true), json!(false), json!(1)]).clone(),
            ),
            5 => (
                "arrayValue",
                json!({"values": (0..r.below(4)).map(|_| any_value(r, depth + 1)).collect::<Vec<_>>()}),
            ),
            _ => ("kvlistValue", json!({"values": attrs(r, depth + 1)})),
        };
        v.insert(k.to_owned(), x);
    }
    Value::Object(v)
}

const KEYS: [&str; 15] = [
    "dl.iteration",
    "nv.dl.iteration",
    "nv.dl.rank",
    "dl.rank",
    "nv.dl.world_size",
    "dl.world_size",
    "host.name",
    "process.pid",
    "nemo.run.id",
    "service.name",
    "thread.id",
    "thread.name",
    "nemo.span.truncated",
    "nemo.span.truncated.reason",
    "loss",
];

fn attrs(r: &mut Rng, depth: u32) -> Vec<Value> {
    (0..r.below(6))
        .map(|_| {
            let key = if r.chance(85) {
                r.pick(&KEYS).to_string()
            } else {
                text(r)
            };
            json!({"key": key, "value": any_value(r, depth)})
        })
        .collect()
}

/// Span ids from a small pool, so that parents, children, links and
/// cycles (a span its own parent) meet; some are not valid ids.
fn span_id(r: &mut Rng) -> Value {
    match r.below(12) {
        0 => json!(""),
        1 => json!("zz"),
        2 => json!(format!("{:x}", r.next())),
        3 => json!("0123456789abcdef0123"),
        _ => json!(format!("{:016x}", r.below(8) + 1)),
    }
}

fn time(r: &mut Rng) -> Value {
    match r.below(6) {
        0 => int(r),
        1 => json!(u64::MAX.to_string()),
        _ => json!((1_000_000_000 + r.below(1_000_000)).to_string()),
    }
}

fn span(r: &mut Rng) -> Value {
    let mut s = json!({
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": span_id(r),
        "parentSpanId": span_id(r),
        "name": text(r),
        "kind": 1,
        "startTimeUnixNano": time(r),
        "endTimeUnixNano": time(r),
        "attributes": attrs(r, 0),
        "status": {"code": *r.pick(&[0, 1, 2, 2, -1, 7]), "message": text(r)},
    });
    if r.chance(20) {
        s["links"] = json!([{"traceId": "01", "spanId": span_id(r)}]);
    }
    if r.chance(20) {
        s["flags"] = json!(*r.pick(&[0x300, 0x100, u32::MAX]));
    }
    if r.chance(50) {
        // a step span with an iteration that is a plain integer
        let key = *r.pick(&["dl.iteration", "nv.dl.iteration"]);
        if let Some(a) = s["attributes"].as_array_mut() {
            a.push(json!({"key": key, "value": {"intValue": int(r)}}));
        }
    }
    s
}

fn resource(r: &mut Rng) -> Value {
    let mut a = attrs(r, 0);
    if r.chance(70) {
        a.push(json!({"key": "nv.dl.rank", "value": {"intValue": int(r)}}));
    }
    if r.chance(40) {
        a.push(json!({"key": "nv.dl.world_size", "value": {"intValue": int(r)}}));
    }
    json!({"attributes": a})
}

fn points(r: &mut Rng) -> Vec<Value> {
    (0..r.below(4))
        .map(|_| {
            let mut p = json!({"timeUnixNano": time(r), "attributes": attrs(r, 2)});
            match r.below(3) {
                0 => p["asInt"] = int(r),
                1 => p["asDouble"] = any_value(r, 4)["doubleValue"].clone(),
                _ => {
                    p["count"] = int(r);
                    p["sum"] = json!(*r.pick(&[0.0, -1.0, 1e308]));
                }
            }
            p
        })
        .collect()
}

fn metric(r: &mut Rng) -> Value {
    let kind = *r.pick(&["gauge", "sum", "histogram"]);
    json!({"name": text(r), kind: {"dataPoints": points(r)}})
}

/// One generated line.
fn line(r: &mut Rng) -> String {
    let mut env = serde_json::Map::new();
    if r.chance(80) {
        let rs: Vec<Value> = (0..=r.below(2))
            .map(|_| {
                json!({"resource": resource(r), "scopeSpans": [{
                    "scope": {"name": "lens"},
                    "spans": (0..r.below(8)).map(|_| span(r)).collect::<Vec<_>>()
                }]})
            })
            .collect();
        env.insert("resourceSpans".to_owned(), json!(rs));
    }
    if r.chance(30) {
        env.insert(
            "resourceMetrics".to_owned(),
            json!([{"resource": resource(r), "scopeMetrics": [{
                "metrics": (0..r.below(4)).map(|_| metric(r)).collect::<Vec<_>>()
            }]}]),
        );
    }
    if r.chance(15) {
        env.insert(
            "resourceLogs".to_owned(),
            json!([{"resource": resource(r), "scopeLogs": [{"logRecords": [{}, {}]}]}]),
        );
    }
    Value::Object(env).to_string()
}

/// Byte-level damage: flips, cuts, splices of JSON tokens and numbers.
fn mutate(r: &mut Rng, line: &mut Vec<u8>) {
    for _ in 0..=r.below(4) {
        let n = line.len() as u64;
        let at = r.below(n + 1) as usize;
        match r.below(9) {
            0 if n > 0 => {
                let i = at.min(line.len() - 1);
                line[i] ^= 1 << r.below(8);
            }
            1 => line.truncate(at),
            2 => {
                let tokens: [&[u8]; 13] = [
                    b"\"",
                    b"{",
                    b"]",
                    b",",
                    b"\\u0000",
                    b"\\ud800",
                    b"\xff\xfe",
                    b"\xef\xbb\xbf",
                    b"9223372036854775808",
                    b"-9223372036854775809",
                    b"1e999",
                    b"null",
                    b"\n",
                ];
                let token = *r.pick(&tokens);
                line.splice(at..at, token.iter().copied());
            }
            3 if n > 0 => {
                let len = r.below(n - at as u64 + 1) as usize;
                let chunk: Vec<u8> = line[at..at + len].to_vec();
                let to = r.below(line.len() as u64 + 1) as usize;
                line.splice(to..to, chunk);
            }
            4 => {
                let end = (at + r.below(32) as usize).min(line.len());
                line.drain(at..end);
            }
            _ => {
                // an integer in quotes becomes an extreme one
                if let Some(i) = find_digits(line, at) {
                    let extreme = r.pick(&[
                        "9223372036854775807",
                        "-9223372036854775808",
                        "18446744073709551615",
                        "0",
                        "-1",
                    ]);
                    let end = i + line[i..].iter().take_while(|c| c.is_ascii_digit()).count();
                    line.splice(i..end, extreme.bytes());
                }
            }
        }
    }
}

fn find_digits(line: &[u8], from: usize) -> Option<usize> {
    let rest = line.get(from..)?;
    rest.iter().position(u8::is_ascii_digit).map(|i| from + i)
}

/// Real lines: a small synthetic run with steps, microbatches, a
/// straggler, a truncated rank and metrics.
fn corpus(dir: &Path) -> Vec<Vec<u8>> {
    let out = dir.to_str().expect("UTF-8 path");
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from([
        "lens",
        "synth",
        "--ranks",
        "2",
        "--steps",
        "3",
        "--seed",
        "7",
        "--straggler",
        "1:forward_backward:40",
        "--truncate",
        "1",
        "--microbatches",
        "2",
        "--out",
        out,
    ])
    .expect("synth arguments");
    let crate::cli::Command::Synth(args) = cli.command else {
        unreachable!("synth parses as synth")
    };
    crate::synth::run(&args).expect("synth");
    let mut lines = Vec::new();
    for rank in 0..2 {
        let text = std::fs::read(dir.join(format!("synth-rank{rank}.otlp.jsonl"))).expect("read");
        lines.extend(
            text.split(|&c| c == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec),
        );
        std::fs::remove_file(dir.join(format!("synth-rank{rank}.otlp.jsonl"))).expect("rm");
    }
    lines
}

/// Writes one case: 1 to 3 files (some gzip) of generated or mutated lines.
fn write_case(r: &mut Rng, dir: &Path, corpus: &[Vec<u8>]) {
    for f in 0..=r.below(3) {
        let mut data = Vec::new();
        for _ in 0..=r.below(12) {
            let mut l = if r.chance(50) {
                line(r).into_bytes()
            } else {
                r.pick(corpus).clone()
            };
            if r.chance(40) {
                mutate(r, &mut l);
            }
            data.extend_from_slice(&l);
            data.push(b'\n');
        }
        let name = format!("case-rank{f}.otlp.jsonl");
        if r.chance(20) {
            let file = std::fs::File::create(dir.join(name + ".gz")).expect("create");
            let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            // sometimes cut short
            let keep = if r.chance(30) {
                r.below(data.len() as u64 + 1) as usize
            } else {
                data.len()
            };
            gz.write_all(&data[..keep]).expect("gzip");
            if r.chance(80) {
                gz.finish().expect("gzip");
            }
        } else {
            std::fs::write(dir.join(name), &data).expect("write");
        }
    }
}

/// The whole pipeline over `dir`.
fn pipeline(r: &mut Rng, dir: &Path) {
    let Ok(found) = crate::input::discover(&[dir.to_path_buf()]) else {
        return;
    };
    let mut sink =
        crate::html::Collector::new(crate::report::Aggregator::default(), r.below(20) as usize);
    let diag = crate::input::reread_quietly(&found.files, &mut sink);
    let settings = crate::report::Settings {
        straggler_pct: *r.pick(&[0.0, 10.0, 1e9]),
        straggler_share: *r.pick(&[0.0, 0.5, 1.0]),
    };
    let (agg, tl) = sink.into_parts();
    let report = agg.finish(diag, settings);
    let text = crate::report::render_text(&report, r.below(30) as usize);
    assert!(!text.contains('\u{1b}'), "an escape in the text report");
    serde_json::to_string(&report).expect("the report serializes");
    let page = crate::html::render(&report, &tl);
    assert!(page.len() < 64 << 20, "a page of {} bytes", page.len());
    crate::perfetto::convert_in_memory(&found.files);
}

pub(crate) fn env_u64(key: &str) -> Option<u64> {
    std::env::var(key).ok().and_then(|v| v.parse().ok())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lens-fuzz-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn hostile_lines_never_panic_the_reader_or_the_analysis() {
    let seed = env_u64("LENS_FUZZ_SEED").unwrap_or(39);
    let cases = env_u64("LENS_FUZZ_CASES");
    let base = scratch("pipeline");
    let corpus = corpus(&base);
    let start = Instant::now();
    let mut ran = 0;
    for case in 0..cases.unwrap_or(CASES) {
        if cases.is_none() && start.elapsed() > BUDGET {
            break;
        }
        let dir = base.join(format!("case-{case}"));
        std::fs::create_dir_all(&dir).expect("case dir");
        let mut r = Rng(seed ^ case.wrapping_mul(0x2545_f491_4f6c_dd1d));
        write_case(&mut r, &dir, &corpus);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pipeline(&mut r, &dir);
        }));
        if outcome.is_err() {
            panic!(
                "case {case} of seed {seed} panicked; its input is kept in {}",
                dir.display()
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
        ran += 1;
    }
    let _ = std::fs::remove_dir_all(&base);
    assert!(ran >= 20, "only {ran} cases in {BUDGET:?}");
}
