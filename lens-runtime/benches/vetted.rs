//! The engine's hand-rolled pieces against the vetted crates that could
//! replace them (issue 42, item 4), on the operations the span path does:
//!
//! * the open-span list's lock (`engine/open/lock.rs`), taken twice a span
//!   by its owner thread and rarely by another: `SpinLock` against
//!   `parking_lot::Mutex` and `std::sync::Mutex`, uncontended;
//! * the open-span slab (`engine/open/slab/`): a span takes a slot when it
//!   starts and frees it when it ends, innermost first: `Slab` against the
//!   `slab` crate and `sharded-slab` (the `tracing-subscriber` registry's).
//!
//! The engine's own files are compiled into this bench unchanged
//! (`#[path]`), so it measures the code the span path runs.
//!
//! `cargo bench -p nemo-lens-runtime --bench vetted` gives the time of each
//! (criterion); `bash scripts/vetted.sh` gives instructions per operation
//! under callgrind (`VETTED=<variant> VETTED_N=<n>` runs one variant `n`
//! times and nothing else).

// the engine files bring more than the bench calls (their unit tests too)
#![allow(dead_code, unused_imports)]

use criterion::Criterion;
use std::hint::black_box;

// the engine's files, as they are (paths are taken from this file's folder)
#[path = "../src/engine/open/lock.rs"]
mod lock;
#[path = "../src/engine/open/slab/mod.rs"]
mod own_slab;
#[path = "../src/engine/sync.rs"]
mod sync;

/// Where the engine's files find each other (`crate::engine::sync`).
mod engine {
    pub(crate) use super::sync;
}

use lock::SpinLock;

/// The engine's slab and the ids it is given.
#[derive(Default)]
struct OwnSlab {
    slab: own_slab::Slab<Record>,
    id: u64,
}

impl OwnSlab {
    /// Three nested spans started and ended innermost first.
    fn nested3(&mut self, r: Record) {
        self.id += 3;
        let (a, b, c) = (self.id - 2, self.id - 1, self.id);
        let sa = self.slab.insert(a, r);
        let sb = self.slab.insert(b, r);
        let sc = self.slab.insert(c, r);
        black_box(self.slab.remove(sc, c));
        black_box(self.slab.remove(sb, b));
        black_box(self.slab.remove(sa, a));
    }
}

/// A span's record as the slab holds it: a few words.
type Record = [u64; 4];

/// One operation of a variant.
type Op = fn(&mut State);

/// One operation of each variant: a span's two lock takes, or three
/// nested spans started and ended innermost first.
const VARIANTS: &[(&str, Op)] = &[
    ("lock/SpinLock", |s| {
        *s.spin.lock() += 1;
        *s.spin.lock() += 1;
    }),
    ("lock/parking_lot::Mutex", |s| {
        *s.parking.lock() += 1;
        *s.parking.lock() += 1;
    }),
    ("lock/std::sync::Mutex", |s| {
        *s.std.lock().unwrap() += 1;
        *s.std.lock().unwrap() += 1;
    }),
    ("slab/Slab (lens)", |s| s.own.nested3(black_box([1u64; 4]))),
    ("slab/slab::Slab", |s| {
        let r = black_box([1u64; 4]);
        let a = s.slab.insert(r);
        let b = s.slab.insert(r);
        let c = s.slab.insert(r);
        black_box(s.slab.remove(c));
        black_box(s.slab.remove(b));
        black_box(s.slab.remove(a));
    }),
    ("slab/slab::Slab, ids checked", |s| {
        // as the engine's slab does: an end names its span's id, and a
        // slot reused by another span is not taken by a stale end
        let r = black_box([1u64; 4]);
        s.next_id += 3;
        let (ia, ib, ic) = (s.next_id - 2, s.next_id - 1, s.next_id);
        let a = s.slab_ids.insert((ia, r));
        let b = s.slab_ids.insert((ib, r));
        let c = s.slab_ids.insert((ic, r));
        for (slot, id) in [(c, ic), (b, ib), (a, ia)] {
            if s.slab_ids.get(slot).is_some_and(|e| e.0 == id) {
                black_box(s.slab_ids.remove(slot));
            }
        }
    }),
    ("slab/sharded_slab::Slab", |s| {
        let r = black_box([1u64; 4]);
        let a = s.sharded.insert(r).unwrap();
        let b = s.sharded.insert(r).unwrap();
        let c = s.sharded.insert(r).unwrap();
        black_box(s.sharded.take(c));
        black_box(s.sharded.take(b));
        black_box(s.sharded.take(a));
    }),
];

struct State {
    spin: SpinLock<u64>,
    parking: parking_lot::Mutex<u64>,
    std: std::sync::Mutex<u64>,
    own: OwnSlab,
    slab: slab::Slab<Record>,
    slab_ids: slab::Slab<(u64, Record)>,
    next_id: u64,
    sharded: sharded_slab::Slab<Record>,
}

impl State {
    fn new() -> Self {
        State {
            spin: SpinLock::default(),
            parking: parking_lot::Mutex::new(0),
            std: std::sync::Mutex::new(0),
            own: OwnSlab::default(),
            slab: slab::Slab::new(),
            slab_ids: slab::Slab::new(),
            next_id: 0,
            sharded: sharded_slab::Slab::new(),
        }
    }
}

/// The callgrind driver: `VETTED_N` operations of the variant named by
/// `VETTED`, in a function of its own so that callgrind can count it
/// alone (`--toggle-collect=*vetted::run*`).
#[inline(never)]
fn run(op: Op, state: &mut State, n: u64) {
    for _ in 0..n {
        op(black_box(&mut *state));
    }
}

fn main() {
    if let Ok(name) = std::env::var("VETTED") {
        let n = std::env::var("VETTED_N")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(100_000);
        let Some((_, op)) = VARIANTS.iter().find(|(v, _)| *v == name) else {
            eprintln!(
                "VETTED: one of {:?}",
                VARIANTS.iter().map(|(v, _)| v).collect::<Vec<_>>()
            );
            std::process::exit(2);
        };
        let mut state = State::new();
        op(&mut state); // first use: allocations outside the count
        run(*op, &mut state, n);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    for (name, op) in VARIANTS {
        let mut state = State::new();
        c.bench_function(name, |b| b.iter(|| op(&mut state)));
    }
    c.final_summary();
}
