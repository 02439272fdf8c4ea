// A group may be declared once per family.
lens::define_span_group! {
    pub serving {
        groups: [request, batch, request],
    }
}

fn main() {}
