//! No external crate's type leaks through the public API except those lens
//! means to expose. `cargo-check-external-types` needs nightly rustdoc JSON,
//! so this walks the sources instead: every `pub` item left in the runtime is
//! public API (`unreachable_pub` is denied by clippy, so anything else is
//! `pub(crate)`), as are the facade's own items. Each type path in their
//! signatures, fields, constants and re-exports is resolved through the
//! file's `use` declarations and checked against the allow-list.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// Crates whose types may appear anywhere in the public API.
const ALLOWED_CRATES: &[(&str, &str)] = &[
    ("std", "the standard library"),
    ("core", "the standard library"),
    ("alloc", "the standard library"),
    (
        "opentelemetry",
        "the OpenTelemetry API, exposed on purpose as `lens::otel`",
    ),
    ("log", "re-exported as `lens::logs::log` for the log bridge"),
    (
        "tracing",
        "re-exported as `lens::tracing::tracing` for the two bridges",
    ),
    (
        "tracing_subscriber",
        "re-exported as `lens::tracing::tracing_subscriber`: `TracingLayer` and `LogBridgeLayer` implement its `Layer`",
    ),
    ("http", "feature `http`: `HeaderMap` carriers"),
    ("mpi", "feature `mpi`: the MPI collective"),
    (
        "inventory",
        "only in the doc-hidden `__private`: the link-time family registry `define_span_group!` expands to",
    ),
];

/// OpenTelemetry SDK items the public API names (the SDK is `lens::otel_sdk`
/// with the `sdk` feature; these are the points where a program plugs its
/// own SDK pieces in).
const ALLOWED_SDK_ITEMS: &[&str] = &[
    "opentelemetry_sdk",
    "opentelemetry_sdk::trace::SdkTracerProvider",
    "opentelemetry_sdk::trace::SpanExporter",
    "opentelemetry_sdk::trace::Sampler",
    "opentelemetry_sdk::metrics::exporter::PushMetricExporter",
    // `TelemetryBuilder::with_span_processor`, `with_metric_reader`, `with_view`
    "opentelemetry_sdk::trace::SpanProcessor",
    "opentelemetry_sdk::metrics::PeriodicReader",
    "opentelemetry_sdk::metrics::Instrument",
    "opentelemetry_sdk::metrics::Stream",
    "opentelemetry_sdk::logs::SdkLoggerProvider",
];

/// Names that are not crates: prelude types, primitives and the like.
fn is_local_or_prelude(first: &str) -> bool {
    matches!(
        first,
        "crate"
            | "self"
            | "super"
            | "Self"
            | "Option"
            | "Some"
            | "None"
            | "Result"
            | "Ok"
            | "Err"
            | "Vec"
            | "String"
            | "Box"
            | "ToOwned"
            | "ToString"
            | "Fn"
            | "FnMut"
            | "FnOnce"
            | "Send"
            | "Sync"
            | "Sized"
            | "Clone"
            | "Copy"
            | "Default"
            | "Iterator"
            | "IntoIterator"
            | "AsRef"
            | "Into"
            | "From"
            | "Drop"
            | "PartialEq"
            | "Eq"
    ) || first.chars().next().is_some_and(|c| c.is_lowercase())
        && matches!(
            first,
            "str"
                | "bool"
                | "char"
                | "u8"
                | "u16"
                | "u32"
                | "u64"
                | "u128"
                | "usize"
                | "i8"
                | "i16"
                | "i32"
                | "i64"
                | "i128"
                | "isize"
                | "f32"
                | "f64"
        )
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") && p.file_name().unwrap() != "tests.rs" {
            out.push(p);
        }
    }
}

/// `use` declarations of a file (or inline module): name → full path.
fn uses(items: &[syn::Item]) -> BTreeMap<String, String> {
    fn walk(tree: &syn::UseTree, prefix: &str, out: &mut BTreeMap<String, String>) {
        let join = |s: &str| {
            if prefix.is_empty() {
                s.to_owned()
            } else {
                format!("{prefix}::{s}")
            }
        };
        match tree {
            syn::UseTree::Path(p) => walk(&p.tree, &join(&p.ident.to_string()), out),
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let full = if name == "self" {
                    prefix.to_owned()
                } else {
                    join(&name)
                };
                let key = if name == "self" {
                    prefix.rsplit("::").next().unwrap_or(prefix).to_owned()
                } else {
                    name
                };
                out.insert(key, full);
            }
            syn::UseTree::Rename(r) => {
                out.insert(r.rename.to_string(), join(&r.ident.to_string()));
            }
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| walk(t, prefix, out)),
            syn::UseTree::Glob(_) => {}
        }
    }
    let mut out = BTreeMap::new();
    for item in items {
        if let syn::Item::Use(u) = item {
            let lead = if u.leading_colon.is_some() { "::" } else { "" };
            walk(&u.tree, lead.trim_end_matches("::"), &mut out);
        }
    }
    out
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string() == "test")
    })
}

