//! The training view of `lens report`: a step span's numeric attributes
//! (loss, tokens/s) and the metrics per rank with their point counts, in
//! text, JSON and HTML; the whole job in the HTML timeline (model init
//! before the first step, evaluation and a checkpoint after steps), in
//! colours that are not the alarm red.

mod support;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::{browser, chromium, fresh_dir, ok, report_json};

/// Job start (Unix ns).
const T0: u64 = 1_796_000_000_000_000_000;
const MS: u64 = 1_000_000;
/// Steps per rank.
const STEPS: u64 = 40;

fn loss(it: u64) -> f64 {
    10.0 * (-(it as f64) / 8.0).exp() + 0.7
}

fn resource(rank: u64) -> Value {
    json!({"attributes": [
        {"key": "service.name", "value": {"stringValue": "train"}},
        {"key": "nemo.run.id", "value": {"stringValue": "tv-run"}},
        {"key": "host.name", "value": {"stringValue": "node0"}},
        {"key": "nv.dl.rank", "value": {"intValue": rank.to_string()}},
        {"key": "nv.dl.world_size", "value": {"intValue": "2"}}
    ]})
}

fn span(id: u64, parent: u64, name: &str, start: u64, end: u64, attrs: Value) -> Value {
    let mut s = json!({
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": format!("{id:016x}"),
        "name": name,
        "kind": 1,
        "startTimeUnixNano": start.to_string(),
        "endTimeUnixNano": end.to_string(),
        "attributes": attrs,
        "status": {"code": 0}
    });
    if parent != 0 {
        s["parentSpanId"] = json!(format!("{parent:016x}"));
    }
    s
}

/// One rank of a short training job, as a trainer exports it (spans in end
/// order): model init (2 s) before step 0, 40 steps of 100 ms whose step
/// span carries `loss` and `tokens_per_s`, an evaluation after step 19, a
/// checkpoint after the last step, and the loss metric exported twice.
fn write_rank(dir: &Path, rank: u64) -> PathBuf {
    let path = dir.join(format!("tv-rank{rank}.otlp.jsonl"));
    let mut f = std::fs::File::create(&path).expect("fixture file");
    let base = (rank + 1) << 32;
    let job = base | 0xffff;
    let mut line = |spans: Vec<Value>| {
        let v = json!({"resourceSpans": [{"resource": resource(rank),
            "scopeSpans": [{"scope": {"name": "trainer"}, "spans": spans}]}]});
        writeln!(f, "{v}").expect("write fixture");
    };
    line(vec![span(
        base | 0xfff0,
        job,
        "model_init",
        T0 + 10 * MS,
        T0 + 2_000 * MS,
        json!([]),
    )]);
    let mut t = T0 + 2_100 * MS;
    let mut metric_at = Vec::new();
    for it in 0..STEPS {
        let id = base | (it << 4);
        let fb = span(
            id | 1,
            id,
            "forward_backward",
            t + MS,
            t + 90 * MS,
            json!([]),
        );
        let step = span(
            id,
            job,
            "train.step",
            t,
            t + 100 * MS,
            json!([
                {"key": "dl.iteration", "value": {"intValue": it.to_string()}},
                {"key": "thread.id", "value": {"intValue": "7"}},
                {"key": "loss", "value": {"doubleValue": loss(it)}},
                {"key": "tokens_per_s", "value": {"intValue": (5000 + 10 * it).to_string()}}
            ]),
        );
        line(vec![fb, step]);
        t += 100 * MS;
        if it == 19 {
            line(vec![span(
                base | 0xfff1,
                job,
                "evaluate",
                t,
                t + 500 * MS,
                json!([]),
            )]);
            t += 500 * MS;
        }
        if it == 19 || it == STEPS - 1 {
            metric_at.push((t, loss(it)));
        }
    }
    line(vec![span(
        base | 0xfff2,
        job,
        "checkpoint.save",
        t,
        t + 800 * MS,
        json!([]),
    )]);
    let end = t + 800 * MS;
    line(vec![span(job, 0, "pretrain.job", T0, end, json!([]))]);
    for (at, v) in metric_at {
        let m = json!({"resourceMetrics": [{"resource": resource(rank), "scopeMetrics": [{
        "scope": {"name": "trainer"},
        "metrics": [{"name": "nv.dl.loss", "gauge": {"dataPoints": [
            {"timeUnixNano": at.to_string(), "asDouble": v}
        ]}}]}]}]});
        writeln!(f, "{m}").expect("write fixture");
    }
    path
}

fn fixture(name: &str) -> PathBuf {
    let dir = fresh_dir(name);
    write_rank(&dir, 0);
    write_rank(&dir, 1);
    dir
}

