// A key followed by `=` needs a value.
fn main() {
    let _g = lens::span_cm!("eval.pass", samples = );
}
