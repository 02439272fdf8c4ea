//! Pass 1: syntax. Turns tokens into argument structs; reports unknown and
//! duplicate options on their own tokens.

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{
    braced, bracketed, parenthesized, Attribute, Expr, Ident, LitStr, Path, Token, Visibility,
};

/// How a site names its group.
pub(crate) enum GroupRef {
    /// `"step"`: a base group, checked against the table.
    Lit(LitStr),
    /// `megatron::MICROBATCH`: any `SpanGroup` static, checked by rustc.
    Path(Box<Path>),
}

impl Parse for GroupRef {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let lookahead = input.lookahead1();
        if lookahead.peek(LitStr) {
            Ok(GroupRef::Lit(input.parse()?))
        } else if lookahead.peek(Ident)
            || lookahead.peek(Token![::])
            || lookahead.peek(Token![crate])
            || lookahead.peek(Token![self])
            || lookahead.peek(Token![super])
        {
            Ok(GroupRef::Path(Box::new(input.parse()?)))
        } else {
            Err(syn::Error::new(
                input.span(),
                "expected a span group: a base group name such as \"step\", or a path such as `megatron::MICROBATCH`",
            ))
        }
    }
}

/// `key = value`, `"dotted.key" = value`, `dotted.key = value` or `key`.
pub(crate) struct Field {
    pub(crate) key: String,
    pub(crate) key_span: Span,
    pub(crate) value: Expr,
}

impl Parse for Field {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let start = input.fork();
        let (key, key_span, shorthand) = if input.peek(LitStr) {
            let lit: LitStr = input.parse()?;
            if lit.value().is_empty() {
                return Err(syn::Error::new(
                    lit.span(),
                    "attribute key must not be empty",
                ));
            }
            (lit.value(), lit.span(), None)
        } else if input.peek(Ident::peek_any) {
            let first = Ident::parse_any(input)?;
            let mut key = first.unraw().to_string();
            let mut span = first.span();
            let mut dotted = false;
            while input.peek(Token![.]) {
                input.parse::<Token![.]>()?;
                let next = Ident::parse_any(input)?;
                key.push('.');
                key.push_str(&next.unraw().to_string());
                span = span.join(next.span()).unwrap_or(span);
                dotted = true;
            }
            (key, span, (!dotted).then_some(first))
        } else {
            return Err(syn::Error::new(
                input.span(),
                "expected an attribute `key = value` (key: an identifier, dotted identifiers, or a string literal)",
            ));
        };
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            input.parse()?
        } else if let Some(ident) = shorthand {
            syn::parse_quote_spanned!(ident.span()=> #ident)
        } else {
            // underline the whole dotted key (`a.b.c`), not the end of input
            let key_tokens: proc_macro2::TokenStream = start
                .cursor()
                .token_stream()
                .into_iter()
                .take_while(
                    |t| !matches!(t, proc_macro2::TokenTree::Punct(p) if p.as_char() == ','),
                )
                .collect();
            return Err(syn::Error::new_spanned(
                key_tokens,
                format!("expected `=` and a value after attribute key `{key}`; only a plain identifier can stand alone (`x` means `x = x`)"),
            ));
        };
        Ok(Field {
            key,
            key_span,
            value,
        })
    }
}

