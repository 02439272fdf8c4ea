// managed_span! needs a group and a span name.
fn main() {
    let _g = lens::managed_span!("step");
}
