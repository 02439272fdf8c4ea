//! Attribute and metric names lens emits or documents, as constants, grouped
//! by namespace. Standard names (`service.*`, `host.*`, `process.*`, `k8s.*`,
//! `gen_ai.*`, `hw.*`, `exception.*`) follow the OpenTelemetry semantic
//! conventions [`SEMCONV_VERSION`]; `nv.dl.*`, `dl.*`, `nemo.*`, `rl.*`,
//! `gym.*`, `slurm.*`, `wandb.*` are the `nemo-lens` family's own, named as
//! the Python library names them (docs/PARITY.md lists where they differ).
//!
//! Attribute names are plain (`GEN_AI_REQUEST_MODEL`), metric names carry a
//! `METRIC_` prefix (`METRIC_GEN_AI_SERVER_REQUEST_DURATION`), well-known
//! attribute values carry the attribute's name and the value
//! (`GEN_AI_TOKEN_TYPE_INPUT`).
//!
//! ```
//! use lens::semconv;
//! assert_eq!(semconv::NV_DL_RANK, "nv.dl.rank");
//! assert_eq!(semconv::DL_ITERATION, "dl.iteration"); // the Python library's
//! #[allow(deprecated)]
//! let former = semconv::NV_DL_ITERATION; // a deprecated alias, same value
//! assert_eq!(former, semconv::DL_ITERATION);
//! assert_eq!(semconv::METRIC_HW_GPU_UTILIZATION, "hw.gpu.utilization");
//! assert!(semconv::SCHEMA_URL.ends_with(semconv::SEMCONV_VERSION));
//! ```

// === version ===
/// The OpenTelemetry semantic-conventions release the standard names follow:
/// 1.37.0, the first release with `gen_ai.provider.name` (renamed from
/// `gen_ai.system`) and with the hardware conventions split per component,
/// GPU metrics `hw.gpu.*` under `hardware/gpu`. Both areas are still at
/// *Development* stability upstream.
pub const SEMCONV_VERSION: &str = "1.37.0";
/// Schema URL of [`SEMCONV_VERSION`].
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.37.0";

// === standard resource attributes ===
/// `service.name`
pub const SERVICE_NAME: &str = "service.name";
/// `service.version` (the application's: lens does not set it; its own
/// version is [`TELEMETRY_SDK_VERSION`])
pub const SERVICE_VERSION: &str = "service.version";
/// `telemetry.sdk.name` (`lens`)
pub const TELEMETRY_SDK_NAME: &str = "telemetry.sdk.name";
/// `telemetry.sdk.language` (`rust`)
pub const TELEMETRY_SDK_LANGUAGE: &str = "telemetry.sdk.language";
/// `telemetry.sdk.version` (lens's version)
pub const TELEMETRY_SDK_VERSION: &str = "telemetry.sdk.version";
/// `service.instance.id` (`<run_id>-rank<rank>`)
pub const SERVICE_INSTANCE_ID: &str = "service.instance.id";
/// `deployment.environment.name` (semantic conventions 1.37)
pub const DEPLOYMENT_ENVIRONMENT_NAME: &str = "deployment.environment.name";
/// `deployment.environment`: the name before semantic conventions 1.27,
/// still set beside [`DEPLOYMENT_ENVIRONMENT_NAME`] for dashboards that
/// query it
pub const DEPLOYMENT_ENVIRONMENT: &str = "deployment.environment";
/// `host.name`
pub const HOST_NAME: &str = "host.name";
/// `process.pid`
pub const PROCESS_PID: &str = "process.pid";
/// `host.gpu.count`: GPUs visible to this process.
pub const HOST_GPU_COUNT: &str = "host.gpu.count";

// === nv.dl.* ===
/// `nv.dl.rank`: global rank of this process.
pub const NV_DL_RANK: &str = "nv.dl.rank";
/// `nv.dl.world_size`: number of ranks.
pub const NV_DL_WORLD_SIZE: &str = "nv.dl.world_size";
/// `nv.dl.local_rank`: rank within the node.
pub const NV_DL_LOCAL_RANK: &str = "nv.dl.local_rank";
/// `dl.rank`: global rank of this process, the name the released Python
/// library (0.1.0, 0.2.0) writes. Lens writes it beside [`NV_DL_RANK`], so a
/// filter written for either Python release matches the Rust ranks.
pub const DL_RANK: &str = "dl.rank";
/// `dl.world_size`: number of ranks, the released Python library's name,
/// written beside [`NV_DL_WORLD_SIZE`].
pub const DL_WORLD_SIZE: &str = "dl.world_size";

