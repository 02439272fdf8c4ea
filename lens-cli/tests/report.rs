//! `lens report` on synthetic runs with known stragglers, truncations and
//! missing ranks.

mod support;

use support::{count_spans, fresh_dir, ok, report_json, synth};

/// A synchronized run (every step ends in an `allreduce` no rank leaves
/// before the last one arrived): every rank's step lasts the same, so the
/// answer is the diagnosis, not whole-step stragglers. Rank 6 hangs half-way
/// (first); before that rank 3's slow `forward_backward` (+32 ms a step)
/// and rank 5's slow `data_loading` (+24 ms) made the others wait.
#[test]
fn the_diagnosis_names_the_planted_hang_and_stragglers_in_order() {
    let dir = synth(
        "stragglers",
        &[
            "--ranks",
            "8",
            "--steps",
            "60",
            "--seed",
            "7",
            "--straggler",
            "3:forward_backward:40",
            "--straggler",
            "5:data_loading:400",
            "--truncate",
            "6",
        ],
    );
    let d = dir.to_str().expect("UTF-8 path");
    let r = report_json(&[&dir], &[]);
    assert_eq!(r["schema_version"], 1);
    let found: Vec<(i64, String, String)> = r["suspects"]
        .as_array()
        .expect("suspects array")
        .iter()
        .map(|s| {
            (
                s["rank"].as_i64().unwrap_or(-1),
                s["phase"].as_str().unwrap_or("").to_owned(),
                s["kind"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let want = |r: i64, p: &str, k: &str| (r, p.to_owned(), k.to_owned());
    assert_eq!(
        found,
        vec![
            want(6, "forward_backward", "hang"),
            want(3, "forward_backward", "straggler"),
            want(5, "data_loading", "straggler"),
        ],
        "{:#}",
        r["diagnosis"]
    );
    assert_eq!(
        r["diagnosis"]["wait_phases"],
        serde_json::json!(["allreduce"])
    );
    assert_eq!(
        r["stragglers"],
        serde_json::json!([]),
        "every step lasts the same"
    );
    // every rank's open phase, step and job are truncated: rank 6 in
    // forward_backward, the others in the allreduce
    let truncated = &r["truncated"];
    assert_eq!(truncated["count"], 24, "{truncated:#}");
    let items = truncated["items"].as_array().expect("items");
    assert!(items.iter().all(|t| t["detail"] == "signal SIGTERM"));
    let names = |rank: i64| {
        let mut n: Vec<&str> = items
            .iter()
            .filter(|t| t["rank"] == rank)
            .filter_map(|t| t["name"].as_str())
            .collect();
        n.sort_unstable();
        n
    };
    assert_eq!(names(6), ["forward_backward", "job", "train.step"]);
    assert_eq!(names(0), ["allreduce", "job", "train.step"]);
    assert_eq!(r["errors"]["count"], 0);
    assert_eq!(r["missing_ranks"].as_array().map(Vec::len), Some(0));
    assert_eq!(r["steps"]["count"], 31, "steps 0..=30, the last one hung");
    assert_eq!(
        r["steps"]["phases"],
        serde_json::json!([
            "data_loading",
            "forward_backward",
            "allreduce",
            "optimizer_step"
        ])
    );

    // the text report gives the answer first
    let text = ok(&["report", d]);
    let first = text.lines().find(|l| l.starts_with("Diagnosis: "));
    assert_eq!(
        first.map(|l| l.starts_with("Diagnosis: rank 6 hung in `forward_backward`")),
        Some(true),
        "{text}"
    );
    assert!(text.contains("2. rank 3 in forward_backward"), "{text}");
    assert!(text.contains("3. rank 5 in data_loading"), "{text}");
    assert!(text.find("Diagnosis: ") < text.find("Ranks"), "{text}");
}

#[test]
fn no_stragglers_in_an_even_run() {
    let dir = fresh_dir("even");
    ok(&[
        "synth",
        "--ranks",
        "6",
        "--steps",
        "40",
        "--out",
        dir.to_str().expect("path"),
    ]);
    let r = report_json(&[&dir], &[]);
    assert_eq!(r["stragglers"], serde_json::json!([]));
    assert_eq!(r["suspects"], serde_json::json!([]), "{:#}", r["diagnosis"]);
    assert_eq!(r["truncated"]["count"], 0);
}

#[test]
fn json_counts_equal_an_independent_count() {
    let dir = fresh_dir("counts");
    ok(&[
        "synth",
        "--ranks",
        "5",
        "--steps",
        "33",
        "--microbatches",
        "3",
        "--out",
        dir.to_str().expect("path"),
        "--truncate",
        "1",
    ]);
    let want = count_spans(&dir);
    let r = report_json(&[&dir], &[]);
    let total: u64 = want.values().sum();
    assert_eq!(r["spans"]["count"], total);
    assert_eq!(r["input"]["skipped_lines"], 0);
    let by_name = r["by_name"].as_object().expect("by_name");
    assert_eq!(by_name.len(), want.len());
    for (name, n) in &want {
        let row = &by_name[name];
        assert_eq!(row["count"], *n, "{name}");
        for q in ["p50", "p95", "p99", "max"] {
            assert!(row[q].as_u64().is_some(), "{name}.{q}");
        }
        assert!(row["p50"].as_u64() <= row["p99"].as_u64());
        assert!(row["p99"].as_u64() <= row["max"].as_u64());
    }
    let ranks = r["ranks"].as_array().expect("ranks");
    assert_eq!(ranks.len(), 5);
    let per_rank: u64 = ranks.iter().filter_map(|x| x["spans"].as_u64()).sum();
    assert_eq!(per_rank, total);
    for key in [
        "schema_version",
        "ranks",
        "spans",
        "by_name",
        "steps",
        "stragglers",
        "truncated",
        "errors",
        "metrics",
    ] {
        assert!(r.get(key).is_some(), "missing key {key}");
    }
    assert!(!r["metrics"].as_array().expect("metrics").is_empty());
}

#[test]
fn ranks_that_exported_nothing_are_named() {
    let dir = fresh_dir("missing");
    ok(&[
        "synth",
        "--ranks",
        "4",
        "--steps",
        "10",
        "--out",
        dir.to_str().expect("path"),
    ]);
    std::fs::remove_file(dir.join("synth-rank2.otlp.jsonl")).expect("remove");
    let r = report_json(&[&dir], &[]);
    assert_eq!(r["missing_ranks"], serde_json::json!([2]));
    assert_eq!(r["world_size"], 4);
}

#[test]
fn gzip_input_reads_like_plain() {
    let plain = fresh_dir("plain");
    let gz = fresh_dir("gz");
    ok(&[
        "synth",
        "--ranks",
        "3",
        "--steps",
        "12",
        "--out",
        plain.to_str().expect("p"),
    ]);
    ok(&[
        "synth",
        "--ranks",
        "3",
        "--steps",
        "12",
        "--gzip",
        "--out",
        gz.to_str().expect("p"),
    ]);
    let a = report_json(&[&plain], &[]);
    let b = report_json(&[&gz], &[]);
    assert_eq!(a["by_name"], b["by_name"]);
    assert_eq!(a["stragglers"], b["stragglers"]);
}

#[test]
fn straggler_thresholds_are_options() {
    let dir = synth(
        "thresholds",
        &[
            "--ranks",
            "4",
            "--steps",
            "20",
            "--straggler",
            "1:optimizer_step:100",
            "--unsynchronized",
        ],
    );
    // optimizer_step is ~14% of a step: +100% makes the step ~14% slower
    // (ranks that do not wait for each other)
    let found = |extra: &[&str]| -> Vec<i64> {
        report_json(&[&dir], extra)["stragglers"]
            .as_array()
            .map(|a| a.iter().filter_map(|s| s["rank"].as_i64()).collect())
            .unwrap_or_default()
    };
    assert_eq!(found(&[]), [1]);
    assert_eq!(found(&["--straggler-pct", "25"]), Vec::<i64>::new());
    assert_eq!(
        found(&["--straggler-pct", "5", "--straggler-share", "1.0"]),
        [1]
    );
}

/// Step spans are those with `dl.iteration` (what lens and the Python
/// library write) or with `nv.dl.iteration` (what lens wrote before): a run
/// mixing a new rank file and an older one has its steps on both ranks.
#[test]
fn steps_are_read_under_dl_iteration_and_the_former_nv_dl_iteration() {
    let dir = fresh_dir("iteration-keys");
    let line = |rank: u32, key: &str, it: u32| {
        let start = 1_000_000 * (it + 1);
        format!(
            r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"nv.dl.rank","value":{{"intValue":"{rank}"}}}},{{"key":"nv.dl.world_size","value":{{"intValue":"2"}}}}]}},"scopeSpans":[{{"scope":{{"name":"lens"}},"spans":[{{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"{:016x}","parentSpanId":"","name":"train.step","kind":1,"startTimeUnixNano":"{start}","endTimeUnixNano":"{}","attributes":[{{"key":"{key}","value":{{"intValue":"{it}"}}}}],"status":{{"code":0}}}}]}}]}}]}}"#,
            (rank + 1) * 100 + it + 1,
            start + 500_000,
        )
    };
    for (rank, key) in [(0, "dl.iteration"), (1, "nv.dl.iteration")] {
        let text: String = (0..3).map(|it| line(rank, key, it) + "\n").collect();
        std::fs::write(dir.join(format!("r-rank{rank}.otlp.jsonl")), text).expect("write");
    }
    let r = report_json(&[&dir], &[]);
    assert_eq!(r["input"]["skipped_lines"], 0, "{r}");
    assert_eq!(r["spans"]["count"], 6, "{r}");
    assert_eq!(
        r["spans"]["step_span_names"],
        serde_json::json!(["train.step"])
    );
    assert_eq!(r["steps"]["count"], 3, "{r}");
    let rows = r["steps"]["rows"].as_array().expect("rows");
    assert!(rows.iter().all(|row| row["ranks"] == 2), "{r}");
    let ranks = r["ranks"].as_array().expect("ranks");
    assert!(ranks.iter().all(|x| x["steps"] == 3), "{r}");
}

