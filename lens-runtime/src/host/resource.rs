//! Resource attributes: lens's own (rank, run id, …), caller-supplied ones,
//! `OTEL_RESOURCE_ATTRIBUTES`, and detected ones (host, process, GPUs, SLURM,
//! Kubernetes).
//!
//! Precedence, lowest first: detected < `OTEL_RESOURCE_ATTRIBUTES` < lens's
//! own < caller-supplied. So a caller always wins over anything detected.

use crate::api::semconv as sc;
use crate::config::LensConfig;
use crate::host::{gpu_worker, gpus};
use opentelemetry::{KeyValue, Value};
use std::path::{Path, PathBuf};

/// The default Kubernetes service-account folder.
pub(crate) const K8S_SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// What resource detection reads: environment and files, injectable for
/// tests.
pub(crate) struct Detect<'a> {
    /// Reads an environment variable as set (an empty value is `Some("")`:
    /// an empty `CUDA_VISIBLE_DEVICES` means no GPU, not unset).
    pub lookup: &'a dyn Fn(&str) -> Option<String>,
    /// The Kubernetes service-account folder.
    pub k8s_service_account_dir: PathBuf,
    /// Whether to count the GPUs through NVML (GPU metrics on); else
    /// `CUDA_VISIBLE_DEVICES` alone, and NVML is not touched.
    pub use_nvml: bool,
}

impl std::fmt::Debug for Detect<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detect")
            .field("k8s_service_account_dir", &self.k8s_service_account_dir)
            .field("use_nvml", &self.use_nvml)
            .finish()
    }
}

impl Detect<'_> {
    fn get(&self, var: &str) -> Option<String> {
        (self.lookup)(var)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    fn first(&self, vars: &[&str]) -> Option<String> {
        vars.iter().find_map(|v| self.get(v))
    }
}

/// 12 random hex digits: the run id when nothing names one shared by the
/// job ([`crate::host::launcher::job_run_id`]).
pub(crate) fn random_run_id() -> String {
    use rand::TryRngCore;
    let mut bytes = [0u8; 6];
    rand::rngs::OsRng
        .try_fill_bytes(&mut bytes)
        .unwrap_or_else(|_| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            let mixed = t ^ u128::from(std::process::id()).rotate_left(48);
            bytes.copy_from_slice(&mixed.to_le_bytes()[..6]);
        });
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lens's own resource attributes for `rank` of `world_size`.
pub(crate) fn lens_attributes(
    config: &LensConfig,
    run_id: &str,
    rank: u32,
    world_size: u32,
    detect: &Detect<'_>,
) -> Vec<KeyValue> {
    let mut v = vec![
        KeyValue::new(sc::SERVICE_NAME, config.service_name.clone()),
        KeyValue::new(sc::TELEMETRY_SDK_NAME, "lens"),
        KeyValue::new(sc::TELEMETRY_SDK_LANGUAGE, "rust"),
        KeyValue::new(sc::TELEMETRY_SDK_VERSION, env!("CARGO_PKG_VERSION")),
        KeyValue::new(sc::NV_DL_RANK, i64::from(rank)),
        KeyValue::new(sc::NV_DL_WORLD_SIZE, i64::from(world_size)),
        // the released Python library's names (0.1.0, 0.2.0), beside Nightly's
        KeyValue::new(sc::DL_RANK, i64::from(rank)),
        KeyValue::new(sc::DL_WORLD_SIZE, i64::from(world_size)),
        KeyValue::new(sc::NEMO_RUN_ID, run_id.to_owned()),
        KeyValue::new(sc::SERVICE_INSTANCE_ID, format!("{run_id}-rank{rank}")),
    ];
    if let Some(local) = crate::config::strategy::local_rank_with(|k| detect.get(k)) {
        v.push(KeyValue::new(sc::NV_DL_LOCAL_RANK, i64::from(local)));
    }
    let environment = detect.first(&["DEPLOYMENT_ENV", "ENVIRONMENT"]);
    let opt = [
        (sc::NEMO_USER_ID, config.user.clone()),
        (sc::WANDB_ENTITY, config.wandb_entity.clone()),
        (sc::WANDB_PROJECT, config.wandb_project.clone()),
        (sc::DEPLOYMENT_ENVIRONMENT_NAME, environment.clone()),
        (sc::DEPLOYMENT_ENVIRONMENT, environment),
    ];
    v.extend(
        opt.into_iter()
            .filter_map(|(k, val)| val.map(|val| KeyValue::new(k, val))),
    );
    v
}

