//! `lens report --csv`: the spans-by-name table as CSV (RFC 4180).

use std::fmt::Write;

use super::Report;

/// The header row.
const HEADER: &str = "name,count,total_ns,mean_ns,min_ns,p50_ns,p95_ns,p99_ns,max_ns,share";

/// Every span name (of those the filters select), by summed time, longest
/// first. `escape`: control characters in names escaped (for a terminal).
pub(crate) fn render_csv(r: &Report, escape: bool) -> String {
    let mut o = String::with_capacity(64 * (r.by_name.len() + 1));
    o.push_str(HEADER);
    o.push_str("\r\n");
    let mut names: Vec<_> = r.by_name.iter().collect();
    names.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then(a.0.cmp(b.0)));
    for (name, n) in names {
        let name = if escape {
            crate::term::printable(name)
        } else {
            std::borrow::Cow::Borrowed(name.as_str())
        };
        field(&mut o, &name);
        let _ = write!(
            o,
            ",{},{},{},{},{},{},{},{},{}\r\n",
            n.count, n.total_ns, n.mean, n.min, n.p50, n.p95, n.p99, n.max, n.share
        );
    }
    o
}

/// `s` as one CSV field: quoted, inner quotes doubled, when it holds a
/// comma, a quote, a line break or leading/trailing space.
fn field(o: &mut String, s: &str) {
    let quote = s.contains([',', '"', '\n', '\r'])
        || s.starts_with(char::is_whitespace)
        || s.ends_with(char::is_whitespace);
    if quote {
        o.push('"');
        o.push_str(&s.replace('"', "\"\""));
        o.push('"');
    } else {
        o.push_str(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_when_needed() {
        let mut o = String::new();
        for s in ["plain", "a,b", "say \"hi\"", "two\nlines", " pad", ""] {
            field(&mut o, s);
            o.push('|');
        }
        assert_eq!(
            o,
            "plain|\"a,b\"|\"say \"\"hi\"\"\"|\"two\nlines\"|\" pad\"||"
        );
    }
}
