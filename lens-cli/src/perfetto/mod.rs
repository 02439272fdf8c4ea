//! Perfetto output (stub).
/// Runs `lens perfetto`.
pub(crate) fn run(_a: &crate::cli::PerfettoArgs) -> Result<(), crate::Failure> { Ok(()) }
