// Functions with where-clauses, also with `err`.
use lens::trace_fn;
use std::fmt::Debug;
use std::str::FromStr;

#[trace_fn(group = "forward_backward", fields(items = items.len()))]
fn total<T>(items: &[T]) -> f64
where
    T: Copy + Into<f64>,
{
    items.iter().map(|x| (*x).into()).sum()
}

#[trace_fn(group = "load_checkpoint", args(text), err)]
fn parse_all<T>(text: &str) -> Result<Vec<T>, String>
where
    T: FromStr,
    T::Err: Debug,
{
    text.split(',')
        .map(|s| s.trim().parse::<T>().map_err(|e| format!("{e:?}")))
        .collect()
}

fn main() {
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("all", &[]).unwrap());
    assert_eq!(total(&[1.0f32, 2.0]), 3.0);
    assert_eq!(parse_all::<u8>("1, 2").unwrap(), vec![1, 2]);
    assert!(parse_all::<u8>("1, x").is_err());
}
