// Consumer groups are named by path, from `#[trace_fn]` and `managed_span!`.
use lens::megatron;
use lens::trace_fn;

#[trace_fn(group = lens::megatron::MICROBATCH, args(mb))]
fn microbatch(mb: u32) -> u32 {
    mb + 1
}

#[trace_fn(group = megatron::COMMUNICATION, name = "allreduce")]
async fn allreduce(bytes: usize) -> usize {
    bytes
}

#[trace_fn(group = lens::nemo_rl::ROLLOUT, err)]
fn rollout(n: usize) -> Result<usize, String> {
    Ok(n)
}

#[trace_fn(group = lens::groups::STEP)]
fn base_group_by_path() {}

fn main() {
    let set = lens::SpanGroupSet::resolve("per_step", &[&megatron::FAMILY]).unwrap();
    lens::set_enabled_span_groups(&set);
    assert!(!megatron::MICROBATCH.is_enabled() && megatron::COMMUNICATION.is_enabled());
    assert_eq!(microbatch(1), 2);
    let g = lens::managed_span!(megatron::COMMUNICATION, "nccl.send", bytes = 1024u64);
    assert!(!g.is_none());
    drop(g);
    let g = lens::managed_span!(lens::megatron::LAYER, "layer", index = 3);
    assert!(g.is_none());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_eq!(rt.block_on(allreduce(8)), 8);
    assert_eq!(rollout(4), Ok(4));
    base_group_by_path();
}
