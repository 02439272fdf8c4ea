//! The spans `lens emit-spans` is asked for: parsed, checked as a whole and
//! put in an order where every parent comes before its children. Nothing
//! here emits anything; any error rejects the whole invocation.

use std::collections::HashMap;

/// Nanoseconds in a second.
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// One `--span NAME,START,END[,PARENT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpanSpec {
    /// Span name; unique within the invocation.
    pub(crate) name: String,
    /// Start, nanoseconds since the Unix epoch.
    pub(crate) start_ns: u64,
    /// End, nanoseconds since the Unix epoch (not before the start).
    pub(crate) end_ns: u64,
    /// Name of the parent span, one of the other `--span`s.
    pub(crate) parent: Option<String>,
}

/// Checked spans, parents first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The spans in emission order: each parent before its children, else
    /// as given.
    pub(crate) spans: Vec<SpanSpec>,
    /// For each span of [`spans`](Self::spans), the index of its parent
    /// there (always smaller than its own).
    pub(crate) parents: Vec<Option<usize>>,
}

impl Plan {
    /// Indices of the spans without a parent.
    pub(crate) fn roots(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.spans.len()).filter(|i| self.parents[*i].is_none())
    }
}

/// Parses and checks every `--span` value; the first problem is the error,
/// naming the offending span and values.
pub(crate) fn plan(values: &[String]) -> Result<Plan, String> {
    let specs = values
        .iter()
        .map(|v| parse_span(v))
        .collect::<Result<Vec<_>, _>>()?;
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(specs.len());
    for (i, s) in specs.iter().enumerate() {
        if index.insert(s.name.as_str(), i).is_some() {
            return Err(format!(
                "span {:?} is given twice (span names must be unique: parents are named by them)",
                s.name
            ));
        }
    }
    let mut parent_of = Vec::with_capacity(specs.len());
    for s in &specs {
        parent_of.push(match &s.parent {
            None => None,
            Some(p) => Some(*index.get(p.as_str()).ok_or_else(|| {
                format!(
                    "span {:?} names parent {p:?}, which is not one of the --span names",
                    s.name
                )
            })?),
        });
    }
    let order = parents_first(&specs, &parent_of)?;
    let mut position = vec![0usize; specs.len()];
    for (pos, &i) in order.iter().enumerate() {
        position[i] = pos;
    }
    let parents = order
        .iter()
        .map(|&i| parent_of[i].map(|p| position[p]))
        .collect();
    let mut slots: Vec<Option<SpanSpec>> = specs.into_iter().map(Some).collect();
    let spans = order.iter().filter_map(|&i| slots[i].take()).collect();
    Ok(Plan { spans, parents })
}

/// `NAME,START,END[,PARENT]`.
fn parse_span(value: &str) -> Result<SpanSpec, String> {
    let fields: Vec<&str> = value.split(',').map(str::trim).collect();
    let [name, start, end, parent @ ..] = fields.as_slice() else {
        return Err(field_count(value, fields.len()));
    };
    if parent.len() > 1 {
        return Err(field_count(value, fields.len()));
    }
    if name.is_empty() {
        return Err(format!("--span {value:?}: the NAME is empty"));
    }
    let time = |what: &str, text: &str| {
        parse_seconds(text).ok_or_else(|| {
            format!(
                "span {name:?}: {what} {text:?} is not a time in seconds since the epoch \
                 (digits with an optional decimal part, e.g. 1718000000.25)"
            )
        })
    };
    let start_ns = time("START", start)?;
    let end_ns = time("END", end)?;
    if end_ns < start_ns {
        return Err(format!("span {name:?}: END {end} is before START {start}"));
    }
    let parent = match parent.first() {
        None => None,
        Some(&"") => {
            return Err(format!("span {name:?}: the PARENT field is empty"));
        }
        Some(p) => Some((*p).to_owned()),
    };
    Ok(SpanSpec {
        name: (*name).to_owned(),
        start_ns,
        end_ns,
        parent,
    })
}

/// The error for a `--span` value with `n` fields.
fn field_count(value: &str, n: usize) -> String {
    format!("--span {value:?}: expected NAME,START,END[,PARENT], got {n} field(s)")
}

/// Seconds since the epoch (`1718000000`, `1718000000.123456789`, `.5`) as
/// exact nanoseconds: the decimal digits are read as written, not through
/// a float; a tenth decimal or more rounds to the nearest nanosecond.
pub(crate) fn parse_seconds(text: &str) -> Option<u64> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return None;
    }
    let secs: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac = frac.as_bytes();
    let mut nanos = (0..9).fold(0u64, |acc, i| {
        acc * 10 + frac.get(i).map_or(0, |d| u64::from(d - b'0'))
    });
    if frac.get(9).is_some_and(|d| *d >= b'5') {
        nanos += 1;
    }
    secs.checked_mul(NANOS_PER_SEC)?.checked_add(nanos)
}