// === dl.* (the Python library's names, in both its 0.1.0 and Nightly
// `nemo.lens.semconv`) ===
/// `dl.tensor_parallel.size`: ranks one layer is split across (TP).
pub const DL_TENSOR_PARALLEL_SIZE: &str = "dl.tensor_parallel.size";
/// `dl.pipeline_parallel.size`: pipeline stages the model is split into
/// (PP).
pub const DL_PIPELINE_PARALLEL_SIZE: &str = "dl.pipeline_parallel.size";
/// `dl.data_parallel.size`: model replicas (DP).
pub const DL_DATA_PARALLEL_SIZE: &str = "dl.data_parallel.size";
/// `dl.batch_size`: samples per (global) batch.
pub const DL_BATCH_SIZE: &str = "dl.batch_size";
/// `dl.sequence_length`: tokens per sequence.
pub const DL_SEQUENCE_LENGTH: &str = "dl.sequence_length";
/// `dl.tensor_parallel.rank`: this rank's index in its TP group.
pub const DL_TENSOR_PARALLEL_RANK: &str = "dl.tensor_parallel.rank";
/// `dl.pipeline_parallel.rank`: this rank's pipeline stage.
pub const DL_PIPELINE_PARALLEL_RANK: &str = "dl.pipeline_parallel.rank";
/// `dl.data_parallel.rank`: this rank's replica.
pub const DL_DATA_PARALLEL_RANK: &str = "dl.data_parallel.rank";
/// `dl.microbatch_id`: the microbatch within a step.
pub const DL_MICROBATCH_ID: &str = "dl.microbatch_id";
/// `dl.iteration`: training iteration, on step spans (`lens report` also
/// reads the former name `nv.dl.iteration` from older trace files).
pub const DL_ITERATION: &str = "dl.iteration";
/// Former name of [`DL_TENSOR_PARALLEL_SIZE`], now its value.
#[deprecated(
    note = "the Python library's name is `dl.tensor_parallel.size`: use DL_TENSOR_PARALLEL_SIZE"
)]
pub const NV_DL_TENSOR_PARALLEL_SIZE: &str = DL_TENSOR_PARALLEL_SIZE;
/// Former name of [`DL_PIPELINE_PARALLEL_SIZE`], now its value.
#[deprecated(
    note = "the Python library's name is `dl.pipeline_parallel.size`: use DL_PIPELINE_PARALLEL_SIZE"
)]
pub const NV_DL_PIPELINE_PARALLEL_SIZE: &str = DL_PIPELINE_PARALLEL_SIZE;
/// Former name of [`DL_DATA_PARALLEL_SIZE`], now its value.
#[deprecated(
    note = "the Python library's name is `dl.data_parallel.size`: use DL_DATA_PARALLEL_SIZE"
)]
pub const NV_DL_DATA_PARALLEL_SIZE: &str = DL_DATA_PARALLEL_SIZE;
/// Former name of [`DL_BATCH_SIZE`], now its value.
#[deprecated(note = "the Python library's name is `dl.batch_size`: use DL_BATCH_SIZE")]
pub const NV_DL_BATCH_SIZE: &str = DL_BATCH_SIZE;
/// Former name of [`DL_SEQUENCE_LENGTH`], now its value.
#[deprecated(note = "the Python library's name is `dl.sequence_length`: use DL_SEQUENCE_LENGTH")]
pub const NV_DL_SEQUENCE_LENGTH: &str = DL_SEQUENCE_LENGTH;
/// Former name of [`DL_ITERATION`], now its value (the key it named,
/// `nv.dl.iteration`, is no longer written). Code that writes with it now
/// writes the Python library's key; code that *reads* older data must
/// match the literal `"nv.dl.iteration"`, which this constant no longer
/// is (the same holds for each `NV_DL_*` alias below and above).
#[deprecated(note = "the Python library's name is `dl.iteration`: use DL_ITERATION")]
pub const NV_DL_ITERATION: &str = DL_ITERATION;

