// `all` is implicit.
lens::define_span_group! {
    pub serving {
        groups: [request, batch],
        presets: {
            all: [request, batch],
        },
    }
}

fn main() {}
