// A preset of the family cannot list itself (only a base preset name may be
// reused, as in `default: [default, request]`).
lens::define_span_group! {
    pub serving {
        groups: [request, batch],
        presets: {
            fast: [request, fast],
        },
    }
}

#[lens::trace_fn(group = serving::REQUEST)]
fn handle() {}

fn main() {
    handle();
    let _ = &serving::FAMILY;
}
