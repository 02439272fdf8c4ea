use lens::trace_fn;

#[trace_fn(group = "step", ret)]
fn a() -> Result<f32, std::io::Error> {
    Ok(1.0)
}

#[trace_fn(group = "step", ret(Ok))]
fn b() -> u64 {
    1
}

#[trace_fn(group = "step", ret(Err))]
fn c() -> Result<u64, String> {
    Ok(1)
}

#[trace_fn(group = "step", err(Json))]
fn d() -> Result<u64, String> {
    Ok(1)
}

fn main() {}
