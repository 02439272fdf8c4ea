//! Fault injection: each situation a real job can put lens in (signals, a
//! hung collector, a full disk, a fork, a panic, hostile input) runs as a
//! child process (the `lens-fault` and `lens-probe` binaries) configured
//! only through the environment, with a timeout, and the test asserts what
//! must hold from outside: exit status and signal, files written, timing
//! bounds, memory.

mod env;
mod file;
mod prop;
mod runtime;
mod signals;
mod support;
