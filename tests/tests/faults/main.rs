//! Fault injection: each situation a real job can put lens in runs as a
//! child process (the `lens-fault` and `lens-probe` binaries), with a
//! timeout, and the test asserts what must hold from outside: exit status
//! and signal, files written, timing bounds, memory.

mod runtime;
mod signals;
mod support;
