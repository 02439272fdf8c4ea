// Every family includes the base groups; redeclaring one is an error.
lens::define_span_group! {
    pub serving {
        groups: [request, step],
    }
}

#[lens::trace_fn(group = serving::REQUEST)]
fn handle() {}

fn main() {
    handle();
    let _ = &serving::FAMILY;
}
