// A family declared in the test itself, used from `#[trace_fn]`,
// `managed_span!` and a spec string.
use lens::{managed_span, trace_fn};

lens::define_span_group! {
    /// Spans of a serving stack.
    pub serving {
        groups: [
            /// One request.
            request,
            batch,
            kv_cache,
        ],
        presets: {
            default: [default, request],
            detailed: [fast, kv_cache],
            fast: [request, batch],
            per_step: [per_step, detailed],
        },
    }
}

mod inner {
    lens::define_span_group! {
        pub(crate) tiny {
            groups: [only],
        }
    }
}

#[trace_fn(group = serving::REQUEST, args(id))]
fn handle(id: u64) -> u64 {
    let _b = managed_span!(serving::BATCH, "serving.batch", size = 4);
    id
}

#[trace_fn(group = inner::tiny::ONLY)]
async fn tiny() -> bool {
    inner::tiny::ONLY.is_enabled()
}

fn main() {
    let set = lens::SpanGroupSet::resolve("detailed", &[&serving::FAMILY]).unwrap();
    assert!(
        set.contains(&serving::REQUEST)
            && set.contains(&serving::BATCH)
            && set.contains(&serving::KV_CACHE)
    );
    assert!(!set.contains(&lens::groups::JOB));
    let set = lens::SpanGroupSet::resolve("default", &[&serving::FAMILY]).unwrap();
    assert!(
        set.contains(&serving::REQUEST)
            && set.contains(&lens::groups::JOB)
            && !set.contains(&serving::BATCH)
    );
    lens::set_enabled_span_groups(&set);
    assert_eq!(handle(7), 7);
    let all =
        lens::SpanGroupSet::resolve("all", &[&serving::FAMILY, &inner::tiny::FAMILY]).unwrap();
    lens::set_enabled_span_groups(&all);
    assert_eq!(handle(8), 8);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert!(rt.block_on(tiny()));
}
