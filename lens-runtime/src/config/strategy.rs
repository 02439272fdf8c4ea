//! Export strategies: which ranks export. A registry of named decisions
//! `(config, rank, world_size) -> bool` with four protected built-ins.

use crate::config::lens::LensConfig;
use std::fmt;
use std::sync::{Arc, LazyLock, RwLock};

/// A strategy decision: does `rank` of `world_size` export under `config`?
pub(crate) type StrategyFn = Arc<dyn Fn(&LensConfig, u32, u32) -> bool + Send + Sync>;

/// The built-in strategies, which cannot be removed or replaced without the
/// explicit override flag.
pub(crate) const BUILTIN_STRATEGIES: &[&str] =
    &["all_ranks", "single_rank", "sampled", "first_rank_per_node"];

/// An export-strategy registry error.
///
/// ```
/// let e = lens::remove_export_strategy("no_such", false).unwrap_err();
/// assert!(e.to_string().starts_with("unknown export strategy `no_such`"));
/// ```
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StrategyError {
    /// The name is empty or blank.
    #[error("an export strategy needs a non-empty name")]
    EmptyName,
    /// A strategy of that name exists; use `replace_export_strategy`.
    #[error(
        "export strategy `{0}` is already registered; use `replace_export_strategy` to replace it"
    )]
    AlreadyRegistered(String),
    /// Built-ins are protected unless `allow_builtin` is set.
    #[error(
        "`{0}` is a built-in export strategy; pass `allow_builtin = true` to replace or remove it"
    )]
    BuiltinProtected(String),
    /// No strategy of that name.
    #[error("unknown export strategy `{name}`; registered strategies are: {}", registered.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
        /// Every registered name.
        registered: Vec<String>,
    },
}

/// The whole chain on one line: what `main` prints when it returns this
/// error.
impl fmt::Debug for StrategyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::config::error::write_chain(self, f)
    }
}

struct Entry {
    name: String,
    decide: StrategyFn,
}

static REGISTRY: LazyLock<RwLock<Vec<Entry>>> = LazyLock::new(|| {
    let builtins: [(&str, StrategyFn); 4] = [
        ("all_ranks", Arc::new(|_, _, _| true)),
        ("single_rank", Arc::new(single_rank)),
        (
            "sampled",
            Arc::new(|c: &LensConfig, r, _| rank_is_sampled(r, c.export_sample_rate)),
        ),
        ("first_rank_per_node", Arc::new(|_, _, _| local_rank() == 0)),
    ];
    RwLock::new(
        builtins
            .into_iter()
            .map(|(n, f)| Entry {
                name: n.to_owned(),
                decide: f,
            })
            .collect(),
    )
});

fn single_rank(c: &LensConfig, rank: u32, world_size: u32) -> bool {
    let target = if c.export_rank < 0 {
        i64::from(world_size.max(1)) - 1
    } else {
        c.export_rank
    };
    i64::from(rank) == target
}

/// Variables that give the rank within the node, in the order read:
/// torchrun's, Open MPI's, SLURM's, MPICH's.
pub(crate) const LOCAL_RANK_VARS: &[&str] = &[
    "LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_LOCALID",
    "MPI_LOCALRANKID",
];

/// The rank of this process within its node: the first of
/// [`LOCAL_RANK_VARS`] that is set (missing or unparsable: 0).
pub(crate) fn local_rank() -> u32 {
    local_rank_with(crate::vars::var).unwrap_or(0)
}

/// The one rule for the local rank, over any lookup (the process
/// environment, or a test's table): the first of [`LOCAL_RANK_VARS`] that
/// is set and not blank, parsed; `None` when none is set or it is not a
/// number. The `first_rank_per_node` strategy and the `nv.dl.local_rank`
/// resource attribute both use it.
pub(crate) fn local_rank_with(lookup: impl Fn(&str) -> Option<String>) -> Option<u32> {
    LOCAL_RANK_VARS
        .iter()
        .find_map(|v| lookup(v).filter(|s| !s.trim().is_empty()))
        .and_then(|v| v.trim().parse().ok())
}

/// The rank-sampling rule shared with the Python library: keep `rank` when
/// `(int(md5(str(rank)).hexdigest(), 16) % 10000) / 10000 < rate`. Rates
/// ≥ 1 keep every rank, ≤ 0 (and NaN) keep none.
///
/// ```
/// use lens::rank_is_sampled;
/// assert!(rank_is_sampled(5, 1.0));
/// assert!(!rank_is_sampled(5, 0.0));
/// let kept = (0..10_000).filter(|r| rank_is_sampled(*r, 0.25)).count();
/// assert!((2_300..2_700).contains(&kept));
/// ```
pub fn rank_is_sampled(rank: u32, rate: f64) -> bool {
    if rate >= 1.0 {
        return true;
    }
    if rate.is_nan() || rate <= 0.0 {
        return false;
    }
    let digest = md5::compute(rank.to_string().as_bytes());
    let value = u128::from_be_bytes(digest.0);
    ((value % 10_000) as f64) / 10_000.0 < rate
}

fn with_registry<R>(f: impl FnOnce(&mut Vec<Entry>) -> R) -> R {
    let mut guard = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    f(&mut guard)
}

