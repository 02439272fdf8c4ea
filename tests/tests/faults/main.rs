//! Regression tests for observed defects, end to end through the public
//! API: each module reproduces one area's faults.

mod prop;
