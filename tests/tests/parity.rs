//! `docs/PARITY.md` against the code: every row's verdict is `same`,
//! `stricter (why)` or `different (why)`, a `same` row has equal Python and
//! Rust columns, and the Rust column of every checked table is what the code
//! says: the families and their presets (resolved), the configuration
//! defaults (`LensConfig::default()`) and the variables the code reads, the
//! semantic-convention constants and the metric kinds and units documented
//! beside them, the instrumentation scope, and the error messages (produced
//! for the table's sample inputs). A row the code lacks, or code the table
//! lacks, fails the test.

use lens::{megatron, nemo_gym, nemo_rl, LensConfig, SpanGroupFamily, SpanGroupSet};
use std::collections::{BTreeMap, BTreeSet};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// One table row: key, Python, Rust, verdict (backticks removed, trimmed).
#[derive(Debug, Clone)]
struct Row {
    key: String,
    python: String,
    rust: String,
    verdict: String,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn norm(cell: &str) -> String {
    cell.replace('`', "").replace("\\|", "|").trim().to_owned()
}

/// The rows of every table, by the `## ` heading they sit under.
fn tables() -> BTreeMap<String, Vec<Row>> {
    let text = read("docs/PARITY.md");
    let mut out: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    let mut section = String::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if let Some(h) = line.strip_prefix("## ") {
            section = h.trim().to_owned();
            continue;
        }
        let line = line.trim();
        if !line.starts_with('|') || line.starts_with("|---") {
            continue;
        }
        // a header row is followed by the separator row
        if lines
            .get(i + 1)
            .is_some_and(|n| n.trim().starts_with("|---"))
        {
            continue;
        }
        // split at `|` not preceded by a backslash
        let mut cells = Vec::new();
        let mut cur = String::new();
        let mut prev = ' ';
        for c in line[1..line.len() - 1].chars() {
            if c == '|' && prev != '\\' {
                cells.push(norm(&cur));
                cur.clear();
            } else {
                cur.push(c);
            }
            prev = c;
        }
        cells.push(norm(&cur));
        assert_eq!(cells.len(), 4, "{section}: 4 cells expected: {line}");
        out.entry(section.clone()).or_default().push(Row {
            key: cells[0].clone(),
            python: cells[1].clone(),
            rust: cells[2].clone(),
            verdict: cells[3].clone(),
        });
    }
    out
}

fn section<'a>(t: &'a BTreeMap<String, Vec<Row>>, name: &str) -> &'a [Row] {
    t.get(name)
        .unwrap_or_else(|| panic!("docs/PARITY.md has no `## {name}` table"))
}

fn by_key(rows: &[Row]) -> BTreeMap<&str, &Row> {
    let mut m = BTreeMap::new();
    for r in rows {
        assert!(
            m.insert(r.key.as_str(), r).is_none(),
            "row `{}` twice",
            r.key
        );
    }
    m
}

/// `want` (key → Rust value from the code) and the table agree exactly.
fn check_exact(name: &str, rows: &[Row], want: &BTreeMap<String, String>) {
    let have = by_key(rows);
    let have_keys: BTreeSet<&str> = have.keys().copied().collect();
    let want_keys: BTreeSet<&str> = want.keys().map(String::as_str).collect();
    assert_eq!(have_keys, want_keys, "{name}: rows ≠ the code's entries");
    for (k, v) in want {
        assert_eq!(&have[k.as_str()].rust, v, "{name}: Rust column of `{k}`");
    }
}

#[test]
fn every_verdict_is_well_formed_and_same_means_equal() {
    let t = tables();
    assert!(t.values().map(Vec::len).sum::<usize>() > 100, "{t:?}");
    for (name, rows) in &t {
        for r in rows {
            let v = &r.verdict;
            let ok = v == "same"
                || (v.starts_with("stricter (") && v.ends_with(')') && v.len() > 12)
                || (v.starts_with("different (") && v.ends_with(')') && v.len() > 13);
            assert!(ok, "{name}: `{}` has verdict `{v}`", r.key);
            if v == "same" {
                assert_eq!(r.python, r.rust, "{name}: `{}` is marked same", r.key);
            }
        }
    }
}

fn families() -> [&'static SpanGroupFamily; 4] {
    [
        &lens::groups::FAMILY,
        &megatron::FAMILY,
        &nemo_rl::FAMILY,
        &nemo_gym::FAMILY,
    ]
}

