//! A fast path for the common span line: a hand-written parser of the
//! OTLP/JSON subset that writers emit, giving exactly what serde would.
//!
//! It is conservative: anything it is not sure to read the way serde_json
//! and the derives in [`super::otlp`] do (escapes, control characters,
//! `null`, floats, negative or out-of-range numbers, duplicate fields,
//! metrics and logs, deep nesting, trailing text…) makes it give up, and the
//! caller parses the whole line with serde_json instead, so results and
//! error messages stay serde's. On span lines it is several times faster:
//! no per-field visitor dispatch, and unknown fields are skipped with a
//! plain scan.

use std::borrow::Cow;

use super::otlp::{
    AnyValue, Envelope, KeyValue, Link, Resource, ResourceSpans, ScopeSpans, Span, Status,
};

/// `None`: not sure, let serde_json parse it.
type R<T> = Option<T>;

/// Nesting deeper than this in skipped values is left to serde_json (whose
/// limit is 128).
const MAX_DEPTH: u32 = 64;

/// Parses one line, or gives up (`None`).
pub(crate) fn envelope(text: &str) -> R<Envelope<'_>> {
    let mut p = P {
        s: text,
        b: text.as_bytes(),
        i: 0,
    };
    let mut env = Envelope::default();
    let mut seen = 0u8;
    p.object(|p, key| {
        match key {
            "resourceSpans" => {
                p.once(&mut seen, 1)?;
                p.array(|p| {
                    env.resource_spans.push(p.resource_spans()?);
                    Some(())
                })
            }
            // rarer; left to serde
            "resourceMetrics" | "resourceLogs" | "lensProfile" => None,
            _ => p.skip(0),
        }
    })?;
    p.ws();
    (p.i == p.b.len()).then_some(env)
}

/// Decodes the text of a string with escapes (between its quotes), as
/// serde_json does in the string's place.
#[cold]
fn decode(inner: &str) -> R<String> {
    serde_json::from_str(&format!("\"{inner}\"")).ok()
}

/// The value of 1 to `max` decimal digits (no sign).
#[inline]
fn dec(digits: &[u8], max: usize) -> R<u64> {
    if digits.is_empty() || digits.len() > max {
        return None;
    }
    let mut v = 0u64;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(c - b'0');
    }
    Some(v)
}

