//! `lens report`'s span tables as `nsys stats` users expect them: total,
//! mean and min columns, `--csv`, and the `--name` / `--rank` filters (the
//! tables follow them, the diagnosis reads every rank).

mod support;

use std::path::Path;

use serde_json::{json, Value};
use support::{fresh_dir, ok, report_json, run, synth};

fn p(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// One OTLP/JSON line: spans `(id, name, start, dur, status code)` of `rank`.
fn line(rank: i64, spans: &[(u64, &str, u64, u64, i64)]) -> String {
    let spans: Vec<Value> = spans
        .iter()
        .map(|&(id, name, start, dur, code)| {
            json!({
                "traceId": "0af7651916cd43dd8448eb211c80319c",
                "spanId": format!("{id:016x}"),
                "name": name,
                "startTimeUnixNano": start.to_string(),
                "endTimeUnixNano": (start + dur).to_string(),
                "status": {"code": code, "message": if code == 2 { "boom" } else { "" }},
            })
        })
        .collect();
    json!({"resourceSpans": [{
        "resource": {"attributes": [
            {"key": "nv.dl.rank", "value": {"intValue": rank.to_string()}},
            {"key": "nv.dl.world_size", "value": {"intValue": "2"}},
        ]},
        "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}],
    }]})
    .to_string()
}

/// Two ranks; `load` lasts 100, 200 and 600 ns; names that need quoting.
fn known_run(name: &str) -> std::path::PathBuf {
    let dir = fresh_dir(name);
    let r0 = [
        line(0, &[(1, "load", 1_000, 100, 0), (2, "load", 2_000, 200, 0)]),
        line(0, &[(3, "a,\"b\"", 3_000, 50, 0), (4, "x\ny", 4_000, 7, 2)]),
    ];
    let r1 = [line(
        1,
        &[
            (5, "load", 1_000, 600, 0),
            (6, "allreduce.grads", 1_700, 40, 2),
        ],
    )];
    std::fs::write(dir.join("r-rank0.otlp.jsonl"), r0.join("\n") + "\n").expect("write");
    std::fs::write(dir.join("r-rank1.otlp.jsonl"), r1.join("\n") + "\n").expect("write");
    dir
}

#[test]
fn the_name_table_has_total_mean_and_min() {
    let dir = known_run("tables-columns");
    let r = report_json(&[&dir], &[]);
    let load = &r["by_name"]["load"];
    assert_eq!(load["count"], 3, "{load}");
    assert_eq!(load["total_ns"], 900, "{load}");
    assert_eq!(load["mean"], 300, "{load}");
    assert_eq!(load["min"], 100, "{load}");
    assert_eq!(load["max"], 600, "{load}");
    let text = ok(&["report", p(&dir)]);
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("name ") && l.contains("p50"))
        .unwrap_or_else(|| panic!("no name table:\n{text}"));
    let cols: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        cols,
        ["name", "count", "total", "mean", "min", "p50", "p95", "p99", "max", "share"],
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("load "))
        .unwrap_or_else(|| panic!("no load row:\n{text}"));
    assert!(
        row.contains("900 ns") && row.contains("300 ns") && row.contains("100 ns"),
        "{row}"
    );
}

/// A minimal RFC 4180 reader (quoted fields, doubled quotes, CRLF).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field) = (Vec::new(), Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    rows
}

