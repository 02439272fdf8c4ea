// `nv.dl.rank` and `"nv.dl.rank"` are the same key.
fn main() {
    let rank = 3;
    let _g = lens::managed_span!("step", "train.step", nv.dl.rank = rank, "nv.dl.rank" = 0);
}