fn parse_fields(input: ParseStream<'_>) -> syn::Result<Vec<Field>> {
    let mut fields = Vec::new();
    while !input.is_empty() {
        fields.push(input.parse()?);
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(fields)
}

/// The options of `#[trace_fn(...)]`.
#[derive(Default)]
pub(crate) struct TraceFnArgs {
    pub(crate) group: Option<GroupRef>,
    pub(crate) name: Option<LitStr>,
    pub(crate) fields: Vec<Field>,
    pub(crate) args: Vec<Ident>,
    pub(crate) err: Option<Ident>,
}

const TRACE_FN_OPTIONS: &str = "group, name, fields, args, err";

impl TraceFnArgs {
    /// Parses the options, collecting every error (not only the first).
    pub(crate) fn parse_all(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut out = TraceFnArgs::default();
        let mut seen: Vec<String> = Vec::new();
        let mut errors: Option<syn::Error> = None;
        let push_err = |e: syn::Error, errors: &mut Option<syn::Error>| match errors {
            Some(all) => all.combine(e),
            None => *errors = Some(e),
        };
        while !input.is_empty() {
            let opt = Ident::parse_any(input)?;
            let name = opt.to_string();
            if seen.contains(&name) {
                push_err(
                    syn::Error::new(opt.span(), format!("duplicate option `{name}`")),
                    &mut errors,
                );
            }
            seen.push(name.clone());
            match name.as_str() {
                "group" => {
                    input.parse::<Token![=]>()?;
                    out.group = Some(input.parse()?);
                }
                "name" => {
                    input.parse::<Token![=]>()?;
                    let expr: Expr = input.parse()?;
                    match expr {
                        Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => out.name = Some(s),
                        other => push_err(
                            syn::Error::new_spanned(other, "`name` must be a string literal, e.g. `name = \"train.step\"`; use `managed_span!` for a name computed at run time"),
                            &mut errors,
                        ),
                    }
                }
                "fields" => {
                    let content;
                    parenthesized!(content in input);
                    out.fields.extend(parse_fields(&content)?);
                }
                "args" => {
                    let content;
                    parenthesized!(content in input);
                    let idents = Punctuated::<Ident, Token![,]>::parse_terminated_with(
                        &content,
                        Ident::parse_any,
                    )?;
                    out.args.extend(idents);
                }
                "err" => out.err = Some(opt.clone()),
                _ => {
                    let msg = if name == "skip" || name == "skip_all" {
                        format!("unknown option `{name}`: `#[trace_fn]` records no argument unless listed in `args(...)`, so there is nothing to skip; expected one of: {TRACE_FN_OPTIONS}")
                    } else {
                        format!("unknown option `{name}`; expected one of: {TRACE_FN_OPTIONS}")
                    };
                    push_err(syn::Error::new(opt.span(), msg), &mut errors);
                    // skip this option's tokens up to the next comma, so the
                    // options after it are still checked
                    while !input.is_empty() && !input.peek(Token![,]) {
                        input.parse::<proc_macro2::TokenTree>()?;
                    }
                }
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        match errors {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

/// `managed_span!(group, name, fields...)` and `span_cm!(name, fields...)`.
pub(crate) struct SpanMacroArgs {
    pub(crate) group: Option<GroupRef>,
    pub(crate) name: Expr,
    pub(crate) fields: Vec<Field>,
}

impl SpanMacroArgs {
    pub(crate) fn parse(input: ParseStream<'_>, with_group: bool) -> syn::Result<Self> {
        let usage = if with_group {
            "expected `managed_span!(group, name, key = value, ...)`, e.g. `managed_span!(\"step\", \"train.step\", iteration = i)`"
        } else {
            "expected `span_cm!(name, key = value, ...)`, e.g. `span_cm!(\"eval.pass\", samples = n)`"
        };
        if input.is_empty() {
            return Err(syn::Error::new(input.span(), usage));
        }
        let group = if with_group {
            let g: GroupRef = input.parse()?;
            if input.is_empty() {
                let msg = format!("missing span name after the group; {usage}");
                return Err(match &g {
                    GroupRef::Lit(l) => syn::Error::new(l.span(), msg),
                    GroupRef::Path(p) => syn::Error::new_spanned(p, msg),
                });
            }
            input.parse::<Token![,]>()?;
            Some(g)
        } else {
            None
        };
        if input.is_empty() {
            return Err(syn::Error::new(
                input.span(),
                format!("missing span name; {usage}"),
            ));
        }
        let name: Expr = input.parse()?;
        let fields = if input.is_empty() {
            Vec::new()
        } else {
            input.parse::<Token![,]>()?;
            parse_fields(input)?
        };
        Ok(SpanMacroArgs {
            group,
            name,
            fields,
        })
    }
}

/// One preset: `name: [member, ...]`.
pub(crate) struct PresetDef {
    pub(crate) name: Ident,
    pub(crate) members: Vec<Ident>,
}

/// `define_span_group! { #[attrs] vis family { groups: [...], presets: { ... } } }`.
pub(crate) struct FamilyDef {
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) vis: Visibility,
    pub(crate) name: Ident,
    pub(crate) groups: Vec<(Vec<Attribute>, Ident)>,
    pub(crate) presets: Vec<PresetDef>,
}

impl Parse for FamilyDef {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        let name: Ident = input.parse()?;
        let body;
        braced!(body in input);
        let mut groups = None;
        let mut presets = Vec::new();
        let mut seen_presets = false;
        while !body.is_empty() {
            let key: Ident = body.parse()?;
            body.parse::<Token![:]>()?;
            match key.to_string().as_str() {
                "groups" if groups.is_none() => {
                    let list;
                    bracketed!(list in body);
                    let mut gs = Vec::new();
                    while !list.is_empty() {
                        let a = list.call(Attribute::parse_outer)?;
                        gs.push((a, list.parse::<Ident>()?));
                        if list.is_empty() {
                            break;
                        }
                        list.parse::<Token![,]>()?;
                    }
                    groups = Some(gs);
                }
                "presets" if !seen_presets => {
                    seen_presets = true;
                    let map;
                    braced!(map in body);
                    while !map.is_empty() {
                        let pname: Ident = map.parse()?;
                        map.parse::<Token![:]>()?;
                        let list;
                        bracketed!(list in map);
                        let members = Punctuated::<Ident, Token![,]>::parse_terminated(&list)?;
                        presets.push(PresetDef {
                            name: pname,
                            members: members.into_iter().collect(),
                        });
                        if map.is_empty() {
                            break;
                        }
                        map.parse::<Token![,]>()?;
                    }
                }
                "groups" | "presets" => {
                    return Err(syn::Error::new(key.span(), format!("duplicate `{key}`")))
                }
                _ => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("unknown key `{key}`; expected `groups` or `presets`"),
                    ))
                }
            }
            if body.is_empty() {
                break;
            }
            body.parse::<Token![,]>()?;
        }
        let groups =
            groups.ok_or_else(|| syn::Error::new(name.span(), "missing `groups: [...]`"))?;
        if !input.is_empty() {
            return Err(syn::Error::new(
                input.span(),
                "expected one family per `define_span_group!`",
            ));
        }
        Ok(FamilyDef {
            attrs,
            vis,
            name,
            groups,
            presets,
        })
    }
}