fn normalise(name: &str) -> Result<String, StrategyError> {
    let n = name.trim().to_ascii_lowercase();
    if n.is_empty() {
        Err(StrategyError::EmptyName)
    } else {
        Ok(n)
    }
}

/// Registers a custom strategy under a new name (ASCII case-insensitive).
///
/// ```
/// use lens::{register_export_strategy, should_export};
/// register_export_strategy("even_ranks", |_, rank, _| rank % 2 == 0).unwrap();
/// let mut cfg = lens::LensConfig::default();
/// cfg.export_strategy = "even_ranks".into();
/// assert!(should_export(&cfg, 4, 8).unwrap());
/// assert!(register_export_strategy("even_ranks", |_, _, _| true).is_err());
/// ```
pub fn register_export_strategy(
    name: &str,
    decide: impl Fn(&LensConfig, u32, u32) -> bool + Send + Sync + 'static,
) -> Result<(), StrategyError> {
    let name = normalise(name)?;
    with_registry(|r| {
        if r.iter().any(|e| e.name == name) {
            return Err(StrategyError::AlreadyRegistered(name));
        }
        r.push(Entry {
            name,
            decide: Arc::new(decide),
        });
        Ok(())
    })
}

/// Registers or replaces a strategy; replacing a built-in needs
/// `allow_builtin = true`.
///
/// ```
/// use lens::replace_export_strategy;
/// assert!(replace_export_strategy("all_ranks", |_, _, _| false, false).is_err());
/// replace_export_strategy("my_rule", |_, r, _| r == 0, false).unwrap();
/// ```
pub fn replace_export_strategy(
    name: &str,
    decide: impl Fn(&LensConfig, u32, u32) -> bool + Send + Sync + 'static,
    allow_builtin: bool,
) -> Result<(), StrategyError> {
    let name = normalise(name)?;
    if BUILTIN_STRATEGIES.contains(&name.as_str()) && !allow_builtin {
        return Err(StrategyError::BuiltinProtected(name));
    }
    with_registry(|r| {
        r.retain(|e| e.name != name);
        r.push(Entry {
            name,
            decide: Arc::new(decide),
        });
        Ok(())
    })
}

/// Removes a strategy; removing a built-in needs `allow_builtin = true`.
///
/// ```
/// use lens::{register_export_strategy, remove_export_strategy};
/// register_export_strategy("tmp_rule", |_, _, _| true).unwrap();
/// remove_export_strategy("tmp_rule", false).unwrap();
/// assert!(remove_export_strategy("sampled", false).is_err());
/// assert!(remove_export_strategy("tmp_rule", false).is_err());
/// ```
pub fn remove_export_strategy(name: &str, allow_builtin: bool) -> Result<(), StrategyError> {
    let name = normalise(name)?;
    if BUILTIN_STRATEGIES.contains(&name.as_str()) && !allow_builtin {
        return Err(StrategyError::BuiltinProtected(name));
    }
    with_registry(|r| {
        let before = r.len();
        r.retain(|e| e.name != name);
        if r.len() == before {
            Err(unknown(&name, r))
        } else {
            Ok(())
        }
    })
}

fn unknown(name: &str, r: &[Entry]) -> StrategyError {
    StrategyError::Unknown {
        name: name.to_owned(),
        registered: r.iter().map(|e| e.name.clone()).collect(),
    }
}

/// Whether a strategy of this name is registered.
///
/// ```
/// assert!(lens::is_export_strategy_registered("Sampled"));
/// ```
pub fn is_export_strategy_registered(name: &str) -> bool {
    let name = name.trim().to_ascii_lowercase();
    let r = REGISTRY.read().unwrap_or_else(|e| e.into_inner());
    r.iter().any(|e| e.name == name)
}

/// The names of every registered strategy.
///
/// ```
/// assert!(lens::registered_export_strategies().contains(&"all_ranks".to_owned()));
/// ```
pub fn registered_export_strategies() -> Vec<String> {
    let r = REGISTRY.read().unwrap_or_else(|e| e.into_inner());
    r.iter().map(|e| e.name.clone()).collect()
}

/// Decides whether `rank` of `world_size` exports under `config`'s strategy.
///
/// ```
/// use lens::{LensConfig, should_export};
/// let cfg = LensConfig::default(); // single_rank, export_rank -1 = last
/// assert!(should_export(&cfg, 7, 8).unwrap());
/// assert!(!should_export(&cfg, 0, 8).unwrap());
/// ```
pub fn should_export(
    config: &LensConfig,
    rank: u32,
    world_size: u32,
) -> Result<bool, StrategyError> {
    let name = config.export_strategy.trim().to_ascii_lowercase();
    let decide = {
        let r = REGISTRY.read().unwrap_or_else(|e| e.into_inner());
        match r.iter().find(|e| e.name == name) {
            Some(e) => e.decide.clone(),
            None => return Err(unknown(&name, &r)),
        }
    };
    Ok(decide(config, rank, world_size))
}

#[cfg(test)]
mod examples {
    //! Examples of crate-private items, kept as unit tests.

    #[test]
    fn local_rank_with() {
        use crate::config::strategy::local_rank_with;
        let env = |k: &str| (k == "OMPI_COMM_WORLD_LOCAL_RANK").then(|| "3".to_owned());
        assert_eq!(local_rank_with(env), Some(3));
        assert_eq!(local_rank_with(|_| None), None);
    }
}
