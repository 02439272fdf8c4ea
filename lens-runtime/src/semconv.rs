//! Attribute names lens emits, as constants. Standard names follow the
//! OpenTelemetry semantic conventions; `nv.dl.*`, `nemo.*`, `slurm.*`,
//! `wandb.*` are the `nemo-lens` family's own.

// === standard resource attributes ===
/// `service.name`
pub const SERVICE_NAME: &str = "service.name";
/// `service.version`
pub const SERVICE_VERSION: &str = "service.version";
/// `service.instance.id` (`<run_id>-rank<rank>`)
pub const SERVICE_INSTANCE_ID: &str = "service.instance.id";
/// `deployment.environment`
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
/// `nv.dl.iteration`: training iteration.
pub const NV_DL_ITERATION: &str = "nv.dl.iteration";

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
/// `slurm.job.id` (`SLURM_JOB_ID`)
pub const SLURM_JOB_ID: &str = "slurm.job.id";
/// `slurm.job.name` (`SLURM_JOB_NAME`)
pub const SLURM_JOB_NAME: &str = "slurm.job.name";
/// `slurm.nodelist` (`SLURM_JOB_NODELIST`)
pub const SLURM_NODELIST: &str = "slurm.nodelist";
/// `slurm.nnodes` (`SLURM_JOB_NUM_NODES`)
pub const SLURM_NNODES: &str = "slurm.nnodes";
/// `slurm.ntasks` (`SLURM_NTASKS`)
pub const SLURM_NTASKS: &str = "slurm.ntasks";
/// `slurm.partition` (`SLURM_JOB_PARTITION`)
pub const SLURM_PARTITION: &str = "slurm.partition";
/// `slurm.cluster.name` (`SLURM_CLUSTER_NAME`)
pub const SLURM_CLUSTER_NAME: &str = "slurm.cluster.name";

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
