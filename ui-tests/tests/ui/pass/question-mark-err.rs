// `?` inside a body recorded with `err`: early returns, `From` conversions
// and an explicit `return`.
use lens::trace_fn;
use std::error::Error;
use std::num::ParseIntError;

#[trace_fn(group = "load_checkpoint", args(text), err)]
fn parse_step(text: &str) -> Result<u64, ParseIntError> {
    let step = text.trim().parse::<u64>()?;
    Ok(step)
}

#[trace_fn(group = "load_checkpoint", err)]
fn parse_pair(a: &str, b: &str) -> Result<(u64, u64), Box<dyn Error + Send + Sync>> {
    if a.is_empty() {
        return Err("empty".into());
    }
    Ok((a.parse()?, b.parse()?))
}

#[trace_fn(group = "checkpoint", err)]
fn io_like() -> std::io::Result<usize> {
    let n: usize = "12".parse().map_err(std::io::Error::other)?;
    Ok(n)
}

fn main() {
    for spec in ["all", "default"] {
        lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve(spec, &[]).unwrap());
        assert_eq!(parse_step(" 3 ").unwrap(), 3);
        assert!(parse_step("x").is_err());
        assert_eq!(parse_pair("1", "2").unwrap(), (1, 2));
        assert!(parse_pair("", "2").is_err());
        assert!(parse_pair("1", "y").is_err());
        assert_eq!(io_like().unwrap(), 12);
    }
}
