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

#[lens::trace_fn(group = serving::KV_CACHE)]
fn handle() {}

fn main() {
    handle();
    let _ = &serving::FAMILY;
}
