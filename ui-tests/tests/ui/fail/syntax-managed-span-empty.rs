// managed_span! with no arguments.
fn main() {
    let _g = lens::managed_span!();
}