/// Ranks are told apart by `nv.dl.rank` (lens, and the Python library's
/// Nightly) or by `dl.rank` (what the Python library 0.1.0 writes), with
/// `nv.dl.rank` winning when a resource has both: files without a
/// `-rank<N>` name and with only `dl.rank` are not merged into rank 0.
#[test]
fn ranks_are_read_under_nv_dl_rank_and_the_python_0_1_dl_rank() {
    let dir = fresh_dir("rank-keys");
    let line = |rank_attrs: &str, id: u32, it: u32, dur: u64| {
        let start = 1_000_000 * u64::from(it + 1);
        format!(
            r#"{{"resourceSpans":[{{"resource":{{"attributes":[{rank_attrs}]}},"scopeSpans":[{{"scope":{{"name":"nemo.lens"}},"spans":[{{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"{id:016x}","parentSpanId":"","name":"train.step","kind":1,"startTimeUnixNano":"{start}","endTimeUnixNano":"{}","attributes":[{{"key":"dl.iteration","value":{{"intValue":"{it}"}}}}],"status":{{"code":0}}}}]}}]}}]}}"#,
            start + dur,
        )
    };
    let kv = |k: &str, v: u32| format!(r#"{{"key":"{k}","value":{{"intValue":"{v}"}}}}"#);
    let files = [
        // Python 0.1.0: dl.rank, dl.world_size
        (
            "py-a",
            format!("{},{}", kv("dl.rank", 0), kv("dl.world_size", 3)),
        ),
        (
            "py-b",
            format!("{},{}", kv("dl.world_size", 3), kv("dl.rank", 1)),
        ),
        // both keys, in either order: nv.dl.rank wins
        (
            "both",
            format!("{},{}", kv("dl.rank", 0), kv("nv.dl.rank", 2)),
        ),
    ];
    for (n, (name, attrs)) in files.iter().enumerate() {
        let text: String = (0..3)
            .map(|it| line(attrs, n as u32 * 100 + it + 1, it, 400_000) + "\n")
            .collect();
        std::fs::write(dir.join(format!("{name}.otlp.jsonl")), text).expect("write");
    }
    let r = report_json(&[&dir], &[]);
    assert_eq!(r["input"]["skipped_lines"], 0, "{r}");
    let ranks: Vec<i64> = r["ranks"]
        .as_array()
        .expect("ranks")
        .iter()
        .map(|x| x["rank"].as_i64().expect("rank"))
        .collect();
    assert_eq!(ranks, [0, 1, 2], "{r}");
    assert_eq!(r["world_size"], 3, "{r}");
    assert_eq!(r["missing_ranks"], serde_json::json!([]), "{r}");
    assert_eq!(r["steps"]["count"], 3, "{r}");
    let rows = r["steps"]["rows"].as_array().expect("rows");
    assert!(rows.iter().all(|row| row["ranks"] == 3), "{r}");
}

/// Ranks that do not export spans write a per-step profile
/// (`*.profile.jsonl`, one `lensProfile` line per step): the report reads
/// it as the step and its phases, so the diagnosis sees every rank under
/// the default `single_rank` strategy. Here rank 2's data loading is 8 ms
/// slow in a synchronized 4-rank job; ranks 0-2 wrote profiles only.
#[test]
fn profiles_of_non_exporting_ranks_reach_the_diagnosis() {
    let dir = fresh_dir("profiles");
    let ms = 1_000_000u64;
    let t0 = 1_796_000_000_000_000_000u64;
    let mut files: Vec<String> = vec![String::new(); 4];
    let step_ns = 30 * ms;
    for it in 0..20u64 {
        let start = t0 + it * step_ns;
        for (rank, text) in files.iter_mut().enumerate() {
            let data = if rank == 2 { 11 * ms } else { 3 * ms };
            let fwd = 10 * ms;
            // everyone leaves the allreduce when rank 2 arrives
            let arrive = data + fwd;
            let leave = 11 * ms + fwd + 2 * ms;
            let phases = format!(
                r#"[{{"n":"data","o":0,"d":{data}}},{{"n":"forward_backward","o":{data},"d":{fwd}}},{{"n":"allreduce","o":{arrive},"d":{}}},{{"n":"optimizer","o":{leave},"d":{}}}]"#,
                leave - arrive,
                4 * ms
            );
            text.push_str(&format!(
                r#"{{"lensProfile":{{"v":1,"run":"r1","rank":{rank},"world":4,"host":"h","step":"train.step","id":"{:016x}","it":{it},"t":"{start}","d":{},"phases":{phases}}}}}"#,
                (rank as u64 + 1) << 32 | (it + 1),
                leave + 4 * ms
            ));
            text.push('\n');
        }
    }
    for (rank, text) in files.iter().enumerate() {
        std::fs::write(dir.join(format!("r1-rank{rank}.profile.jsonl")), text).expect("write");
    }
    let r = report_json(&[&dir], &[]);
    assert_eq!(r["input"]["skipped_lines"], 0, "{r}");
    assert_eq!(r["ranks"].as_array().map(Vec::len), Some(4), "{r}");
    let first = &r["suspects"][0];
    assert_eq!(first["rank"], 2, "{:#}", r["diagnosis"]);
    assert_eq!(first["phase"], "data", "{:#}", r["diagnosis"]);
    assert_eq!(
        r["diagnosis"]["wait_phases"],
        serde_json::json!(["allreduce"])
    );
}
