//! The encoding of one profile line: `{"lensProfile":{…}}\n` (the format is
//! in the parent module's documentation). Once per step, with the standard
//! formatting; names go through serde_json's escaping when they need it.

use std::borrow::Cow;
use std::io::Write as _;

/// The longest span name kept, in bytes (cut at a character boundary).
pub(crate) const MAX_NAME: usize = 128;

/// Who wrote the profile: the fields every line carries.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub(crate) run: String,
    pub(crate) rank: u32,
    pub(crate) world: u32,
    pub(crate) host: String,
}

/// One direct child of a parent, or the sum of its children of one name.
#[derive(Debug)]
pub(super) struct Phase {
    pub(super) name: Cow<'static, str>,
    /// Unix ns.
    pub(super) start: u64,
    pub(super) dur: u64,
    pub(super) open: bool,
}

/// A step's line, before encoding.
pub(super) struct StepLine<'a> {
    pub(super) name: &'a str,
    pub(super) id: u64,
    pub(super) iteration: Option<i64>,
    pub(super) start: u64,
    pub(super) dur: u64,
    pub(super) open: bool,
    pub(super) phases: &'a [Phase],
}

/// Appends `s`'s line, `\n` included, to `out`.
pub(super) fn encode(m: &Meta, s: &StepLine<'_>, out: &mut Vec<u8>) {
    // writes into a Vec cannot fail
    let _ = write!(out, "{{\"lensProfile\":{{\"v\":1,\"run\":");
    json_str(out, &m.run);
    let _ = write!(out, ",\"rank\":{},\"world\":{},\"host\":", m.rank, m.world);
    json_str(out, &m.host);
    out.extend_from_slice(b",\"step\":");
    json_str(out, cut_str(s.name));
    let _ = write!(out, ",\"id\":\"{:016x}\"", s.id);
    if let Some(it) = s.iteration {
        let _ = write!(out, ",\"it\":{it}");
    }
    let _ = write!(out, ",\"t\":\"{}\",\"d\":{}", s.start, s.dur);
    if s.open {
        out.extend_from_slice(b",\"open\":true");
    }
    out.extend_from_slice(b",\"phases\":[");
    for (i, p) in s.phases.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"n\":");
        json_str(out, &p.name);
        let _ = write!(
            out,
            ",\"o\":{},\"d\":{}",
            p.start.saturating_sub(s.start),
            p.dur
        );
        if p.open {
            out.extend_from_slice(b",\"open\":true");
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"]}}\n");
}

/// `s` as a JSON string: as is when nothing needs escaping (span names,
/// as a rule), else with serde_json's escaping.
fn json_str(out: &mut Vec<u8>, s: &str) {
    if !s
        .bytes()
        .any(|b| b < 0x20 || b == b'"' || b == b'\\' || b == 0x7f)
    {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        return;
    }
    if serde_json::to_writer(&mut *out, s).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}

/// `s` cut to at most `MAX_NAME` bytes, at a character boundary.
fn cut_str(s: &str) -> &str {
    if s.len() <= MAX_NAME {
        return s;
    }
    let mut end = MAX_NAME;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `name` cut to at most `MAX_NAME` bytes (see [`cut_str`]).
pub(super) fn cut(name: Cow<'static, str>) -> Cow<'static, str> {
    match name {
        Cow::Owned(s) if s.len() > MAX_NAME => Cow::Owned(cut_str(&s).to_owned()),
        Cow::Borrowed(s) => Cow::Borrowed(cut_str(s)),
        n => n,
    }
}