#[test]
fn text_shows_each_series_with_its_point_count() {
    let dir = fixture("tv-text");
    let text = ok(&["report", dir.to_str().expect("path")]);
    let steps = text
        .split("\nStep attributes")
        .nth(1)
        .unwrap_or_else(|| panic!("no step attribute section:\n{text}"));
    let steps = steps.split("\nMetrics").next().unwrap_or("");
    let loss_lines: Vec<&str> = steps
        .split("\n  loss\n")
        .nth(1)
        .expect("a loss series")
        .lines()
        .take(2)
        .collect();
    for (rank, l) in loss_lines.iter().enumerate() {
        assert!(l.contains(&format!("rank {rank}")), "{l}");
        assert!(
            l.contains("10.7000 → 0.7764"),
            "first → last by iteration: {l}"
        );
        assert!(l.contains("40 points"), "point count: {l}");
        // a falling loss: the sparkline starts high and ends low
        let spark: Vec<char> = l.chars().filter(|c| ('▁'..='█').contains(c)).collect();
        assert!(spark.len() >= 8, "sparkline: {l}");
        assert_eq!((spark[0], spark[spark.len() - 1]), ('█', '▁'), "{l}");
    }
    assert!(steps.contains("tokens_per_s"), "{steps}");
    assert!(
        !steps.contains("thread.id") && !steps.contains("dl.iteration"),
        "bookkeeping attributes are not series: {steps}"
    );
    let metrics = text.split("\nMetrics").nth(1).expect("metrics section");
    assert!(metrics.contains("nv.dl.loss"), "{metrics}");
    assert!(
        metrics.contains("2 points"),
        "the metric's 2 points are said: {metrics}"
    );
    assert!(
        metrics.contains("Few points: metrics are exported every OTEL_METRIC_EXPORT_INTERVAL"),
        "{metrics}"
    );
}

