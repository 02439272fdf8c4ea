// A preset naming an unknown group lists the valid names.
lens::define_span_group! {
    pub serving {
        groups: [request, batch],
        presets: {
            default: [default, requests],
        },
    }
}

fn main() {}
