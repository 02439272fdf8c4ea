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

/// How a value is recorded: as an attribute value, or as the text of its
/// `Display` (`%`) or `Debug` (`?`) formatting.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) enum Fmt {
    #[default]
    Value,
    Display,
    Debug,
}

/// `%` or `?` before a value (or a shorthand key), if there is one.
fn parse_sigil(input: ParseStream<'_>) -> syn::Result<Option<(Fmt, Span)>> {
    if input.peek(Token![%]) {
        Ok(Some((Fmt::Display, input.parse::<Token![%]>()?.span)))
    } else if input.peek(Token![?]) {
        Ok(Some((Fmt::Debug, input.parse::<Token![?]>()?.span)))
    } else {
        Ok(None)
    }
}

/// `key = value`, `"dotted.key" = value`, `dotted.key = value` or `key`;
/// `%` / `?` before the value or the lone key (`%x`, `key = ?expr`) record
/// its `Display` / `Debug` text.
pub(crate) struct Field {
    pub(crate) key: String,
    pub(crate) key_span: Span,
    /// The key as written (`a.b.c`), for errors that underline all of it.
    pub(crate) key_tokens: proc_macro2::TokenStream,
    pub(crate) value: Expr,
    pub(crate) fmt: Fmt,
}

impl Parse for Field {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if let Some((fmt, sigil)) = parse_sigil(input)? {
            let sign = if fmt == Fmt::Display { '%' } else { '?' };
            let shorthand_only = || {
                format!("`{sign}x` stands for `x = {sign}x` and takes a plain identifier; for anything else write `key = {sign}expr`")
            };
            if !input.peek(Ident::peek_any) {
                return Err(syn::Error::new(sigil, shorthand_only()));
            }
            let ident = Ident::parse_any(input)?;
            if !input.is_empty() && !input.peek(Token![,]) {
                let rest = tokens_between(input.cursor(), syn::buffer::Cursor::empty());
                let mut all = quote::quote!(#ident);
                all.extend(rest.into_iter().take_while(
                    |t| !matches!(t, proc_macro2::TokenTree::Punct(p) if p.as_char() == ','),
                ));
                return Err(syn::Error::new_spanned(all, shorthand_only()));
            }
            return Ok(Field {
                key: ident.unraw().to_string(),
                key_span: ident.span(),
                key_tokens: quote::quote!(#ident),
                value: syn::parse_quote_spanned!(ident.span()=> #ident),
                fmt,
            });
        }
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
        let key_tokens = tokens_between(start.cursor(), input.cursor());
        let mut fmt = Fmt::Value;
        let value = if input.peek(Token![=]) {
            let eq = input.parse::<Token![=]>()?;
            if let Some((f, _)) = parse_sigil(input)? {
                fmt = f;
            }
            if input.is_empty() || input.peek(Token![,]) {
                return Err(syn::Error::new(
                    eq.span,
                    format!("expected a value after `{key} =`"),
                ));
            }
            input.parse()?
        } else if let Some(ident) = shorthand {
            syn::parse_quote_spanned!(ident.span()=> #ident)
        } else {
            return Err(syn::Error::new_spanned(
                key_tokens,
                format!("expected `=` and a value after attribute key `{key}`; only a plain identifier can stand alone (`x` means `x = x`)"),
            ));
        };
        Ok(Field {
            key,
            key_span,
            key_tokens,
            value,
            fmt,
        })
    }
}

/// The tokens from `start` up to (not including) `end`.
fn tokens_between(
    start: syn::buffer::Cursor<'_>,
    end: syn::buffer::Cursor<'_>,
) -> proc_macro2::TokenStream {
    let mut out = proc_macro2::TokenStream::new();
    let mut cursor = start;
    while cursor != end {
        match cursor.token_tree() {
            Some((tt, next)) => {
                out.extend([tt]);
                cursor = next;
            }
            None => break,
        }
    }
    out
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
    /// `err(Debug)`: the error's `Debug` text (default: `Display`).
    pub(crate) err_fmt: Fmt,
    /// Whether `args(...)` came before `fields(...)` (to report a key given
    /// by both on the later one).
    pub(crate) args_first: bool,
    /// `kind = server`: the span kind (checked in `validate`).
    pub(crate) kind: Option<Ident>,
    /// `ret`: record the return value (the `Ok` value with `err`).
    pub(crate) ret: Option<Ident>,
    /// `ret(Ok)`: record only the `Ok` value of a returned `Result`.
    pub(crate) ret_ok: bool,
    /// `crate = path`: where generated code finds lens.
    pub(crate) krate: Option<Path>,
    /// `parent = expr`: an explicit parent.
    pub(crate) parent: Option<Expr>,
    /// `links(expr, ...)`: follows-from links.
    pub(crate) links: Vec<Expr>,
}

const TRACE_FN_OPTIONS: &str = "group, name, fields, args, err, ret, kind, parent, links, crate";

/// The span kinds `kind = ...` accepts.
pub(crate) const SPAN_KINDS: &[(&str, &str)] = &[
    ("internal", "Internal"),
    ("server", "Server"),
    ("client", "Client"),
    ("producer", "Producer"),
    ("consumer", "Consumer"),
];

impl TraceFnArgs {
    /// Parses the options, collecting every error (not only the first): after
    /// a malformed option, parsing resumes at the next top-level comma.
    pub(crate) fn parse_all(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut out = TraceFnArgs::default();
        let mut seen: Vec<String> = Vec::new();
        let mut errors: Option<syn::Error> = None;
        while !input.is_empty() {
            if let Err(e) = out.parse_option(input, &mut seen, &mut errors) {
                push_err(&mut errors, e);
                while !input.is_empty() && !input.peek(Token![,]) {
                    input.parse::<proc_macro2::TokenTree>()?;
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

    /// One option. Errors that do not derail parsing go to `errors`; the
    /// returned error means "skip to the next comma".
    fn parse_option(
        &mut self,
        input: ParseStream<'_>,
        seen: &mut Vec<String>,
        errors: &mut Option<syn::Error>,
    ) -> syn::Result<()> {
        if !input.peek(Ident::peek_any) {
            return Err(input.error(format!("expected an option; one of: {TRACE_FN_OPTIONS}")));
        }
        let opt = Ident::parse_any(input)?;
        let name = opt.to_string();
        if seen.contains(&name) {
            push_err(
                errors,
                syn::Error::new(opt.span(), format!("duplicate option `{name}`")),
            );
        }
        seen.push(name.clone());
        match name.as_str() {
            "group" => {
                expect_eq(input, &opt, "group = \"step\"")?;
                self.group = Some(input.parse()?);
            }
            "name" => {
                expect_eq(input, &opt, "name = \"train.step\"")?;
                match input.parse::<Expr>()? {
                    Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) if s.value().is_empty() => {
                        push_err(errors, syn::Error::new(s.span(), "span name must not be empty"));
                    }
                    Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => self.name = Some(s),
                    other => push_err(
                        errors,
                        syn::Error::new_spanned(
                            other,
                            "`name` must be a string literal, e.g. `name = \"train.step\"`; use `managed_span!` for a name computed at run time",
                        ),
                    ),
                }
            }
            "fields" => {
                let content = expect_list(
                    input,
                    &opt,
                    "fields(iteration = i, \"nv.dl.rank\" = rank, loss)",
                )?;
                self.fields.extend(parse_fields(&content)?);
            }
            "args" => {
                let content = expect_list(input, &opt, "args(step, lr)")?;
                self.args_first = self.fields.is_empty();
                self.args.extend(parse_args(&content)?);
            }
            "err" | "ret" => {
                let (example, choices): (&str, &[&str]) = if name == "err" {
                    (
                        "`err`, `err(Display)` or `err(Debug)`",
                        &["Display", "Debug"],
                    )
                } else {
                    ("`ret` or `ret(Ok)`", &["Ok"])
                };
                let mut how = None;
                if input.peek(syn::token::Paren) {
                    let content;
                    parenthesized!(content in input);
                    let bad = || syn::Error::new(opt.span(), format!("expected {example}"));
                    let word: Ident = content.parse().map_err(|_| bad())?;
                    if !content.is_empty() || !choices.iter().any(|c| word == c) {
                        return Err(syn::Error::new(word.span(), format!("expected {example}")));
                    }
                    how = Some(word);
                } else if !input.is_empty() && !input.peek(Token![,]) {
                    return Err(syn::Error::new(
                        opt.span(),
                        format!("`{name}` takes no value: write {example}"),
                    ));
                }
                if name == "err" {
                    self.err = Some(opt.clone());
                    if how.is_some_and(|w| w == "Debug") {
                        self.err_fmt = Fmt::Debug;
                    }
                } else {
                    self.ret = Some(opt.clone());
                    self.ret_ok = how.is_some();
                }
            }
            "crate" => {
                expect_eq(input, &opt, "crate = ::my_crate::lens")?;
                self.krate = Some(input.call(Path::parse_mod_style)?);
            }
            "kind" => {
                expect_eq(input, &opt, "kind = server")?;
                if !input.peek(Ident::peek_any) {
                    return Err(
                        input.error(format!("expected a span kind; one of: {}", kind_list()))
                    );
                }
                self.kind = Some(Ident::parse_any(input)?);
            }
            "parent" => {
                expect_eq(input, &opt, "parent = &request_span")?;
                self.parent = Some(input.parse()?);
            }
            "links" => {
                let content = expect_list(input, &opt, "links(&producer_span, remote_context)")?;
                let exprs = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?;
                if exprs.is_empty() {
                    push_err(
                        errors,
                        syn::Error::new(
                            opt.span(),
                            "`links()` is empty: name at least one span to link, or remove `links`",
                        ),
                    );
                }
                self.links.extend(exprs);
            }
            _ => {
                let msg = if name == "skip" || name == "skip_all" {
                    format!("unknown option `{name}`: `#[trace_fn]` records no argument unless listed in `args(...)`, so there is nothing to skip; expected one of: {TRACE_FN_OPTIONS}")
                } else {
                    format!("unknown option `{name}`; expected one of: {TRACE_FN_OPTIONS}")
                };
                return Err(syn::Error::new(opt.span(), msg));
            }
        }
        Ok(())
    }
}

/// The parameter names of `args(...)`. Anything else (`key = value`, `%x`,
/// an expression) is an error that suggests `fields(...)`, which records
/// expressions.
fn parse_args(content: ParseStream<'_>) -> syn::Result<Vec<Ident>> {
    let mut out = Vec::new();
    while !content.is_empty() {
        let start = content.fork();
        let ident = if content.peek(Ident::peek_any) {
            Some(Ident::parse_any(content)?)
        } else {
            None
        };
        if ident.is_none() || !(content.is_empty() || content.peek(Token![,])) {
            // the whole entry, up to the next comma
            while !content.is_empty() && !content.peek(Token![,]) {
                content.parse::<proc_macro2::TokenTree>()?;
            }
            let entry = tokens_between(start.cursor(), content.cursor());
            let mut written = entry.to_string();
            if let Some(rest) = written.strip_prefix("% ").or(written.strip_prefix("? ")) {
                written = format!("{}{rest}", &written[..1]);
            }
            return Err(syn::Error::new_spanned(
                entry,
                format!("`args(...)` takes parameter names only; to record an expression, use `fields(...)`, e.g. `fields({written})`"),
            ));
        }
        out.extend(ident);
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(out)
}

/// A leading `crate = path,` of a function-like macro (where its generated
/// code finds lens), if there is one.
pub(crate) fn leading_crate(input: ParseStream<'_>) -> syn::Result<Option<Path>> {
    if !(input.peek(Token![crate]) && input.peek2(Token![=])) {
        return Ok(None);
    }
    input.parse::<Token![crate]>()?;
    input.parse::<Token![=]>()?;
    let path = input.call(Path::parse_mod_style)?;
    input.parse::<Token![,]>()?;
    Ok(Some(path))
}

/// `internal, server, client, producer, consumer`.
pub(crate) fn kind_list() -> String {
    SPAN_KINDS
        .iter()
        .map(|(k, _)| *k)
        .collect::<Vec<_>>()
        .join(", ")
}

fn push_err(errors: &mut Option<syn::Error>, e: syn::Error) {
    match errors {
        Some(all) => all.combine(e),
        None => *errors = Some(e),
    }
}

/// `opt = ...`: an error on `opt` when the `=` is missing.
fn expect_eq(input: ParseStream<'_>, opt: &Ident, example: &str) -> syn::Result<()> {
    if input.peek(Token![=]) {
        input.parse::<Token![=]>()?;
        Ok(())
    } else {
        Err(syn::Error::new(
            opt.span(),
            format!("`{opt}` needs a value, e.g. `{example}`"),
        ))
    }
}

/// `opt(...)`: an error on `opt` when the parentheses are missing.
fn expect_list<'a>(
    input: ParseStream<'a>,
    opt: &Ident,
    example: &str,
) -> syn::Result<syn::parse::ParseBuffer<'a>> {
    if !input.peek(syn::token::Paren) {
        return Err(syn::Error::new(
            opt.span(),
            format!("`{opt}` takes a list in parentheses, e.g. `{example}`"),
        ));
    }
    let content;
    parenthesized!(content in input);
    Ok(content)
}

/// `managed_span!(group, name, fields...)` and `span_cm!(name, fields...)`.
pub(crate) struct SpanMacroArgs {
    /// `crate = path` (first): where generated code finds lens.
    pub(crate) krate: Option<Path>,
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
        let krate = leading_crate(input)?;
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
            krate,
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
    /// `crate = path,` (first): where generated code finds lens.
    pub(crate) krate: Option<Path>,
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) vis: Visibility,
    pub(crate) name: Ident,
    pub(crate) groups: Vec<(Vec<Attribute>, Ident)>,
    pub(crate) presets: Vec<PresetDef>,
}

impl Parse for FamilyDef {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let krate = leading_crate(input)?;
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
            krate,
            attrs,
            vis,
            name,
            groups,
            presets,
        })
    }
}
