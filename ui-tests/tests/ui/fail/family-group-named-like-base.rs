// Every family includes the base groups; redeclaring one is an error.
lens::define_span_group! {
    pub serving {
        groups: [request, step],
    }
}

fn main() {}