/// Indices in an order where each parent precedes its children, keeping the
/// given order otherwise; a cycle is an error that names it.
fn parents_first(specs: &[SpanSpec], parent_of: &[Option<usize>]) -> Result<Vec<usize>, String> {
    /// Where a span is in the walk.
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        OnPath,
        Done,
    }
    let mut state = vec![State::New; specs.len()];
    let mut order = Vec::with_capacity(specs.len());
    for first in 0..specs.len() {
        // walk up to an emitted ancestor (or a root), then emit downwards
        let mut path = Vec::new();
        let mut at = Some(first);
        while let Some(i) = at {
            match state[i] {
                State::Done => break,
                State::OnPath => {
                    let from = path.iter().position(|p| *p == i).unwrap_or(0);
                    let names: Vec<String> = path[from..]
                        .iter()
                        .chain(std::iter::once(&i))
                        .map(|j| format!("{:?}", specs[*j].name))
                        .collect();
                    return Err(format!(
                        "spans form a cycle (child -> parent): {}",
                        names.join(" -> ")
                    ));
                }
                State::New => {
                    state[i] = State::OnPath;
                    path.push(i);
                    at = parent_of[i];
                }
            }
        }
        for &i in path.iter().rev() {
            state[i] = State::Done;
            order.push(i);
        }
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`plan`] of string literals.
    fn p(values: &[&str]) -> Result<Plan, String> {
        plan(&values.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>())
    }

    /// The names of the planned spans, in order.
    fn names(plan: &Plan) -> Vec<&str> {
        plan.spans.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn seconds_are_exact_to_the_nanosecond() {
        assert_eq!(parse_seconds("1718000000"), Some(1_718_000_000_000_000_000));
        assert_eq!(
            parse_seconds("1718000000.123456789"),
            Some(1_718_000_000_123_456_789)
        );
        assert_eq!(
            parse_seconds("1718000000.5"),
            Some(1_718_000_000_500_000_000)
        );
        assert_eq!(parse_seconds(".25"), Some(250_000_000));
        assert_eq!(parse_seconds("3."), Some(3_000_000_000));
        assert_eq!(parse_seconds("1.0000000015"), Some(1_000_000_002));
        assert_eq!(parse_seconds("1.0000000014"), Some(1_000_000_001));
        for bad in [
            "",
            ".",
            "-1",
            "1e9",
            "abc",
            "1.2.3",
            " 1",
            "+1",
            "99999999999999999999",
        ] {
            assert_eq!(parse_seconds(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn parents_come_first_otherwise_the_given_order_holds() {
        let plan = p(&["c,2,3,b", "a,1,9", "b,1,5,a", "d,4,5"]).expect("valid");
        assert_eq!(names(&plan), ["a", "b", "c", "d"]);
        assert_eq!(plan.parents, [None, Some(0), Some(1), None]);
        assert_eq!(plan.roots().collect::<Vec<_>>(), [0, 3]);
    }

    #[test]
    fn every_bad_input_is_one_clear_error() {
        let cases: &[(&[&str], &str)] = &[
            (&["a,1"], "expected NAME,START,END[,PARENT], got 2 field(s)"),
            (&["a,1,2,b,c"], "got 5 field(s)"),
            (&[",1,2"], "the NAME is empty"),
            (&["a,x,2"], "span \"a\": START \"x\" is not a time"),
            (&["a,1,2e3"], "span \"a\": END \"2e3\" is not a time"),
            (&["a,5,4"], "span \"a\": END 4 is before START 5"),
            (&["a,1,2,"], "span \"a\": the PARENT field is empty"),
            (&["a,1,2", "a,3,4"], "span \"a\" is given twice"),
            (&["a,1,2,zz"], "span \"a\" names parent \"zz\""),
            (&["a,1,2,a"], "cycle (child -> parent): \"a\" -> \"a\""),
            (
                &["r,0,9", "a,1,2,c", "b,1,2,a", "c,1,2,b"],
                "cycle (child -> parent): \"a\" -> \"c\" -> \"b\" -> \"a\"",
            ),
        ];
        for (values, expected) in cases {
            let err = p(values).expect_err("rejected");
            assert!(err.contains(expected), "{values:?}: {err}");
        }
    }
}
