//! Runnable examples of lens that need crates beyond `nemo-lens`'s own
//! (tokio, axum, reqwest, MPI). Each example's header gives the command line
//! that runs it, with its environment; the examples with no other
//! dependency ship inside the `nemo-lens` package (`lens/examples/`).
//!
//! | example | needs |
//! |---|---|
//! | `quickstart` | nothing: it turns telemetry on and writes a file itself |
//! | `token_streaming` | `NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file` |
//! | `nemo_gym_server` | `NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file` |
//! | `w3c_service` | `NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file` |
//! | `pretrain_mpi` | `--features mpi`, `mpirun`, `-x NEMO_LENS_ENABLED=1` ... |
//!
//! This library is empty: cargo needs one target besides the examples.
