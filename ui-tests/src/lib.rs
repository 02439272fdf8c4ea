//! UI tests live in `tests/`.
