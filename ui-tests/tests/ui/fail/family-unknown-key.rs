// A family has `groups` and `presets`, nothing else.
lens::define_span_group! {
    pub serving {
        groups: [request],
        defaults: [request],
    }
}

fn main() {}
