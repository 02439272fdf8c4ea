// span_cm! needs a span name.
fn main() {
    let _g = lens::span_cm!();
}
