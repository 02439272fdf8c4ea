// A family that states its presets completely, as `nemo_rl` and `nemo_gym`
// do: resolving `default` or `per_step` against it gives exactly the listed
// groups, without the base preset of the same name.
use lens::groups::{CHECKPOINT, EVALUATE, FORWARD_BACKWARD, JOB, MODEL_INIT, STEP};
use lens::SpanGroupSet;

lens::define_span_group! {
    /// An RL-like family.
    pub rl {
        groups: [rollout, reward, verify],
        presets: {
            default: [job, rollout],
            per_step: [job, step, rollout, reward],
        },
    }
}

fn main() {
    let d = SpanGroupSet::resolve("default", &[&rl::FAMILY]).unwrap();
    assert_eq!(d.names(), ["job", "rollout"]);
    assert!(!d.contains(&CHECKPOINT) && !d.contains(&EVALUATE));
    let p = SpanGroupSet::resolve("per_step", &[&rl::FAMILY]).unwrap();
    assert_eq!(p.names(), ["job", "step", "rollout", "reward"]);
    assert!(!p.contains(&MODEL_INIT) && !p.contains(&FORWARD_BACKWARD));
    // `all` stays every group of the family and of the base family
    let a = SpanGroupSet::resolve("all", &[&rl::FAMILY]).unwrap();
    assert_eq!(a.names().len(), 8 + 3);
    // the family's preset list is complete: default, per_step, all
    let names: Vec<_> = rl::FAMILY.presets().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["default", "per_step", "all"]);
    // the base family alone still has the base presets
    let b = SpanGroupSet::resolve("default", &[]).unwrap();
    assert!(b.contains(&JOB) && b.contains(&CHECKPOINT) && !b.contains(&STEP));
}
