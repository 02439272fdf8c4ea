//! `#[trace_fn] async fn` as a plain `fn` returning the instrumented
//! future, so that the span (and the parent context it takes) is made when
//! the function is *called*, not when the future is first polled:
//! `tokio::spawn(handle(req))` keeps the caller's trace.
//!
//! `async fn f(&self, x: &str) -> T { body }` becomes
//!
//! ```text
//! fn f<'__lens0, '__lens1>(&'__lens0 self, x: &'__lens1 str)
//!     -> impl Future<Output = T> + Captures<(&'__lens0 (), &'__lens1 (), PhantomData<Self>)>
//! {
//!     let __lens_span = if GROUP.is_enabled() { Some(start_detached(..)) } else { None };
//!     instrument(async move { body }, __lens_span)
//! }
//! ```
//!
//! Every elided input lifetime gets a name of its own (as an `async fn`'s
//! do), and the future captures every input lifetime through the
//! `Captures` bound (Rust 2021 return-position `impl Trait` captures only
//! the lifetimes its bounds name). A lifetime hidden in a path (`x: Foo`
//! for `Foo<'a>`) cannot be seen by a macro: write `Foo<'_>`.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::visit_mut::{self, VisitMut};
use syn::{
    FnArg, GenericParam, Lifetime, LifetimeParam, ParenthesizedGenericArguments, Receiver,
    ReturnType, Signature, TypeBareFn, TypeReference,
};

/// Names the elided lifetimes of the inputs and collects every lifetime
/// they use.
#[derive(Default)]
struct Lifetimes {
    fresh: Vec<Lifetime>,
    used: Vec<Lifetime>,
    /// Lifetimes the inputs use (for the elision rules of the output).
    inputs: Vec<Lifetime>,
    /// The lifetime of a `&self` / `&mut self` receiver.
    receiver: Option<Lifetime>,
}

impl Lifetimes {
    fn name(&mut self) -> Lifetime {
        let lt = Lifetime::new(&format!("'__lens{}", self.fresh.len()), Span::call_site());
        self.fresh.push(lt.clone());
        self.use_(&lt);
        lt
    }

    fn use_(&mut self, lt: &Lifetime) {
        if lt.ident != "static" && lt.ident != "_" && !self.used.iter().any(|u| u == lt) {
            self.used.push(lt.clone());
        }
        if lt.ident != "_" && !self.inputs.iter().any(|u| u == lt) {
            self.inputs.push(lt.clone());
        }
    }

    /// The lifetime an elided output lifetime stands for: the receiver's,
    /// else the only input lifetime.
    fn elided_output(&self) -> Option<Lifetime> {
        self.receiver
            .clone()
            .or_else(|| (self.inputs.len() == 1).then(|| self.inputs[0].clone()))
    }
}

/// Writes out the elided lifetimes of the output type (the async fn's
/// output lived inside the future; now it is named in the signature).
struct NameOutput(Lifetime);

impl VisitMut for NameOutput {
    fn visit_type_reference_mut(&mut self, r: &mut TypeReference) {
        if r.lifetime.as_ref().is_none_or(|l| l.ident == "_") {
            r.lifetime = Some(self.0.clone());
        }
        visit_mut::visit_type_mut(self, &mut r.elem);
    }

    fn visit_lifetime_mut(&mut self, lt: &mut Lifetime) {
        if lt.ident == "_" {
            *lt = self.0.clone();
        }
    }

    fn visit_type_bare_fn_mut(&mut self, _: &mut TypeBareFn) {}
    fn visit_parenthesized_generic_arguments_mut(&mut self, _: &mut ParenthesizedGenericArguments) {
    }
}

impl VisitMut for Lifetimes {
    fn visit_type_reference_mut(&mut self, r: &mut TypeReference) {
        match &r.lifetime {
            None => r.lifetime = Some(self.name()),
            Some(lt) if lt.ident == "_" => r.lifetime = Some(self.name()),
            Some(lt) => self.use_(&lt.clone()),
        }
        visit_mut::visit_type_mut(self, &mut r.elem);
    }

    fn visit_lifetime_mut(&mut self, lt: &mut Lifetime) {
        if lt.ident == "_" {
            *lt = self.name();
        } else {
            self.use_(lt);
        }
    }

    fn visit_receiver_mut(&mut self, r: &mut Receiver) {
        if r.colon_token.is_some() {
            // `self: &Self`, `self: Box<Self>`: an ordinary type
            visit_mut::visit_type_mut(self, &mut r.ty);
            return;
        }
        if let Some((_, lt)) = &mut r.reference {
            let named = match lt {
                Some(l) if l.ident != "_" => {
                    let l = l.clone();
                    self.use_(&l);
                    l
                }
                _ => self.name(),
            };
            *lt = Some(named.clone());
            self.receiver = Some(named.clone());
            if let syn::Type::Reference(t) = r.ty.as_mut() {
                t.lifetime = Some(named);
            }
        }
    }

    // elided lifetimes of `fn(&T)` and `Fn(&T)` are higher-ranked: not ours
    fn visit_type_bare_fn_mut(&mut self, _: &mut TypeBareFn) {}
    fn visit_parenthesized_generic_arguments_mut(&mut self, _: &mut ParenthesizedGenericArguments) {
    }
}

/// Turns the signature of an `async fn` into that of a `fn` returning
/// `impl Future`.
pub(crate) fn desugar_signature(k: &crate::expand::Krate, sig: &mut Signature) {
    let lp = k.private();
    let mut lts = Lifetimes::default();
    for input in &mut sig.inputs {
        match input {
            FnArg::Receiver(r) => lts.visit_receiver_mut(r),
            FnArg::Typed(t) => lts.visit_type_mut(&mut t.ty),
        }
    }
    for param in &sig.generics.params {
        if let GenericParam::Lifetime(l) = param {
            if !lts.used.contains(&l.lifetime) {
                lts.used.push(l.lifetime.clone());
            }
        }
    }
    if let (ReturnType::Type(_, ty), Some(lt)) = (&mut sig.output, lts.elided_output()) {
        NameOutput(lt).visit_type_mut(ty);
    }
    let has_self = sig.receiver().is_some();
    for (i, lt) in lts.fresh.iter().enumerate() {
        sig.generics
            .params
            .insert(i, GenericParam::Lifetime(LifetimeParam::new(lt.clone())));
    }
    if sig.generics.lt_token.is_none() {
        sig.generics.lt_token = Some(Default::default());
        sig.generics.gt_token = Some(Default::default());
    }
    let output = match &sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => quote!(#ty),
    };
    let used = &lts.used;
    let self_marker = has_self.then(|| quote!(::core::marker::PhantomData<Self>,));
    let captures: TokenStream = quote! {
        #lp::Captures<(#(&#used (),)* #self_marker)>
    };
    sig.asyncness = None;
    sig.output = syn::parse_quote! {
        -> impl ::core::future::Future<Output = #output> + #captures
    };
}
