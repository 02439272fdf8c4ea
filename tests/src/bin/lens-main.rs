//! A program as users write it: `main` returns `Result<(), Box<dyn Error>>`
//! and sets lens up from the environment with `?`. `tests/setup_errors.rs`
//! runs it with bad settings and reads what Rust prints on stderr for the
//! returned error.

use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let telemetry = lens::setup_telemetry_from_env()?;
    drop(lens::span_cm!("main.work"));
    telemetry.shutdown(Duration::from_secs(5)).into_result()?;
    Ok(())
}
