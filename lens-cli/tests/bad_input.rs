//! Bad input is reported with file:line, skipped and counted; it never
//! panics. Empty input exits with code 3 and says why.

mod support;

use std::io::Write;

use support::{fresh_dir, ok, report_json, run};

fn synth_one(dir: &std::path::Path) -> String {
    ok(&[
        "synth",
        "--ranks",
        "1",
        "--steps",
        "5",
        "--out",
        dir.to_str().expect("path"),
    ]);
    std::fs::read_to_string(dir.join("synth-rank0.otlp.jsonl")).expect("synth file")
}

#[test]
fn malformed_lines_truncated_files_and_bad_encodings_are_skipped_and_counted() {
    let src = fresh_dir("bad-src");
    let good = synth_one(&src);
    let good_lines: Vec<&str> = good.lines().collect();
    let dir = fresh_dir("bad");

    // 1: garbage and wrong shapes between good lines
    let mut a = Vec::new();
    writeln!(a, "{}", good_lines[0]).ok();
    writeln!(a, "this is not json").ok(); // line 2
    writeln!(a, "{{\"resourceSpans\": 42}}").ok(); // line 3: wrong type
    a.extend_from_slice(b"{\"resourceSpans\":[{\"x\":\"\xff\xfe\"}]}\n"); // line 4: not UTF-8
    writeln!(a, "{}", good_lines[1]).ok();
    writeln!(a).ok(); // blank lines are fine
    std::fs::write(dir.join("a-rank0.otlp.jsonl"), &a).expect("write a");

    // 2: file cut in the middle of its last line
    let cut = &good_lines[2][..good_lines[2].len() / 2];
    std::fs::write(
        dir.join("b-rank1.otlp.jsonl"),
        format!("{}\n{cut}", good_lines[3]),
    )
    .expect("write b");

    // 3: gzip header followed by garbage
    std::fs::write(
        dir.join("c-rank2.otlp.jsonl.gz"),
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage!garbage!",
    )
    .expect("write c");

    // 4: valid gzip cut short
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(good.as_bytes()).expect("gzip");
    let gz = gz.finish().expect("gzip");
    std::fs::write(dir.join("d-rank3.otlp.jsonl.gz"), &gz[..gz.len() / 2]).expect("write d");

    let d = dir.to_str().expect("path");
    let out = run(&["report", "--json", d]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let a_path = dir.join("a-rank0.otlp.jsonl").display().to_string();
    for line in [2, 3, 4] {
        assert!(
            stderr.contains(&format!("{a_path}:{line}: ")),
            "no report for line {line}: {stderr}"
        );
    }
    assert!(
        stderr.contains(&format!("{a_path}:4: not UTF-8")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{}:2: ", dir.join("b-rank1.otlp.jsonl").display())),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{}:1: ",
            dir.join("c-rank2.otlp.jsonl.gz").display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&dir.join("d-rank3.otlp.jsonl.gz").display().to_string()),
        "{stderr}"
    );

    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(r["input"]["files"], 4);
    assert_eq!(
        r["input"]["skipped_lines"].as_u64(),
        Some(4),
        "{:#}",
        r["input"]
    );
    assert!(
        r["input"]["broken_files"].as_u64() >= Some(1),
        "{:#}",
        r["input"]
    );
    // a: 2 good lines, b: 1 good line, d: whatever decoded before the cut
    assert!(r["spans"]["count"].as_u64() >= Some(3 * 5));
}

#[test]
fn error_status_spans_are_listed() {
    let dir = fresh_dir("errors");
    let line = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"nv.dl.rank","value":{"intValue":"0"}}]},"scopeSpans":[{"spans":[{"traceId":"01","spanId":"00000000000000aa","name":"checkpoint.save","startTimeUnixNano":"100","endTimeUnixNano":"900","status":{"code":2,"message":"disk full"}}]}]}]}"#;
    std::fs::write(dir.join("x.otlp.jsonl"), format!("{line}\n")).expect("write");
    let r = report_json(&[&dir], &[]);
    assert_eq!(r["errors"]["count"], 1);
    assert_eq!(r["errors"]["items"][0]["detail"], "disk full");
    assert_eq!(r["errors"]["items"][0]["dur_ns"], 800);
}