struct P<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> P<'a> {
    #[inline]
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    /// The next non-blank byte (not consumed).
    #[inline]
    fn peek(&mut self) -> R<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    #[inline]
    fn eat(&mut self, c: u8) -> R<()> {
        if self.peek()? == c {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    /// Marks field `bit` seen; a second time is serde's "duplicate field".
    #[inline]
    fn once<
        T: Copy + std::ops::BitAnd<Output = T> + std::ops::BitOrAssign + PartialEq + Default,
    >(
        &self,
        seen: &mut T,
        bit: T,
    ) -> R<()> {
        if *seen & bit != T::default() {
            return None;
        }
        *seen |= bit;
        Some(())
    }

    /// A string without control characters: its text between the quotes
    /// and whether it holds escapes (then still to be decoded).
    #[inline]
    fn raw_str(&mut self) -> R<(&'a str, bool)> {
        self.eat(b'"')?;
        let start = self.i;
        // eight bytes at a time to the first quote, backslash or control
        // character (what serde_json's `skip_to_escape` does)
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        while let Some(chunk) = self.b.get(self.i..self.i + 8) {
            let w = u64::from_le_bytes(chunk.try_into().ok()?);
            let quote = w ^ (ONES * u64::from(b'"'));
            let slash = w ^ (ONES * u64::from(b'\\'));
            let hits = (quote.wrapping_sub(ONES) & !quote)
                | (slash.wrapping_sub(ONES) & !slash)
                | (w.wrapping_sub(ONES * 0x20) & !w);
            let hits = hits & HIGH;
            if hits != 0 {
                self.i += (hits.trailing_zeros() / 8) as usize;
                break;
            }
            self.i += 8;
        }
        let mut escaped = false;
        loop {
            let c = *self.b.get(self.i)?;
            if c == b'"' {
                // both ends are ASCII quotes: char boundaries
                let s = self.s.get(start..self.i)?;
                self.i += 1;
                return Some((s, escaped));
            }
            if c < 0x20 {
                return None;
            }
            if c == b'\\' {
                // the escaped byte is never the closing quote; serde_json
                // checks the escape when the string is decoded
                escaped = true;
                self.i += 1;
            }
            self.i += 1;
        }
    }

    /// A string without escapes, borrowed.
    #[inline]
    fn str(&mut self) -> R<&'a str> {
        match self.raw_str()? {
            (s, false) => Some(s),
            (_, true) => None,
        }
    }

    /// A string: borrowed, or decoded by serde_json when it has escapes.
    #[inline]
    fn string(&mut self) -> R<Cow<'a, str>> {
        match self.raw_str()? {
            (s, false) => Some(Cow::Borrowed(s)),
            (s, true) => Some(Cow::Owned(decode(s)?)),
        }
    }

    /// `{ "key": value, … }`, calling `f` on each key with the value next.
    #[inline]
    fn object(&mut self, mut f: impl FnMut(&mut Self, &str) -> R<()>) -> R<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let (key, escaped) = self.raw_str()?;
            self.eat(b':')?;
            let decoded;
            let key = if escaped {
                decoded = decode(key)?;
                decoded.as_str()
            } else {
                key
            };
            f(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// `[ value, … ]`, calling `f` with each value next.
    #[inline]
    fn array(&mut self, mut f: impl FnMut(&mut Self) -> R<()>) -> R<()> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            f(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Up to `max` decimal digits, no leading zero (JSON); their value.
    #[inline]
    fn digits(&mut self, max: usize) -> R<u64> {
        let start = self.i;
        let mut v = 0u64;
        while let Some(&c) = self.b.get(self.i) {
            if !c.is_ascii_digit() {
                break;
            }
            v = v.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
            self.i += 1;
            if self.i - start > max {
                return None;
            }
        }
        let n = self.i - start;
        if n == 0 || (n > 1 && self.b[start] == b'0') {
            return None;
        }
        Some(v)
    }

    /// A plain non-negative JSON integer of at most `max` digits (no
    /// fraction or exponent: those are floats to serde_json).
    #[inline]
    fn uint(&mut self, max: usize) -> R<u64> {
        self.ws();
        let v = self.digits(max)?;
        match self.b.get(self.i) {
            Some(b'.' | b'e' | b'E') => None,
            _ => Some(v),
        }
    }

    /// An OTLP int64: a decimal string (as `i128::from_str` reads it,
    /// here up to 18 digits, optionally negative) or a plain integer.
    #[inline]
    fn int64(&mut self) -> R<i64> {
        if self.peek()? != b'"' {
            return i64::try_from(self.uint(18)?).ok();
        }
        let s = self.str()?.as_bytes();
        let (neg, digits) = match s.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, s),
        };
        let v = i64::try_from(dec(digits, 18)?).ok()?;
        Some(if neg { -v } else { v })
    }

    /// An OTLP uint64: a decimal string of up to 19 digits or a plain
    /// integer.
    #[inline]
    fn uint64(&mut self) -> R<u64> {
        if self.peek()? != b'"' {
            return self.uint(19);
        }
        dec(self.str()?.as_bytes(), 19)
    }

    /// Skips any JSON value (checking its syntax like serde_json's
    /// `IgnoredAny` does).
    fn skip(&mut self, depth: u32) -> R<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => match self.raw_str()? {
                (_, false) => Some(()),
                (s, true) => decode(s).map(drop),
            },
            b'{' => self.object(|p, _| p.skip(depth + 1)),
            b'[' => self.array(|p| p.skip(depth + 1)),
            b't' => self.lit(b"true"),
            b'f' => self.lit(b"false"),
            b'n' => self.lit(b"null"),
            _ => self.number(),
        }
    }

    /// The text of what `f` reads (after blanks).
    fn token(&mut self, f: impl FnOnce(&mut Self) -> R<()>) -> R<&'a str> {
        self.ws();
        let start = self.i;
        f(self)?;
        self.s.get(start..self.i)
    }

    fn lit(&mut self, word: &[u8]) -> R<()> {
        if self.b.get(self.i..self.i + word.len())? == word {
            self.i += word.len();
            Some(())
        } else {
            None
        }
    }

    /// Any JSON number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self) -> R<()> {
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        self.digits(usize::MAX)?;
        let run = |p: &mut Self| {
            let start = p.i;
            while p.b.get(p.i).is_some_and(u8::is_ascii_digit) {
                p.i += 1;
            }
            (p.i > start).then_some(())
        };
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            run(self)?;
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            run(self)?;
        }
        Some(())
    }

    fn resource_spans(&mut self) -> R<ResourceSpans<'a>> {
        let mut rs = ResourceSpans {
            resource: Resource::default(),
            scope_spans: Vec::new(),
        };
        let mut seen = 0u8;
        self.object(|p, key| match key {
            "resource" => {
                p.once(&mut seen, 1)?;
                let mut seen_attrs = false;
                p.object(|p, key| match key {
                    "attributes" => {
                        p.once(&mut seen_attrs, true)?;
                        p.attributes(&mut rs.resource.attributes)
                    }
                    _ => p.skip(0),
                })
            }
            "scopeSpans" => {
                p.once(&mut seen, 2)?;
                p.array(|p| {
                    let mut ss = ScopeSpans { spans: Vec::new() };
                    let mut seen_spans = false;
                    p.object(|p, key| match key {
                        "spans" => {
                            p.once(&mut seen_spans, true)?;
                            p.array(|p| {
                                ss.spans.push(p.span()?);
                                Some(())
                            })
                        }
                        _ => p.skip(0),
                    })?;
                    rs.scope_spans.push(ss);
                    Some(())
                })
            }
            _ => p.skip(0),
        })?;
        Some(rs)
    }

    fn attributes(&mut self, out: &mut Vec<KeyValue<'a>>) -> R<()> {
        self.array(|p| {
            let mut key = None;
            let mut value = AnyValue::default();
            let mut seen = 0u8;
            p.object(|p, k| match k {
                "key" => {
                    p.once(&mut seen, 1)?;
                    key = Some(p.string()?);
                    Some(())
                }
                "value" => {
                    p.once(&mut seen, 2)?;
                    value = p.any_value()?;
                    Some(())
                }
                _ => p.skip(0),
            })?;
            out.push(KeyValue { key: key?, value });
            Some(())
        })
    }

    fn any_value(&mut self) -> R<AnyValue<'a>> {
        let mut v = AnyValue::default();
        let mut seen = 0u8;
        self.object(|p, key| match key {
            "stringValue" => {
                p.once(&mut seen, 1)?;
                v.string_value = Some(p.string()?);
                Some(())
            }
            "intValue" => {
                p.once(&mut seen, 2)?;
                v.int_value = Some(p.int64()?);
                Some(())
            }
            "boolValue" => {
                p.once(&mut seen, 4)?;
                v.bool_value = Some(match p.peek()? {
                    b't' => p.lit(b"true").map(|()| true)?,
                    b'f' => p.lit(b"false").map(|()| false)?,
                    _ => return None,
                });
                Some(())
            }
            // numbers and JSON values: serde_json's reading of the token
            "doubleValue" => {
                p.once(&mut seen, 8)?;
                let tok = p.token(|p| match p.peek()? {
                    b'-' | b'0'..=b'9' => p.number(),
                    _ => None,
                })?;
                v.double_value = Some(serde_json::from_str(tok).ok()?);
                Some(())
            }
            "arrayValue" | "kvlistValue" => {
                p.once(&mut seen, if key == "arrayValue" { 16 } else { 32 })?;
                // `null` is `None` to serde, not `Some(Value::Null)`
                if p.peek()? == b'n' {
                    return None;
                }
                let tok = p.token(|p| p.skip(0))?;
                let value = Some(Box::new(serde_json::from_str(tok).ok()?));
                if key == "arrayValue" {
                    v.array_value = value;
                } else {
                    v.kvlist_value = value;
                }
                Some(())
            }
            _ => p.skip(0),
        })?;
        Some(v)
    }

    fn span(&mut self) -> R<Span<'a>> {
        let mut s = Span {
            span_id: Cow::Borrowed(""),
            parent_span_id: Cow::Borrowed(""),
            flags: 0,
            name: Cow::Borrowed(""),
            start_time_unix_nano: 0,
            end_time_unix_nano: 0,
            attributes: Vec::new(),
            links: Vec::new(),
            status: Status::default(),
        };
        let mut seen = 0u16;
        self.object(|p, key| {
            match key {
                "spanId" => {
                    p.once(&mut seen, 1)?;
                    s.span_id = p.string()?;
                }
                "parentSpanId" => {
                    p.once(&mut seen, 2)?;
                    s.parent_span_id = p.string()?;
                }
                "flags" => {
                    p.once(&mut seen, 4)?;
                    s.flags = u32::try_from(p.uint(9)?).ok()?;
                }
                "name" => {
                    p.once(&mut seen, 8)?;
                    s.name = p.string()?;
                }
                "startTimeUnixNano" => {
                    p.once(&mut seen, 16)?;
                    s.start_time_unix_nano = p.uint64()?;
                }
                "endTimeUnixNano" => {
                    p.once(&mut seen, 32)?;
                    s.end_time_unix_nano = p.uint64()?;
                }
                "attributes" => {
                    p.once(&mut seen, 64)?;
                    p.attributes(&mut s.attributes)?;
                }
                "links" => {
                    p.once(&mut seen, 128)?;
                    p.array(|p| {
                        let mut link = Link {
                            span_id: Cow::Borrowed(""),
                        };
                        let mut seen_id = false;
                        p.object(|p, key| match key {
                            "spanId" => {
                                p.once(&mut seen_id, true)?;
                                link.span_id = p.string()?;
                                Some(())
                            }
                            _ => p.skip(0),
                        })?;
                        s.links.push(link);
                        Some(())
                    })?;
                }
                "status" => {
                    p.once(&mut seen, 256)?;
                    let mut seen_st = 0u8;
                    p.object(|p, key| match key {
                        "code" => {
                            p.once(&mut seen_st, 1)?;
                            s.status.code = i32::try_from(p.uint(9)?).ok()?;
                            Some(())
                        }
                        "message" => {
                            p.once(&mut seen_st, 2)?;
                            s.status.message = p.string()?;
                            Some(())
                        }
                        _ => p.skip(0),
                    })?;
                }
                _ => p.skip(0)?,
            }
            Some(())
        })?;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path gives serde's result or gives up.
    fn same(line: &str) -> bool {
        let serde = serde_json::from_str::<Envelope<'_>>(line);
        match envelope(line) {
            Some(fast) => {
                let serde = serde.unwrap_or_else(|e| panic!("fast path took {line}: {e}"));
                assert_eq!(format!("{fast:?}"), format!("{serde:?}"), "{line}");
                true
            }
            None => false,
        }
    }

    fn span_line(span: &str) -> String {
        format!(
            r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"nv.dl.rank","value":{{"intValue":"3"}}}}]}},"scopeSpans":[{{"scope":{{"name":"x"}},"spans":[{span}]}}]}}]}}"#
        )
    }

    #[test]
    fn common_lines_take_the_fast_path_and_match_serde() {
        let spans = [
            r#"{"traceId":"0001","spanId":"00000000000000aa","parentSpanId":"01","flags":769,"name":"a b","kind":1,"startTimeUnixNano":"1796000000005050000","endTimeUnixNano":"9999999999999999999","attributes":[{"key":"thread.id","value":{"intValue":"-12"}},{"key":"t","value":{"boolValue":true}},{"key":"s","value":{"stringValue":"é ☃"}},{"key":"b","value":{"bytesValue":"AA=="}}],"links":[{"traceId":"01","spanId":"02","attributes":[]}],"status":{"code":2,"message":"boom"},"events":[{"name":"e","timeUnixNano":1,"x":[1.5e3,-0,null,false,{}]}]}"#,
            r#"{"name":"a","startTimeUnixNano":5,"endTimeUnixNano":0,"attributes":[{"key":"k","value":{"intValue":123456789012345678}}]}"#,
            r#" { "name" : "a" , "flags" : 0 , "status" : { } , "links" : [ ] } "#,
            r#"{}"#,
            // escapes are decoded by serde_json, keys included
            r#"{"name":"a\"b\u00e9\n\/","na\u006de2":1,"spanId":"\u0030a","attributes":[{"key":"k\\","value":{"stringValue":"\ud83d\ude00"}}],"x":"\t"}"#,
            r#"{"na\u006de":"escaped key","status":{"message":"\"quoted\""}}"#,
            // doubles and JSON values: serde_json reads the token
            r#"{"attributes":[{"key":"a","value":{"doubleValue":1.5}},{"key":"b","value":{"doubleValue":-0}},{"key":"c","value":{"doubleValue":2}},{"key":"d","value":{"doubleValue":1.7976931348623157e308}},{"key":"e","value":{"doubleValue":0.30000000000000004}},{"key":"f","value":{"doubleValue":123456789012345678901234567890}}]}"#,
            r#"{"attributes":[{"key":"k","value":{"arrayValue":{"values":[{"intValue":"1"},{"stringValue":"a\"b"}]}}},{"key":"l","value":{"kvlistValue":{"values":[{"key":"x","value":{"doubleValue":1e-7}}],"x":1,"x":2}}}]}"#,
        ];
        for s in spans {
            assert!(same(&span_line(s)), "{s}");
        }
        assert!(same(
            r#"{"resourceSpans":[],"other":{"a":[1,2,{"b":"c"}]}}"#
        ));
        assert!(same(r#"{}"#));
    }

    #[test]
    fn unsure_lines_are_left_to_serde() {
        let spans = [
            r#"{"name":"\ud800"}"#, // lone surrogate
            r#"{"x":"\ud800"}"#,    // ignored: serde's to accept
            r#"{"name":"a\qb"}"#,   // bad escape
            r#"{"x":"a\qb"}"#,      // bad escape
            r#"{"attributes":[{"key":"k","value":{"doubleValue":"NaN"}}]}"#,
            r#"{"attributes":[{"key":"k","value":{"doubleValue":1e400}}]}"#,
            r#"{"attributes":[{"key":"k","value":{"doubleValue":null}}]}"#,
            r#"{"attributes":[{"key":"k","value":{"doubleValue":1,"doubleValue":2}}]}"#,
            r#"{"attributes":[{"key":"k","value":{"arrayValue":null}}]}"#,
            r#"{"attributes":[{"key":"k","value":{"arrayValue":{"values":[1,]}}}]}"#,
            r#"{"name":"a","name":"b"}"#, // duplicate field
            r#"{"name":null}"#,           // null
            r#"{"startTimeUnixNano":"18446744073709551615"}"#, // 20 digits
            r#"{"startTimeUnixNano":"-1"}"#, // serde error
            r#"{"startTimeUnixNano":"12x"}"#, // serde error
            r#"{"startTimeUnixNano":"+1"}"#, // i128 accepts +
            r#"{"startTimeUnixNano":1.5}"#, // float
            r#"{"startTimeUnixNano":1e3}"#, // float
            r#"{"startTimeUnixNano":01}"#, // bad number
            r#"{"startTimeUnixNano":-1}"#, // negative
            r#"{"flags":"1"}"#,           // string for u32
            r#"{"flags":4294967296}"#,    // out of range
            r#"{"attributes":[{"value":{"intValue":"1"}}]}"#, // no key
            r#"{"attributes":[{"key":"k","value":{"boolValue":null}}]}"#,
            r#"{"attributes":[{"key":"k","value":{"intValue":"-"}}]}"#,
            r#"{"x":"a	b"}"#, // control character
            r#"{"x":[1,]}"#,  // bad JSON
            r#"{"x":tru}"#,   // bad JSON
            r#"["a"]"#,       // a struct as a sequence
        ];
        for s in spans {
            assert!(!same(&span_line(s)), "{s}");
        }
        for line in [
            r#"{"resourceMetrics":[]}"#,
            r#"{"resourceSpans":[]} x"#,
            r#"{"resourceSpans":[]"#,
            r#"{"resourceSpans":[],"resourceSpans":[]}"#,
            r#"[]"#,
            "",
        ] {
            assert!(!same(line), "{line}");
        }
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(100), "]".repeat(100));
        assert!(!same(&deep));
    }
}
