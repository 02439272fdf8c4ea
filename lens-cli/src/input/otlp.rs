//! Serde mirror of the OTLP/JSON encoding, borrowing from the line buffer.
//!
//! Only the fields the readers use are declared; everything else is skipped
//! by serde. int64/uint64 fields accept both the canonical string form
//! (`"123"`) and plain JSON numbers.

use std::borrow::Cow;

use serde::de::{self, Deserializer, IgnoredAny, Visitor};
use serde::Deserialize;

/// One line of an OTLP/JSON-lines file.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Envelope<'a> {
    #[serde(borrow, default)]
    pub(crate) resource_spans: Vec<ResourceSpans<'a>>,
    #[serde(borrow, default)]
    pub(crate) resource_metrics: Vec<ResourceMetrics<'a>>,
    #[serde(borrow, default)]
    pub(crate) resource_logs: Vec<ResourceLogs<'a>>,
    /// One step of a rank that does not export spans (`*.profile.jsonl`,
    /// see [`Profile`]).
    #[serde(borrow, default)]
    pub(crate) lens_profile: Option<Profile<'a>>,
}

/// One step's phase profile, written by a rank that does not export spans
/// (lens's `NEMO_LENS_PROFILE`, on by default with the file exporter): the
/// step and its direct children, with offsets from the step's start.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Profile<'a> {
    #[serde(borrow, default)]
    pub(crate) run: Cow<'a, str>,
    #[serde(default, deserialize_with = "de_opt_i64")]
    pub(crate) rank: Option<i64>,
    #[serde(default, deserialize_with = "de_opt_i64")]
    pub(crate) world: Option<i64>,
    #[serde(borrow, default)]
    pub(crate) host: Cow<'a, str>,
    /// The step span's name.
    #[serde(borrow, default)]
    pub(crate) step: Cow<'a, str>,
    /// The step span's id (16 hex digits).
    #[serde(borrow, default)]
    pub(crate) id: Cow<'a, str>,
    /// Its `dl.iteration`.
    #[serde(default, deserialize_with = "de_opt_i64")]
    pub(crate) it: Option<i64>,
    /// Its start (Unix ns).
    #[serde(default, deserialize_with = "de_u64")]
    pub(crate) t: u64,
    /// Its duration (ns).
    #[serde(default, deserialize_with = "de_u64")]
    pub(crate) d: u64,
    /// Still open when the job ended (truncated).
    #[serde(default)]
    pub(crate) open: bool,
    #[serde(borrow, default)]
    pub(crate) phases: Vec<ProfilePhase<'a>>,
}

/// A direct child of a profiled step.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ProfilePhase<'a> {
    #[serde(borrow, default)]
    pub(crate) n: Cow<'a, str>,
    /// Start, from the step's start (ns).
    #[serde(default, deserialize_with = "de_u64")]
    pub(crate) o: u64,
    /// Duration (ns).
    #[serde(default, deserialize_with = "de_u64")]
    pub(crate) d: u64,
    #[serde(default)]
    pub(crate) open: bool,
}

/// A resource: its attributes only.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Resource<'a> {
    #[serde(borrow, default)]
    pub(crate) attributes: Vec<KeyValue<'a>>,
}

/// Spans of one resource.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourceSpans<'a> {
    #[serde(borrow, default)]
    pub(crate) resource: Resource<'a>,
    #[serde(borrow, default)]
    pub(crate) scope_spans: Vec<ScopeSpans<'a>>,
}

/// Spans of one instrumentation scope.
#[derive(Debug, Deserialize)]
pub(crate) struct ScopeSpans<'a> {
    #[serde(borrow, default)]
    pub(crate) spans: Vec<Span<'a>>,
}

/// One span.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Span<'a> {
    #[serde(borrow, default)]
    pub(crate) span_id: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(crate) parent_span_id: Cow<'a, str>,
    #[serde(default)]
    pub(crate) flags: u32,
    #[serde(borrow, default)]
    pub(crate) name: Cow<'a, str>,
    #[serde(default, deserialize_with = "de_u64")]
    pub(crate) start_time_unix_nano: u64,
    #[serde(default, deserialize_with = "de_u64")]
    pub(crate) end_time_unix_nano: u64,
    #[serde(borrow, default)]
    pub(crate) attributes: Vec<KeyValue<'a>>,
    #[serde(borrow, default)]
    pub(crate) links: Vec<Link<'a>>,
    #[serde(borrow, default)]
    pub(crate) status: Status<'a>,
}

/// Span status (`code`: 0 unset, 1 ok, 2 error).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Status<'a> {
    #[serde(default)]
    pub(crate) code: i32,
    #[serde(borrow, default)]
    pub(crate) message: Cow<'a, str>,
}

/// A span link.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Link<'a> {
    #[serde(borrow, default)]
    pub(crate) span_id: Cow<'a, str>,
}

/// One attribute.
#[derive(Debug, Deserialize)]
pub(crate) struct KeyValue<'a> {
    #[serde(borrow)]
    pub(crate) key: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(crate) value: AnyValue<'a>,
}

