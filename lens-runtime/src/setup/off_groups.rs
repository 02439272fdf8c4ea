//! The one warning setup gives about span groups the spec leaves off.
//!
//! What is knowable at setup, and so what the warning names:
//!
//! * **families**: every family linked into the program (the link-time
//!   registry of `define_span_group!`) or registered. For each consumer
//!   family the spec *reaches* (at least one of its own groups on), the
//!   groups it leaves off: `per_step` reaches `megatron` (communication,
//!   data_loading, inference) and leaves `megatron.layer` off. A family the
//!   spec does not reach at all is one the program most likely does not use
//!   (every program links the four shipped families), so it is not listed;
//!   base groups are not listed either (their names are in the setup line).
//! * **bridge routes**: every `tracing` bridge route of
//!   `NEMO_LENS_TRACING_GROUPS` / `NEMO_LENS_TRACING_DEFAULT` and of every
//!   `TracingBridge` layer built before setup, whose group is off: such a
//!   route can never record.
//! * **sites** (`#[trace_fn]`, `managed_span!`) are only known when they
//!   run, and a disabled site must cost one load and a branch, so a site is
//!   never checked: its group is named through its family instead.
//!
//! The warning is one line on stderr, written by the rank that exports,
//! beside the setup line, and left out with it by `NEMO_LENS_QUIET=1`.

use crate::api::groups::{SpanGroup, SpanGroupSet};

/// The warning for `spec` resolved to `set`, with the bridge's `routes`;
/// `None` when nothing the program can record is off.
pub(super) fn warning(
    spec: &str,
    set: &SpanGroupSet,
    routes: &[(String, &'static SpanGroup)],
) -> Option<String> {
    let off_routes: Vec<&(String, &'static SpanGroup)> =
        routes.iter().filter(|(_, g)| !set.contains(g)).collect();
    let mut off: Vec<&'static SpanGroup> = set.off_in_reached_families();
    for (_, g) in &off_routes {
        if !off.iter().any(|o| o.same(g)) {
            off.push(g);
        }
    }
    if off.is_empty() {
        return None;
    }
    let qualified = |g: &SpanGroup| format!("{}.{}", g.family(), g.name());
    let mut line = format!(
        "span groups off under NEMO_LENS_SPAN_GROUPS={spec:?}, their sites record nothing: {}",
        off.iter()
            .map(|g| qualified(g))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !off_routes.is_empty() {
        line.push_str(&format!(
            "; tracing routes that record nothing: {}",
            off_routes
                .iter()
                .map(|(t, g)| format!("{t} -> {}", qualified(g)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // the example turns on the routed groups first: they were asked for
    let example = off_routes.first().map_or(off[0], |(_, g)| *g).name();
    let spec = spec.trim().trim_end_matches(',');
    let sep = if spec.is_empty() { "" } else { "," };
    line.push_str(&format!(
        "; to turn one on add its name (NEMO_LENS_SPAN_GROUPS=\"{spec}{sep}{example}\"), or use \"all\""
    ));
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::groups::{base, Preset, SpanGroupFamily};
    use std::sync::atomic::AtomicU64;

    static WORD: AtomicU64 = AtomicU64::new(0);
    const LAYER: SpanGroup = SpanGroup::__new("layer", "mega", &WORD, 0);
    const COMM: SpanGroup = SpanGroup::__new("communication", "mega", &WORD, 1);
    static MEGA: SpanGroupFamily = SpanGroupFamily::__new(
        "mega",
        &WORD,
        &[&LAYER, &COMM],
        // per_step: every base group + communication
        &[
            Preset::__new("per_step", 0xff, 0b10),
            Preset::__new("all", 0xff, 0b11),
        ],
    );
    static WORD2: AtomicU64 = AtomicU64::new(0);
    const SERVER: SpanGroup = SpanGroup::__new("server", "gym", &WORD2, 0);
    static GYM: SpanGroupFamily =
        SpanGroupFamily::__new("gym", &WORD2, &[&SERVER], &[Preset::__new("all", 0xff, 1)]);

    fn set(spec: &str) -> SpanGroupSet {
        SpanGroupSet::resolve(spec, &[&MEGA, &GYM]).unwrap()
    }

    #[test]
    fn an_off_group_of_a_reached_family_is_named_with_the_way_to_turn_it_on() {
        let w = warning("per_step", &set("per_step"), &[]).unwrap();
        assert!(
            w.contains("mega.layer") && !w.contains("mega.communication"),
            "{w}"
        );
        assert!(
            w.contains(r#"NEMO_LENS_SPAN_GROUPS="per_step,layer""#),
            "{w}"
        );
        assert!(w.contains("\"all\"") && !w.contains('\n'), "{w}");
    }

    #[test]
    fn a_family_the_spec_does_not_reach_is_not_named() {
        // gym has no group on under per_step: a family the program does not use
        let w = warning("per_step", &set("per_step"), &[]).unwrap();
        assert!(!w.contains("gym.server"), "{w}");
        // nor are base groups, and a base-only spec warns about nothing
        assert_eq!(warning("default", &set("default"), &[]), None);
    }

    #[test]
    fn nothing_off_no_warning() {
        assert_eq!(warning("all", &set("all"), &[]), None);
        assert_eq!(warning("per_step,layer", &set("per_step,layer"), &[]), None);
    }

    #[test]
    fn a_route_to_an_off_group_is_named_even_in_an_unreached_family() {
        let routes = [
            ("my_server".to_owned(), &SERVER),
            ("train".to_owned(), &base::STEP),
        ];
        let w = warning("default", &set("default"), &routes).unwrap();
        assert!(w.contains("gym.server") && w.contains("base.step"), "{w}");
        assert!(
            w.contains(
                "tracing routes that record nothing: my_server -> gym.server, train -> base.step"
            ),
            "{w}"
        );
        assert!(
            w.contains(r#"NEMO_LENS_SPAN_GROUPS="default,server""#),
            "{w}"
        );
        // a route whose group is on is not named
        let w = warning("all", &set("all"), &routes);
        assert_eq!(w, None);
    }

    #[test]
    fn a_blank_spec_gets_an_example_without_a_leading_comma() {
        let routes = [("t".to_owned(), &LAYER)];
        let w = warning("", &set(""), &routes).unwrap();
        assert!(w.contains(r#"NEMO_LENS_SPAN_GROUPS="layer""#), "{w}");
    }
}
