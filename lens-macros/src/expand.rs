//! Pass 3: code generation. Generated code names only `::lens::__private`
//! (or `<path>::__private` with `crate = path`).

use crate::parse::{FamilyDef, Field, Fmt, SpanMacroArgs, TraceFnArgs};
use crate::tables::is_redacted_key;
use crate::validate::{FamilyPlan, TraceFnPlan};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::ext::IdentExt;
use syn::{Ident, ItemFn, LitStr, ReturnType};

/// Where generated code finds lens: `::lens`, or the path of `crate = path`
/// (a crate that re-exports lens).
pub(crate) struct Krate(Option<syn::Path>);

impl Krate {
    pub(crate) fn new(path: Option<&syn::Path>) -> Self {
        Krate(path.cloned())
    }

    /// `::lens::__private` spanned at `span` (so rustc reports on the
    /// user's token as before), or `<path>::__private`.
    pub(crate) fn private_at(&self, span: Span) -> TokenStream {
        match &self.0 {
            None => quote_spanned!(span=> ::lens::__private),
            Some(p) => quote_spanned!(span=> #p::__private),
        }
    }

    pub(crate) fn private(&self) -> TokenStream {
        self.private_at(Span::call_site())
    }
}

/// Builds the attribute `Vec`; value expressions are evaluated only here,
/// which the caller places inside the enabled branch.
pub(crate) fn attributes(k: &Krate, fields: &[Field], args: &[Ident]) -> TokenStream {
    let lp = k.private();
    let n = fields.len() + args.len();
    if n == 0 {
        return quote!(#lp::Attrs::new());
    }
    let pushes = fields
        .iter()
        .map(|f| push(k, &f.key, f.key_span, f.fmt, f.value.to_token_stream()))
        .chain(
            args.iter()
                .map(|a| push(k, &a.to_string(), a.span(), Fmt::Value, a.to_token_stream())),
        );
    quote! {{
        let mut __lens_attrs = #lp::Attrs::with_capacity(#n);
        #(#pushes)*
        __lens_attrs
    }}
}

fn push(k: &Krate, key: &str, key_span: Span, fmt: Fmt, value: TokenStream) -> TokenStream {
    let key_lit = LitStr::new(key, key_span);
    let (first, last) = first_last_span(&value);
    let lp = k.private_at(first);
    let name = match (fmt, is_redacted_key(key)) {
        (Fmt::Value, false) => "push",
        (Fmt::Value, true) => "push_redacted",
        (Fmt::Display, false) => "push_display",
        (Fmt::Display, true) => "push_display_redacted",
        (Fmt::Debug, false) => "push_debug",
        (Fmt::Debug, true) => "push_debug_redacted",
    };
    let name = Ident::new(name, first);
    let f = quote_spanned!(first=> #lp::#name);
    // `&(value)` with `&` on the value's first token and the parentheses on
    // its last one: rustc's span of this argument is then exactly the user's
    // expression, so an `AttributeValue` error underlines all of it.
    let and = quote_spanned!(first=> &);
    let mut paren = proc_macro2::Group::new(proc_macro2::Delimiter::Parenthesis, value);
    paren.set_span(last);
    quote_spanned! {first=>
        #f(&mut __lens_attrs, #key_lit, #and #paren);
    }
}

/// The spans of the first and last token of `tokens` (call site if empty).
fn first_last_span(tokens: &TokenStream) -> (Span, Span) {
    let mut iter = tokens.clone().into_iter();
    let first = iter
        .next()
        .map(|t| t.span())
        .unwrap_or_else(Span::call_site);
    let last = iter.last().map(|t| t.span()).unwrap_or(first);
    (first, last)
}

/// `SpanGroup::is_enabled(&group)`, spanned on the group so that a path to
/// something that is not a `SpanGroup` is reported there.
fn is_enabled(k: &Krate, group: &TokenStream) -> TokenStream {
    let span = first_last_span(group).0;
    let lp = k.private_at(span);
    quote_spanned!(span=> #lp::SpanGroup::is_enabled(&#group))
}

/// The `start_span` path, spanned on the name so that a name of the wrong
/// type is reported there.
fn start_span(k: &Krate, name: &syn::Expr) -> TokenStream {
    let span = first_last_span(&name.to_token_stream()).0;
    let lp = k.private_at(span);
    quote_spanned!(span=> #lp::start_span)
}

fn contains_impl_trait(ty: &TokenStream) -> bool {
    ty.clone().into_iter().any(|t| match t {
        proc_macro2::TokenTree::Ident(i) => i == "impl",
        proc_macro2::TokenTree::Group(g) => contains_impl_trait(&g.stream()),
        _ => false,
    })
}

/// The call that starts the span of a `#[trace_fn]`: detached (an `async
/// fn`'s, handed to its future) or attached (a synchronous function's);
/// `kind`, `parent` and `links` take the `_with` entry points, so a plain
/// site stays on the shortest path.
fn start_call(
    k: &Krate,
    args: &TraceFnArgs,
    plan: &TraceFnPlan,
    detached: bool,
    attrs_vec: TokenStream,
) -> TokenStream {
    let lp = k.private();
    let name = &plan.name;
    if plan.kind.is_none() && args.parent.is_none() && args.links.is_empty() {
        return if detached {
            quote!(#lp::start_detached(#name, #attrs_vec))
        } else {
            quote!(#lp::start_span(#name, #attrs_vec))
        };
    }
    let kind = match &plan.kind {
        Some(k) => quote!(#lp::SpanKind::#k),
        None => quote!(#lp::SpanKind::Internal),
    };
    // each expression is spanned on itself, so a wrong type is reported there
    let parent = match &args.parent {
        Some(e) => {
            let sp = first_last_span(&e.to_token_stream()).0;
            let lp = k.private_at(sp);
            quote_spanned!(sp=> #lp::IntoParentContext::into_parent_context(#e))
        }
        None => quote!(::core::option::Option::None),
    };
    let n = args.links.len();
    let links = args.links.iter().map(|e| {
        let sp = first_last_span(&e.to_token_stream()).0;
        let lp = k.private_at(sp);
        quote_spanned!(sp=> __lens_links.extend(#lp::IntoLink::into_link(#e));)
    });
    let links = quote!({
        let mut __lens_links = #lp::Vec::with_capacity(#n);
        #(#links)*
        __lens_links
    });
    let f = if detached {
        quote!(start_detached_with)
    } else {
        quote!(start_span_with)
    };
    quote!(#lp::#f(#name, #attrs_vec, #kind, #parent, #links))
}

/// The parameters a synchronous `#[trace_fn]` hands to its body closure as
/// arguments rather than captures, so that the body's out-of-line function
/// takes them in the registers the function itself got them in (a capture
/// set of more than two words would be passed through memory): every plain
/// `name` / `mut name` parameter without attributes. `mut` moves to the
/// closure's parameter. `self`, patterns and parameters with attributes are
/// captured.
fn forward_params(sig: &mut syn::Signature) -> Vec<(Option<syn::token::Mut>, Ident)> {
    let mut out = Vec::new();
    for input in &mut sig.inputs {
        let syn::FnArg::Typed(t) = input else {
            continue;
        };
        if !t.attrs.is_empty() {
            continue;
        }
        if let syn::Pat::Ident(p) = t.pat.as_mut() {
            if p.by_ref.is_none() && p.subpat.is_none() && p.attrs.is_empty() {
                out.push((p.mutability.take(), p.ident.clone()));
            }
        }
    }
    out
}

/// Every identifier the options of a `#[trace_fn]` mention (`args`, and the
/// tokens of `fields`, `parent` and `links` expressions).
fn idents_in(args: &TraceFnArgs) -> Vec<Ident> {
    fn walk(tokens: TokenStream, out: &mut Vec<Ident>) {
        for t in tokens {
            match t {
                proc_macro2::TokenTree::Ident(i) => out.push(i),
                proc_macro2::TokenTree::Group(g) => walk(g.stream(), out),
                _ => {}
            }
        }
    }
    let mut out = args.args.clone();
    for f in &args.fields {
        walk(f.value.to_token_stream(), &mut out);
    }
    for e in args.parent.iter().chain(&args.links) {
        walk(e.to_token_stream(), &mut out);
    }
    out
}

pub(crate) fn trace_fn(args: &TraceFnArgs, plan: TraceFnPlan, func: ItemFn) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        mut sig,
        block,
    } = func;
    let is_async = sig.asyncness.is_some();
    let (outer, inner): (Vec<_>, Vec<_>) = attrs
        .into_iter()
        .partition(|a| matches!(a.style, syn::AttrStyle::Outer));
    let k = Krate::new(args.krate.as_ref());
    let lp = k.private();
    let group = plan.group.clone();
    let attrs_vec = attributes(&k, &args.fields, &args.args);
    let start = start_call(&k, args, &plan, is_async, attrs_vec);
    // `ret(Ok)`, or `ret` with `err`: the `Ok` value
    let ret_ok = args.ret_ok || args.err.is_some();
    let debug_err = args.err_fmt == Fmt::Debug;
    let ret_span = args
        .ret
        .as_ref()
        .map_or_else(proc_macro2::Span::call_site, |r| r.span());
    let ret_ty: Option<TokenStream> = match &sig.output {
        ReturnType::Default => Some(quote!(())),
        ReturnType::Type(_, ty) => {
            let t = ty.to_token_stream();
            (!contains_impl_trait(&t)).then_some(t)
        }
    };
    // Where rustc should point for errors about the return type (the
    // written type, else the function's name) and about `err`.
    let ty_span = match &sig.output {
        ReturnType::Default => sig.ident.span(),
        ReturnType::Type(_, ty) => first_last_span(&ty.to_token_stream()).0,
    };
    let err_span = args
        .err
        .as_ref()
        .map_or_else(proc_macro2::Span::call_site, |e| e.span());
    let enabled = is_enabled(&k, &group);
    let body = if is_async {
        let fake_return = ret_ty.map(|t| {
            // a return edge of the declared type, so the async block's
            // output is inferred from the signature (and a wrong tail
            // expression is reported in the body, against `-> T`)
            quote_spanned! {ty_span=>
                #[allow(unknown_lints, unreachable_code, clippy::diverging_sub_expression, clippy::let_unit_value, clippy::unreachable, clippy::empty_loop, clippy::let_with_type_underscore, clippy::needless_return)]
                if false {
                    let __lens_fake_return: #t = loop {};
                    return __lens_fake_return;
                }
            }
        });
        // the span is made here, when the function is called (the `fn`
        // returns the instrumented future; see `asyncfn`)
        // with `ret`, the body's output is recorded on the span, current
        // while the future is polled
        let fut = match &args.ret {
            None => quote!(async move { #fake_return #block }),
            Some(_) => {
                let lp = k.private_at(ret_span);
                let record = if ret_ok {
                    quote_spanned!(ret_span=> #lp::record_ok_current(__lens_on, &__lens_out);)
                } else {
                    quote_spanned!(ret_span=> #lp::record_return_current(__lens_on, &__lens_out);)
                };
                quote!(async move {
                    let __lens_out = async move { #fake_return #block }.await;
                    #record
                    __lens_out
                })
            }
        };
        let call = if args.err.is_some() {
            // a non-`Result` output or an error type without `Display` is
            // reported on `err`
            let lp = k.private_at(err_span);
            if debug_err {
                quote_spanned!(err_span=> #lp::instrument_result_debug(#fut, __lens_span))
            } else {
                quote_spanned!(err_span=> #lp::instrument_result(#fut, __lens_span))
            }
        } else {
            quote!(#lp::instrument(#fut, __lens_span))
        };
        let on = args
            .ret
            .is_some()
            .then(|| quote!(let __lens_on = ::core::option::Option::is_some(&__lens_span);));
        quote! {
            let __lens_span = if #enabled {
                ::core::option::Option::Some(#start)
            } else {
                ::core::option::Option::None
            };
            #on
            #call
        }
    } else if args.err.is_none()
        && args.ret.is_none()
        && outer.iter().any(|a| a.path().is_ident("track_caller"))
    {
        // `#[track_caller]`: the body stays in the function itself (a
        // closure would report its own location to `Location::caller()`),
        // at the cost of a guard held across it
        quote! {
            let __lens_guard = if #enabled {
                #start
            } else {
                #lp::SpanGuard::none()
            };
            #block
        }
    } else {
        let annot = ret_ty.map(|t| quote!(-> #t));
        // a non-`Result` return type or an error type without `Display` is
        // reported on `err`; a return value that is not an attribute value,
        // on `ret`
        let record_err = args.err.is_some().then(|| {
            let lp = k.private_at(err_span);
            if debug_err {
                quote_spanned!(err_span=> #lp::record_result_debug(&__lens_guard, &__lens_ret);)
            } else {
                quote_spanned!(err_span=> #lp::record_result(&__lens_guard, &__lens_ret);)
            }
        });
        let record_ret = args.ret.as_ref().map(|_| {
            let lp = k.private_at(ret_span);
            if ret_ok {
                quote_spanned!(ret_span=> #lp::record_ok(&__lens_guard, &__lens_ret);)
            } else {
                quote_spanned!(ret_span=> #lp::record_return(&__lens_guard, &__lens_ret);)
            }
        });
        let record = quote!(#record_err #record_ret);
        // The disabled path is the floor: load the group's word, test the
        // bit, run the body, with no guard held across it (so no stack
        // frame of the site's own). The body is written once, as a closure
        // made after the span has started (the span's attribute expressions
        // see the arguments before the body takes them); both branches call
        // it through one out-of-line function, a tail call when disabled.
        // `return` and `?` in the body come back to the closure. It is made
        // under an `FnOnce` bound so that it may return borrows of what it
        // captured (`&mut self` methods returning `Result<&mut T, E>`).
        let forwarded = forward_params(&mut sig);
        let n = forwarded.len();
        let tys: Vec<Ident> = (0..n)
            .map(|i| Ident::new(&format!("__LensA{i}"), proc_macro2::Span::call_site()))
            .collect();
        let vals: Vec<Ident> = (0..n)
            .map(|i| Ident::new(&format!("__lens_a{i}"), proc_macro2::Span::call_site()))
            .collect();
        let names: Vec<&Ident> = forwarded.iter().map(|(_, name)| name).collect();
        // a parameter the span's options read is used even when the body
        // does not use it; one used nowhere is still reported, on the
        // closure's parameter (the user's token)
        let used_by_options = idents_in(args);
        let pats: Vec<TokenStream> = forwarded
            .iter()
            .map(|(mutability, name)| {
                let allow = used_by_options
                    .contains(name)
                    .then(|| quote!(#[allow(unused_variables)]));
                quote!(#allow #mutability #name)
            })
            .collect();
        quote! {
            let __lens_on: bool = #enabled;
            let __lens_guard = if __lens_on {
                #start
            } else {
                #lp::SpanGuard::none()
            };
            // the closure's parameter types are those of the arguments (so
            // that an elided lifetime is the function's, not a new
            // higher-ranked one, and `impl Trait` needs no name)
            #[inline(always)]
            fn __lens_once<__LensR, #(#tys,)* __LensF: ::core::ops::FnOnce(#(#tys),*) -> __LensR>(#(_: &#tys,)* f: __LensF) -> __LensF {
                f
            }
            #[inline(never)]
            fn __lens_call<__LensR, #(#tys,)* __LensF: ::core::ops::FnOnce(#(#tys),*) -> __LensR>(f: __LensF, #(#vals: #tys),*) -> __LensR {
                f(#(#vals),*)
            }
            let __lens_body = __lens_once(#(&#names,)* move |#(#pats),*| #annot #block);
            // branching on the bool again (not on the guard, which the
            // optimizer cannot see is `Some` after the span's start) lets it
            // thread the disabled path straight to the tail call
            if __lens_on {
                let __lens_ret = __lens_call(__lens_body, #(#names),*);
                #record
                __lens_ret
            } else {
                // inert: nothing to drop after the call, which is then in
                // tail position
                ::core::mem::forget(__lens_guard);
                __lens_call(__lens_body, #(#names),*)
            }
        }
    };
    let allow = is_async.then(|| {
        crate::asyncfn::desugar_signature(&k, &mut sig);
        // an `async fn` of a trait implemented as `fn -> impl Future`
        quote!(#[allow(refining_impl_trait)])
    });
    quote! {
        #(#outer)*
        #allow
        #vis #sig {
            #(#inner)*
            #body
        }
    }
}

pub(crate) fn managed_span(args: SpanMacroArgs, group: TokenStream) -> TokenStream {
    let k = Krate::new(args.krate.as_ref());
    let lp = k.private();
    let name = args.name;
    let attrs_vec = attributes(&k, &args.fields, &[]);
    let enabled = is_enabled(&k, &group);
    let start = start_span(&k, &name);
    quote! {
        if #enabled {
            #start(#name, #attrs_vec)
        } else {
            #lp::SpanGuard::none()
        }
    }
}

pub(crate) fn span_cm(args: SpanMacroArgs) -> TokenStream {
    let k = Krate::new(args.krate.as_ref());
    let name = args.name;
    let attrs_vec = attributes(&k, &args.fields, &[]);
    let start = start_span(&k, &name);
    quote!(#start(#name, #attrs_vec))
}

/// The module of a family that failed validation: its first 64 distinct
/// groups and only the `all` preset, so that code using it compiles and the
/// only errors shown are the macro's own.
pub(crate) fn family_fallback(mut def: FamilyDef) -> TokenStream {
    let mut seen = Vec::new();
    def.groups.retain(|(_, g)| {
        let id = g.unraw().to_string().to_ascii_uppercase();
        let keep = seen.len() < 64 && !seen.contains(&id);
        if keep {
            seen.push(id);
        }
        keep
    });
    let all_own = if seen.len() >= 64 {
        u64::MAX
    } else {
        (1u64 << seen.len()) - 1
    };
    let plan = FamilyPlan {
        presets: vec![("all".to_owned(), 0xff, all_own)],
    };
    family(def, plan)
}

pub(crate) fn family(def: FamilyDef, plan: FamilyPlan) -> TokenStream {
    let lp = Krate::new(def.krate.as_ref()).private();
    let FamilyDef {
        attrs,
        vis,
        name,
        groups,
        ..
    } = def;
    let fam = name.unraw().to_string();
    let statics = groups.iter().enumerate().map(|(bit, (gattrs, g))| {
        let gname = g.unraw().to_string();
        let id = Ident::new(&gname.to_ascii_uppercase(), g.span());
        let bit = bit as u32;
        let doc = format!("Span group `{gname}` of the `{fam}` family.");
        let has_doc = gattrs.iter().any(|a| a.path().is_ident("doc"));
        let doc = (!has_doc).then(|| quote!(#[doc = #doc]));
        quote! {
            #(#gattrs)*
            #doc
            pub const #id: #lp::SpanGroup =
                #lp::SpanGroup::__new(#gname, #fam, &__LENS_WORD, #bit);
        }
    });
    let ids = groups
        .iter()
        .map(|(_, g)| Ident::new(&g.unraw().to_string().to_ascii_uppercase(), g.span()));
    let presets = plan
        .presets
        .iter()
        .map(|(p, base, own)| quote!(#lp::Preset::__new(#p, #base, #own)));
    let group_list = groups
        .iter()
        .map(|(_, g)| format!("`{}`", g.unraw()))
        .collect::<Vec<_>>()
        .join(", ");
    let preset_list = plan
        .presets
        .iter()
        .map(|(p, _, _)| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let family_doc =
        format!("The `{fam}` family: base groups plus {group_list}; presets {preset_list}.");
    quote! {
        #(#attrs)*
        #vis mod #name {
            #[doc(hidden)]
            pub static __LENS_WORD: #lp::AtomicU64 = #lp::AtomicU64::new(0);
            #(#statics)*
            #[doc = #family_doc]
            pub static FAMILY: #lp::SpanGroupFamily = #lp::SpanGroupFamily::__new(
                #fam,
                &__LENS_WORD,
                &[#(&#ids),*],
                &[#(#presets),*],
            );
            // the link-time registry: `setup_telemetry_from_env` and the
            // `tracing` bridge know this family without being told
            #lp::inventory::submit! {
                #lp::LinkedFamily(&FAMILY)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_parameters_are_forwarded_and_lose_their_mut() {
        let mut sig: syn::Signature = syn::parse_quote! {
            fn f(&mut self, a: u8, mut b: Vec<u8>, (c, d): (u8, u8), _: u8,
                 ref e: u8, g @ 1..=2: u8, #[allow(unused)] h: u8, i: impl Fn())
        };
        let fwd = forward_params(&mut sig);
        let names: Vec<String> = fwd.iter().map(|(_, n)| n.to_string()).collect();
        assert_eq!(names, ["a", "b", "i"]);
        let muts: Vec<bool> = fwd.iter().map(|(m, _)| m.is_some()).collect();
        assert_eq!(muts, [false, true, false]);
        // the function's own `b` is no longer `mut` (the closure's is)
        let printed = sig.to_token_stream().to_string();
        assert!(printed.contains("b : Vec < u8 >"), "{printed}");
        assert!(!printed.contains("mut b"), "{printed}");
        assert!(printed.contains("& mut self"), "{printed}");
    }

    #[test]
    fn idents_of_options_cover_args_fields_parent_and_links() {
        let args: TraceFnArgs = syn::parse::Parser::parse2(
            TraceFnArgs::parse_all,
            quote!(
                group = "step",
                args(a),
                fields(n = b.len()),
                parent = c,
                links(d)
            ),
        )
        .unwrap();
        let found: Vec<String> = idents_in(&args).iter().map(ToString::to_string).collect();
        for want in ["a", "b", "len", "c", "d"] {
            assert!(found.iter().any(|f| f == want), "{want} in {found:?}");
        }
    }
}