/// An attribute value; exactly one field is set in valid input.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AnyValue<'a> {
    #[serde(borrow, default)]
    pub(crate) string_value: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "de_opt_i64")]
    pub(crate) int_value: Option<i64>,
    #[serde(default, deserialize_with = "de_opt_f64")]
    pub(crate) double_value: Option<f64>,
    #[serde(default)]
    pub(crate) bool_value: Option<bool>,
    #[serde(default)]
    pub(crate) array_value: Option<Box<serde_json::Value>>,
    #[serde(default)]
    pub(crate) kvlist_value: Option<Box<serde_json::Value>>,
}

/// Keys that number a step span, preferred first: the Python library's
/// `dl.iteration`, which lens writes, then `nv.dl.iteration`, lens's former
/// name, still read so that older trace files keep their steps.
pub(crate) const ITERATION_KEYS: [&str; 2] = [lens::semconv::DL_ITERATION, "nv.dl.iteration"];

/// A step span's iteration, gathered over its attributes in one pass: feed
/// every attribute to [`StepIteration::offer`], then read
/// [`StepIteration::get`]. `dl.iteration` wins over `nv.dl.iteration` when a
/// span carries both, whatever their order.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct StepIteration {
    found: [Option<i64>; ITERATION_KEYS.len()],
}

impl StepIteration {
    /// Takes the attribute when `key` is one of [`ITERATION_KEYS`] (an
    /// integer value counts; any other value leaves the span without one
    /// from this key); returns whether it was.
    pub(crate) fn offer(&mut self, key: &str, value: &AnyValue<'_>) -> bool {
        match ITERATION_KEYS.iter().position(|k| *k == key) {
            Some(i) => {
                self.found[i] = value.as_i64();
                true
            }
            None => false,
        }
    }

    /// The iteration under the first key that had an integer.
    pub(crate) fn get(self) -> Option<i64> {
        self.found.into_iter().flatten().next()
    }

    /// The iteration of a span with attributes `attrs`.
    #[cfg(test)]
    pub(crate) fn of(attrs: &[KeyValue<'_>]) -> Option<i64> {
        let mut it = Self::default();
        for kv in attrs {
            it.offer(&kv.key, &kv.value);
        }
        it.get()
    }
}

/// A plain attribute value, as the readers use it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// A string.
    Str(String),
    /// A 64-bit integer.
    Int(i64),
    /// A double.
    Double(f64),
    /// A boolean.
    Bool(bool),
    /// An array, a key-value list or bytes, rendered as JSON text.
    Other(String),
}

impl AnyValue<'_> {
    /// The value as an `i64`, when it is an integer.
    pub(crate) fn as_i64(&self) -> Option<i64> {
        self.int_value
    }

    /// The value as a string slice, when it is a string.
    pub(crate) fn as_str(&self) -> Option<&str> {
        self.string_value.as_deref()
    }

    /// True for `true` and for the string `"true"`.
    pub(crate) fn is_true(&self) -> bool {
        self.bool_value == Some(true) || self.as_str() == Some("true")
    }

    /// An owned copy.
    pub(crate) fn to_value(&self) -> Value {
        if let Some(s) = &self.string_value {
            Value::Str(s.to_string())
        } else if let Some(i) = self.int_value {
            Value::Int(i)
        } else if let Some(d) = self.double_value {
            Value::Double(d)
        } else if let Some(b) = self.bool_value {
            Value::Bool(b)
        } else if let Some(v) = self.array_value.as_deref().or(self.kvlist_value.as_deref()) {
            Value::Other(v.to_string())
        } else {
            Value::Other(String::new())
        }
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Str(s) | Value::Other(s) => f.write_str(s),
            Value::Int(i) => write!(f, "{i}"),
            Value::Double(d) => write!(f, "{d}"),
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// Metrics of one resource.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourceMetrics<'a> {
    #[serde(borrow, default)]
    pub(crate) resource: Resource<'a>,
    #[serde(borrow, default)]
    pub(crate) scope_metrics: Vec<ScopeMetrics<'a>>,
}

/// Metrics of one scope.
#[derive(Debug, Deserialize)]
pub(crate) struct ScopeMetrics<'a> {
    #[serde(borrow, default)]
    pub(crate) metrics: Vec<Metric<'a>>,
}

/// One metric with its points (gauge, sum or histogram).
#[derive(Debug, Deserialize)]
pub(crate) struct Metric<'a> {
    #[serde(borrow, default)]
    pub(crate) name: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(crate) gauge: Option<NumberPoints<'a>>,
    #[serde(borrow, default)]
    pub(crate) sum: Option<NumberPoints<'a>>,
    #[serde(borrow, default)]
    pub(crate) histogram: Option<HistogramPoints<'a>>,
}

/// Points of a gauge or a sum.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NumberPoints<'a> {
    #[serde(borrow, default)]
    pub(crate) data_points: Vec<NumberPoint<'a>>,
}

/// One gauge or sum point.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NumberPoint<'a> {
    #[serde(borrow, default)]
    pub(crate) attributes: Vec<KeyValue<'a>>,
    #[serde(default, deserialize_with = "de_u64")]
    pub(crate) time_unix_nano: u64,
    #[serde(default, deserialize_with = "de_opt_f64")]
    pub(crate) as_double: Option<f64>,
    #[serde(default, deserialize_with = "de_opt_i64")]
    pub(crate) as_int: Option<i64>,
}

