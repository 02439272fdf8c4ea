//! Profile lines carried inside spans: a rank that does not export holds
//! its per-step profile in memory, the ranks gather it to the exporting
//! rank (`TelemetryHandle::gather_profiles`), and that rank exports it as
//! spans named [`CARRIER_NAME`] whose [`CARRIER_KEY`] attribute is an
//! array of `{"lensProfile":…}` lines (lens-runtime's
//! `sdk::profile::gather`). They reach a collector and its files as any
//! span does; here each line is read as a line of a `*.profile.jsonl` file
//! would be, and the carrier itself is not a span of the run.

use super::otlp::{self, Envelope};

/// The name of a span that carries profile lines.
pub(crate) const CARRIER_NAME: &str = "lens.profile";
/// The attribute that holds them: a string array, one line each.
pub(crate) const CARRIER_KEY: &str = "lens.profile.lines";

/// Whether `s` is a carrier of profile lines rather than a span.
pub(crate) fn is_carrier(s: &otlp::Span<'_>) -> bool {
    s.name == CARRIER_NAME && s.attributes.iter().any(|kv| kv.key == CARRIER_KEY)
}

/// The lines `s` carries, each handed to `each` parsed (a line that is not
/// a profile line is counted in the second value of the result and
/// skipped). Returns (lines read, lines skipped).
pub(crate) fn for_each_line(
    s: &otlp::Span<'_>,
    mut each: impl FnMut(&otlp::Profile<'_>),
) -> (u64, u64) {
    let (mut read, mut skipped) = (0, 0);
    for kv in s.attributes.iter().filter(|kv| kv.key == CARRIER_KEY) {
        let Some(values) = kv
            .value
            .array_value
            .as_deref()
            .and_then(|a| a.get("values"))
            .and_then(|v| v.as_array())
        else {
            continue;
        };
        for v in values {
            let parsed = v
                .get("stringValue")
                .and_then(|t| t.as_str())
                .and_then(|t| serde_json::from_str::<Envelope<'_>>(t).ok());
            match parsed.as_ref().and_then(|e| e.lens_profile.as_ref()) {
                Some(p) => {
                    read += 1;
                    each(p);
                }
                None => skipped += 1,
            }
        }
    }
    (read, skipped)
}
