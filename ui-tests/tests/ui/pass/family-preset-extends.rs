// A family that extends the base presets explicitly, by listing a base
// preset as a member (as `megatron` does), and one that states no presets and
// inherits the base ones unchanged.
use lens::groups::{CHECKPOINT, EVALUATE, JOB, OPTIMIZER, STEP};
use lens::SpanGroupSet;

lens::define_span_group! {
    /// A Megatron-like family.
    pub mt {
        groups: [microbatch, communication],
        presets: {
            default: [default, communication],
            per_step: [per_step, microbatch],
        },
    }
}

lens::define_span_group! {
    pub(crate) plain {
        groups: [extra],
    }
}

fn main() {
    let d = SpanGroupSet::resolve("default", &[&mt::FAMILY]).unwrap();
    assert_eq!(d.names(), ["job", "checkpoint", "evaluate", "communication"]);
    let p = SpanGroupSet::resolve("per_step", &[&mt::FAMILY]).unwrap();
    assert!(p.contains(&STEP) && p.contains(&OPTIMIZER) && p.contains(&mt::MICROBATCH));
    assert!(!p.contains(&mt::COMMUNICATION));
    let d = SpanGroupSet::resolve("default", &[&plain::FAMILY]).unwrap();
    assert!(d.contains(&JOB) && d.contains(&CHECKPOINT) && d.contains(&EVALUATE));
    assert!(!d.contains(&plain::EXTRA));
    let names: Vec<_> = plain::FAMILY.presets().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["default", "per_step", "all"]);
}
