//! Broadcasting a trace context from one rank to all over a small
//! collective, and gathering bytes to one rank over the same collective.

use super::bytes::*;
use super::carrier::*;
use std::fmt;
use std::sync::Mutex;

/// A failed collective operation: what failed, in words (a communicator's
/// own error is rarely a Rust error to keep as a source).
///
/// ```
/// let e = lens::propagation::CollectiveError("root 9 out of range".into());
/// assert_eq!(e.to_string(), "collective failed: root 9 out of range");
/// assert_eq!(format!("{e:?}"), e.to_string());
/// ```
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("collective failed: {0}")]
pub struct CollectiveError(pub String);

/// The whole chain on one line: what `main` prints when it returns this
/// error.
impl fmt::Debug for CollectiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The collectives lens needs: broadcast bytes from a root rank, and
/// gather bytes to one (provided, built on the broadcast). Implemented for
/// MPI (feature `mpi`) and in-process threads ([`LocalCollective`]);
/// implement it for your own communicator (NCCL, Gloo, a key-value store)
/// to use [`broadcast_trace_context`] and `TelemetryHandle::gather_profiles`.
pub trait Collective {
    /// This process's rank in the communicator.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Every rank calls this; every rank returns `root`'s `data` (the
    /// `data` of other ranks is ignored).
    fn broadcast_bytes(&self, root: usize, data: Vec<u8>) -> Result<Vec<u8>, CollectiveError>;

    /// Every rank calls this: `root` gets every rank's `data`, indexed by
    /// rank (its own included); the other ranks get `None`. Lens gathers
    /// the per-step profiles of the ranks that do not export with it
    /// (`TelemetryHandle::gather_profiles`).
    ///
    /// The provided method is built on [`broadcast_bytes`](Self::broadcast_bytes):
    /// each rank broadcasts its data in turn, so every rank receives every
    /// rank's data and the call costs `size` broadcasts. Override it with
    /// your communicator's gather (MPI's `gatherv`, `torch.distributed`'s
    /// `gather_object`) where the job is large.
    ///
    /// ```
    /// use lens::propagation::{Collective, LocalCollective};
    /// let comms = LocalCollective::group(3);
    /// let got: Vec<_> = std::thread::scope(|s| {
    ///     let hs: Vec<_> = comms
    ///         .iter()
    ///         .map(|c| s.spawn(move || c.gather_bytes(1, vec![c.rank() as u8; c.rank()]).unwrap()))
    ///         .collect();
    ///     hs.into_iter().map(|h| h.join().unwrap()).collect()
    /// });
    /// assert_eq!(got[0], None);
    /// assert_eq!(got[1], Some(vec![vec![], vec![1], vec![2, 2]]));
    /// assert_eq!(got[2], None);
    /// ```
    fn gather_bytes(
        &self,
        root: usize,
        data: Vec<u8>,
    ) -> Result<Option<Vec<Vec<u8>>>, CollectiveError> {
        let (rank, size) = (self.rank(), self.size());
        if root >= size {
            return Err(CollectiveError(format!(
                "root {root} is not below the world size {size}"
            )));
        }
        let mut out = (rank == root).then(|| Vec::with_capacity(size));
        let mut mine = Some(data);
        for r in 0..size {
            let payload = if r == rank {
                mine.take().unwrap_or_default()
            } else {
                Vec::new()
            };
            let got = self.broadcast_bytes(r, payload)?;
            if let Some(o) = out.as_mut() {
                o.push(got);
            }
        }
        Ok(out)
    }
}

/// Broadcasts `src_rank`'s current trace context to every rank: **a
/// collective — every rank must call it**. Every rank gets the same carrier
/// (empty when `src_rank` has no active span; fields that do not fit lose
/// whole list members, as in [`context_to_bytes`]). Attach
/// `extract_context(&carrier)` to parent spans on the shared trace.
///
/// ```
/// use lens::{propagation::broadcast_trace_context, propagation::LocalCollective};
/// let comms = LocalCollective::group(2);
/// let got: Vec<_> = std::thread::scope(|s| {
///     let hs: Vec<_> = comms.iter().map(|c| s.spawn(move || broadcast_trace_context(c, 0).unwrap())).collect();
///     hs.into_iter().map(|h| h.join().unwrap()).collect()
/// });
/// assert_eq!(got[0], got[1]);
/// ```
pub fn broadcast_trace_context(
    comm: &dyn Collective,
    src_rank: usize,
) -> Result<Carrier, CollectiveError> {
    if src_rank >= comm.size() {
        return Err(CollectiveError(format!(
            "src_rank {src_rank} is not below the world size {}",
            comm.size()
        )));
    }
    let payload = if comm.rank() == src_rank {
        encode_carrier(&inject_context())
    } else {
        Vec::new()
    };
    let bytes = comm.broadcast_bytes(src_rank, payload)?;
    Ok(decode_carrier(&bytes).unwrap_or_default())
}

/// An in-process [`Collective`] over threads, for tests and single-process
/// simulations of a job.
#[derive(Debug, Clone)]
pub struct LocalCollective {
    rank: usize,
    shared: std::sync::Arc<LocalShared>,
}

#[derive(Debug)]
struct LocalShared {
    size: usize,
    barrier: std::sync::Barrier,
    slot: Mutex<Vec<u8>>,
}

impl LocalCollective {
    /// `size` communicators, one per thread-rank.
    pub fn group(size: usize) -> Vec<LocalCollective> {
        let shared = std::sync::Arc::new(LocalShared {
            size,
            barrier: std::sync::Barrier::new(size),
            slot: Mutex::new(Vec::new()),
        });
        (0..size)
            .map(|rank| LocalCollective {
                rank,
                shared: shared.clone(),
            })
            .collect()
    }
}

impl Collective for LocalCollective {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.size
    }
    fn broadcast_bytes(&self, root: usize, data: Vec<u8>) -> Result<Vec<u8>, CollectiveError> {
        if self.rank == root {
            *self.shared.slot.lock().unwrap_or_else(|e| e.into_inner()) = data;
        }
        self.shared.barrier.wait();
        let out = self
            .shared
            .slot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        self.shared.barrier.wait();
        Ok(out)
    }
}

/// [`Collective`] over an MPI communicator (feature `mpi`).
#[cfg(feature = "mpi")]
pub mod mpi_collective {
    use crate::api::propagation::collective::{Collective, CollectiveError};
    use mpi::topology::Communicator;
    use mpi::traits::Root;

    /// Wraps any rsmpi communicator (e.g. `universe.world()`).
    #[derive(Debug)]
    pub struct MpiCollective<C: Communicator>(pub C);

    impl<C: Communicator> Collective for MpiCollective<C> {
        fn rank(&self) -> usize {
            self.0.rank() as usize
        }
        fn size(&self) -> usize {
            self.0.size() as usize
        }
        fn broadcast_bytes(&self, root: usize, data: Vec<u8>) -> Result<Vec<u8>, CollectiveError> {
            let root_i32 = i32::try_from(root)
                .map_err(|_| CollectiveError(format!("root {root} out of range")))?;
            let proc = self.0.process_at_rank(root_i32);
            let mut len = data.len() as u64;
            proc.broadcast_into(&mut len);
            let mut buf = if self.rank() == root {
                data
            } else {
                vec![0u8; len as usize]
            };
            proc.broadcast_into(&mut buf[..]);
            Ok(buf)
        }
    }
}