#[test]
fn presets_and_groups_are_the_code_s() {
    let t = tables();
    let mut presets = BTreeMap::new();
    let mut groups = BTreeMap::new();
    for fam in families() {
        let with: &[&'static SpanGroupFamily] = if fam.name() == "base" { &[] } else { &[fam] };
        for p in fam.presets() {
            let set = SpanGroupSet::resolve(p.name(), with).unwrap();
            presets.insert(
                format!("{} {}", fam.name(), p.name()),
                set.names().join(", "),
            );
        }
        let own: Vec<&str> = fam.groups().iter().map(|g| g.name()).collect();
        groups.insert(fam.name().to_owned(), own.join(", "));
    }
    check_exact(
        "Span-group presets",
        section(&t, "Span-group presets"),
        &presets,
    );
    check_exact("Span groups", section(&t, "Span groups"), &groups);
}

/// `NEMO_LENS_<KEY>` variables the code reads: the keys `from_lookup` asks
/// for, and every `"NEMO_LENS_…"` literal in the runtime.
fn variables_read() -> BTreeSet<String> {
    let mut vars = BTreeSet::new();
    let env = read("lens-runtime/src/config/env.rs");
    for call in [
        "env.bool(\"",
        "env.string(\"",
        "env.opt(\"",
        "env.get(\"",
        "env.plain(\"",
    ] {
        for (i, _) in env.match_indices(call) {
            let rest = &env[i + call.len()..];
            let key = &rest[..rest.find('"').unwrap()];
            // `plain` reads the name as it is (OTEL_*, WANDB_*); the others
            // read it under lens's prefixes (`OTEL_CONTEXT` is lens's
            // NEMO_LENS_OTEL_CONTEXT)
            if call == "env.plain(\"" {
                vars.insert(key.to_owned());
            } else {
                vars.insert(format!("NEMO_LENS_{key}"));
            }
        }
    }
    let mut stack = vec![std::path::PathBuf::from(format!("{ROOT}/lens-runtime/src"))];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, _) in text.match_indices("\"NEMO_LENS_") {
                    let rest = &text[i + 1..];
                    let end = rest
                        .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
                        .unwrap();
                    if rest[end..].starts_with('"') && end > "NEMO_LENS_".len() {
                        vars.insert(rest[..end].to_owned());
                    }
                }
            }
        }
    }
    vars
}

/// The default of a configuration variable, rendered as the table writes
/// it; `None` for variables that are not `LensConfig` fields.
fn config_default(var: &str) -> Option<String> {
    let c = LensConfig::default();
    let unset = |o: &Option<String>| o.clone().unwrap_or_else(|| "unset".to_owned());
    Some(match var {
        "NEMO_LENS_ENABLED" => c.enabled.to_string(),
        "OTEL_SERVICE_NAME" => c.service_name,
        "NEMO_LENS_EXPORT_STRATEGY" => c.export_strategy,
        "NEMO_LENS_EXPORT_RANK" => c.export_rank.to_string(),
        "NEMO_LENS_EXPORT_SAMPLE_RATE" => format!("{:?}", c.export_sample_rate),
        "NEMO_LENS_SAMPLER_ENABLED" => c.sampler_enabled.to_string(),
        "NEMO_LENS_TRACES_ENABLED" => c.traces_enabled.to_string(),
        "NEMO_LENS_METRICS_ENABLED" => c.metrics_enabled.to_string(),
        "NEMO_LENS_LOGS_ENABLED" => c.logs_enabled.to_string(),
        "NEMO_LENS_SPAN_GROUPS" => c.span_groups,
        "NEMO_LENS_EXPORTER" => c.exporter.as_str().to_owned(),
        "NEMO_LENS_RUN_ID" => unset(&c.run_id),
        "NEMO_LENS_USER_ID" => unset(&c.user),
        "WANDB_ENTITY" => unset(&c.wandb_entity),
        "WANDB_PROJECT" => unset(&c.wandb_project),
        "NEMO_LENS_FILE_PATH" => unset(&c.file_path),
        "NEMO_LENS_PERFETTO_MAX_BYTES" => c.perfetto_max_bytes.to_string(),
        "NEMO_LENS_QUIET" => c.quiet.to_string(),
        "NEMO_LENS_FLUSH_ON_SIGNAL" => c.flush_on_signal.to_string(),
        "NEMO_LENS_GPU_METRICS" => c.gpu_metrics.to_string(),
        "NEMO_LENS_FINE_BUCKETS" => c.fine_buckets.to_string(),
        "NEMO_LENS_REDACT_KEYS" => {
            if c.redact_keys.is_empty() {
                "none".to_owned()
            } else {
                c.redact_keys.join(",")
            }
        }
        _ => return None,
    })
}

#[test]
fn environment_variables_and_defaults_are_the_code_s() {
    let t = tables();
    let rows = by_key(section(&t, "Environment variables"));
    let read = variables_read();
    for var in &read {
        assert!(
            rows.contains_key(var.as_str()),
            "no row for `{var}`, which the code reads"
        );
    }
    for (key, row) in &rows {
        if key.starts_with("NEMO_LENS_") {
            assert!(
                read.contains(*key),
                "`{key}` has a row but the code does not read it"
            );
        }
        if let Some(default) = config_default(key) {
            assert_eq!(row.rust, default, "default of `{key}`");
        }
    }
    // every LensConfig default is in the table
    for var in &read {
        if config_default(var).is_some() {
            assert!(rows.contains_key(var.as_str()));
        }
    }
}

