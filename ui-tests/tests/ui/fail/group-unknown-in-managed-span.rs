// managed_span! checks base group names like #[trace_fn].
fn main() {
    let _g = lens::managed_span!("forward", "train.forward");
}
