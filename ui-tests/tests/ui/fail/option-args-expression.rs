use lens::trace_fn;

struct Config {
    hidden: usize,
}

#[trace_fn(group = "step", args(hidden = cfg.hidden))]
fn a(cfg: &Config) {
    let _ = cfg;
}

#[trace_fn(group = "step", args(step, %cfg))]
fn b(step: u64, cfg: &str) {
    let _ = (step, cfg);
}

fn main() {}