// nv.dl.* metrics (training instrument set, `metrics::TrainingMetrics`)
/// Metric `nv.dl.step.duration`: histogram, `s`, wall time of one training
/// step (iteration).
pub const METRIC_NV_DL_STEP_DURATION: &str = "nv.dl.step.duration";
/// Metric `nv.dl.loss`: gauge, `1`, training loss of the last step.
pub const METRIC_NV_DL_LOSS: &str = "nv.dl.loss";
/// Metric `nv.dl.grad_norm`: gauge, `1`, global gradient norm of the last
/// step.
pub const METRIC_NV_DL_GRAD_NORM: &str = "nv.dl.grad_norm";
/// Metric `nv.dl.learning_rate`: gauge, `1`, learning rate of the last step.
pub const METRIC_NV_DL_LEARNING_RATE: &str = "nv.dl.learning_rate";
/// Metric `nv.dl.throughput.tokens_per_sec`: gauge, `{token}/s`.
pub const METRIC_NV_DL_THROUGHPUT_TOKENS_PER_SEC: &str = "nv.dl.throughput.tokens_per_sec";
/// Metric `nv.dl.throughput.tflops`: gauge, `{TFLOP}/s`, model TFLOP/s
/// achieved by this rank.
pub const METRIC_NV_DL_THROUGHPUT_TFLOPS: &str = "nv.dl.throughput.tflops";
/// Metric `nv.dl.iterations`: counter, `{iteration}`, training iterations
/// completed.
pub const METRIC_NV_DL_ITERATIONS: &str = "nv.dl.iterations";

// === nemo.* ===
/// `nemo.run.id`
pub const NEMO_RUN_ID: &str = "nemo.run.id";
/// `nemo.user.id`
pub const NEMO_USER_ID: &str = "nemo.user.id";
/// `nemo.span.truncated`: the span was still open at telemetry shutdown.
pub const NEMO_SPAN_TRUNCATED: &str = "nemo.span.truncated";
/// `nemo.span.truncated.reason`
pub const NEMO_SPAN_TRUNCATED_REASON: &str = "nemo.span.truncated.reason";

// === wandb.* ===
/// `wandb.entity`
pub const WANDB_ENTITY: &str = "wandb.entity";
/// `wandb.project`
pub const WANDB_PROJECT: &str = "wandb.project";

// === slurm.* ===
/// `slurm.job.id` (`SLURM_JOB_ID`, else the older alias `SLURM_JOBID`)
pub const SLURM_JOB_ID: &str = "slurm.job.id";
/// `slurm.job.name` (`SLURM_JOB_NAME`)
pub const SLURM_JOB_NAME: &str = "slurm.job.name";
/// `slurm.nodelist` (`SLURM_JOB_NODELIST`, else `SLURM_NODELIST`)
pub const SLURM_NODELIST: &str = "slurm.nodelist";
/// `slurm.nnodes` (`SLURM_NNODES`, else `SLURM_JOB_NUM_NODES`), a string
pub const SLURM_NNODES: &str = "slurm.nnodes";
/// `slurm.ntasks` (`SLURM_NTASKS`), a string
pub const SLURM_NTASKS: &str = "slurm.ntasks";
/// `slurm.partition` (`SLURM_JOB_PARTITION`, else `SLURM_PARTITION`)
pub const SLURM_PARTITION: &str = "slurm.partition";
/// `slurm.cluster.name` (`SLURM_CLUSTER_NAME`)
pub const SLURM_CLUSTER_NAME: &str = "slurm.cluster.name";
/// The job-level SLURM attributes and the variables each is read from
/// (the first set wins): what resource detection records and what
/// `lens slurm-env --stage sbatch` appends. As the Python library
/// documents them (`detect_slurm`, nemo-lens 0.1.0; docs/PARITY.md), they
/// are recorded only inside a job (the first entry, `slurm.job.id`, is set),
/// the first variable of each entry is the one the documentation names (the
/// others only fill in where it is unset), and every value is the
/// variable's text, counts included, as 0.1.0 writes them.
///
/// ```
/// let (attr, vars) = lens::semconv::SLURM_JOB_SOURCES[0];
/// assert_eq!((attr, vars[0]), ("slurm.job.id", "SLURM_JOB_ID"));
/// ```
pub const SLURM_JOB_SOURCES: &[(&str, &[&str])] = &[
    (SLURM_JOB_ID, &["SLURM_JOB_ID", "SLURM_JOBID"]),
    (SLURM_JOB_NAME, &["SLURM_JOB_NAME"]),
    (SLURM_NODELIST, &["SLURM_JOB_NODELIST", "SLURM_NODELIST"]),
    (SLURM_NNODES, &["SLURM_NNODES", "SLURM_JOB_NUM_NODES"]),
    (SLURM_NTASKS, &["SLURM_NTASKS"]),
    (SLURM_PARTITION, &["SLURM_JOB_PARTITION", "SLURM_PARTITION"]),
    (SLURM_CLUSTER_NAME, &["SLURM_CLUSTER_NAME"]),
];
/// `slurm.step.id` (`SLURM_STEP_ID`): the job step, written by every rank
/// inside an `srun` step (the run id is the job's, as the Python library
/// makes it) and by the task stage of `lens slurm-env`
pub const SLURM_STEP_ID: &str = "slurm.step.id";
/// `slurm.procid` (`SLURM_PROCID`): the task's rank in the step
pub const SLURM_PROCID: &str = "slurm.procid";
/// `slurm.localid` (`SLURM_LOCALID`): the task's rank on its node
pub const SLURM_LOCALID: &str = "slurm.localid";
/// `slurm.nodeid` (`SLURM_NODEID`): the node's index in the job
pub const SLURM_NODEID: &str = "slurm.nodeid";
/// `slurm.node.name` (`SLURMD_NODENAME`): the node the task runs on
pub const SLURM_NODE_NAME: &str = "slurm.node.name";

