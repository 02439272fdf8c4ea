// `async fn`: with and without `err`, with `?`, async methods and async
// trait methods; the span covers the whole future.
use lens::trace_fn;
use std::num::ParseIntError;

#[trace_fn(group = "step", args(i))]
async fn double(i: u64) -> u64 {
    tokio::task::yield_now().await;
    i * 2
}

#[trace_fn(group = "evaluate")]
async fn unit() {
    tokio::task::yield_now().await;
}

#[trace_fn(group = "load_checkpoint", args(text), err)]
async fn parse(text: &str) -> Result<u64, ParseIntError> {
    tokio::task::yield_now().await;
    let v = text.parse::<u64>()?;
    Ok(double(v).await)
}

#[trace_fn(group = "checkpoint", err)]
async fn early(fail: bool) -> Result<(), String> {
    if fail {
        return Err("failed".to_owned());
    }
    Ok(())
}

struct Server {
    requests: u64,
}

impl Server {
    #[trace_fn(group = "job", fields(requests = self.requests))]
    async fn handle(&self, n: u64) -> u64 {
        tokio::task::yield_now().await;
        self.requests + n
    }

    #[trace_fn(group = "job", err)]
    async fn bump(&mut self) -> Result<u64, std::io::Error> {
        self.requests += 1;
        Ok(self.requests)
    }

    #[trace_fn(group = "job")]
    async fn into_total(self) -> u64 {
        self.requests
    }
}

trait Env {
    async fn step(&self, action: u32) -> u32;
}

struct Gym;

impl Env for Gym {
    #[trace_fn(group = "step", args(action))]
    async fn step(&self, action: u32) -> u32 {
        action + 1
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    for spec in ["all", ""] {
        lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve(spec, &[]).unwrap());
        assert_eq!(double(2).await, 4);
        unit().await;
        assert_eq!(parse("21").await.unwrap(), 42);
        assert!(parse("x").await.is_err());
        assert!(early(true).await.is_err());
        assert!(early(false).await.is_ok());
        let mut s = Server { requests: 1 };
        assert_eq!(s.handle(2).await, 3);
        assert_eq!(s.bump().await.unwrap(), 2);
        assert_eq!(s.into_total().await, 2);
        assert_eq!(Gym.step(1).await, 2);
        // a spawned instrumented future must be Send
        assert_eq!(tokio::spawn(double(5)).await.unwrap(), 10);
    }
}