/// Attributes from `OTEL_RESOURCE_ATTRIBUTES` (`k=v,k2=v2`, percent-decoded;
/// see [`parse_resource_attributes`]).
///
/// As the OpenTelemetry specification asks, an invalid value is discarded
/// as a whole: no attribute comes from it, one warning goes to stderr
/// (best effort), and setup goes on.
pub(crate) fn otel_resource_attributes(detect: &Detect<'_>) -> Vec<KeyValue> {
    let Some(raw) = detect.get("OTEL_RESOURCE_ATTRIBUTES") else {
        return Vec::new();
    };
    parse_resource_attributes(&raw).unwrap_or_else(|e| {
        crate::diag::warn(format_args!("ignoring OTEL_RESOURCE_ATTRIBUTES: {e}"));
        Vec::new()
    })
}

/// Why an `OTEL_RESOURCE_ATTRIBUTES` value is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InvalidResourceAttributes {
    /// The invalid `key=value` member (at most 64 characters of it).
    pub member: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl std::fmt::Display for InvalidResourceAttributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "member {:?} {}; expected comma-separated key=value pairs with \
             percent-encoded UTF-8 (e.g. team=pre%2Dtrain,zone=eu)",
            self.member, self.reason
        )
    }
}

impl std::error::Error for InvalidResourceAttributes {}

/// Parses an `OTEL_RESOURCE_ATTRIBUTES` value: comma-separated `key=value`
/// members (the W3C Baggage form without properties), keys and values
/// trimmed and percent-decoded. Blank members are skipped; a member without
/// `=`, with an empty key, with a `%` not followed by two hex digits, or
/// whose escapes do not decode to UTF-8 makes the whole value invalid.
pub(crate) fn parse_resource_attributes(
    raw: &str,
) -> Result<Vec<KeyValue>, InvalidResourceAttributes> {
    raw.split(',')
        .filter(|member| !member.trim().is_empty())
        .map(|member| {
            let invalid = |reason| InvalidResourceAttributes {
                member: member.trim().chars().take(64).collect(),
                reason,
            };
            let (k, v) = member
                .split_once('=')
                .ok_or_else(|| invalid("has no '='"))?;
            let k = percent_decode(k.trim()).map_err(invalid)?;
            if k.is_empty() {
                return Err(invalid("has an empty key"));
            }
            let v = percent_decode(v.trim()).map_err(invalid)?;
            Ok(KeyValue::new(k, v))
        })
        .collect()
}

/// `s` percent-decoded, strictly: every `%` starts a two-hex-digit escape
/// and the decoded bytes are UTF-8.
fn percent_decode(s: &str) -> Result<String, &'static str> {
    let b = s.as_bytes();
    let escapes_ok = b.iter().enumerate().all(|(i, c)| {
        *c != b'%'
            || matches!(b.get(i + 1..i + 3), Some([h, l]) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit())
    });
    if !escapes_ok {
        return Err("has a '%' not followed by two hex digits");
    }
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(std::borrow::Cow::into_owned)
        .map_err(|_| "has percent escapes that do not decode to UTF-8")
}

