//! Fault-injection tests: lens run as a child process (`lens-probe`) under
//! hostile conditions must never panic, hang or die by a signal.

mod env;
