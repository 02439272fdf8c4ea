//! The Perfetto encoding that both the runtime's `perfetto` exporter and
//! `lens perfetto` write: the subset of Perfetto's trace protos they use
//! ([`proto`]) and the lane packing that keeps slices properly nested on a
//! track ([`packing`]). Depend on `lens` (or run `lens perfetto`) instead.
//!
//! ```
//! use lens_perfetto::packing::Packing;
//! let mut lanes = Packing::default();
//! assert_eq!(lanes.lane(0, 0, 2, 4), 0);
//! assert_eq!(lanes.lane(0, 0, 3, 9), 1); // overlaps without nesting
//! ```

#![forbid(unsafe_code)]

pub mod packing;
pub mod proto;