/// Host, process, GPU, SLURM and Kubernetes attributes.
pub(crate) fn detected_attributes(detect: &Detect<'_>) -> Vec<KeyValue> {
    let mut v = Vec::new();
    if let Some(host) = hostname() {
        v.push(KeyValue::new(sc::HOST_NAME, host));
    }
    v.push(KeyValue::new(
        sc::PROCESS_PID,
        i64::from(std::process::id()),
    ));
    if let Some(n) = gpu_count(detect) {
        v.push(KeyValue::new(sc::HOST_GPU_COUNT, n));
    }
    v.extend(slurm(detect));
    v.extend(kubernetes(detect));
    v
}

pub(crate) fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; gethostname NUL-terminates
    // on success when the name fits.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).into_owned();
    (!name.is_empty()).then_some(name)
}

/// GPUs visible to this process, by the rule of [`crate::host::gpus`]:
/// with `use_nvml`, the process's one GPU discovery (the devices the GPU
/// metrics report); else, or when NVML does not load, the devices
/// `CUDA_VISIBLE_DEVICES` lists when set; else `None`.
pub(crate) fn gpu_count(detect: &Detect<'_>) -> Option<i64> {
    let raw = (detect.lookup)(gpus::VISIBLE_DEVICES);
    let worker = detect.use_nvml.then(gpu_worker::process);
    gpu_worker::visible_count(raw.as_deref(), worker).map(|n| n as i64)
}

/// The job's SLURM attributes ([`sc::SLURM_JOB_SOURCES`]), as the Python
/// library records them: only inside a job (`SLURM_JOB_ID` set), every
/// value a string (the node and task counts too, so one backend column
/// holds one type whichever language wrote it, and `lens slurm-env`, which
/// can only write strings, agrees).
fn slurm(d: &Detect<'_>) -> Vec<KeyValue> {
    let in_job = sc::SLURM_JOB_SOURCES
        .first()
        .is_some_and(|(_, vars)| d.first(vars).is_some());
    if !in_job {
        return Vec::new();
    }
    let step = d
        .first(&["SLURM_STEP_ID", "SLURM_STEPID"])
        .map(|s| KeyValue::new(sc::SLURM_STEP_ID, s));
    sc::SLURM_JOB_SOURCES
        .iter()
        .filter_map(|&(k, vars)| Some(KeyValue::new(k, Value::from(d.first(vars)?))))
        // the step, which the run id leaves out (it is the job's, as Python's)
        .chain(step)
        .collect()
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The Kubernetes attributes, as the Python library documents them
/// (`detect_kubernetes`, nemo-lens 0.1.0): only in a pod
/// (`KUBERNETES_SERVICE_HOST` set, or the service-account folder present),
/// each from its `K8S_*` downward-API variable first, then the
/// documented `POD_*` / `NODE_NAME` one (`HOSTNAME`, the Python code's
/// fallback, last for the pod name). The other names, and the service
/// account's `namespace` file, only fill in where those are unset.
fn kubernetes(d: &Detect<'_>) -> Vec<KeyValue> {
    let sa = &d.k8s_service_account_dir;
    if d.get("KUBERNETES_SERVICE_HOST").is_none() && !sa.is_dir() {
        return Vec::new();
    }
    let namespace = d
        .first(&["K8S_NAMESPACE", "POD_NAMESPACE", "KUBERNETES_NAMESPACE"])
        .or_else(|| read_trimmed(&sa.join("namespace")));
    let pairs = [
        (sc::K8S_NAMESPACE_NAME, namespace),
        (
            sc::K8S_POD_NAME,
            d.first(&["K8S_POD_NAME", "POD_NAME", "HOSTNAME"]),
        ),
        (sc::K8S_POD_UID, d.first(&["K8S_POD_UID", "POD_UID"])),
        (sc::K8S_NODE_NAME, d.first(&["K8S_NODE_NAME", "NODE_NAME"])),
        (
            sc::K8S_CONTAINER_NAME,
            d.first(&["K8S_CONTAINER_NAME", "CONTAINER_NAME"]),
        ),
        (sc::K8S_JOB_NAME, d.first(&["K8S_JOB_NAME", "JOB_NAME"])),
    ];
    pairs
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| KeyValue::new(k, v)))
        .collect()
}

