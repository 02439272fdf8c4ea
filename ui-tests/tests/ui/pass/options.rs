// `kind`, `ret`, `parent`, `links`: sync and async, with `err`, methods.
use lens::otel::trace::TraceContextExt as _;
use lens::{trace_fn, LensSpan};

#[trace_fn(group = "step", kind = server, ret)]
fn status() -> u16 {
    200
}

#[trace_fn(group = "step", kind = client, parent = parent, links(other), ret, err)]
async fn fetch(parent: &LensSpan, other: Option<&LensSpan>) -> Result<String, std::io::Error> {
    Ok("body".to_owned())
}

struct Consumer;

impl Consumer {
    #[trace_fn(group = "job", kind = consumer, links(&self.producer()), ret)]
    fn take(&self, n: usize) -> Vec<u64> {
        vec![0; n]
    }

    fn producer(&self) -> lens::otel::trace::SpanContext {
        lens::otel::Context::current().span().span_context().clone()
    }
}

fn main() {
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("all", &[]).unwrap());
    assert_eq!(status(), 200);
    let parent = lens::detached_span("parent");
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    assert_eq!(rt.block_on(fetch(&parent, None)).unwrap(), "body");
    assert_eq!(Consumer.take(2), vec![0, 0]);
}
