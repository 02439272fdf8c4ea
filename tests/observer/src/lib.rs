//! Tests only: see `tests/observer.rs`.
