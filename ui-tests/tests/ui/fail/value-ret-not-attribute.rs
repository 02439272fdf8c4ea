use lens::trace_fn;

struct Batch;

#[trace_fn(group = "step", ret)]
fn make() -> Batch {
    Batch
}

#[trace_fn(group = "step", ret, err)]
async fn make_async() -> Result<Batch, String> {
    Ok(Batch)
}

fn main() {}
