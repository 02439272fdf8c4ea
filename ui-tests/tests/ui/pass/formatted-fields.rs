// `%` / `?` fields, `err(Debug)`, `ret(Ok)` and the inert guard's methods.
use lens::{managed_span, span_cm, trace_fn, InSpan as _, SpanGuard};

#[derive(Debug)]
struct Config {
    lr: f64,
}

#[trace_fn(group = "step", fields(%name, ?cfg, lr = %cfg.lr, "a.b" = ?(1, 2)), ret(Ok), err(Debug))]
fn step(name: &str, cfg: &Config) -> Result<u64, std::io::Error> {
    Ok(name.len() as u64)
}

#[trace_fn(group = "step", err(Display), ret(Ok))]
async fn fetch(n: u64) -> Result<u64, std::io::Error> {
    Ok(n)
}

fn takes(guard: &SpanGuard) {
    guard.set_attribute("k", 1);
}

fn main() {
    let cfg = Config { lr: 0.1 };
    assert_eq!(step("x", &cfg).unwrap(), 1);
    let g = managed_span!("step", "s", lr = %cfg.lr, ?cfg);
    g.set_attribute("loss", 0.5);
    g.add_event("e", &[]);
    g.record_error("boom");
    g.set_status(lens::SpanStatus::Ok);
    takes(&g);
    takes(&span_cm!("c", ?cfg));
    let _ = g.is_recording();
    let _fut = fetch(1).in_span(SpanGuard::none());
}