/// Points of a histogram.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HistogramPoints<'a> {
    #[serde(borrow, default)]
    pub(crate) data_points: Vec<HistogramPoint<'a>>,
}

/// One histogram point; the readers use its mean.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HistogramPoint<'a> {
    #[serde(borrow, default)]
    pub(crate) attributes: Vec<KeyValue<'a>>,
    #[serde(default, deserialize_with = "de_u64")]
    pub(crate) time_unix_nano: u64,
    #[serde(default, deserialize_with = "de_u64")]
    pub(crate) count: u64,
    #[serde(default, deserialize_with = "de_opt_f64")]
    pub(crate) sum: Option<f64>,
}

/// Logs of one resource (only counted).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourceLogs<'a> {
    #[serde(borrow, default)]
    pub(crate) resource: Resource<'a>,
    #[serde(default)]
    pub(crate) scope_logs: Vec<ScopeLogs>,
}

/// Log records of one scope (only counted).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ScopeLogs {
    #[serde(default)]
    pub(crate) log_records: Vec<IgnoredAny>,
}

struct IntVisitor;

impl Visitor<'_> for IntVisitor {
    type Value = i128;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an integer or a decimal string")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i128, E> {
        Ok(v.into())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i128, E> {
        Ok(v.into())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i128, E> {
        Ok(v as i128)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<i128, E> {
        v.parse::<i128>()
            .map_err(|_| E::custom(format_args!("not an integer: {v:?}")))
    }
}

fn de_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = d.deserialize_any(IntVisitor)?;
    u64::try_from(v).map_err(|_| de::Error::custom(format_args!("out of range: {v}")))
}

/// A proto3 JSON double: a number, or the strings `"NaN"`, `"Infinity"`,
/// `"-Infinity"` (which lens's file exporter writes for non-finite values),
/// or a number in a string.
fn de_opt_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    struct F64Visitor;
    impl de::Visitor<'_> for F64Visitor {
        type Value = Option<f64>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a number, or \"NaN\", \"Infinity\", \"-Infinity\"")
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            match v {
                "NaN" => Ok(Some(f64::NAN)),
                "Infinity" => Ok(Some(f64::INFINITY)),
                "-Infinity" => Ok(Some(f64::NEG_INFINITY)),
                other => other
                    .parse()
                    .map(Some)
                    .map_err(|_| E::custom(format_args!("not a double: {other:?}"))),
            }
        }
    }
    d.deserialize_any(F64Visitor)
}

fn de_opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let v = d.deserialize_any(IntVisitor)?;
    i64::try_from(v)
        .map(Some)
        .map_err(|_| de::Error::custom(format_args!("out of range: {v}")))
}

/// Parses a hex span id (16 digits) into a `u64`; 0 when absent or invalid.
pub(crate) fn span_id_u64(hex: &str) -> u64 {
    if hex.is_empty() || hex.len() > 16 {
        return 0;
    }
    u64::from_str_radix(hex, 16).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iteration(attrs: &str) -> Option<i64> {
        let attrs: Vec<KeyValue<'_>> = serde_json::from_str(attrs).expect("attributes");
        StepIteration::of(&attrs)
    }

    #[test]
    fn steps_are_numbered_by_dl_iteration_or_the_former_nv_dl_iteration() {
        assert_eq!(ITERATION_KEYS[0], "dl.iteration");
        // what lens and the Python library write
        assert_eq!(
            iteration(r#"[{"key":"dl.iteration","value":{"intValue":"7"}}]"#),
            Some(7)
        );
        // what lens wrote before: older trace files keep their steps
        assert_eq!(
            iteration(r#"[{"key":"nv.dl.iteration","value":{"intValue":8}}]"#),
            Some(8)
        );
        // both: the current name wins, in either order
        for attrs in [
            r#"[{"key":"nv.dl.iteration","value":{"intValue":"1"}},{"key":"dl.iteration","value":{"intValue":"2"}}]"#,
            r#"[{"key":"dl.iteration","value":{"intValue":"2"}},{"key":"nv.dl.iteration","value":{"intValue":"1"}}]"#,
        ] {
            assert_eq!(iteration(attrs), Some(2), "{attrs}");
        }
        // a non-integer current key falls back to the former one
        assert_eq!(
            iteration(
                r#"[{"key":"dl.iteration","value":{"stringValue":"x"}},{"key":"nv.dl.iteration","value":{"intValue":"3"}}]"#
            ),
            Some(3)
        );
        // neither, or the metric's name, or a bare `iteration`: not a step
        for attrs in [
            r#"[]"#,
            r#"[{"key":"nv.dl.iterations","value":{"intValue":"1"}}]"#,
            r#"[{"key":"iteration","value":{"intValue":"1"}}]"#,
            r#"[{"key":"dl.iteration","value":{"doubleValue":1.0}}]"#,
        ] {
            assert_eq!(iteration(attrs), None, "{attrs}");
        }
    }
}
