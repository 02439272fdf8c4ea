//! Rank, world size and run id from the launcher that started the process,
//! so that `torchrun`, `mpirun` and `srun` jobs need no lens configuration:
//! every rank of one job finds the same run id and its own rank.
//!
//! Rank and world size, the first launcher whose two variables are both set:
//!
//! | launcher | rank | world size |
//! |---|---|---|
//! | explicit override | `NEMO_LENS_RANK` | `NEMO_LENS_WORLD_SIZE` |
//! | torchrun | `RANK` | `WORLD_SIZE` |
//! | Open MPI | `OMPI_COMM_WORLD_RANK` | `OMPI_COMM_WORLD_SIZE` |
//! | MPICH / Hydra | `PMI_RANK` | `PMI_SIZE` |
//! | SLURM | `SLURM_PROCID` | `SLURM_NTASKS` |
//!
//! None set: rank 0 of 1. A value that is not a number, or a rank outside
//! the world, is a configuration error naming the variable.
//!
//! Run id, the first that is set: `NEMO_LENS_RUN_ID`; the SLURM job id
//! (`SLURM_JOB_ID`, as the Python library takes it: every step of one
//! allocation is one run, each step's processes carry `slurm.step.id`);
//! `TORCHELASTIC_RUN_ID` (not its
//! placeholder `none`); the Open MPI job id (`OMPI_MCA_ess_base_jobid`); the
//! PMIx namespace (`PMIX_NAMESPACE`). In a launcher's id, characters other
//! than ASCII letters, digits, `.`, `_` and `-` become `-`, since the id
//! names files. None set:
//! a random id, different on every rank (setup warns when the world has
//! more than one rank).

use crate::config::error::invalid;
use crate::config::ConfigError;

/// The launchers read, in order: (name, rank variable, world variable).
pub(crate) const LAUNCHERS: &[(&str, &str, &str)] = &[
    ("override", "NEMO_LENS_RANK", "NEMO_LENS_WORLD_SIZE"),
    ("torchrun", "RANK", "WORLD_SIZE"),
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("MPICH/Hydra", "PMI_RANK", "PMI_SIZE"),
    ("SLURM", "SLURM_PROCID", "SLURM_NTASKS"),
];

/// Where this process sits in its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Launch {
    pub(crate) rank: u32,
    pub(crate) world_size: u32,
    /// The launcher the values came from (`None`: none found, rank 0 of 1).
    pub(crate) launcher: Option<&'static str>,
}

/// Rank and world size from the first launcher that sets both.
pub(crate) fn launch(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Launch, ConfigError> {
    let get = |v: &str| lookup(v).filter(|s| !s.trim().is_empty());
    for (name, rank_var, world_var) in LAUNCHERS {
        let (Some(r), Some(w)) = (get(rank_var), get(world_var)) else {
            continue;
        };
        let rank: u32 = r
            .trim()
            .parse()
            .map_err(|_| invalid(rank_var, &r, "a rank: a whole number >= 0"))?;
        let world_size: u32 = w
            .trim()
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| invalid(world_var, &w, "a world size: a whole number >= 1"))?;
        if rank >= world_size {
            return Err(invalid(
                rank_var,
                &r,
                &format!("a rank below the world size {world_size} ({world_var})"),
            ));
        }
        return Ok(Launch {
            rank,
            world_size,
            launcher: Some(name),
        });
    }
    Ok(Launch {
        rank: 0,
        world_size: 1,
        launcher: None,
    })
}

/// The job's run id from the launcher, when it gives one (see the module
/// documentation for the order); `configured` is `NEMO_LENS_RUN_ID`.
pub(crate) fn job_run_id(
    configured: Option<&str>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    let get = |v: &str| {
        lookup(v)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    if let Some(id) = configured.map(str::trim).filter(|s| !s.is_empty()) {
        return Some(id.to_owned());
    }
    // SLURM_JOB_ID alone, as the Python library: one run id for both
    // languages in one allocation (the step is the `slurm.step.id` attribute)
    let id = get("SLURM_JOB_ID")
        .or_else(|| get("TORCHELASTIC_RUN_ID").filter(|s| s != "none"))
        .or_else(|| get("OMPI_MCA_ess_base_jobid"))
        .or_else(|| get("PMIX_NAMESPACE"))?;
    Some(file_safe(&id))
}

/// `id` with every character other than `A-Z a-z 0-9 . _ -` made `-`: safe
/// as part of a file name (no separator, so no way out of its folder), as
/// the `file` exporter names a rank's file after the run id.
///
/// ```
/// assert_eq!(lens::file_safe_run_id("job/7 step:1"), "job-7-step-1");
/// ```
pub fn file_safe_run_id(id: &str) -> String {
    file_safe(id)
}

/// [`file_safe_run_id`].
pub(crate) fn file_safe(id: &str) -> String {
    id.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '-',
        })
        .collect()
}