#[test]
fn json_carries_the_series_and_the_metric_points_on_the_step_axis() {
    let dir = fixture("tv-json");
    let r = report_json(&[&dir], &[]);
    let rows = r["step_series"].as_array().expect("step_series");
    let loss0 = rows
        .iter()
        .find(|s| s["name"] == "loss" && s["rank"] == 0)
        .expect("loss of rank 0");
    assert_eq!(loss0["count"], 40);
    assert_eq!(loss0["first"], json!(loss(0)));
    let pts = loss0["points"].as_array().expect("points");
    assert_eq!(pts.len(), 40);
    assert_eq!(pts[0], json!([0, loss(0)]));
    assert_eq!(pts[39][0], 39);
    assert!(rows
        .iter()
        .any(|s| s["name"] == "tokens_per_s" && s["rank"] == 1));
    assert!(!rows.iter().any(|s| s["name"] == "thread.id"));
    assert_eq!(r["step_axis"], json!([0.0, 40.0]));
    let m = r["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .find(|m| m["name"] == "nv.dl.loss" && m["rank"] == 0)
        .expect("loss metric");
    assert_eq!(m["count"], 2);
    assert_eq!(m["first"], json!(loss(19)));
    assert_eq!(m["last"], json!(loss(39)));
    assert_eq!(m["points"].as_array().expect("points").len(), 2);
    // exported right after steps 19 and 39: at the end of those steps
    let at: Vec<f64> = m["at_step"]
        .as_array()
        .expect("at_step")
        .iter()
        .map(|v| v.as_f64().expect("on the step axis"))
        .collect();
    assert_eq!(at.len(), 2);
    assert!((19.0..=20.0).contains(&at[0]), "{at:?}");
    assert!((39.9..=40.0).contains(&at[1]), "{at:?}");
    // --rank selects the series too
    let one = report_json(&[&dir], &["--rank", "1"]);
    let ranks: Vec<&Value> = one["step_series"]
        .as_array()
        .expect("step_series")
        .iter()
        .map(|s| &s["rank"])
        .collect();
    assert!(
        !ranks.is_empty() && ranks.iter().all(|r| **r == 1),
        "{ranks:?}"
    );
}

/// The left edge (percent) of the first span named `name` in `html`'s
/// part after `from`.
fn left_of(html: &str, from: &str, name: &str) -> Option<f64> {
    let part = html.split(from).nth(1)?;
    let at = part.find(&format!("data-n=\"{name}\""))?;
    let before = &part[..at];
    let style = &before[before.rfind("style=\"left:")? + 12..];
    style.split('%').next()?.parse().ok()
}

#[test]
fn html_draws_the_whole_job_and_a_chart_per_series() {
    let dir = fixture("tv-html");
    let out = fresh_dir("tv-html-out");
    let page = out.join("training.html");
    ok(&[
        "report",
        "--html",
        page.to_str().expect("path"),
        "--html-steps",
        "6",
        dir.to_str().expect("path"),
    ]);
    let html = std::fs::read_to_string(&page).expect("page");
    let whole = html
        .split("<b>Whole job</b>")
        .nth(1)
        .and_then(|w| w.split("class=\"section card\"").next())
        .expect("a whole-job section");
    // model init before step 0, evaluation between steps, the checkpoint
    // after the last step: all in the whole-job view, in that order
    let at = |name: &str| {
        left_of(&html, "<b>Whole job</b>", name).unwrap_or_else(|| panic!("{name} not drawn"))
    };
    let (init, step0, eval, ckpt) = (
        at("model_init"),
        at("train.step"),
        at("evaluate"),
        at("checkpoint.save"),
    );
    assert!(init < 1.0 && step0 > 20.0, "init {init}%, step 0 {step0}%");
    assert!(
        step0 < eval && eval < ckpt && ckpt > 80.0,
        "{step0} {eval} {ckpt}"
    );
    assert!(
        whole.contains("class=\"region\""),
        "the steps region is marked"
    );
    assert!(
        whole.contains("steps 0–39 (40 step spans)"),
        "region names its steps"
    );
    assert!(whole.contains(">first steps</button>") && whole.contains(">last steps</button>"));
    // evaluation and checkpoint have their own colours, not the alarm red
    for (class, name) in [
        ("k-eval", "evaluate"),
        ("k-ckpt", "checkpoint.save"),
        ("k-init", "model_init"),
    ] {
        let tag = whole
            .split("<div class=\"s")
            .find(|t| t.contains(&format!("data-n=\"{name}\"")))
            .unwrap_or_else(|| panic!("{name} span"));
        assert!(tag.starts_with(&format!(" {class}")), "{name}: {tag}");
        let color = tag
            .split("background:")
            .nth(1)
            .and_then(|c| c.split('"').next());
        assert!(
            color.is_some_and(|c| !["#d62728", "#e15759"].contains(&c)),
            "{name}: {color:?}"
        );
    }
    // the detail sections still start at the first step: no model_init there
    let detail = html
        .split("<b>First steps</b>")
        .nth(1)
        .expect("first steps section");
    assert!(!detail
        .split("<h2>")
        .next()
        .unwrap_or("")
        .contains("data-n=\"model_init\""));
    // one chart per series on the step axis, with its point count
    assert!(html.contains("data-metric=\"loss\""), "no loss chart");
    assert!(html.contains("data-metric=\"tokens_per_s\""));
    assert!(html.contains("step attribute · 40 points per rank"));
    assert!(html.contains("data-metric=\"nv.dl.loss\""));
    assert!(html.contains("metric · 2 points per rank"));

    let Some(bin) = chromium() else {
        if std::env::var_os("LENS_SKIP_BROWSER").is_some_and(|v| v == "1") {
            eprintln!("LENS_SKIP_BROWSER=1: chromium not installed, browser checks skipped");
            return;
        }
        panic!("chromium is not installed: run scripts/install-test-deps.sh (apt-get install chromium) or set LENS_SKIP_BROWSER=1");
    };
    // the "last steps" button zooms the whole-job view onto the last steps
    let probe = r#"<script>try{const s=document.querySelector(".whole");const b=[...s.querySelectorAll(".zfit")].find(x=>x.textContent==="last steps");b.click();const sc=s.querySelector(".scroll"),inn=s.querySelector(".inner");const [a,e]=b.dataset.fit.split(",").map(Number);const l=sc.scrollLeft/inn.offsetWidth*100,r=(sc.scrollLeft+sc.clientWidth)/inn.offsetWidth*100;document.body.setAttribute("data-check",(l<=a&&r>=e&&(r-l)<3*(e-a))?"ok":"view "+l+"-"+r+" target "+a+"-"+e);}catch(x){document.body.setAttribute("data-check","ERR "+x)}</script></body>"#;
    let probed = out.join("probe.html");
    std::fs::write(&probed, html.replace("</body>", probe)).expect("probe page");
    let dom = browser(
        &bin,
        &fresh_dir("tv-profile-probe"),
        &["--dump-dom", "--window-size=1400,900"],
        &format!("file://{}", probed.display()),
    );
    let dom = String::from_utf8_lossy(&dom.stdout);
    let check = dom
        .split("data-check=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or("no data-check");
    assert_eq!(check, "ok", "zoom onto the last steps");
    let png = out.join("training.png");
    let shot = browser(
        &bin,
        &fresh_dir("tv-profile-shot"),
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1400,1800",
            "--hide-scrollbars",
        ],
        &format!("file://{}", page.display()),
    );
    assert!(shot.status.success(), "screenshot failed");
    let bytes = std::fs::read(&png).expect("screenshot written");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    eprintln!("screenshot: {}", png.display());
}
