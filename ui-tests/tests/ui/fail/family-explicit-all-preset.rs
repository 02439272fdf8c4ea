// `all` is implicit.
lens::define_span_group! {
    pub serving {
        groups: [request, batch],
        presets: {
            all: [request, batch],
        },
    }
}

#[lens::trace_fn(group = serving::REQUEST)]
fn handle() {}

fn main() {
    handle();
    let _ = &serving::FAMILY;
}