/// The run id every rank of this job shares, by the rule setup uses:
/// `config.run_id` (`NEMO_LENS_RUN_ID`), else the SLURM job id,
/// `TORCHELASTIC_RUN_ID`, the Open MPI job id or the PMIx namespace read
/// through `lookup`; `None` when nothing names one (setup then makes a
/// random id, [`TelemetryHandle::run_id`](crate::TelemetryHandle::run_id)).
/// For a launcher that must know the id before setting telemetry up, to
/// hand it to the processes it starts.
///
/// ```
/// let cfg = lens::LensConfig::default();
/// let torchrun = |v: &str| (v == "TORCHELASTIC_RUN_ID").then(|| "c0ffee".to_owned());
/// assert_eq!(lens::shared_run_id(&cfg, torchrun).as_deref(), Some("c0ffee"));
/// assert_eq!(lens::shared_run_id(&cfg, |_| None), None);
/// ```
pub fn shared_run_id(
    config: &crate::config::LensConfig,
    lookup: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    job_run_id(config.run_id.as_deref(), &lookup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn launchers_in_order_and_the_override_wins() {
        let l = |vars: &[(&str, &str)]| launch(&env(vars)).unwrap();
        assert_eq!(l(&[]).launcher, None);
        assert_eq!((l(&[]).rank, l(&[]).world_size), (0, 1));
        let torch = l(&[("RANK", "3"), ("WORLD_SIZE", "8"), ("LOCAL_RANK", "3")]);
        assert_eq!(
            (torch.rank, torch.world_size, torch.launcher),
            (3, 8, Some("torchrun"))
        );
        let ompi = l(&[("OMPI_COMM_WORLD_RANK", "2"), ("OMPI_COMM_WORLD_SIZE", "4")]);
        assert_eq!((ompi.rank, ompi.launcher), (2, Some("Open MPI")));
        let hydra = l(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")]);
        assert_eq!(hydra.launcher, Some("MPICH/Hydra"));
        let slurm = l(&[("SLURM_PROCID", "5"), ("SLURM_NTASKS", "16")]);
        assert_eq!((slurm.rank, slurm.world_size), (5, 16));
        // torchrun under srun: torchrun's own numbering wins over SLURM's
        let both = l(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            ("RANK", "7"),
            ("WORLD_SIZE", "16"),
        ]);
        assert_eq!((both.rank, both.launcher), (7, Some("torchrun")));
        // a rank without a world size is skipped, not guessed
        assert_eq!(l(&[("RANK", "3")]).launcher, None);
        let over = l(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("NEMO_LENS_RANK", "1"),
            ("NEMO_LENS_WORLD_SIZE", "2"),
        ]);
        assert_eq!((over.rank, over.world_size), (1, 2));
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (vars, var) in [
            (&[("RANK", "x"), ("WORLD_SIZE", "2")][..], "RANK"),
            (&[("RANK", "0"), ("WORLD_SIZE", "0")][..], "WORLD_SIZE"),
            (&[("PMI_RANK", "4"), ("PMI_SIZE", "4")][..], "PMI_RANK"),
        ] {
            let e = launch(&env(vars)).unwrap_err().to_string();
            assert!(e.contains(var), "{e}");
        }
    }

    #[test]
    fn one_run_id_per_job() {
        let id = |vars: &[(&str, &str)]| job_run_id(None, &env(vars));
        assert_eq!(id(&[]), None);
        assert_eq!(id(&[("SLURM_JOB_ID", "123")]).as_deref(), Some("123"));
        assert_eq!(
            id(&[("SLURM_JOB_ID", "123"), ("SLURM_STEP_ID", "4")]).as_deref(),
            Some("123"),
            "the Python library's run id: the job's, not the step's"
        );
        assert_eq!(id(&[("TORCHELASTIC_RUN_ID", "none")]), None);
        assert_eq!(
            id(&[
                ("TORCHELASTIC_RUN_ID", "c0ffee"),
                ("OMPI_MCA_ess_base_jobid", "9")
            ])
            .as_deref(),
            Some("c0ffee")
        );
        assert_eq!(
            id(&[("OMPI_MCA_ess_base_jobid", "60686337")]).as_deref(),
            Some("60686337")
        );
        assert_eq!(
            id(&[("PMIX_NAMESPACE", "prterun-vm-123@1")]).as_deref(),
            Some("prterun-vm-123-1")
        );
        assert_eq!(
            job_run_id(Some(" mine "), &env(&[("SLURM_JOB_ID", "1")])).as_deref(),
            Some("mine")
        );
    }
}