#[test]
fn csv_is_the_name_table_with_quoted_names() {
    let dir = known_run("tables-csv");
    let out = run(&["report", "--csv", p(&dir)]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let rows = parse_csv(&text);
    assert_eq!(
        rows[0],
        [
            "name", "count", "total_ns", "mean_ns", "min_ns", "p50_ns", "p95_ns", "p99_ns",
            "max_ns", "share"
        ]
    );
    let r = report_json(&[&dir], &[]);
    let by_name = r["by_name"].as_object().expect("by_name");
    assert_eq!(rows.len() - 1, by_name.len(), "{text}");
    // longest total first
    assert_eq!(rows[1][0], "load");
    for row in &rows[1..] {
        assert_eq!(row.len(), 10, "{row:?}");
        let j = &by_name[&row[0]];
        for (i, key) in [
            "count", "total_ns", "mean", "min", "p50", "p95", "p99", "max",
        ]
        .iter()
        .enumerate()
        {
            assert_eq!(row[i + 1], j[key].to_string(), "{}.{key}", row[0]);
        }
        let share: f64 = row[9].parse().expect("share");
        assert!((share - j["share"].as_f64().expect("share")).abs() < 1e-12);
    }
    assert!(rows.iter().any(|r| r[0] == "a,\"b\""), "{text}");
    assert!(rows.iter().any(|r| r[0] == "x\ny"), "{text}");
    assert!(text.contains("\"a,\"\"b\"\"\""), "{text}");
    // --csv and --json are one or the other
    assert_eq!(
        run(&["report", "--csv", "--json", p(&dir)]).status.code(),
        Some(2)
    );
}

#[test]
fn name_and_rank_filters_restrict_the_tables_not_the_diagnosis() {
    let dir = synth(
        "tables-filter",
        &["--ranks", "6", "--steps", "12", "--truncate", "4"],
    );
    let all = report_json(&[&dir], &[]);
    assert!(all["filter"].is_null(), "{}", all["filter"]);
    let f = report_json(
        &[&dir],
        &["--name", "allreduce*", "--name", "train", "--rank", "0,2-3"],
    );
    // the tables: only the names matched (glob or substring) ...
    let names: Vec<&String> = f["by_name"].as_object().expect("by_name").keys().collect();
    assert_eq!(names, ["allreduce", "train.step"], "{names:?}");
    // ... and only the ranks selected
    let ranks: Vec<i64> = f["ranks"]
        .as_array()
        .expect("ranks")
        .iter()
        .filter_map(|r| r["rank"].as_i64())
        .collect();
    assert_eq!(ranks, [0, 2, 3]);
    let truncated = f["truncated"]["items"].as_array().expect("items");
    assert!(!truncated.is_empty());
    assert!(
        truncated
            .iter()
            .all(|t| [0, 2, 3].contains(&t["rank"].as_i64().unwrap_or(-1))
                && ["allreduce", "train.step"].contains(&t["name"].as_str().unwrap_or(""))),
        "{truncated:?}"
    );
    assert!(f["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .all(|m| [0, 2, 3].contains(&m["rank"].as_i64().unwrap_or(-1))));
    // counts on the selected ranks only
    let per_rank: u64 = [0, 2, 3]
        .iter()
        .map(|r| {
            let file = dir.join(format!("synth-rank{r}.otlp.jsonl"));
            support::spans_in(&file)
                .iter()
                .filter(|s| s["name"] == "train.step")
                .count() as u64
        })
        .sum();
    assert_eq!(f["by_name"]["train.step"]["count"], per_rank);
    assert_eq!(
        f["filter"],
        json!({"names": ["allreduce*", "train"], "ranks": [[0, 0], [2, 3]],
               "spans": f["by_name"].as_object().expect("by_name").values()
                   .map(|v| v["count"].as_u64().unwrap_or(0)).sum::<u64>()})
    );
    // the diagnosis, the steps and the totals read every rank: rank 4 hung
    // even though the tables do not show it
    assert_eq!(f["diagnosis"], all["diagnosis"]);
    assert_eq!(f["steps"], all["steps"]);
    for key in ["count", "truncated", "errors", "step_span_names"] {
        assert_eq!(f["spans"][key], all["spans"][key], "spans.{key}");
    }
    // the share's denominator: the selected ranks' wall time
    assert!(f["spans"]["wall_ns"].as_u64() < all["spans"]["wall_ns"].as_u64());
    assert_eq!(
        f["diagnosis"]["suspects"][0]["rank"], 4,
        "{}",
        f["diagnosis"]
    );
    // the text says what was filtered; CSV follows the filters
    let text = ok(&["report", "--rank", "1", "--name", "optimizer", p(&dir)]);
    assert!(text.contains("Filter --name optimizer --rank 1:"), "{text}");
    assert!(
        text.contains("rank 4"),
        "the diagnosis names rank 4:\n{text}"
    );
    let csv = ok(&["report", "--csv", "--name", "*step", p(&dir)]);
    let rows: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap_or(""))
        .collect();
    assert_eq!(rows, ["train.step", "optimizer_step"], "{csv}");
    // a bad rank list is a usage error
    for bad in ["3-1", "x", "1,,2", "-2"] {
        let out = run(&["report", "--rank", bad, p(&dir)]);
        assert_eq!(out.status.code(), Some(2), "--rank {bad}: {out:?}");
    }
}
