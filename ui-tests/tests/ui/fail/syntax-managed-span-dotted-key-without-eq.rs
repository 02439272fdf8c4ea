// A dotted key has no shorthand form: it needs `= value`.
fn main() {
    let rank = 0;
    let _g = lens::managed_span!("step", "train.step", nv.dl.rank);
    let _ = rank;
}