// === k8s.* ===
/// `k8s.namespace.name`
pub const K8S_NAMESPACE_NAME: &str = "k8s.namespace.name";
/// `k8s.pod.name`
pub const K8S_POD_NAME: &str = "k8s.pod.name";
/// `k8s.pod.uid`
pub const K8S_POD_UID: &str = "k8s.pod.uid";
/// `k8s.node.name`
pub const K8S_NODE_NAME: &str = "k8s.node.name";
/// `k8s.container.name`
pub const K8S_CONTAINER_NAME: &str = "k8s.container.name";
/// `k8s.job.name`
pub const K8S_JOB_NAME: &str = "k8s.job.name";

// === exceptions ===
/// `exception.type`
pub const EXCEPTION_TYPE: &str = "exception.type";
/// `exception.message`
pub const EXCEPTION_MESSAGE: &str = "exception.message";
/// `exception.stacktrace` (written when a backtrace is captured:
/// `RUST_BACKTRACE` / `RUST_LIB_BACKTRACE`)
pub const EXCEPTION_STACKTRACE: &str = "exception.stacktrace";

// === code.* (a `tracing` span's callsite, set by the `tracing` bridge) ===
/// `code.namespace`: the `tracing` target of a bridged span (usually its
/// module path). Deprecated upstream since 1.30 in favour of a
/// fully-qualified `code.function.name`, which a `tracing` callsite does not
/// have, and no successor holds a module path: kept for the target.
pub const CODE_NAMESPACE: &str = "code.namespace";
/// `code.file.path`: the source file of a bridged span's callsite (1.30's
/// name for `code.filepath`).
pub const CODE_FILE_PATH: &str = "code.file.path";
/// `code.line.number`: the line of a bridged span's callsite (1.30's name
/// for `code.lineno`).
pub const CODE_LINE_NUMBER: &str = "code.line.number";

// === gen_ai.* (GenAI semantic conventions) ===
/// `gen_ai.operation.name`: the GenAI operation, e.g. `text_completion`,
/// `chat`, `embeddings`.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// `gen_ai.provider.name`: the GenAI provider (`gen_ai.system` before 1.37).
pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
/// `gen_ai.request.model`: the model a request asked for.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
/// `gen_ai.token.type`: `input` or `output` on `gen_ai.client.token.usage`.
pub const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";
/// Value `text_completion` of `gen_ai.operation.name` (lens's default).
pub const GEN_AI_OPERATION_NAME_TEXT_COMPLETION: &str = "text_completion";
/// Value `nemo` of `gen_ai.provider.name` (lens's default).
pub const GEN_AI_PROVIDER_NAME_NEMO: &str = "nemo";
/// Value `input` of `gen_ai.token.type`.
pub const GEN_AI_TOKEN_TYPE_INPUT: &str = "input";
/// Value `output` of `gen_ai.token.type`.
pub const GEN_AI_TOKEN_TYPE_OUTPUT: &str = "output";
/// Metric `gen_ai.server.request.duration`: histogram, `s`.
pub const METRIC_GEN_AI_SERVER_REQUEST_DURATION: &str = "gen_ai.server.request.duration";
/// Metric `gen_ai.client.token.usage`: histogram, `{token}`, one point per
/// `gen_ai.token.type`.
pub const METRIC_GEN_AI_CLIENT_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
/// Metric `gen_ai.server.time_to_first_token`: histogram, `s`, from the
/// request's arrival to its first output token.
pub const METRIC_GEN_AI_SERVER_TIME_TO_FIRST_TOKEN: &str = "gen_ai.server.time_to_first_token";
/// Metric `gen_ai.server.time_per_output_token`: histogram, `s`, the mean
/// time between output tokens after the first (the decode phase).
pub const METRIC_GEN_AI_SERVER_TIME_PER_OUTPUT_TOKEN: &str = "gen_ai.server.time_per_output_token";