/// `(NAME, value, doc)` of every `pub const NAME: &str = "value";` in
/// `semconv.rs`.
fn semconv() -> Vec<(String, String, String)> {
    let text = read("lens-runtime/src/api/semconv.rs");
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut doc = String::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim();
        if let Some(d) = l.strip_prefix("///") {
            doc.push_str(d.trim());
            doc.push(' ');
        } else if let Some(rest) = l.strip_prefix("pub const ") {
            if let Some((name, ty)) = rest.split_once(": &str =") {
                let mut value = ty.trim().to_owned();
                if value.is_empty() {
                    i += 1;
                    value = lines[i].trim().to_owned();
                }
                let value = value.trim_end_matches(';').trim_matches('"').to_owned();
                out.push((name.trim().to_owned(), value, doc.clone()));
            }
            doc.clear();
        } else if !l.starts_with("#[") {
            doc.clear();
        }
        i += 1;
    }
    out
}

#[test]
fn attribute_keys_are_the_semconv_constants() {
    let t = tables();
    let keys: BTreeMap<String, String> = semconv()
        .into_iter()
        .filter(|(n, v, _)| {
            !n.starts_with("METRIC_")
                && v.contains('.')
                && n != "SEMCONV_VERSION"
                && n != "SCHEMA_URL"
        })
        .map(|(_, v, _)| (v.clone(), v))
        .collect();
    assert!(keys.contains_key("dl.tensor_parallel.size"));
    let rows = section(&t, "Attribute keys");
    // a Python-only key (Rust column `—`) is allowed beside the code's
    let ours: Vec<Row> = rows.iter().filter(|r| r.rust != "—").cloned().collect();
    check_exact("Attribute keys", &ours, &keys);
}

/// The `slurm.*` variable rows of the behaviour table: their Rust column is
/// `lens::semconv::SLURM_JOB_SOURCES` ("A, else B"), and every source has
/// its row.
#[test]
fn slurm_variables_are_the_code_s() {
    let t = tables();
    let rows = by_key(section(&t, "Wire formats and behaviour"));
    for (attr, vars) in lens::semconv::SLURM_JOB_SOURCES {
        let key = format!("{attr} variable");
        let row = rows
            .get(key.as_str())
            .unwrap_or_else(|| panic!("no row `{key}`"));
        assert_eq!(row.rust, vars.join(", else "), "Rust column of `{key}`");
        for v in row.python.split(", else ") {
            assert!(
                vars.contains(&v),
                "`{key}`: lens also reads {v}, which the Python library reads"
            );
        }
    }
}

#[test]
fn metrics_are_the_semconv_constants_with_their_kind_and_unit() {
    let t = tables();
    let mut want = BTreeMap::new();
    for (name, value, doc) in semconv() {
        if !name.starts_with("METRIC_") {
            continue;
        }
        let head = format!("Metric `{value}`: ");
        let rest = doc
            .split_once(&head)
            .unwrap_or_else(|| panic!("{name}: doc does not start with {head:?}: {doc}"))
            .1;
        let kind = rest.split(',').next().unwrap().trim();
        let after = rest.split_once(',').map_or("", |(_, r)| r.trim());
        let unit = if after.starts_with("no unit") {
            "none"
        } else {
            rest.split('`').nth(1).unwrap()
        };
        want.insert(value.clone(), format!("{kind}, {unit}"));
    }
    let rows = section(&t, "Metrics");
    let ours: Vec<Row> = rows.iter().filter(|r| r.rust != "—").cloned().collect();
    check_exact("Metrics", &ours, &want);
}

#[test]
fn scope_and_carriers_are_the_code_s() {
    let t = tables();
    let rows = by_key(section(&t, "Instrumentation scope"));
    assert_eq!(rows["spans and metrics"].rust, lens::SCOPE_NAME);
}

#[test]
fn error_messages_are_the_code_s() {
    let t = tables();
    let rows = section(&t, "Error messages");
    assert!(rows.len() >= 5);
    for r in rows {
        let (var, value) = r
            .key
            .split_once('=')
            .unwrap_or_else(|| panic!("error row key is VARIABLE=value: {}", r.key));
        let err = LensConfig::from_lookup(&["NEMO_LENS_"], &[], |v| {
            (v == var).then(|| value.to_owned())
        })
        .expect_err(&r.key);
        assert_eq!(r.rust, norm(&err.to_string()), "message for {}", r.key);
    }
}
