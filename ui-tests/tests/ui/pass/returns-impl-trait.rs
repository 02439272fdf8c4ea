// Functions returning `impl Trait`, sync and async, with and without `err`.
use lens::trace_fn;
use std::fmt::Display;

#[trace_fn(group = "step", args(n))]
fn evens(n: u64) -> impl Iterator<Item = u64> {
    (0..n).filter(|x| x % 2 == 0)
}

#[trace_fn(group = "step")]
fn label(step: u64) -> Box<dyn Display> {
    Box::new(step)
}

#[trace_fn(group = "checkpoint", err)]
fn checkpoint_name(step: u64) -> Result<impl Display, std::num::TryFromIntError> {
    let small: u32 = u32::try_from(step)?;
    Ok(format!("ckpt-{small}"))
}

#[trace_fn(group = "checkpoint", err)]
async fn async_checkpoint_name(step: u64) -> Result<impl Display, std::num::TryFromIntError> {
    let small: u16 = u16::try_from(step)?;
    Ok(small)
}

#[trace_fn(group = "step")]
async fn async_evens(n: u64) -> impl Iterator<Item = u64> {
    (0..n).filter(|x| x % 2 == 0)
}

fn main() {
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("all", &[]).unwrap());
    assert_eq!(evens(5).collect::<Vec<_>>(), vec![0, 2, 4]);
    assert_eq!(label(3).to_string(), "3");
    assert_eq!(checkpoint_name(3).unwrap().to_string(), "ckpt-3");
    assert!(checkpoint_name(u64::MAX).is_err());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(async_checkpoint_name(9).await.unwrap().to_string(), "9");
        assert!(async_checkpoint_name(1 << 20).await.is_err());
        assert_eq!(async_evens(4).await.count(), 2);
    });
}
