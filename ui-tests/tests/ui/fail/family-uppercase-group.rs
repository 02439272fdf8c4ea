// Group names are lowercase snake_case.
lens::define_span_group! {
    pub serving {
        groups: [request, KvCache],
    }
}

fn main() {
    let _ = &serving::REQUEST;
}
