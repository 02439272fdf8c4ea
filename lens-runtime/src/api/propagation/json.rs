//! The JSON form of the byte carrier: the W3C carrier map as UTF-8 JSON, the
//! form the Python library sends over NCCL (`json.dumps(carrier)`). Only a
//! flat object of string values is read; anything else gives `None`.

use super::bytes::{fit_field, MAX_FIELD};
use super::carrier::{Carrier, ENV_CARRIER_VARS};
use std::fmt::Write as _;

/// `map`'s W3C fields as Python's `json.dumps` writes them (`", "` and
/// `": "` separators, non-ASCII and control characters escaped as `\uXXXX`),
/// in carrier order, skipping absent and empty fields: `{}` when none.
pub(super) fn encode(map: &Carrier) -> Vec<u8> {
    let mut out = String::from("{");
    for (k, _) in ENV_CARRIER_VARS {
        let v = fit_field(k, map.get(k).map_or("", String::as_str));
        if v.is_empty() {
            continue;
        }
        if out.len() > 1 {
            out.push_str(", ");
        }
        push_string(&mut out, k);
        out.push_str(": ");
        push_string(&mut out, &v);
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

/// The carrier in `bytes` if they are one JSON object whose values are all
/// strings (surrounding whitespace allowed; later duplicate keys win, as in
/// Python's `json.loads`). Only the W3C fields are kept, each at most
/// [`MAX_FIELD`] bytes; anything else gives `None`.
pub(super) fn decode(bytes: &[u8]) -> Option<Carrier> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.ws();
    p.eat(b'{')?;
    let mut map = Carrier::new();
    p.ws();
    if p.peek() == Some(b'}') {
        p.i += 1;
    } else {
        loop {
            p.ws();
            let key = p.string()?;
            p.ws();
            p.eat(b':')?;
            p.ws();
            let value = p.string()?;
            if ENV_CARRIER_VARS.iter().any(|(k, _)| *k == key) {
                if value.len() > MAX_FIELD {
                    return None;
                }
                map.insert(key, value);
            }
            p.ws();
            match p.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
    }
    p.ws();
    (p.i == p.s.len()).then_some(map)
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
    fn string(&mut self) -> Option<String> {
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
            if out.len() > MAX_FIELD * 6 {
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn carrier(pairs: &[(&str, &str)]) -> Carrier {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn encodes_as_python_json_dumps() {
        let c = carrier(&[
            (
                "traceparent",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            ),
            ("baggage", "k=v%20w"),
            ("other", "x"),
        ]);
        assert_eq!(
            String::from_utf8(encode(&c)).unwrap(),
            r#"{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "baggage": "k=v%20w"}"#
        );
        assert_eq!(encode(&Carrier::new()), b"{}");
        let odd = carrier(&[("tracestate", "a\"\\\n\u{1}é😀/")]);
        assert_eq!(
            String::from_utf8(encode(&odd)).unwrap(),
            r#"{"tracestate": "a\"\\\n\u0001\u00e9\ud83d\ude00/"}"#
        );
        assert_eq!(decode(&encode(&odd)).unwrap(), odd);
    }

    #[test]
    fn decodes_any_flat_object_of_strings() {
        let c = decode(b" {\n\"traceparent\" :\"t\",\"x\":\"y\",\"baggage\":\"b\\/\\u00e9\"} ")
            .unwrap();
        assert_eq!(c, carrier(&[("traceparent", "t"), ("baggage", "b/é")]));
        assert_eq!(decode(b"{}").unwrap(), Carrier::new());
        assert_eq!(
            decode(br#"{"baggage":"a","baggage":"b"}"#).unwrap()["baggage"],
            "b"
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
            assert_eq!(decode(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        let long = format!("{{\"baggage\":\"{}\"}}", "x".repeat(MAX_FIELD + 1));
        assert_eq!(decode(long.as_bytes()), None);
    }
}
