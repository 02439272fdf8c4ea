//! Pass 2: meaning. Checks group names, `args`, the item's kind and
//! `define_span_group!` families; every error sits on its own token.

use crate::expand::Krate;
use crate::parse::{FamilyDef, Field, GroupRef, SpanMacroArgs, TraceFnArgs};
use crate::tables::{base_group_list, BASE_GROUPS, BASE_PRESETS};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::{Expr, FnArg, Ident, ItemFn, Pat};

/// Adds `e` to the errors collected so far.
pub(crate) fn push(errors: &mut Option<syn::Error>, e: syn::Error) {
    match errors {
        Some(all) => all.combine(e),
        None => *errors = Some(e),
    }
}

/// The expression of a group handle (`&'static SpanGroup` place).
pub(crate) fn group_tokens(k: &Krate, group: &GroupRef) -> syn::Result<TokenStream> {
    match group {
        GroupRef::Lit(lit) => {
            let name = lit.value();
            match BASE_GROUPS.iter().find(|g| **g == name) {
                Some(g) => {
                    let ident = Ident::new(&g.to_ascii_uppercase(), lit.span());
                    let lp = k.private_at(lit.span());
                    Ok(quote_spanned!(lit.span()=> #lp::base::#ident))
                }
                None => {
                    let hint = BASE_GROUPS
                        .iter()
                        .find(|g| g.eq_ignore_ascii_case(&name))
                        .map(|g| format!(" (group names are lowercase: did you mean \"{g}\"?)"))
                        .unwrap_or_default();
                    Err(syn::Error::new(
                        lit.span(),
                        format!(
                            "unknown span group \"{name}\"{hint}; valid base groups are: {}; a consumer family's groups are named by path, e.g. `lens::megatron::MICROBATCH`",
                            base_group_list()
                        ),
                    ))
                }
            }
        }
        GroupRef::Path(path) => Ok(path.to_token_stream()),
    }
}

/// Each attribute key at most once (a second value would silently replace
/// the first): the error sits on the repeated key.
fn attribute_keys(fields: &[Field], args: &[Ident], args_first: bool) -> syn::Result<()> {
    let mut errors = None;
    let mut seen: Vec<String> = Vec::new();
    let fields = fields.iter().map(|f| (f.key.clone(), f.key_tokens.clone()));
    let args = args
        .iter()
        .map(|a| (a.unraw().to_string(), a.to_token_stream()));
    let keys: Vec<_> = if args_first {
        args.chain(fields).collect()
    } else {
        fields.chain(args).collect()
    };
    for (key, tokens) in keys {
        if seen.contains(&key) {
            push(
                &mut errors,
                syn::Error::new_spanned(tokens, format!("duplicate attribute key `{key}`")),
            );
        } else {
            seen.push(key);
        }
    }
    errors.map_or(Ok(()), Err)
}

/// `managed_span!` / `span_cm!`: keys once each, and a literal name not empty.
pub(crate) fn span_macro(args: &SpanMacroArgs) -> syn::Result<()> {
    let mut errors = attribute_keys(&args.fields, &[], false).err();
    if let Expr::Lit(syn::ExprLit {
        lit: syn::Lit::Str(s),
        ..
    }) = &args.name
    {
        if s.value().is_empty() {
            push(
                &mut errors,
                syn::Error::new(s.span(), "span name must not be empty"),
            );
        }
    }
    errors.map_or(Ok(()), Err)
}

/// A checked `#[trace_fn]`.
pub(crate) struct TraceFnPlan {
    pub(crate) group: TokenStream,
    pub(crate) name: syn::LitStr,
    /// The `SpanKind` variant of `kind = ...`.
    pub(crate) kind: Option<syn::Ident>,
}

pub(crate) fn trace_fn(args: &TraceFnArgs, func: &ItemFn) -> syn::Result<TraceFnPlan> {
    let mut errors = None;
    if let Some(c) = &func.sig.constness {
        push(
            &mut errors,
            syn::Error::new(
                c.span,
                "`#[trace_fn]` cannot instrument a `const fn`: spans are created at run time",
            ),
        );
    }
    let group = match &args.group {
        None => {
            push(&mut errors, syn::Error::new(Span::call_site(), format!("missing `group`: name a base group, e.g. `#[trace_fn(group = \"step\")]` (valid base groups are: {}), or a consumer group by path, e.g. `group = lens::megatron::MICROBATCH`", base_group_list())));
            None
        }
        Some(g) => match group_tokens(&Krate::new(args.krate.as_ref()), g) {
            Ok(t) => Some(t),
            Err(e) => {
                push(&mut errors, e);
                None
            }
        },
    };
    let params: Vec<String> = func
        .sig
        .inputs
        .iter()
        .filter_map(|a| match a {
            FnArg::Typed(t) => match &*t.pat {
                Pat::Ident(p) => Some(p.ident.to_string()),
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect();
    if let Err(e) = attribute_keys(&args.fields, &args.args, args.args_first) {
        push(&mut errors, e);
    }
    for a in &args.args {
        if a == "self" {
            push(&mut errors, syn::Error::new(a.span(), "`self` cannot be recorded as an attribute; record a scalar field instead, e.g. `fields(id = self.id)`"));
        } else if !params.iter().any(|p| a == p) {
            let list = if params.is_empty() {
                "none".to_owned()
            } else {
                params.join(", ")
            };
            push(&mut errors, syn::Error::new(a.span(), format!("`args` names `{a}`, which is not a parameter of `{}`; parameters that can be recorded: {list}", func.sig.ident)));
        }
    }
    if let Some(err) = &args.err {
        let returns = match &func.sig.output {
            syn::ReturnType::Default => Some("()".to_owned()),
            syn::ReturnType::Type(_, ty) => clearly_not_result(ty).then(|| type_to_string(ty)),
        };
        if let Some(returns) = returns {
            push(&mut errors, syn::Error::new(err.span(), format!("`err` records the `Err` of a returned `Result`, but `{}` returns `{returns}`; remove `err`", func.sig.ident)));
        }
    }
    let kind = match &args.kind {
        None => None,
        Some(k) => {
            let written = k.unraw().to_string();
            match crate::parse::SPAN_KINDS.iter().find(|(n, _)| *n == written) {
                Some((_, variant)) => Some(syn::Ident::new(variant, k.span())),
                None => {
                    let hint = crate::parse::SPAN_KINDS
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(&written))
                        .map(|(n, _)| format!(" (kinds are lowercase: `{n}`)"))
                        .unwrap_or_default();
                    push(
                        &mut errors,
                        syn::Error::new(
                            k.span(),
                            format!(
                                "unknown span kind `{written}`{hint}; expected one of: {}",
                                crate::parse::kind_list()
                            ),
                        ),
                    );
                    None
                }
            }
        }
    };
    if let (Some(ret), syn::ReturnType::Type(_, ty)) = (&args.ret, &func.sig.output) {
        let f = &func.sig.ident;
        if args.ret_ok && clearly_not_result(ty) {
            push(&mut errors, syn::Error::new(ret.span(), format!("`ret(Ok)` records the `Ok` value of a returned `Result`, but `{f}` returns `{}`; write `ret`", type_to_string(ty))));
        } else if !args.ret_ok && args.err.is_none() && named_result(ty) {
            push(&mut errors, syn::Error::new(ret.span(), format!("`ret` records the return value, but `{f}` returns `{}`, which is not a span attribute value; add `err` to record the `Ok` value and the error, or write `ret(Ok)` to record only the `Ok` value", type_to_string(ty))));
        }
    }
    if let (Some(ret), syn::ReturnType::Default) = (&args.ret, &func.sig.output) {
        push(
            &mut errors,
            syn::Error::new(
                ret.span(),
                format!(
                    "`ret` records the return value, but `{}` returns `()`; remove `ret`",
                    func.sig.ident
                ),
            ),
        );
    }
    if let Some(e) = errors {
        return Err(e);
    }
    let name = args.name.clone().unwrap_or_else(|| {
        syn::LitStr::new(&func.sig.ident.unraw().to_string(), func.sig.ident.span())
    });
    Ok(TraceFnPlan {
        group: group.unwrap_or_default(),
        name,
        kind,
    })
}

/// `ty` as written, without the spaces of `TokenStream`'s `Display`.
fn type_to_string(ty: &syn::Type) -> String {
    let mut s = ty.to_token_stream().to_string();
    for (from, to) in [
        (" <", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" ,", ","),
        (" ::", "::"),
        (":: ", "::"),
        ("& ", "&"),
        ("( ", "("),
        (" )", ")"),
        ("[ ", "["),
        (" ]", "]"),
        (" ;", ";"),
    ] {
        s = s.replace(from, to);
    }
    s
}

/// Whether `ty` is certainly not a `Result` (a primitive, a tuple, a
/// reference, an array or a common std type). Other paths may be aliases of
/// `Result` and are left to rustc, whose error then points at `err`.
fn clearly_not_result(ty: &syn::Type) -> bool {
    const NOT_RESULT: &[&str] = &[
        "bool", "char", "str", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32",
        "u64", "u128", "usize", "f32", "f64", "String", "Option", "Vec", "Box", "HashMap",
        "BTreeMap", "HashSet", "BTreeSet",
    ];
    match ty {
        syn::Type::Paren(p) => clearly_not_result(&p.elem),
        syn::Type::Group(g) => clearly_not_result(&g.elem),
        syn::Type::Tuple(_)
        | syn::Type::Reference(_)
        | syn::Type::Array(_)
        | syn::Type::Slice(_)
        | syn::Type::Never(_)
        | syn::Type::Ptr(_)
        | syn::Type::BareFn(_) => true,
        syn::Type::Path(p) => {
            p.qself.is_none()
                && p.path
                    .segments
                    .last()
                    .is_some_and(|s| NOT_RESULT.iter().any(|n| s.ident == n))
        }
        _ => false,
    }
}

/// Whether `ty` is a path whose last segment is `Result` (`Result<T, E>`,
/// `io::Result<T>`, `anyhow::Result<T>`).
fn named_result(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Paren(p) => named_result(&p.elem),
        syn::Type::Group(g) => named_result(&g.elem),
        syn::Type::Path(p) => {
            p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "Result")
        }
        _ => false,
    }
}

/// The error for `#[trace_fn]` on something that is not a function with a body.
pub(crate) fn not_a_fn(item: &TokenStream) -> syn::Error {
    if let Ok(f) = syn::parse2::<syn::TraitItemFn>(item.clone()) {
        if f.default.is_none() {
            return syn::Error::new_spanned(
                &f.sig,
                "`#[trace_fn]` needs a function body; put it on the implementation of this method",
            );
        }
    }
    let head: TokenStream = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Struct(s)) => {
            let (struct_token, ident) = (&s.struct_token, &s.ident);
            quote!(#struct_token #ident)
        }
        Ok(syn::Item::Enum(e)) => {
            let (enum_token, ident) = (&e.enum_token, &e.ident);
            quote!(#enum_token #ident)
        }
        Ok(syn::Item::Const(c)) => {
            let (const_token, ident) = (&c.const_token, &c.ident);
            quote!(#const_token #ident)
        }
        Ok(syn::Item::Static(s)) => {
            let (static_token, ident) = (&s.static_token, &s.ident);
            quote!(#static_token #ident)
        }
        Ok(syn::Item::Impl(i)) => i.impl_token.to_token_stream(),
        Ok(syn::Item::Mod(m)) => {
            let (mod_token, ident) = (&m.mod_token, &m.ident);
            quote!(#mod_token #ident)
        }
        Ok(syn::Item::Trait(t)) => {
            let (trait_token, ident) = (&t.trait_token, &t.ident);
            quote!(#trait_token #ident)
        }
        Ok(syn::Item::Type(t)) => {
            let (type_token, ident) = (&t.type_token, &t.ident);
            quote!(#type_token #ident)
        }
        _ => item.clone().into_iter().take(2).collect(),
    };
    syn::Error::new_spanned(
        head,
        "`#[trace_fn]` can only be applied to functions and methods",
    )
}

/// `KvCache` -> `kv_cache`, `HTTPServer` -> `http_server`, `Step` -> `step`.
fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 && chars[i - 1] != '_' {
            let prev_lower = chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit();
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if prev_lower || (chars[i - 1].is_ascii_uppercase() && next_lower) {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A checked family: masks per preset over (base word, own word).
pub(crate) struct FamilyPlan {
    pub(crate) presets: Vec<(String, u64, u64)>,
}

pub(crate) fn family(def: &FamilyDef) -> syn::Result<FamilyPlan> {
    let mut errors = None;
    let fam = def.name.to_string();
    if fam == "base" {
        push(
            &mut errors,
            syn::Error::new(
                def.name.span(),
                "`base` is the built-in family; choose another name",
            ),
        );
    }
    let mut own: Vec<String> = Vec::new();
    for (i, (_, g)) in def.groups.iter().enumerate() {
        let name = g.unraw().to_string();
        if name != name.to_ascii_lowercase() {
            push(
                &mut errors,
                syn::Error::new(
                    g.span(),
                    format!(
                        "span group names are lowercase snake_case: write `{}`",
                        snake_case(&name)
                    ),
                ),
            );
        } else if own.contains(&name) {
            push(
                &mut errors,
                syn::Error::new(
                    g.span(),
                    format!("duplicate span group `{name}` in family `{fam}`"),
                ),
            );
        } else if BASE_GROUPS.contains(&name.as_str()) {
            push(
                &mut errors,
                syn::Error::new(
                    g.span(),
                    format!(
                        "`{name}` is already a base group, which every family includes; remove it"
                    ),
                ),
            );
        } else if BASE_PRESETS.iter().any(|(p, _)| *p == name) {
            push(
                &mut errors,
                syn::Error::new(
                    g.span(),
                    format!("`{name}` is a preset name and cannot also be a group"),
                ),
            );
        }
        if i == 64 {
            push(&mut errors, syn::Error::new(g.span(), format!("family `{fam}` declares more than 64 span groups; a family is one 64-bit word: split it into two families")));
        }
        own.push(name);
    }
    let mut seen = Vec::new();
    for p in &def.presets {
        let n = p.name.to_string();
        if n == "all" {
            push(&mut errors, syn::Error::new(p.name.span(), "preset `all` is implicit (every group of the family and the base family); remove it"));
        } else if seen.contains(&n) {
            push(
                &mut errors,
                syn::Error::new(p.name.span(), format!("duplicate preset `{n}`")),
            );
        } else if own.contains(&n) {
            push(
                &mut errors,
                syn::Error::new(
                    p.name.span(),
                    format!("`{n}` is a group of this family and cannot also be a preset"),
                ),
            );
        }
        seen.push(n);
    }
    if let Some(e) = errors {
        return Err(e);
    }
    // Resolve presets (they may name base groups, base presets, own groups and
    // own presets, in any order; cycles are errors, reported once each).
    let mut state = vec![Resolve::Todo; def.presets.len()];
    let mut errors = None;
    for i in 0..def.presets.len() {
        resolve_preset(def, &own, i, &mut state, &mut Vec::new(), &mut errors);
    }
    if let Some(e) = errors {
        return Err(e);
    }
    let resolved: Vec<(u64, u64)> = state
        .iter()
        .map(|r| match r {
            Resolve::Done(b, o) => (*b, *o),
            _ => (0, 0),
        })
        .collect();
    let mut presets: Vec<(String, u64, u64)> = def
        .presets
        .iter()
        .zip(&resolved)
        .map(|(p, (b, o))| (p.name.to_string(), *b, *o))
        .collect();
    // A base preset the family does not state is inherited as it is, so the
    // family's preset list is complete and the runtime never has to merge
    // the base family's presets into a consumer family's.
    for (name, mask) in BASE_PRESETS.iter().filter(|(n, _)| *n != "all") {
        if !presets.iter().any(|(p, _, _)| p == name) {
            presets.push(((*name).to_owned(), *mask, 0));
        }
    }
    let all_own = if own.len() >= 64 {
        u64::MAX
    } else {
        (1u64 << own.len()) - 1
    };
    presets.push(("all".to_owned(), 0xff, all_own));
    Ok(FamilyPlan { presets })
}

/// Where the resolution of one preset stands.
#[derive(Clone, Copy)]
enum Resolve {
    Todo,
    InProgress,
    Done(u64, u64),
    /// An error was already reported for it.
    Failed,
}

/// Resolves preset `i` into `state[i]`; `stack` holds the presets being
/// resolved (to name the cycle). Returns `None` on error (already reported).
fn resolve_preset(
    def: &FamilyDef,
    own: &[String],
    i: usize,
    state: &mut Vec<Resolve>,
    stack: &mut Vec<usize>,
    errors: &mut Option<syn::Error>,
) -> Option<(u64, u64)> {
    match state[i] {
        Resolve::Done(b, o) => return Some((b, o)),
        Resolve::Failed | Resolve::InProgress => return None,
        Resolve::Todo => {}
    }
    state[i] = Resolve::InProgress;
    stack.push(i);
    let this = &def.presets[i].name;
    let all_own = if own.len() >= 64 {
        u64::MAX
    } else {
        (1u64 << own.len()) - 1
    };
    let (mut base, mut mine) = (0u64, 0u64);
    let mut failed = false;
    for m in &def.presets[i].members {
        let n = m.unraw().to_string();
        let self_preset = def.presets.iter().position(|p| p.name == n);
        if let Some(bit) = own.iter().position(|g| *g == n) {
            mine |= 1 << bit;
        } else if let Some(bit) = BASE_GROUPS.iter().position(|g| *g == n) {
            base |= 1 << bit;
        } else if let Some(j) = self_preset.filter(|j| *j != i) {
            if let Resolve::InProgress = state[j] {
                // `m` closes a cycle: name it on this token, once
                let from = stack.iter().position(|k| *k == j).unwrap_or(0);
                let path: Vec<String> = stack[from..]
                    .iter()
                    .map(|k| format!("`{}`", def.presets[*k].name))
                    .chain(std::iter::once(format!("`{n}`")))
                    .collect();
                push(
                    errors,
                    syn::Error::new(
                        m.span(),
                        format!(
                            "preset cycle: {}; a preset cannot include itself",
                            path.join(" includes ")
                        ),
                    ),
                );
                failed = true;
            } else {
                match resolve_preset(def, own, j, state, stack, errors) {
                    Some((b, o)) => {
                        base |= b;
                        mine |= o;
                    }
                    None => failed = true,
                }
            }
        } else if let Some((_, mask)) = BASE_PRESETS.iter().find(|(p, _)| *p == n) {
            // a preset naming itself (`default: [default, x]`) means the base preset
            base |= mask;
            if n == "all" {
                mine |= all_own;
            }
        } else if self_preset == Some(i) {
            push(
                errors,
                syn::Error::new(m.span(), format!("preset `{this}` includes itself")),
            );
            failed = true;
        } else {
            let mut valid: Vec<String> = own.to_vec();
            valid.extend(BASE_GROUPS.iter().map(|s| s.to_string()));
            valid.extend(def.presets.iter().map(|p| p.name.to_string()));
            valid.extend(BASE_PRESETS.iter().map(|(p, _)| p.to_string()));
            valid.sort();
            valid.dedup();
            push(
                errors,
                syn::Error::new(
                    m.span(),
                    format!(
                        "preset `{this}` names unknown group or preset `{n}`; valid names are: {}",
                        valid.join(", ")
                    ),
                ),
            );
            failed = true;
        }
    }
    stack.pop();
    if failed {
        state[i] = Resolve::Failed;
        None
    } else {
        state[i] = Resolve::Done(base, mine);
        Some((base, mine))
    }
}

use syn::ext::IdentExt as _;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_suggestions() {
        assert_eq!(snake_case("KvCache"), "kv_cache");
        assert_eq!(snake_case("HTTPServer"), "http_server");
        assert_eq!(snake_case("Step"), "step");
        assert_eq!(snake_case("data_Loading"), "data_loading");
        assert_eq!(snake_case("layer2Norm"), "layer2_norm");
    }

    #[test]
    fn result_detection_leaves_aliases_to_rustc() {
        let not = |s: &str| clearly_not_result(&syn::parse_str(s).unwrap());
        assert!(not("u64") && not("()") && not("&str") && not("Option<u8>") && not("[u8; 4]"));
        assert!(!not("Result<u8, E>") && !not("io::Result<()>") && !not("Fallible") && !not("T"));
        let named = |s: &str| named_result(&syn::parse_str(s).unwrap());
        assert!(
            named("Result<u8, E>")
                && named("candle_core::Result<f32>")
                && named("(io::Result<()>)")
        );
        assert!(!named("Fallible<u8>") && !named("u8") && !named("Option<Result<u8, E>>"));
        assert_eq!(
            type_to_string(&syn::parse_str("Option < Vec < u8 > >").unwrap()),
            "Option<Vec<u8>>"
        );
        assert_eq!(
            type_to_string(&syn::parse_str("&'a str").unwrap()),
            "&'a str"
        );
    }
}
