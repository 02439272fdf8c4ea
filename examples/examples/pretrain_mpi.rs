//! A Megatron-style pretraining loop with a 4-stage pipeline over MPI.
//!
//! ```text
//! cargo build --release -p examples --features mpi --example pretrain_mpi
//! mpirun -np 4 -x NEMO_LENS_ENABLED=1 -x NEMO_LENS_EXPORTER=file \
//!     -x NEMO_LENS_EXPORT_STRATEGY=all_ranks -x MEGATRON_OTEL_SPAN_GROUPS=per_step,microbatch,layer \
//!     target/release/examples/pretrain_mpi
//! # the same, recorded and reported on by `lens record`
//! lens record -- mpirun -np 4 target/release/examples/pretrain_mpi
//! ```
//!
//! The configuration is built in code: each setting read as
//! `MEGATRON_OTEL_*` first, then `NEMO_LENS_*`, and the rank and world size
//! taken from the MPI communicator.
//!
//! Rank 0 opens each step span and broadcasts its trace context; every rank
//! parents its stage span on it, so one step is one trace across all ranks.
//! Activations travel stage to stage with the sender's context as bytes, and
//! each receiver opens `recv_forward` with a Link (not a parent) to the
//! sender's `send_forward` span.

use lens::megatron;
use lens::propagation::mpi_collective::MpiCollective;
use lens::propagation::{
    broadcast_trace_context, context_from_bytes, context_to_bytes, create_linked_span,
    extract_context,
};
use lens::{managed_span, LensConfig};
use mpi::point_to_point::{Destination, Source};
use mpi::topology::Communicator;
use std::error::Error;
use std::time::Duration;

const STEPS: u64 = 2;
const MICROBATCHES: u32 = 2;

fn main() -> Result<(), Box<dyn Error>> {
    let universe = mpi::initialize().ok_or("MPI is already initialised")?;
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    // MEGATRON_OTEL_X wins over NEMO_LENS_X; span groups of every family
    // the program links (megatron's among them)
    let config = LensConfig::from_env_with(
        &["MEGATRON_OTEL_", "NEMO_LENS_"],
        &lens::span_group_families(),
    )?;
    let telemetry = lens::setup_telemetry(config, rank as u32, size as u32)?;
    let comm = MpiCollective(world.duplicate());

    for iteration in 0..STEPS {
        // rank 0 owns the step; everyone else joins its trace
        let root_step =
            (rank == 0).then(|| lens::span_cm!("train.step", "dl.iteration" = iteration));
        let carrier = broadcast_trace_context(&comm, 0)?;
        let parent = extract_context(&carrier).attach();
        let stage = managed_span!(
            "step",
            "pp.stage",
            "nv.dl.rank" = rank,
            "dl.iteration" = iteration
        );
        for mb in 0..MICROBATCHES {
            let _mb = managed_span!(megatron::MICROBATCH, "microbatch", microbatch = mb);
            if rank > 0 {
                let (bytes, _status) = world.process_at_rank(rank - 1).receive_vec::<u8>();
                let sender = context_from_bytes(&bytes).unwrap_or_default();
                let recv = create_linked_span(
                    "recv_forward",
                    &sender,
                    &[("microbatch", &mb), ("src_rank", &(rank - 1))],
                );
                drop(recv.enter());
            }
            {
                let _fwd = managed_span!(megatron::LAYER, "forward", microbatch = mb);
                std::thread::sleep(Duration::from_millis(2));
            }
            if rank < size - 1 {
                let send = managed_span!(
                    megatron::COMMUNICATION,
                    "send_forward",
                    microbatch = mb,
                    dst_rank = rank + 1
                );
                // an inert guard (group off) sends nothing: the next stage
                // then starts its own trace
                let bytes = match send.is_none() {
                    true => Vec::new(),
                    false => context_to_bytes(send.context()),
                };
                world.process_at_rank(rank + 1).send(&bytes[..]);
            }
        }
        drop(stage);
        drop(parent);
        drop(root_step);
    }
    println!("rank {rank}/{size}: exporting={}", telemetry.is_exporting());
    telemetry.shutdown(Duration::from_secs(10));
    Ok(())
}
