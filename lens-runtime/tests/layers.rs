//! The runtime's module graph: layers only depend downward, and no module
//! depends on itself through others.
//!
//! Layers, lowest first: `diag`, `vars`, `engine`, `api`, `config`,
//! `host`, `sdk`, `bridge`, `setup`.
//! A module is a file under `src/` (`src/sdk/export/batch.rs` is
//! `sdk::export::batch`, `src/config/mod.rs` is `config`); `lib.rs` and
//! test-only helpers are not part of the graph. An edge is a `crate::…`
//! path, a `super::…` path, or a use of a child module by name, outside
//! comments and `#[cfg(test)] mod tests` / `mod examples`.
//!
//! The wall between `api` and the span engine: no file of `src/api/` but
//! its one socket, `api/engine_socket.rs`, names `opentelemetry_sdk` or
//! the engine (`crate::engine`), outside comments and unit tests.

mod common;

use common::files;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const LAYERS: &[&str] = &[
    "diag", "vars", "engine", "api", "config", "host", "sdk", "bridge", "setup",
];
/// The one file of `src/api/` that may name the engine and the SDK.
const SOCKET: &str = "api/engine_socket.rs";
/// Files that are not part of the graph.
const EXEMPT: &[&str] = &["lib.rs", "metrics_test_support.rs", "test_rng.rs"];

fn layer(module: &str) -> usize {
    let top = module.split("::").next().unwrap_or(module);
    LAYERS
        .iter()
        .position(|l| *l == top)
        .unwrap_or_else(|| panic!("module {module} is in no layer; add its folder to LAYERS"))
}

/// The file's code without comments and without its unit tests.
fn code(text: &str) -> String {
    // unit tests and examples kept as unit tests are not part of the graph:
    // an inline module of them is cut from there to the end (it comes
    // last); a `mod tests;` line (at the top) names a file of its own,
    // which is a module of the graph
    let test_only = ["#[cfg(test)]\nmod tests {", "#[cfg(test)]\nmod examples {"];
    let text = match test_only.iter().filter_map(|m| text.find(m)).min() {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| match l.find(" // ") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Identifier paths following `prefix` (`crate::`, `super::`, `name::`).
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        let after = &rest[i + prefix.len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(after.len());
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push(after[..end].trim_end_matches(':'));
        }
        rest = &after[end..];
    }
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut modules = BTreeMap::new();
    for f in &all {
        let rel = f
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if EXEMPT.contains(&rel.as_str()) {
            continue;
        }
        let name = rel
            .trim_end_matches(".rs")
            .trim_end_matches("/mod")
            .replace('/', "::");
        modules.insert(name, std::fs::read_to_string(f).unwrap());
    }
    let known: Vec<String> = modules.keys().cloned().collect();
    // the longest known module that `path` names
    let resolve = |path: &str| -> Option<String> {
        known
            .iter()
            .filter(|m| path == m.as_str() || path.starts_with(&format!("{m}::")))
            .max_by_key(|m| m.len())
            .cloned()
    };
    let mut edges = BTreeMap::new();
    for (name, text) in &modules {
        let code = code(text);
        let mut deps = BTreeSet::new();
        for p in paths_after(&code, "crate::") {
            deps.extend(resolve(p));
        }
        // `super::` from a/b.rs is `a`; from a/b/mod.rs (module a::b) too
        let parent = name.rsplit_once("::").map_or("", |(p, _)| p);
        for p in paths_after(&code, "super::") {
            let full = if parent.is_empty() {
                p.to_owned()
            } else {
                format!("{parent}::{p}")
            };
            deps.extend(resolve(&full).or_else(|| (!parent.is_empty()).then(|| parent.to_owned())));
        }
        // children used by name from their parent
        for child in known
            .iter()
            .filter(|k| k.rsplit_once("::").is_some_and(|(p, _)| p == name))
        {
            let short = child.rsplit_once("::").map_or(child.as_str(), |(_, c)| c);
            let used = !paths_after(&code, &format!("{short}::")).is_empty()
                || code.contains(&format!("use {short};"));
            if used {
                deps.insert(child.clone());
            }
        }
        deps.remove(name);
        edges.insert(name.clone(), deps);
    }
    edges
}

#[test]
fn layers_only_depend_downward() {
    let mut upward = Vec::new();
    for (m, deps) in graph() {
        for d in deps {
            if layer(&d) > layer(&m) {
                upward.push(format!("{m} -> {d}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "modules that reach upward:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_module_graph_has_no_cycle() {
    let g = graph();
    let mut cycles = BTreeSet::new();
    for start in g.keys() {
        // depth-first over simple paths from `start`
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        while let Some((node, path)) = stack.pop() {
            for d in g.get(&node).into_iter().flatten() {
                if d == start {
                    let mut c = path.clone();
                    c.sort();
                    cycles.insert(c.join(" <-> "));
                } else if !path.contains(d) {
                    let mut p = path.clone();
                    p.push(d.clone());
                    stack.push((d.clone(), p));
                }
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles:\n{}",
        cycles.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Whether `rel` (a path under `src/`) is a file of unit tests only: a
/// `tests.rs`, or a file under a `tests/` folder (each is declared
/// `#[cfg(test)] mod tests;` by its parent).
fn is_test_file(rel: &str) -> bool {
    rel.ends_with("/tests.rs") || rel.contains("/tests/")
}

/// Whether `code` names `name` as a whole path segment (not `my_name`,
/// not `name_socket`).
fn names(code: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices(name).any(|(i, _)| {
        !code[..i].chars().next_back().is_some_and(ident)
            && !code[i + name.len()..].chars().next().is_some_and(ident)
    })
}

/// What of the engine and the SDK each file of `api/` names, but for its
/// socket: `file: name` for each, in order.
fn api_reaching_past_the_socket(src: &Path) -> Vec<String> {
    let mut all = Vec::new();
    files(&src.join("api"), &mut all);
    all.sort();
    let mut found = Vec::new();
    for f in &all {
        let rel = f
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel == SOCKET || is_test_file(&rel) {
            continue;
        }
        let code = code(&std::fs::read_to_string(f).unwrap());
        for name in ["opentelemetry_sdk", "crate::engine"] {
            if names(&code, name) {
                found.push(format!("src/{rel}: {name}"));
            }
        }
    }
    found
}

#[test]
fn api_reaches_the_engine_and_the_sdk_only_through_its_socket() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    assert!(src.join(SOCKET).is_file(), "the socket {SOCKET} is gone");
    let found = api_reaching_past_the_socket(&src);
    assert!(
        found.is_empty(),
        "files of api/ that name the engine or the OpenTelemetry SDK past its one socket ({SOCKET}; take what they need through it):\n{}",
        found.join("\n")
    );
}
