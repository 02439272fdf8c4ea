//! Procedural macros of Lens for Rust. Use them through the `lens` crate,
//! whose documentation shows each macro and its expansion; generated code
//! refers only to `::lens::__private`.
//!
//! Each macro runs in three passes: `parse` (syntax), `validate`
//! (meaning) and `expand` (code). Every error is reported on the token that
//! caused it and, for `#[trace_fn]`, the user's item is still emitted so the
//! only error shown is ours.

#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::parse::Parser;

mod asyncfn;
mod expand;
mod parse;
mod tables;
mod validate;

/// Instruments a function, method or `async fn` with a span gated by a span
/// group. See `lens::trace_fn` for the full documentation.
#[proc_macro_attribute]
pub fn trace_fn(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item: TokenStream2 = item.into();
    let args = parse::TraceFnArgs::parse_all.parse(attr);
    let func = syn::parse2::<syn::ItemFn>(item.clone());
    let result = match (args, func) {
        (Ok(args), Ok(func)) => match validate::trace_fn(&args, &func) {
            Ok(plan) => Ok(expand::trace_fn(&args, plan, func)),
            Err(e) => Err(e),
        },
        (Err(mut e), Err(_)) => {
            e.combine(validate::not_a_fn(&item));
            Err(e)
        }
        (Ok(_), Err(_)) => Err(validate::not_a_fn(&item)),
        (Err(e), Ok(_)) => Err(e),
    };
    match result {
        Ok(tokens) => tokens.into(),
        Err(e) => {
            let err = e.to_compile_error();
            quote!(#err #item).into()
        }
    }
}

/// Opens a span if its group is enabled: a `SpanGuard`, inert when the
/// group is off. See `lens::managed_span!`.
#[proc_macro]
pub fn managed_span(input: TokenStream) -> TokenStream {
    let krate = leading_crate(input.clone());
    let parsed =
        (|s: syn::parse::ParseStream<'_>| parse::SpanMacroArgs::parse(s, true)).parse(input);
    let result = parsed.and_then(|args| {
        let group = validate::group_tokens(
            &expand::Krate::new(args.krate.as_ref()),
            args.group.as_ref().expect("managed_span parses a group"),
        );
        match (group, validate::span_macro(&args)) {
            (Ok(group), Ok(())) => Ok(expand::managed_span(args, group)),
            (Err(mut e), Err(more)) => {
                e.combine(more);
                Err(e)
            }
            (Err(e), Ok(())) | (Ok(_), Err(e)) => Err(e),
        }
    });
    match result {
        Ok(t) => t.into(),
        Err(e) => {
            let err = e.to_compile_error();
            quote!({ #err; #krate::SpanGuard::none() }).into()
        }
    }
}

/// `<path>::__private` of a leading `crate = path,` (else
/// `::lens::__private`), read even where the rest fails to parse, so that
/// the fallback of a macro with an error adds no second one.
fn leading_crate(input: TokenStream) -> TokenStream2 {
    let path = (|s: syn::parse::ParseStream<'_>| {
        let p = parse::leading_crate(s);
        s.parse::<TokenStream2>()?;
        p
    })
    .parse(input)
    .ok()
    .flatten();
    expand::Krate::new(path.as_ref()).private()
}

/// Opens an always-on span: `SpanGuard`. See `lens::span_cm!`.
#[proc_macro]
pub fn span_cm(input: TokenStream) -> TokenStream {
    let krate = leading_crate(input.clone());
    let parsed =
        (|s: syn::parse::ParseStream<'_>| parse::SpanMacroArgs::parse(s, false)).parse(input);
    match parsed.and_then(|args| validate::span_macro(&args).map(|()| args)) {
        Ok(args) => expand::span_cm(args).into(),
        Err(e) => {
            let err = e.to_compile_error();
            quote!({ #err; #krate::SpanGuard::none() }).into()
        }
    }
}

/// Declares a consumer span-group family extending the base family. See
/// `lens::define_span_group!`.
#[proc_macro]
pub fn define_span_group(input: TokenStream) -> TokenStream {
    let def = match syn::parse::<parse::FamilyDef>(input) {
        Ok(d) => d,
        Err(e) => return e.to_compile_error().into(),
    };
    match validate::family(&def) {
        Ok(plan) => expand::family(def, plan).into(),
        Err(e) => {
            // still declare the module, so uses of its groups add no errors
            let err = e.to_compile_error();
            let fallback = expand::family_fallback(def);
            quote!(#err #fallback).into()
        }
    }
}
