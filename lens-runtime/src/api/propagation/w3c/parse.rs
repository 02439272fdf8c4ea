//! Parsing and validating `traceparent` and `tracestate` values, by the
//! rules the [`w3c`](crate::api::propagation::w3c) module documents.

use opentelemetry::trace::{SpanId, TraceFlags, TraceId};

/// The most list members a `tracestate` may have; more drops it.
///
/// ```
/// assert_eq!(lens::propagation::w3c::MAX_TRACESTATE_MEMBERS, 32);
/// ```
pub const MAX_TRACESTATE_MEMBERS: usize = 32;

/// The flag bits this implementation knows (sampled, random-trace-id).
pub(crate) const KNOWN_FLAGS: u8 = 0x03;
/// Length of a version `00` traceparent (and of the known prefix of later versions).
pub(crate) const TRACEPARENT_LEN: usize = 55;
/// Longest tracestate key and value.
pub(crate) const MAX_KEY_LEN: usize = 256;
pub(crate) const MAX_VALUE_LEN: usize = 256;

/// Parses one `traceparent` value into its trace id, parent id and flags
/// (all 8 bits as sent), or `None` if it is invalid. See the
/// [module documentation](crate::api::propagation::w3c) for the rules.
///
/// ```
/// use lens::propagation::w3c::parse_traceparent;
/// let (trace_id, parent_id, flags) =
///     parse_traceparent(" 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\t").unwrap();
/// assert_eq!(format!("{trace_id:032x}"), "0af7651916cd43dd8448eb211c80319c");
/// assert_eq!(format!("{parent_id:016x}"), "b7ad6b7169203331");
/// assert!(flags.is_sampled());
/// // a future version may carry more fields after a dash
/// assert!(parse_traceparent("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-xyz").is_some());
/// // version 00 may not, and version ff is invalid
/// assert!(parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-xyz").is_none());
/// assert!(parse_traceparent("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").is_none());
/// ```
pub fn parse_traceparent(value: &str) -> Option<(TraceId, SpanId, TraceFlags)> {
    let v = value.trim_matches(is_ows).as_bytes();
    if v.len() < TRACEPARENT_LEN {
        return None;
    }
    let version = hex_u8(&v[0..2])?;
    if v[2] != b'-' || version == 0xff {
        return None;
    }
    if version == 0x00 && v.len() != TRACEPARENT_LEN {
        return None;
    }
    if v.len() > TRACEPARENT_LEN && v[TRACEPARENT_LEN] != b'-' {
        return None;
    }
    if v[35] != b'-' || v[52] != b'-' {
        return None;
    }
    let trace_id = hex_u128(&v[3..35])?;
    let parent_id = hex_u128(&v[36..52])? as u64;
    let flags = hex_u8(&v[53..55])?;
    if trace_id == 0 || parent_id == 0 {
        return None;
    }
    Some((
        TraceId::from_bytes(trace_id.to_be_bytes()),
        SpanId::from_bytes(parent_id.to_be_bytes()),
        TraceFlags::new(flags),
    ))
}

/// Parses the values of every `tracestate` header of one request, combined
/// in order, into its list members; `None` if the combined list is invalid
/// and must be dropped (a malformed member, more than 32 members). Empty and
/// blank members are ignored, so `Some(vec![])` is an empty (but valid)
/// `tracestate`. A duplicated key keeps its first member: later members
/// with the same key are validated, then discarded, and do not count
/// towards the 32.
///
/// ```
/// use lens::propagation::w3c::parse_tracestate;
/// let members = parse_tracestate(["foo=1 , bar=2", "", "tenant@vendor=x"]).unwrap();
/// assert_eq!(members, [("foo", "1"), ("bar", "2"), ("tenant@vendor", "x")]
///     .map(|(k, v)| (k.to_string(), v.to_string())));
/// // a duplicated key: the first member is kept
/// let first = parse_tracestate(["foo=1", "bar=2,foo=2"]).unwrap();
/// assert_eq!(first, [("foo", "1"), ("bar", "2")].map(|(k, v)| (k.to_string(), v.to_string())));
/// assert!(parse_tracestate(["foo=1", "foo=X=1"]).is_none()); // a malformed duplicate
/// assert!(parse_tracestate(["FOO=1"]).is_none()); // uppercase key
/// assert!(parse_tracestate(["foo="]).is_none()); // empty value
/// ```
pub fn parse_tracestate<'a, I>(values: I) -> Option<Vec<(String, String)>>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut members: Vec<(String, String)> = Vec::new();
    for header in values {
        for member in header.split(',') {
            let member = member.trim_matches(is_ows);
            if member.is_empty() {
                continue;
            }
            let (key, value) = member.split_once('=')?;
            if !valid_key(key) || !valid_value(value) {
                return None;
            }
            if members.iter().any(|(k, _)| k == key) {
                continue; // a duplicated key: the first member wins
            }
            if members.len() == MAX_TRACESTATE_MEMBERS {
                return None;
            }
            members.push((key.to_owned(), value.to_owned()));
        }
    }
    Some(members)
}

/// `key = ( lcalpha / DIGIT ) 0*255( keychar )`,
/// `keychar = lcalpha / DIGIT / "_" / "-" / "*" / "/" / "@"`.
pub(crate) fn valid_key(key: &str) -> bool {
    let k = key.as_bytes();
    match k.first() {
        Some(b) if b.is_ascii_lowercase() || b.is_ascii_digit() => {}
        _ => return false,
    }
    k.len() <= MAX_KEY_LEN
        && k.iter().all(|&b| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || matches!(b, b'_' | b'-' | b'*' | b'/' | b'@')
        })
}

/// `value = 0*255(chr) nblk-chr`, `chr = %x20 / nblk-chr`,
/// `nblk-chr = %x21-2B / %x2D-3C / %x3E-7E`.
pub(crate) fn valid_value(value: &str) -> bool {
    let v = value.as_bytes();
    !v.is_empty()
        && v.len() <= MAX_VALUE_LEN
        && v.last() != Some(&b' ')
        && v.iter()
            .all(|&b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
}

pub(crate) fn is_ows(c: char) -> bool {
    c == ' ' || c == '\t'
}

pub(crate) fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

pub(crate) fn hex_u8(digits: &[u8]) -> Option<u8> {
    Some((hex_digit(digits[0])? << 4) | hex_digit(digits[1])?)
}

/// Up to 32 lowercase hex digits as a number.
pub(crate) fn hex_u128(digits: &[u8]) -> Option<u128> {
    digits.iter().try_fold(0u128, |acc, &b| {
        Some((acc << 4) | u128::from(hex_digit(b)?))
    })
}