// === rl.* (RL post-training, `metrics::RlMetrics`) ===
/// `rl.algorithm`: the RL algorithm, e.g. `grpo`, `ppo`, `dpo`.
pub const RL_ALGORITHM: &str = "rl.algorithm";
/// `rl.num_rollouts`: rollouts collected in a step or phase.
pub const RL_NUM_ROLLOUTS: &str = "rl.num_rollouts";
/// `rl.reward`: the reward of one rollout or sample.
pub const RL_REWARD: &str = "rl.reward";
/// `rl.generation.backend`: the generation engine, e.g. `vllm`.
pub const RL_GENERATION_BACKEND: &str = "rl.generation.backend";
/// Metric `rl.reward.mean`: gauge, no unit, mean reward of the last batch.
pub const METRIC_RL_REWARD_MEAN: &str = "rl.reward.mean";
/// Metric `rl.kl_divergence`: gauge, no unit, KL divergence to the reference
/// policy.
pub const METRIC_RL_KL_DIVERGENCE: &str = "rl.kl_divergence";
/// Metric `rl.policy_loss`: gauge, no unit.
pub const METRIC_RL_POLICY_LOSS: &str = "rl.policy_loss";
/// Metric `rl.value_loss`: gauge, no unit.
pub const METRIC_RL_VALUE_LOSS: &str = "rl.value_loss";
/// Metric `rl.entropy`: gauge, no unit, policy entropy.
pub const METRIC_RL_ENTROPY: &str = "rl.entropy";
/// Metric `rl.response_length.mean`: gauge, no unit, mean generated
/// response length.
pub const METRIC_RL_RESPONSE_LENGTH_MEAN: &str = "rl.response_length.mean";
/// Metric `rl.grad_norm`: gauge, no unit.
pub const METRIC_RL_GRAD_NORM: &str = "rl.grad_norm";
/// Metric `rl.learning_rate`: gauge, no unit.
pub const METRIC_RL_LEARNING_RATE: &str = "rl.learning_rate";
/// Metric `rl.throughput.tokens_per_sec`: gauge, `{token}/s`.
pub const METRIC_RL_THROUGHPUT_TOKENS_PER_SEC: &str = "rl.throughput.tokens_per_sec";
/// Metric `rl.generation.duration_ms`: histogram, `ms`, one generation
/// phase.
pub const METRIC_RL_GENERATION_DURATION_MS: &str = "rl.generation.duration_ms";
/// Metric `rl.rollout.duration_ms`: histogram, `ms`, one rollout.
pub const METRIC_RL_ROLLOUT_DURATION_MS: &str = "rl.rollout.duration_ms";

