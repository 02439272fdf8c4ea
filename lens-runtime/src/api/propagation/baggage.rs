//! W3C Baggage, encoded so that values survive a round trip with the Python
//! OpenTelemetry SDK: `,`, `;`, `=`, `%`, `+`, spaces and non-ASCII text are
//! percent-encoded (a space as `%20`, which every W3C decoder reads, where
//! Python writes `+`); on extraction a `+` reads as a space, as Python's
//! `unquote_plus` reads it. Limits and validation are Python's.

use opentelemetry::baggage::{BaggageExt as _, KeyValueMetadata};
use opentelemetry::propagation::{
    text_map_propagator::FieldIter, Extractor, Injector, TextMapPropagator,
};
use opentelemetry::Context;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::borrow::Cow;

/// Name of the `baggage` header.
const BAGGAGE: &str = "baggage";
/// Most bytes of a whole `baggage` header (W3C Baggage "Limits").
const MAX_HEADER: usize = 8192;
/// Most bytes of one list member (Python SDK: longer ones are dropped).
const MAX_MEMBER: usize = 4096;
/// Most list members read or written (Python SDK).
const MAX_MEMBERS: usize = 180;

/// Python's `quote_plus` leaves letters, digits and `_.-~` as they are; so
/// do we (a space is `%20`, not `+`).
const ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b'-')
    .remove(b'~');

/// The W3C Baggage propagator lens installs and its carriers use.
#[derive(Debug, Default)]
pub(crate) struct BaggagePropagator {
    _private: (),
}

impl BaggagePropagator {
    pub(crate) fn new() -> Self {
        BaggagePropagator::default()
    }
}

/// `key=value[;properties]`, key and value percent-encoded.
fn member(key: &str, value: &str, metadata: &str) -> String {
    let mut m: String = utf8_percent_encode(key, ENCODE).collect();
    m.push('=');
    m.extend(utf8_percent_encode(value, ENCODE));
    let metadata = metadata.trim();
    if !metadata.is_empty() {
        m.push(';');
        m.push_str(metadata);
    }
    m
}

/// The members as one header value, under Python's limits: a member over
/// 4,096 bytes is left out; after 180 members, or once the header would pass
/// 8,192 bytes, the rest are.
fn header<'a>(members: impl Iterator<Item = Cow<'a, str>>) -> String {
    let mut out = String::new();
    let kept = members
        .filter(|m| !m.is_empty() && m.len() <= MAX_MEMBER)
        .take(MAX_MEMBERS);
    for m in kept {
        let comma = usize::from(!out.is_empty());
        if out.len() + comma + m.len() > MAX_HEADER {
            break;
        }
        if comma == 1 {
            out.push(',');
        }
        out.push_str(&m);
    }
    out
}

impl TextMapPropagator for BaggagePropagator {
    fn inject_context(&self, cx: &Context, injector: &mut dyn Injector) {
        let baggage = cx.baggage();
        if baggage.is_empty() {
            return;
        }
        let value = header(
            baggage
                .iter()
                .map(|(k, (v, meta))| Cow::Owned(member(k.as_str(), v.as_str(), meta.as_str()))),
        );
        if !value.is_empty() {
            injector.set(BAGGAGE, value);
        }
    }

    fn extract_with_context(&self, cx: &Context, extractor: &dyn Extractor) -> Context {
        match extractor.get(BAGGAGE).map(parse) {
            Some(entries) if !entries.is_empty() => cx.with_baggage(
                entries
                    .into_iter()
                    .map(|(k, v, meta)| KeyValueMetadata::new(k, v, meta)),
            ),
            _ => cx.clone(),
        }
    }

    fn fields(&self) -> FieldIter<'_> {
        static FIELDS: std::sync::OnceLock<[String; 1]> = std::sync::OnceLock::new();
        FieldIter::new(FIELDS.get_or_init(|| [BAGGAGE.to_owned()]))
    }
}

/// The entries of a `baggage` header, read as the Python SDK reads it: a
/// header over 8,192 bytes is ignored; members are split at `,` (spaces and
/// tabs around it ignored); an empty, non-ASCII or over-4,096-byte member is
/// skipped; at most 180 are read; a member whose key is not a token, whose
/// value holds a character outside the W3C `baggage-octet` range, or whose
/// properties are malformed is skipped. Key and value are `+`-as-space
/// percent-decoded (bad UTF-8 becomes U+FFFD) and trimmed; properties are
/// kept as the entry's metadata.
fn parse(header: &str) -> Vec<(String, String, String)> {
    if header.len() > MAX_HEADER {
        return Vec::new();
    }
    header
        .split(',')
        .map(|m| m.trim_matches([' ', '\t']))
        .filter(|m| !m.is_empty() && m.is_ascii() && m.len() <= MAX_MEMBER)
        .take(MAX_MEMBERS)
        .filter_map(|m| {
            let (key, rest) = m.split_once('=')?;
            let (value, props) = rest.split_once(';').unwrap_or((rest, ""));
            let (key, value) = (
                key.trim_matches([' ', '\t']),
                value.trim_matches([' ', '\t']),
            );
            let props_ok = props.is_empty() || props.split(';').all(valid_property);
            if !(valid_key(key) && valid_value(value) && props_ok) {
                return None;
            }
            let key = unquote_plus(key).trim().to_owned();
            let value = unquote_plus(value).trim().to_owned();
            Some((key, value, props.trim().to_owned()))
        })
        .collect()
}

