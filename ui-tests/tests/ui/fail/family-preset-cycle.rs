// Presets may name other presets, but not in a cycle.
lens::define_span_group! {
    pub serving {
        groups: [request, batch, kv_cache],
        presets: {
            fast: [request, detailed],
            detailed: [batch, fast],
        },
    }
}

fn main() {}