// === gym.* (RL environment servers, `metrics::GymMetrics`) ===
/// `gym.server.name`: the environment server's name.
pub const GYM_SERVER_NAME: &str = "gym.server.name";
/// `gym.server.type`: the kind of server (`agent`, `model`, `resources`).
pub const GYM_SERVER_TYPE: &str = "gym.server.type";
/// `gym.num_servers`: environment servers in the run.
pub const GYM_NUM_SERVERS: &str = "gym.num_servers";
/// `gym.rollout.batch_size`: rollouts collected per batch.
pub const GYM_ROLLOUT_BATCH_SIZE: &str = "gym.rollout.batch_size";
/// Metric `gym.server.request_duration_ms`: histogram, `ms`, one request to
/// an environment server.
pub const METRIC_GYM_SERVER_REQUEST_DURATION_MS: &str = "gym.server.request_duration_ms";
/// Metric `gym.rollout.duration_ms`: histogram, `ms`, one rollout
/// collection.
pub const METRIC_GYM_ROLLOUT_DURATION_MS: &str = "gym.rollout.duration_ms";
/// Metric `gym.verify.duration_ms`: histogram, `ms`, one verification.
pub const METRIC_GYM_VERIFY_DURATION_MS: &str = "gym.verify.duration_ms";
/// Metric `gym.verify.success_rate`: gauge, no unit, fraction of verifications
/// that passed.
pub const METRIC_GYM_VERIFY_SUCCESS_RATE: &str = "gym.verify.success_rate";
/// Metric `gym.servers.active`: gauge, no unit, environment servers
/// currently serving.
pub const METRIC_GYM_SERVERS_ACTIVE: &str = "gym.servers.active";

// === hw.* (hardware semantic conventions, GPU telemetry in `gpu`) ===
/// `hw.id`: identifier of the component, unique on the host (required on
/// every `hw.*` point; lens uses the GPU UUID).
pub const HW_ID: &str = "hw.id";
/// `hw.name`: easily recognisable name of the component (lens: `gpu<N>`,
/// the NVML / `nvidia-smi` index).
pub const HW_NAME: &str = "hw.name";
/// `hw.model`: descriptive model name (e.g. `NVIDIA H200`).
pub const HW_MODEL: &str = "hw.model";
/// `hw.vendor`: vendor of the component.
pub const HW_VENDOR: &str = "hw.vendor";
/// `hw.type`: the component type (`gpu` for every point lens emits).
pub const HW_TYPE: &str = "hw.type";
/// `hw.driver_version`: driver version of the component.
pub const HW_DRIVER_VERSION: &str = "hw.driver_version";
/// `hw.gpu.task`: the task `hw.gpu.utilization` measures.
pub const HW_GPU_TASK: &str = "hw.gpu.task";
/// Value `gpu` of `hw.type`.
pub const HW_TYPE_GPU: &str = "gpu";
/// Value `NVIDIA` of `hw.vendor`.
pub const HW_VENDOR_NVIDIA: &str = "NVIDIA";
/// Value `general` of `hw.gpu.task` (NVML's overall GPU utilisation).
pub const HW_GPU_TASK_GENERAL: &str = "general";
/// Metric `hw.gpu.utilization`: gauge, `1` (0..1), fraction of time the
/// GPU was busy.
pub const METRIC_HW_GPU_UTILIZATION: &str = "hw.gpu.utilization";
/// Metric `hw.gpu.memory.utilization`: gauge, `1` (0..1), fraction of GPU
/// memory used (used / total).
pub const METRIC_HW_GPU_MEMORY_UTILIZATION: &str = "hw.gpu.memory.utilization";
/// Metric `hw.gpu.memory.usage`: up-down counter, `By`, GPU memory used.
pub const METRIC_HW_GPU_MEMORY_USAGE: &str = "hw.gpu.memory.usage";
/// Metric `hw.gpu.memory.limit`: up-down counter, `By`, size of the GPU
/// memory.
pub const METRIC_HW_GPU_MEMORY_LIMIT: &str = "hw.gpu.memory.limit";
/// Metric `hw.power`: gauge, `W`, instantaneous power drawn by the
/// component.
pub const METRIC_HW_POWER: &str = "hw.power";
/// Metric `hw.energy`: counter, `J`, energy consumed by the component since
/// the driver was loaded.
pub const METRIC_HW_ENERGY: &str = "hw.energy";
/// Metric `hw.temperature`: gauge, `Cel`.
pub const METRIC_HW_TEMPERATURE: &str = "hw.temperature";

#[cfg(test)]
mod tests {
    /// The engine, a layer below, writes the truncation names itself:
    /// they must be the public ones (which `tests/parity.rs` reads here).
    #[test]
    fn the_engine_writes_the_public_truncation_names() {
        use crate::api::engine_socket::{SPAN_TRUNCATED, SPAN_TRUNCATED_REASON};
        assert_eq!(super::NEMO_SPAN_TRUNCATED, SPAN_TRUNCATED);
        assert_eq!(super::NEMO_SPAN_TRUNCATED_REASON, SPAN_TRUNCATED_REASON);
    }
}