/// `+` as a space, then percent-decoded; bad UTF-8 becomes U+FFFD and a `%`
/// that starts no escape stays (Python's `unquote_plus`).
fn unquote_plus(s: &str) -> String {
    let spaced = s.replace('+', " ");
    percent_decode_str(&spaced).decode_utf8_lossy().into_owned()
}

/// A token: printable ASCII other than space and `"(),/:;<=>?@[\]{}`.
fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_graphic() && !b"\"(),/:;<=>?@[\\]{}".contains(&b))
}

/// W3C `baggage-octet`s: printable ASCII other than space, `"`, `,`, `;`,
/// `\`.
fn valid_value(v: &str) -> bool {
    v.bytes()
        .all(|b| b.is_ascii_graphic() && !b"\",;\\".contains(&b))
}

/// `key`, or `key=value`, with spaces and tabs around each part.
fn valid_property(p: &str) -> bool {
    match p.split_once('=') {
        Some((k, v)) => {
            valid_key(k.trim_matches([' ', '\t'])) && valid_value(v.trim_matches([' ', '\t']))
        }
        None => valid_key(p.trim_matches([' ', '\t'])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::baggage::BaggageExt;
    use std::collections::HashMap;

    fn round_trip(value: &str) -> (String, String) {
        let cx = Context::new().with_baggage([KeyValueMetadata::new("k", value.to_owned(), "")]);
        let mut map: HashMap<String, String> = HashMap::new();
        BaggagePropagator::new().inject_context(&cx, &mut map);
        let header = map["baggage"].clone();
        let back = BaggagePropagator::new().extract_with_context(&Context::new(), &map);
        let got = back
            .baggage()
            .get("k")
            .map(|v| v.to_string())
            .unwrap_or_default();
        (header, got)
    }

    #[test]
    fn every_awkward_value_survives_and_is_encoded_for_python() {
        for (value, wire) in [
            ("a b", "k=a%20b"),
            ("a+b", "k=a%2Bb"),
            ("50%", "k=50%25"),
            ("%41", "k=%2541"),
            ("x,y;z=w", "k=x%2Cy%3Bz%3Dw"),
            ("é ü 日本", "k=%C3%A9%20%C3%BC%20%E6%97%A5%E6%9C%AC"),
            ("a_b.c-d~e", "k=a_b.c-d~e"),
        ] {
            assert_eq!(round_trip(value), (wire.to_owned(), value.to_owned()));
        }
    }

    #[test]
    fn reads_what_python_writes() {
        // Python's quote_plus: a space is `+`, a `+` is `%2B`
        let e = parse("k=a+b%2Bc%25,j=%C3%A9 , bad key=x,v=\"q\",p=1;prop;q=2");
        assert_eq!(
            e,
            [
                ("k".into(), "a b+c%".into(), "".into()),
                ("j".into(), "é".into(), "".into()),
                ("p".into(), "1".into(), "prop;q=2".into()),
            ]
        );
    }

    #[test]
    fn limits_are_pythons() {
        assert!(parse(&format!("k={}", "v".repeat(MAX_HEADER))).is_empty());
        assert!(parse(&format!("k={}", "v".repeat(MAX_MEMBER))).is_empty());
        assert_eq!(
            parse(&format!("k={}", "v".repeat(MAX_MEMBER - 2)))[0]
                .1
                .len(),
            MAX_MEMBER - 2
        );
        assert!(parse("k=é").is_empty(), "raw non-ASCII is skipped");
        assert_eq!(
            parse("k=%zz").first().map(|e| e.1.clone()),
            Some("%zz".into())
        );
        assert_eq!(parse("k=%ff")[0].1, "\u{fffd}");
        let many: Vec<String> = (0..200).map(|i| format!("k{i}=v")).collect();
        assert_eq!(parse(&many.join(",")).len(), MAX_MEMBERS);
        let h = header(many.iter().map(|m| Cow::Borrowed(m.as_str())));
        assert_eq!(h.split(',').count(), MAX_MEMBERS);
        let big: Vec<String> = (0..3)
            .map(|i| format!("k{i}={}", "v".repeat(3000)))
            .collect();
        let h = header(big.iter().map(|m| Cow::Borrowed(m.as_str())));
        assert_eq!(h, big[..2].join(","));
        let huge = format!("k={}", "v".repeat(MAX_MEMBER));
        assert_eq!(
            header([Cow::Borrowed(huge.as_str()), Cow::Borrowed("a=1")].into_iter()),
            "a=1"
        );
    }
}
