//! `RankAwareSampler`: keeps or drops every span of a rank by the same md5
//! rule as the `sampled` strategy, then defers to an inner sampler
//! (parent-based by default, or `OTEL_TRACES_SAMPLER`).

use crate::config::strategy::rank_is_sampled;
use opentelemetry::trace::{Link, SpanKind, TraceContextExt, TraceId, TraceState};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{Sampler, SamplingDecision, SamplingResult, ShouldSample};

/// A sampler that drops all spans of ranks the md5 rule does not keep at
/// `rate` and asks `inner` for the others. Rate ≥ 1 keeps every rank, ≤ 0
/// drops every rank. The parent's tracestate is kept in every decision.
///
/// ```
/// use lens::RankAwareSampler;
/// use lens::{otel_sdk::trace::Sampler, otel_sdk::trace::SdkTracerProvider};
/// let s = RankAwareSampler::new(3, 0.5, Sampler::ParentBased(Box::new(Sampler::AlwaysOn)));
/// let _provider = SdkTracerProvider::builder().with_sampler(s).build();
/// ```
#[derive(Debug, Clone)]
pub struct RankAwareSampler {
    rank: u32,
    rate: f64,
    keep: bool,
    inner: Sampler,
}

impl RankAwareSampler {
    /// A sampler for `rank` at `rate` composed with `inner`.
    pub fn new(rank: u32, rate: f64, inner: Sampler) -> Self {
        RankAwareSampler {
            rank,
            rate,
            keep: rank_is_sampled(rank, rate),
            inner,
        }
    }

    /// Whether this rank's spans can be sampled at all.
    ///
    /// ```
    /// use lens::RankAwareSampler;
    /// use lens::otel_sdk::trace::Sampler;
    /// assert!(RankAwareSampler::new(0, 1.0, Sampler::AlwaysOn).keeps_rank());
    /// assert!(!RankAwareSampler::new(0, 0.0, Sampler::AlwaysOn).keeps_rank());
    /// ```
    pub fn keeps_rank(&self) -> bool {
        self.keep
    }

    /// The rank and rate this sampler was built for.
    pub fn rank_and_rate(&self) -> (u32, f64) {
        (self.rank, self.rate)
    }
}

impl ShouldSample for RankAwareSampler {
    fn should_sample(
        &self,
        parent_context: Option<&Context>,
        trace_id: TraceId,
        name: &str,
        span_kind: &SpanKind,
        attributes: &[KeyValue],
        links: &[Link],
    ) -> SamplingResult {
        if !self.keep {
            return SamplingResult {
                decision: SamplingDecision::Drop,
                attributes: Vec::new(),
                trace_state: parent_trace_state(parent_context),
            };
        }
        let mut r =
            self.inner
                .should_sample(parent_context, trace_id, name, span_kind, attributes, links);
        if parent_context.is_some_and(|c| c.has_active_span()) {
            r.trace_state = parent_trace_state(parent_context);
        }
        r
    }
}

fn parent_trace_state(parent: Option<&Context>) -> TraceState {
    parent
        .filter(|c| c.has_active_span())
        .map(|c| c.span().span_context().trace_state().clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::otel::sampler_from_lookup;
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags};

    fn parent(sampled: bool, state: &str) -> Context {
        let sc = SpanContext::new(
            TraceId::from(7u128),
            SpanId::from(9u64),
            if sampled {
                TraceFlags::SAMPLED
            } else {
                TraceFlags::default()
            },
            true,
            TraceState::from_key_value([("vendor", state)]).unwrap(),
        );
        Context::new().with_remote_span_context(sc)
    }

    fn decide(s: &RankAwareSampler, parent: Option<&Context>) -> SamplingResult {
        s.should_sample(
            parent,
            TraceId::from(11u128),
            "x",
            &SpanKind::Internal,
            &[],
            &[],
        )
    }

    fn kept_rank(rate: f64) -> u32 {
        (0..1000).find(|r| rank_is_sampled(*r, rate)).unwrap()
    }

    fn dropped_rank(rate: f64) -> u32 {
        (0..1000).find(|r| !rank_is_sampled(*r, rate)).unwrap()
    }

    #[test]
    fn dropped_rank_drops_everything_and_keeps_tracestate() {
        let s = RankAwareSampler::new(dropped_rank(0.5), 0.5, Sampler::AlwaysOn);
        let p = parent(true, "abc");
        let r = decide(&s, Some(&p));
        assert_eq!(r.decision, SamplingDecision::Drop);
        assert_eq!(r.trace_state.get("vendor"), Some("abc"));
        assert_eq!(decide(&s, None).decision, SamplingDecision::Drop);
    }

    #[test]
    fn kept_rank_composes_with_parent_based() {
        let s = RankAwareSampler::new(
            kept_rank(0.5),
            0.5,
            Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        );
        let sampled = parent(true, "s1");
        let r = decide(&s, Some(&sampled));
        assert_eq!(r.decision, SamplingDecision::RecordAndSample);
        assert_eq!(r.trace_state.get("vendor"), Some("s1"));
        let unsampled = parent(false, "s2");
        let r = decide(&s, Some(&unsampled));
        assert_eq!(
            r.decision,
            SamplingDecision::Drop,
            "parent-based follows the parent"
        );
        assert_eq!(r.trace_state.get("vendor"), Some("s2"));
        assert_eq!(decide(&s, None).decision, SamplingDecision::RecordAndSample);
    }

    #[test]
    fn rate_bounds() {
        assert!(RankAwareSampler::new(123, 1.0, Sampler::AlwaysOn).keeps_rank());
        assert!(RankAwareSampler::new(123, 7.0, Sampler::AlwaysOn).keeps_rank());
        assert!(!RankAwareSampler::new(123, 0.0, Sampler::AlwaysOn).keeps_rank());
        assert!(!RankAwareSampler::new(123, -1.0, Sampler::AlwaysOn).keeps_rank());
    }

    #[test]
    fn env_sampler_is_composed() {
        let inner =
            sampler_from_lookup(|k| (k == "OTEL_TRACES_SAMPLER").then(|| "always_off".into()))
                .unwrap();
        let s = RankAwareSampler::new(kept_rank(0.5), 0.5, inner);
        assert_eq!(decide(&s, None).decision, SamplingDecision::Drop);
        let e = sampler_from_lookup(|k| match k {
            "OTEL_TRACES_SAMPLER" => Some("traceidratio".into()),
            "OTEL_TRACES_SAMPLER_ARG" => Some("2".into()),
            _ => None,
        })
        .unwrap_err();
        assert!(e.to_string().contains("OTEL_TRACES_SAMPLER_ARG"));
    }
}

#[cfg(test)]
mod examples {
    //! Examples of crate-private items, kept as unit tests.

    #[test]
    fn sampler_from_lookup() {
        use crate::config::otel::sampler_from_lookup;
        let s = sampler_from_lookup(|k| match k {
            "OTEL_TRACES_SAMPLER" => Some("parentbased_traceidratio".into()),
            "OTEL_TRACES_SAMPLER_ARG" => Some("0.25".into()),
            _ => None,
        })
        .unwrap();
        let _ = s;
        assert!(
            sampler_from_lookup(|k| (k == "OTEL_TRACES_SAMPLER").then(|| "sometimes".into()))
                .is_err()
        );
    }
}