fn is_pub(vis: &syn::Visibility) -> bool {
    matches!(vis, syn::Visibility::Public(_))
}

/// Collects the type paths of public signatures, resolved to full paths.
struct Collect<'a> {
    external: &'a BTreeSet<String>,
    uses: &'a BTreeMap<String, String>,
    generics: BTreeSet<String>,
    found: &'a mut BTreeSet<(String, String)>,
    at: String,
}

impl Collect<'_> {
    fn resolve(&mut self, path: &syn::Path) {
        let first = path.segments[0].ident.to_string();
        if path.leading_colon.is_none()
            && (self.generics.contains(&first) || is_local_or_prelude(&first))
        {
            return;
        }
        let rest: Vec<String> = path
            .segments
            .iter()
            .skip(1)
            .map(|s| s.ident.to_string())
            .collect();
        let head = match self.uses.get(&first) {
            Some(full) => full.clone(),
            None => first.clone(),
        };
        let full = std::iter::once(head)
            .chain(rest)
            .collect::<Vec<_>>()
            .join("::");
        let krate = full.split("::").next().unwrap_or("").to_owned();
        if !self.external.contains(&krate) || krate.starts_with("lens") {
            // defined in this crate or a lens crate
            return;
        }
        self.found.insert((full, self.at.clone()));
    }
}

impl<'ast> Visit<'ast> for Collect<'_> {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.resolve(path);
        syn::visit::visit_path(self, path);
    }
    fn visit_block(&mut self, _: &'ast syn::Block) {}
    fn visit_expr(&mut self, _: &'ast syn::Expr) {}
}

fn generics_of(g: &syn::Generics) -> BTreeSet<String> {
    g.params
        .iter()
        .filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(t.ident.to_string()),
            syn::GenericParam::Const(c) => Some(c.ident.to_string()),
            syn::GenericParam::Lifetime(_) => None,
        })
        .collect()
}

