//! JSON objects of strings, as the byte carrier's JSON form needs them: the
//! W3C carrier map as UTF-8 JSON, the form the Python library sends over
//! NCCL (`json.dumps(carrier)`). Only a flat object of string values is
//! read; anything else gives `None`.

use std::fmt::Write as _;

/// `pairs` as one object, written as Python's `json.dumps` writes it
/// (`", "` and `": "` separators, non-ASCII and control characters escaped
/// as `\uXXXX`), in the given order: `{}` when there are none.
pub(super) fn encode<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<u8> {
    let mut out = String::from("{");
    for (k, v) in pairs {
        if out.len() > 1 {
            out.push_str(", ");
        }
        push_string(&mut out, k);
        out.push_str(": ");
        push_string(&mut out, v);
    }
    out.push('}');
    out.into_bytes()
}

fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// The pairs of `bytes` if they are one JSON object whose values are all
/// strings, in order (surrounding whitespace allowed); a string longer than
/// `max` bytes, or anything else, gives `None`.
pub(super) fn decode(bytes: &[u8], max: usize) -> Option<Vec<(String, String)>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.ws();
    p.eat(b'{')?;
    let mut pairs = Vec::new();
    p.ws();
    if p.peek() == Some(b'}') {
        p.i += 1;
    } else {
        loop {
            p.ws();
            let key = p.string(max)?;
            p.ws();
            p.eat(b':')?;
            p.ws();
            let value = p.string(max)?;
            pairs.push((key, value));
            p.ws();
            match p.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
    }
    p.ws();
    (p.i == p.s.len()).then_some(pairs)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.i += 1;
        Some(b)
    }

    fn eat(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn hex4(&mut self) -> Option<u16> {
        let digits = self.s.get(self.i..self.i + 4)?;
        self.i += 4;
        let text = std::str::from_utf8(digits).ok()?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u16::from_str_radix(text, 16).ok()
    }

    /// A JSON string; a lone surrogate (which no Rust string holds) or a
    /// raw control character gives `None`.
    fn string(&mut self, max: usize) -> Option<String> {
        self.eat(b'"')?;
        let mut out = String::new();
        loop {
            // copy the run up to the next quote or backslash at once (the
            // input is valid UTF-8 and both are ASCII, so the cut is safe)
            let start = self.i;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.i += 1;
            }
            out.push_str(std::str::from_utf8(&self.s[start..self.i]).ok()?);
            if out.len() > max {
                return None;
            }
            match self.next()? {
                b'"' => return Some(out),
                b'\\' => {}
                _ => return None,
            }
            let c = match self.next()? {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => {
                    let hi = self.hex4()?;
                    if (0xd800..0xdc00).contains(&hi) {
                        self.eat(b'\\')?;
                        self.eat(b'u')?;
                        let lo = self.hex4()?;
                        char::decode_utf16([hi, lo]).next()?.ok()?
                    } else {
                        char::from_u32(u32::from(hi))?
                    }
                }
                _ => return None,
            };
            out.push(c);
            if out.len() > max {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn encodes_as_python_json_dumps() {
        assert_eq!(
            String::from_utf8(encode([
                ("traceparent", "00-ab-01"),
                ("baggage", "k=v%20w")
            ]))
            .unwrap(),
            r#"{"traceparent": "00-ab-01", "baggage": "k=v%20w"}"#
        );
        assert_eq!(encode([]), b"{}");
        let odd = "a\"\\\n\u{1}\u{7f}é😀/";
        let bytes = encode([("tracestate", odd)]);
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            r#"{"tracestate": "a\"\\\n\u0001\u007f\u00e9\ud83d\ude00/"}"#
        );
        assert_eq!(decode(&bytes, 100).unwrap(), pairs(&[("tracestate", odd)]));
    }

    #[test]
    fn decodes_any_flat_object_of_strings() {
        let p = decode(
            b" {\n\"traceparent\" :\"t\",\"x\":\"y\",\"baggage\":\"b\\/\\u00e9\"} ",
            100,
        )
        .unwrap();
        assert_eq!(
            p,
            pairs(&[("traceparent", "t"), ("x", "y"), ("baggage", "b/é")])
        );
        assert_eq!(decode(b"{}", 100).unwrap(), pairs(&[]));
        assert_eq!(
            decode(br#"{"baggage":"a","baggage":"b"}"#, 100).unwrap(),
            pairs(&[("baggage", "a"), ("baggage", "b")])
        );
    }

    #[test]
    fn anything_else_is_none() {
        for bad in [
            &b""[..],
            b"{",
            b"[]",
            b"{\"traceparent\":1}",
            b"{\"traceparent\":null}",
            b"{\"traceparent\":\"x\"",
            b"{\"traceparent\":\"x\",}",
            b"{\"traceparent\" \"x\"}",
            b"{\"a\":\"b\"} x",
            b"{\"a\":\"\\ud800\"}",
            b"{\"a\":\"\\ud800\\u0041\"}",
            b"{\"a\":\"\\uZZZZ\"}",
            b"{\"a\":\"\\u+0ab\"}",
            b"{\"a\":\"\\q\"}",
            b"{\"a\":\"raw\ncontrol\"}",
            b"{\"a\":\"\xff\"}",
            b"{\"a\":{\"b\":\"c\"}}",
        ] {
            assert_eq!(decode(bad, 100), None, "{:?}", String::from_utf8_lossy(bad));
        }
        // a string over the limit, escaped or not
        assert_eq!(decode(br#"{"a":"12345"}"#, 4), None);
        assert_eq!(decode(br#"{"a":"\u00e9\u00e9\u00e9"}"#, 4), None);
        assert!(decode(br#"{"a":"1234"}"#, 4).is_some());
    }
}
