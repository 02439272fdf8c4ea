// A preset naming an unknown group lists the valid names.
lens::define_span_group! {
    pub serving {
        groups: [request, batch],
        presets: {
            default: [default, requests],
        },
    }
}

#[lens::trace_fn(group = serving::BATCH)]
fn handle() {}

fn main() {
    handle();
    let _ = &serving::FAMILY;
}