fn scan_items(
    external: &BTreeSet<String>,
    items: &[syn::Item],
    inherited: &BTreeMap<String, String>,
    file: &str,
    found: &mut BTreeSet<(String, String)>,
) {
    let mut uses = inherited.clone();
    uses.extend(self::uses(items));
    for item in items {
        let mut c =
            |at: String, generics: BTreeSet<String>, f: &mut dyn FnMut(&mut Collect<'_>)| {
                let mut col = Collect {
                    external,
                    uses: &uses,
                    generics,
                    found,
                    at: format!("{file}: {at}"),
                };
                f(&mut col);
            };
        match item {
            syn::Item::Fn(f) if is_pub(&f.vis) && !is_test_only(&f.attrs) => {
                c(
                    f.sig.ident.to_string(),
                    generics_of(&f.sig.generics),
                    &mut |v| v.visit_signature(&f.sig),
                );
            }
            syn::Item::Struct(s) if is_pub(&s.vis) && !is_test_only(&s.attrs) => {
                for field in s.fields.iter().filter(|f| is_pub(&f.vis)) {
                    c(s.ident.to_string(), generics_of(&s.generics), &mut |v| {
                        v.visit_type(&field.ty)
                    });
                }
            }
            syn::Item::Enum(e) if is_pub(&e.vis) && !is_test_only(&e.attrs) => {
                for var in &e.variants {
                    for field in &var.fields {
                        c(
                            format!("{}::{}", e.ident, var.ident),
                            generics_of(&e.generics),
                            &mut |v| v.visit_type(&field.ty),
                        );
                    }
                }
            }
            syn::Item::Const(k) if is_pub(&k.vis) => {
                c(k.ident.to_string(), BTreeSet::new(), &mut |v| {
                    v.visit_type(&k.ty)
                });
            }
            syn::Item::Static(s) if is_pub(&s.vis) => {
                c(s.ident.to_string(), BTreeSet::new(), &mut |v| {
                    v.visit_type(&s.ty)
                });
            }
            syn::Item::Type(t) if is_pub(&t.vis) => {
                c(t.ident.to_string(), generics_of(&t.generics), &mut |v| {
                    v.visit_type(&t.ty)
                });
            }
            syn::Item::Trait(t) if is_pub(&t.vis) => {
                for ti in &t.items {
                    if let syn::TraitItem::Fn(f) = ti {
                        let mut g = generics_of(&t.generics);
                        g.extend(generics_of(&f.sig.generics));
                        c(format!("{}::{}", t.ident, f.sig.ident), g, &mut |v| {
                            v.visit_signature(&f.sig)
                        });
                    }
                }
                for bound in &t.supertraits {
                    c(t.ident.to_string(), BTreeSet::new(), &mut |v| {
                        v.visit_type_param_bound(bound)
                    });
                }
            }
            syn::Item::Impl(i) if i.trait_.is_none() && !is_test_only(&i.attrs) => {
                let ty = quote_ty(&i.self_ty);
                for ii in &i.items {
                    if let syn::ImplItem::Fn(f) = ii {
                        if is_pub(&f.vis) && !is_test_only(&f.attrs) {
                            let mut g = generics_of(&i.generics);
                            g.extend(generics_of(&f.sig.generics));
                            c(format!("{ty}::{}", f.sig.ident), g, &mut |v| {
                                v.visit_signature(&f.sig)
                            });
                        }
                    }
                }
            }
            syn::Item::Use(u) if is_pub(&u.vis) => {
                // a public re-export of an external path
                let mut one = BTreeMap::new();
                one.extend(self::uses(std::slice::from_ref(item)));
                for (name, full) in one {
                    let krate = full.split("::").next().unwrap_or("");
                    if external.contains(krate) && !krate.starts_with("lens") {
                        found.insert((full, format!("{file}: pub use … {name}")));
                    }
                }
            }
            syn::Item::Mod(m) if !is_test_only(&m.attrs) => {
                if let Some((_, inner)) = &m.content {
                    scan_items(external, inner, &uses, file, found);
                }
            }
            _ => {}
        }
    }
}

fn quote_ty(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        _ => "impl".to_owned(),
    }
}

/// The crates the runtime and the facade depend on: a path that starts
/// with one of these (or with `std`, `core`, `alloc`) is external; any
/// other name is a module or item of this crate.
fn dependency_crates() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out: BTreeSet<String> = ["std", "core", "alloc"].map(String::from).into();
    for manifest in [root.join("Cargo.toml"), root.join("../lens/Cargo.toml")] {
        let text = std::fs::read_to_string(manifest).unwrap();
        let mut in_deps = false;
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                in_deps = line == "[dependencies]";
                continue;
            }
            if in_deps {
                if let Some((name, _)) = line.split_once('=') {
                    let name = name.trim();
                    if !name.is_empty() && !name.starts_with('#') {
                        out.insert(name.replace('-', "_"));
                    }
                }
            }
        }
    }
    out
}

fn allowed(full: &str) -> bool {
    let krate = full.split("::").next().unwrap_or("");
    ALLOWED_CRATES.iter().any(|(c, _)| *c == krate) || ALLOWED_SDK_ITEMS.contains(&full)
}

#[test]
fn no_external_type_leaks_except_the_allow_list() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rs_files(&root.join("src"), &mut files);
    rs_files(&root.join("../lens/src"), &mut files);
    let external = dependency_crates();
    let mut found = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let name = f.strip_prefix(root).unwrap_or(f).display().to_string();
        scan_items(&external, &ast.items, &BTreeMap::new(), &name, &mut found);
    }
    assert!(
        found.iter().any(|(p, _)| p.starts_with("opentelemetry::")),
        "the scan sees the OpenTelemetry API types the surface uses; if not, it sees nothing"
    );
    if std::env::var_os("LENS_SHOW_API_TYPES").is_some() {
        for (p, at) in &found {
            eprintln!("{p}  (in {at})");
        }
    }
    let leaks: Vec<String> = found
        .iter()
        .filter(|(p, _)| !allowed(p))
        .map(|(p, at)| format!("{p}  (in {at})"))
        .collect();
    assert!(
        leaks.is_empty(),
        "external types in the public API that are not on the allow-list:\n{}",
        leaks.join("\n")
    );
}