#[test]
fn empty_input_exits_3_with_a_clear_message() {
    let dir = fresh_dir("empty");
    let out = run(&["report", dir.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no OTLP/JSON-lines files"));

    std::fs::write(dir.join("e.otlp.jsonl"), "").expect("write");
    let out = run(&["report", dir.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no spans, metrics or logs found"),
        "{stderr}"
    );

    let out = run(&[
        "perfetto",
        dir.to_str().expect("path"),
        "-o",
        dir.join("t.pftrace").to_str().expect("p"),
    ]);
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn bom_crlf_and_utf16_files() {
    let src = fresh_dir("enc-src");
    let good = synth_one(&src);
    let dir = fresh_dir("enc");
    // UTF-8 with a byte order mark and CRLF line ends: read as usual
    let crlf = format!("\u{feff}{}", good.replace('\n', "\r\n"));
    std::fs::write(dir.join("bom-rank0.otlp.jsonl"), crlf).expect("write");
    // UTF-16LE: not OTLP/JSON lines, reported once by name, nothing read
    let mut utf16 = vec![0xff, 0xfe];
    for u in good.encode_utf16() {
        utf16.extend_from_slice(&u.to_le_bytes());
    }
    std::fs::write(dir.join("u16-rank1.otlp.jsonl"), utf16).expect("write");
    let out = run(&["report", "--json", dir.to_str().expect("path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("u16-rank1.otlp.jsonl: not OTLP/JSON lines (first bad line 1: not UTF-8"),
        "{stderr}"
    );
    assert!(stderr.contains("looks like UTF-16"), "{stderr}");
    assert_eq!(stderr.matches("u16-rank1").count(), 1, "{stderr}");
    assert!(!stderr.contains("bom-rank0"), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let want = support::count_spans(&src).values().sum::<u64>();
    assert_eq!(r["spans"]["count"], want);
    assert_eq!(r["input"]["not_otlp_files"], 1);
    assert!(r["input"]["skipped_lines"].as_u64() >= Some(1));
}

/// Non-finite doubles, as the runtime's file exporter writes them (proto3
/// JSON: `"NaN"`, `"Infinity"`, `"-Infinity"`), are values, not bad lines.
#[test]
fn non_finite_doubles_are_read_not_skipped() {
    let dir = fresh_dir("non-finite");
    let line = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"nv.dl.rank","value":{"intValue":"0"}}]},"scopeSpans":[{"scope":{"name":"lens"},"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","parentSpanId":"","name":"train.step","kind":1,"startTimeUnixNano":"1000","endTimeUnixNano":"2000","attributes":[{"key":"loss","value":{"doubleValue":"NaN"}},{"key":"grad_norm","value":{"doubleValue":"Infinity"}},{"key":"floor","value":{"doubleValue":"-Infinity"}},{"key":"dl.iteration","value":{"intValue":"0"}}],"status":{"code":0}}]}]}]}"#;
    std::fs::write(dir.join("r-rank0.otlp.jsonl"), format!("{line}\n")).expect("write");
    let r = report_json(&[&dir], &[]);
    assert_eq!(r["input"]["skipped_lines"], 0, "{r}");
    assert_eq!(r["spans"]["count"], 1, "{r}");
}

/// A file that is not OTLP/JSON lines (none of its first 5 non-empty lines
/// is) gets one line naming it and is skipped, counted; a file that is
/// OTLP with a few bad lines still gets one report per bad line.
#[test]
fn a_file_that_is_not_otlp_gets_one_line_naming_it() {
    let src = fresh_dir("not-otlp-src");
    let good = synth_one(&src);
    let dir = fresh_dir("not-otlp");
    // pretty-printed JSON: no line of it is a JSON document
    let pretty: Vec<String> = (0..40)
        .map(|i| format!("  {{\"traceEvents\": [{i},"))
        .collect();
    std::fs::write(dir.join("pretty.otlp.jsonl"), pretty.join("\n")).expect("write");
    // JSON lines that are not OTLP (a log), and a short text file
    let log: String = (0..30)
        .map(|i| format!("{{\"level\":\"info\",\"msg\":\"m{i}\"}}\n"))
        .collect();
    std::fs::write(dir.join("log.otlp.jsonl"), log).expect("write");
    std::fs::write(dir.join("notes.otlp.jsonl"), "hello\n\nworld\n").expect("write");
    // OTLP with bad lines: the first two lines bad, then good ones
    let mut mixed = String::from("garbage one\n{\"resourceSpans\": 7}\n");
    mixed.push_str(&good);
    mixed.push_str("garbage two\n");
    std::fs::write(dir.join("mixed-rank0.otlp.jsonl"), mixed).expect("write");

    let out = run(&["report", "--json", dir.to_str().expect("path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for (file, first) in [
        ("pretty.otlp.jsonl", "first bad line 1: "),
        (
            "log.otlp.jsonl",
            "first bad line 1: JSON without resourceSpans",
        ),
        ("notes.otlp.jsonl", "first bad line 1: "),
    ] {
        let path = dir.join(file).display().to_string();
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(&path)).collect();
        assert_eq!(lines.len(), 1, "{file}: {stderr}");
        assert!(
            lines[0].starts_with(&format!("lens: {path}: not OTLP/JSON lines ({first}")),
            "{file}: {stderr}"
        );
        assert!(lines[0].ends_with("), skipped"), "{stderr}");
    }
    let mixed = dir.join("mixed-rank0.otlp.jsonl").display().to_string();
    for line in [1, 2, good.lines().count() + 3] {
        assert!(
            stderr.contains(&format!("{mixed}:{line}: not an OTLP/JSON line")),
            "no report for line {line}: {stderr}"
        );
    }
    assert!(!stderr.contains(&format!("{mixed}: not OTLP")), "{stderr}");
    assert!(!stderr.contains("more problems follow"), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(r["input"]["not_otlp_files"], 3, "{}", r["input"]);
    assert_eq!(r["input"]["files"], 4, "{}", r["input"]);
    assert_eq!(
        r["spans"]["count"].as_u64(),
        Some(support::count_spans(&src).values().sum::<u64>())
    );
    // the text report counts them too
    let text = ok(&["report", dir.to_str().expect("path")]);
    assert!(
        text.contains("Skipped 3 file(s) that are not OTLP/JSON lines"),
        "{text}"
    );
}