/// Merges attribute lists, later lists overriding earlier ones key by key,
/// keeping first-seen order. Linear in the number of attributes (an
/// `OTEL_RESOURCE_ATTRIBUTES` value may hold very many).
pub(crate) fn merge(layers: &[Vec<KeyValue>]) -> Vec<KeyValue> {
    let mut out: Vec<KeyValue> = Vec::new();
    let mut index: std::collections::HashMap<opentelemetry::Key, usize> =
        std::collections::HashMap::new();
    for kv in layers.iter().flatten() {
        match index.get(&kv.key).and_then(|i| out.get_mut(*i)) {
            Some(o) => o.value = kv.value.clone(),
            None => {
                index.insert(kv.key.clone(), out.len());
                out.push(kv.clone());
            }
        }
    }
    out
}

/// Every resource attribute for this rank, with the documented precedence.
pub(crate) fn resource_attributes(
    config: &LensConfig,
    run_id: &str,
    rank: u32,
    world_size: u32,
    caller: &[KeyValue],
    detect: &Detect<'_>,
) -> Vec<KeyValue> {
    let from_env = otel_resource_attributes(detect);
    let mut lens = lens_attributes(config, run_id, rank, world_size, detect);
    // `service.name` from OTEL_RESOURCE_ATTRIBUTES is kept unless a service
    // name was configured (OTEL_SERVICE_NAME, or a name other than the
    // default in code), as the OpenTelemetry SDKs do
    let configured = detect.get("OTEL_SERVICE_NAME").is_some()
        || config.service_name != crate::config::DEFAULT_SERVICE_NAME;
    if !configured
        && from_env
            .iter()
            .any(|kv| kv.key.as_str() == sc::SERVICE_NAME)
    {
        lens.retain(|kv| kv.key.as_str() != sc::SERVICE_NAME);
    }
    merge(&[detected_attributes(detect), from_env, lens, caller.to_vec()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn detect<'a>(vars: &'a HashMap<&'a str, &'a str>, sa: &Path) -> Detect<'a> {
        // leak a closure for the test's lifetime
        let f: &'a dyn Fn(&str) -> Option<String> =
            Box::leak(Box::new(move |k: &str| vars.get(k).map(|v| v.to_string())));
        Detect {
            lookup: f,
            k8s_service_account_dir: sa.to_owned(),
            use_nvml: false,
        }
    }

    fn value(attrs: &[KeyValue], key: &str) -> Option<String> {
        attrs
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    }

    #[test]
    fn kubernetes_from_env_and_service_account_folder() {
        let dir = std::env::temp_dir().join(format!("lens-sa-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("namespace"), "training\n").unwrap();
        let vars = HashMap::from([
            ("POD_NAME", "trainer-0"),
            ("NODE_NAME", "gpu-node-3"),
            ("POD_UID", "u-1"),
        ]);
        let attrs = detected_attributes(&detect(&vars, &dir));
        assert_eq!(
            value(&attrs, "k8s.namespace.name").as_deref(),
            Some("training")
        );
        assert_eq!(value(&attrs, "k8s.pod.name").as_deref(), Some("trainer-0"));
        assert_eq!(
            value(&attrs, "k8s.node.name").as_deref(),
            Some("gpu-node-3")
        );
        assert_eq!(value(&attrs, "k8s.pod.uid").as_deref(), Some("u-1"));
        std::fs::remove_dir_all(&dir).unwrap();
        // neither the folder nor KUBERNETES_SERVICE_HOST: nothing k8s
        let attrs = detected_attributes(&detect(&vars, &dir));
        assert!(attrs.iter().all(|kv| !kv.key.as_str().starts_with("k8s.")));
        // the env var alone is enough
        let vars = HashMap::from([
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("POD_NAMESPACE", "ns"),
            ("JOB_NAME", "j"),
        ]);
        let attrs = detected_attributes(&detect(&vars, &dir));
        assert_eq!(value(&attrs, "k8s.namespace.name").as_deref(), Some("ns"));
        assert_eq!(value(&attrs, "k8s.job.name").as_deref(), Some("j"));
    }

    #[test]
    fn gpu_count_without_nvml_reads_the_list_as_cuda_does() {
        let none = HashMap::new();
        let d = detect(&none, Path::new("/nonexistent"));
        assert_eq!(gpu_count(&d), None);
        for (v, n) in [
            ("", 0),
            ("-1", 0),
            ("NoDevFiles", 0),
            ("0", 1),
            ("0,1,2,3", 4),
            ("GPU-abc,GPU-def", 2),
            ("0,1,-1,2", 2),
            ("0,0", 0),
            ("xyz", 0),
            ("GPU-", 0),
            ("0,GPU-abc,1", 1),
            ("MIG-abc,MIG-def", 1),
        ] {
            let vars = HashMap::from([("CUDA_VISIBLE_DEVICES", v)]);
            assert_eq!(gpu_count(&detect(&vars, Path::new("/x"))), Some(n), "{v:?}");
        }
    }

    #[test]
    fn nvml_is_not_touched_without_gpu_metrics() {
        let me = std::thread::current().id();
        for v in [None, Some(""), Some("0,1"), Some("GPU-abc")] {
            let vars: HashMap<&str, &str> =
                v.map(|v| ("CUDA_VISIBLE_DEVICES", v)).into_iter().collect();
            let attrs = detected_attributes(&detect(&vars, Path::new("/x")));
            let count = value(&attrs, sc::HOST_GPU_COUNT);
            assert_eq!(count.is_some(), v.is_some(), "{v:?}");
        }
        let callers = crate::host::gpu_worker::CALLERS.lock().unwrap();
        assert!(
            !callers.as_ref().is_some_and(|c| c.contains(&me)),
            "resource detection asked for the NVML worker"
        );
    }

    #[test]
    fn otel_resource_attributes_hostile_values_are_discarded_whole() {
        let one = |raw: &str| {
            let raw = raw.to_owned();
            let lookup = move |k: &str| (k == "OTEL_RESOURCE_ATTRIBUTES").then(|| raw.clone());
            let d = Detect {
                lookup: &lookup,
                k8s_service_account_dir: "/nonexistent".into(),
                use_nvml: false,
            };
            otel_resource_attributes(&d)
        };
        // valid: decoded, blank members skipped, empty values kept
        let attrs = one("a=1,, b = x%20y ,c=,%C3%A9t%C3%A9=%E2%82%AC");
        assert_eq!(value(&attrs, "a").as_deref(), Some("1"));
        assert_eq!(value(&attrs, "b").as_deref(), Some("x y"));
        assert_eq!(value(&attrs, "c").as_deref(), Some(""));
        assert_eq!(value(&attrs, "été").as_deref(), Some("€"));
        assert!(one("").is_empty() && one(" , ").is_empty());
        // one invalid member discards the value (with a warning), without a panic
        assert_eq!(one("team=ok,x=%1€"), Vec::new());
        for bad in [
            "team=%1€",
            "team=%",
            "team=ok,x=%",
            "team=%zz",
            "team=%e2%82",
            "team=%ff",
            "%€=1",
            "team",
            "=x",
            " = x",
            "\u{1}%%zz=,,==",
            "team=ok,bare",
        ] {
            assert!(parse_resource_attributes(bad).is_err(), "{bad:?}");
        }
        // a long invalid member is quoted shortly
        let long = "x".repeat(1 << 20);
        let e = parse_resource_attributes(&long).unwrap_err();
        assert_eq!(e.member.chars().count(), 64);
        assert!(e.to_string().contains("has no '='"));
    }

    /// Issue 14: SLURM attributes only inside a job, every value a string
    /// (as nemo-lens 0.1.0 writes them), each read from the variable the
    /// Python documentation names (`SLURM_NNODES`, `SLURM_NTASKS`,
    /// `SLURM_JOB_PARTITION`, `SLURM_JOB_NODELIST`, …), the other form only
    /// where that one is unset.
    #[test]
    fn slurm_attributes_as_the_python_library_writes_them() {
        let raw = |vars: &HashMap<&str, &str>, k: &str| {
            slurm(&detect(vars, Path::new("/nonexistent")))
                .into_iter()
                .find(|kv| kv.key.as_str() == k)
                .map(|kv| kv.value)
        };
        // a faked srun step of a 4-node job: both forms set, the documented wins
        let step = HashMap::from([
            ("SLURM_JOB_ID", "77"),
            ("SLURM_JOB_NAME", "pretrain"),
            ("SLURM_NODELIST", "gpu[001-002]"),
            ("SLURM_JOB_NODELIST", "gpu[001-004]"),
            ("SLURM_NNODES", "2"),
            ("SLURM_JOB_NUM_NODES", "4"),
            ("SLURM_NTASKS", "16"),
            ("SLURM_PARTITION", "from-input"),
            ("SLURM_JOB_PARTITION", "batch"),
            ("SLURM_CLUSTER_NAME", "eos"),
        ]);
        let want = [
            ("slurm.job.id", "77"),
            ("slurm.job.name", "pretrain"),
            ("slurm.nodelist", "gpu[001-004]"),
            ("slurm.nnodes", "2"),
            ("slurm.ntasks", "16"),
            ("slurm.partition", "batch"),
            ("slurm.cluster.name", "eos"),
        ];
        for (k, v) in want {
            // strings, counts included, as Python's `detect_slurm` writes them
            assert_eq!(raw(&step, k), Some(Value::from(v)), "{k}");
        }
        assert_eq!(
            slurm(&detect(&step, Path::new("/nonexistent"))).len(),
            want.len()
        );
        // only the other forms set: they fill in
        let other = HashMap::from([
            ("SLURM_JOB_ID", "77"),
            ("SLURM_NODELIST", "gpu[001-002]"),
            ("SLURM_JOB_NUM_NODES", "4"),
            ("SLURM_PARTITION", "from-input"),
        ]);
        assert_eq!(raw(&other, "slurm.nnodes"), Some(Value::from("4")));
        assert_eq!(
            raw(&other, "slurm.nodelist"),
            Some(Value::from("gpu[001-002]"))
        );
        assert_eq!(
            raw(&other, "slurm.partition"),
            Some(Value::from("from-input"))
        );
        assert_eq!(raw(&other, "slurm.ntasks"), None);
        assert_eq!(raw(&other, "slurm.step.id"), None, "no step: not in srun");
        // inside an srun step: the step, which the run id leaves out
        let mut in_step = other.clone();
        in_step.insert("SLURM_STEP_ID", "3");
        assert_eq!(raw(&in_step, "slurm.step.id"), Some(Value::from("3")));
        // outside a job (no SLURM_JOB_ID): nothing, even with other SLURM_*
        let no_job = HashMap::from([("SLURM_NTASKS", "16"), ("SLURM_JOB_PARTITION", "batch")]);
        assert!(slurm(&detect(&no_job, Path::new("/nonexistent"))).is_empty());
    }

    /// The Kubernetes attributes from the Python library's `K8S_*`
    /// variables first, the other names after them.
    #[test]
    fn kubernetes_reads_the_python_library_s_variables_first() {
        let vars = HashMap::from([
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("K8S_NAMESPACE", "ml"),
            ("POD_NAMESPACE", "other"),
            ("K8S_POD_NAME", "trainer-0"),
            ("HOSTNAME", "host-name"),
            ("POD_NAME", "other"),
            ("K8S_POD_UID", "u-1"),
            ("POD_UID", "other"),
            ("K8S_NODE_NAME", "node-3"),
            ("NODE_NAME", "other"),
            ("K8S_CONTAINER_NAME", "main"),
            ("CONTAINER_NAME", "other"),
            ("K8S_JOB_NAME", "j"),
            ("JOB_NAME", "other"),
        ]);
        let attrs = kubernetes(&detect(&vars, Path::new("/nonexistent")));
        for (k, v) in [
            ("k8s.namespace.name", "ml"),
            ("k8s.pod.name", "trainer-0"),
            ("k8s.pod.uid", "u-1"),
            ("k8s.node.name", "node-3"),
            ("k8s.container.name", "main"),
            ("k8s.job.name", "j"),
        ] {
            assert_eq!(value(&attrs, k).as_deref(), Some(v), "{k}");
        }
        // the documented POD_NAME, then the Python code's HOSTNAME
        let pod = HashMap::from([
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("HOSTNAME", "host-name"),
            ("POD_NAME", "trainer-1"),
        ]);
        let attrs = kubernetes(&detect(&pod, Path::new("/nonexistent")));
        assert_eq!(value(&attrs, "k8s.pod.name").as_deref(), Some("trainer-1"));
        let host = HashMap::from([
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("HOSTNAME", "trainer-2"),
        ]);
        let attrs = kubernetes(&detect(&host, Path::new("/nonexistent")));
        assert_eq!(value(&attrs, "k8s.pod.name").as_deref(), Some("trainer-2"));
    }

    #[test]
    fn service_name_from_the_environment_and_the_sdk_attributes() {
        let attrs_for = |vars: &HashMap<&str, &str>, cfg: &LensConfig| {
            let d = detect(vars, Path::new("/nonexistent"));
            resource_attributes(cfg, "r", 0, 1, &[], &d)
        };
        let env = HashMap::from([(
            "OTEL_RESOURCE_ATTRIBUTES",
            "service.name=trainer,service.version=2.1",
        )]);
        let attrs = attrs_for(&env, &LensConfig::default());
        assert_eq!(value(&attrs, "service.name").as_deref(), Some("trainer"));
        assert_eq!(
            value(&attrs, "service.version").as_deref(),
            Some("2.1"),
            "the application's version, not lens's"
        );
        assert_eq!(value(&attrs, "telemetry.sdk.name").as_deref(), Some("lens"));
        assert_eq!(
            value(&attrs, "telemetry.sdk.language").as_deref(),
            Some("rust")
        );
        assert_eq!(
            value(&attrs, "telemetry.sdk.version").as_deref(),
            Some(env!("CARGO_PKG_VERSION"))
        );
        // OTEL_SERVICE_NAME, or a name set in code, wins over the attribute
        let mut both = env.clone();
        both.insert("OTEL_SERVICE_NAME", "svc");
        let cfg = LensConfig {
            service_name: "svc".into(),
            ..LensConfig::default()
        };
        assert_eq!(
            value(&attrs_for(&both, &cfg), "service.name").as_deref(),
            Some("svc")
        );
        let coded = LensConfig {
            service_name: "coded".into(),
            ..LensConfig::default()
        };
        assert_eq!(
            value(&attrs_for(&env, &coded), "service.name").as_deref(),
            Some("coded")
        );
        // neither: the default, and no service.version at all
        let none = attrs_for(&HashMap::new(), &LensConfig::default());
        assert_eq!(value(&none, "service.name").as_deref(), Some("nemo"));
        assert_eq!(value(&none, "service.version"), None);
        let prod = attrs_for(
            &HashMap::from([("DEPLOYMENT_ENV", "prod")]),
            &LensConfig::default(),
        );
        assert_eq!(
            value(&prod, "deployment.environment.name").as_deref(),
            Some("prod")
        );
    }

    #[test]
    fn precedence_caller_over_lens_over_env_over_detected() {
        let vars = HashMap::from([
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "host.name=from-env,service.name=env-svc,a%2Cb=c%3Dd",
            ),
            ("SLURM_JOB_ID", "99"),
            ("DEPLOYMENT_ENV", "prod"),
        ]);
        let d = detect(&vars, Path::new("/nonexistent"));
        let cfg = LensConfig::default();
        let run = crate::host::launcher::job_run_id(cfg.run_id.as_deref(), d.lookup).unwrap();
        assert_eq!(run, "99");
        let attrs = resource_attributes(
            &cfg,
            &run,
            1,
            2,
            &[KeyValue::new("service.name", "caller")],
            &d,
        );
        assert_eq!(
            value(&attrs, "host.name").as_deref(),
            Some("from-env"),
            "env beats detected"
        );
        assert_eq!(
            value(&attrs, "service.name").as_deref(),
            Some("caller"),
            "caller beats all"
        );
        assert_eq!(
            value(&attrs, "a,b").as_deref(),
            Some("c=d"),
            "percent-decoded"
        );
        assert_eq!(
            value(&attrs, "deployment.environment").as_deref(),
            Some("prod")
        );
        assert_eq!(
            value(&attrs, "service.instance.id").as_deref(),
            Some("99-rank1")
        );
        assert_eq!(value(&attrs, "slurm.job.id").as_deref(), Some("99"));
    }
}

#[cfg(test)]
mod examples {
    //! Examples of crate-private items, kept as unit tests.

    #[test]
    fn run_id_from_slurm_else_random() {
        use crate::host::launcher::job_run_id;
        use crate::host::resource::random_run_id;
        assert_eq!(
            job_run_id(None, &|v| (v == "SLURM_JOB_ID").then(|| "777".into())).as_deref(),
            Some("777")
        );
        assert_eq!(job_run_id(None, &|_| None), None);
        assert_eq!(random_run_id().len(), 12);
    }

    #[test]
    fn otel_resource_attributes() {
        use crate::host::resource::{otel_resource_attributes, Detect};
        let d = |v: &'static str| Detect {
            lookup: Box::leak(Box::new(move |k: &str| {
                (k == "OTEL_RESOURCE_ATTRIBUTES").then(|| v.to_owned())
            })),
            k8s_service_account_dir: "/nonexistent".into(),
            use_nvml: false,
        };
        assert_eq!(otel_resource_attributes(&d("team=a%20b")).len(), 1);
        assert!(otel_resource_attributes(&d("team=ok,team=%1€")).is_empty());
    }

    #[test]
    fn parse_resource_attributes() {
        use crate::host::resource::parse_resource_attributes;
        let attrs = parse_resource_attributes(" a%2Cb = c%3Dd , team=pre%E2%82%AC,").unwrap();
        assert_eq!(attrs[0].key.as_str(), "a,b");
        assert_eq!(attrs[0].value.as_str(), "c=d");
        assert_eq!(attrs[1].value.as_str(), "pre€");
        for bad in [
            "team",
            "=x",
            "team=%",
            "team=%zz",
            "team=%1€",
            "team=%e2%82",
        ] {
            assert!(parse_resource_attributes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn gpu_count() {
        use crate::host::resource::{gpu_count, Detect};
        let d = Detect {
            lookup: &|v| (v == "CUDA_VISIBLE_DEVICES").then(|| "0,1,3".into()),
            k8s_service_account_dir: "/nonexistent".into(),
            use_nvml: false,
        };
        assert_eq!(gpu_count(&d), Some(3));
    }

    #[test]
    fn merge() {
        use opentelemetry::KeyValue;
        let m = crate::host::resource::merge(&[
            vec![KeyValue::new("a", 1), KeyValue::new("b", 2)],
            vec![KeyValue::new("a", 3)],
        ]);
        assert_eq!(m, vec![KeyValue::new("a", 3), KeyValue::new("b", 2)]);
    }
}
