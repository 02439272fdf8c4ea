//! The HTML page rendered by headless Chromium: lanes with `data-rank`,
//! SVG metric panels, no external resources; a screenshot is written to
//! the test output directory.

mod support;

use support::{browser, chromium, fresh_dir, ok, synth};

#[test]
fn html_report_renders_lanes_and_panels_in_headless_chromium() {
    let dir = synth(
        "html-in",
        &[
            "--ranks",
            "6",
            "--steps",
            "40",
            "--straggler",
            "4:forward_backward:35",
            "--truncate",
            "2",
        ],
    );
    let d = dir.to_str().expect("UTF-8 path");
    let out = fresh_dir("html-out");
    let page = out.join("report.html");
    ok(&[
        "report",
        "--html",
        page.to_str().expect("path"),
        "--html-steps",
        "8",
        d,
    ]);
    let html = std::fs::read_to_string(&page).expect("page");
    // self-contained: nothing fetched from anywhere
    for bad in [
        "<script src",
        "<link ",
        "http://",
        "https://",
        "@import",
        "url(",
    ] {
        let hits: Vec<_> = html
            .match_indices(bad)
            .filter(|(i, _)| !html[*i..].starts_with("http://www.w3.org/2000/svg"))
            .collect();
        assert!(
            hits.is_empty(),
            "page references an external resource: {bad}"
        );
    }
    assert!(html.len() < 2 << 20, "page is {} bytes", html.len());

    let Some(bin) = chromium() else {
        if std::env::var_os("LENS_SKIP_BROWSER").is_some_and(|v| v == "1") {
            eprintln!("LENS_SKIP_BROWSER=1: chromium not installed, browser checks skipped");
            return;
        }
        panic!("chromium is not installed: run scripts/install-test-deps.sh (apt-get install chromium) or set LENS_SKIP_BROWSER=1");
    };
    let url = format!("file://{}", page.display());
    let dom = browser(&bin, &fresh_dir("html-profile-dom"), &["--dump-dom"], &url);
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&dom.stderr)
    );
    for rank in 0..6 {
        let lanes = dom_text
            .matches(&format!("data-rank=\"{rank}\" style=\"height:"))
            .count();
        assert_eq!(
            lanes, 3,
            "rank {rank}: one lane per timeline section (whole job, first steps, last steps)"
        );
    }
    assert!(
        dom_text.contains("class=\"lane straggler\" data-rank=\"4\""),
        "straggler lane not highlighted"
    );
    assert!(
        dom_text.contains("<svg class=\"metric\""),
        "no metric panel"
    );
    assert!(
        dom_text.contains("data-metric=\"nv.dl.loss\""),
        "no loss panel"
    );
    assert!(
        dom_text.contains("polyline class=\"straggler\" data-rank=\"4\""),
        "straggler line missing"
    );
    assert!(dom_text.contains("s trunc"), "truncated spans not marked");
    assert!(dom_text.contains("id=\"tip\""));
    // the rank x step heat map is drawn; in a synchronized run every
    // rank's step lasts the same, so the diagnosis carries the answer:
    // rank 2 hung, rank 4 was slow in forward_backward before that, and
    // the others' waits are drawn pale
    assert!(dom_text.contains("<svg class=\"heat\""), "no heat map");
    let diag = dom_text
        .split("id=\"diagnosis\"")
        .nth(1)
        .and_then(|d| d.split("</div>").next())
        .unwrap_or("");
    assert!(
        diag.contains("rank 2 hung in `forward_backward`"),
        "the verdict names the hang: {diag}"
    );
    assert!(
        diag.contains("data-rank=\"4\"") && diag.contains("<td>forward_backward</td>"),
        "rank 4's slow forward_backward is a suspect: {diag}"
    );
    assert!(dom_text.contains("s wait"), "waits not drawn distinctly");
    assert!(
        dom_text.contains("s culprit"),
        "the suspect's phase is not marked"
    );

    // the inline script works: zoom twice, hover a slow step
    let probe = r#"<script>try{const s=document.querySelector(".section");s.querySelector(".zin").click();s.querySelector(".zin").click();const el=document.querySelector(".lane[data-rank='4'] .s.culprit");el.dispatchEvent(new MouseEvent("mouseover",{bubbles:true}));document.body.setAttribute("data-check","zoom="+s.querySelector(".inner").style.width+";tip="+document.getElementById("tip").style.display+";"+document.getElementById("tip").textContent.split("\n")[0]);}catch(e){document.body.setAttribute("data-check","ERR "+e)}</script></body>"#;
    let probed = out.join("probe.html");
    std::fs::write(&probed, html.replace("</body>", probe)).expect("write probe page");
    let dom = browser(
        &bin,
        &fresh_dir("html-profile-probe"),
        &["--dump-dom"],
        &format!("file://{}", probed.display()),
    );
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    let check = dom_text
        .split("data-check=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or("no data-check");
    assert!(
        check.starts_with("zoom=400%;tip=block;forward_backward") && check.ends_with("(rank 4)"),
        "script probe: {check}"
    );

    let png = out.join("timeline.png");
    let shot = browser(
        &bin,
        &fresh_dir("html-profile-shot"),
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1400,900",
            "--hide-scrollbars",
        ],
        &url,
    );
    assert!(
        shot.status.success(),
        "screenshot failed: {}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let bytes = std::fs::read(&png).expect("screenshot written");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        bytes.len() > 10_000,
        "screenshot suspiciously small: {} bytes",
        bytes.len()
    );
    eprintln!("screenshot: {}", png.display());
}

#[test]
fn html_size_stays_bounded_on_a_long_run() {
    let dir = fresh_dir("html-big-in");
    let d = dir.to_str().expect("path");
    ok(&["synth", "--ranks", "16", "--steps", "1500", "--out", d]);
    let page = fresh_dir("html-big-out").join("big.html");
    ok(&["report", "--html", page.to_str().expect("path"), d]);
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(html.len() < 3 << 20, "page is {} bytes", html.len());
    assert!(html.contains("Showing the first 8 and the last 8 of up to 1500 steps per rank"));
}

#[test]
fn many_ranks_keep_fewer_steps_each() {
    let dir = synth(
        "html-wide-in",
        &[
            "--ranks",
            "600",
            "--steps",
            "12",
            "--straggler",
            "599:forward_backward:50",
        ],
    );
    let d = dir.to_str().expect("UTF-8 path");
    let page = fresh_dir("html-wide-out").join("wide.html");
    ok(&["report", "--html", page.to_str().expect("path"), d]);
    let html = std::fs::read_to_string(&page).expect("page");
    // 4096 step groups over 600 ranks: 6 steps per rank (3 + 3)
    assert!(
        html.contains("Showing the first 3 and the last 3 of up to 12 steps per rank"),
        "note missing"
    );
    assert!(html.contains("64 of 600 ranks drawn (stragglers first)"));
    assert!(html.contains("class=\"lane straggler\" data-rank=\"599\""));
    assert!(html.len() < 4 << 20, "page is {} bytes", html.len());
}
