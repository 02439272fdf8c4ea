//! Export strategies and the md5 rank rule, checked against Python's hashlib.

use lens::{rank_is_sampled, should_export, LensConfig, StrategyError};
use std::process::Command;

const RATES: [f64; 6] = [0.01, 0.1, 0.25, 0.5, 0.9, 0.333];

/// Ranks 0..1024 kept at each rate, computed by Python's hashlib with the
/// Python library's rule.
fn python_vectors() -> Vec<Vec<u32>> {
    let script = format!(
        "import hashlib\nfor rate in {RATES:?}:\n    print(' '.join(str(r) for r in range(1024) if (int(hashlib.md5(str(r).encode()).hexdigest(), 16) % 10000) / 10000 < rate))\n"
    );
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .output()
        .expect("python3 is needed for the cross-language vectors (.ci/run installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().map(|r| r.parse().unwrap()).collect())
        .collect()
}

#[test]
fn sampled_rule_matches_python_hashlib_for_ranks_0_to_1023() {
    let vectors = python_vectors();
    assert_eq!(vectors.len(), RATES.len());
    for (rate, want) in RATES.iter().zip(&vectors) {
        let got: Vec<u32> = (0..1024).filter(|r| rank_is_sampled(*r, *rate)).collect();
        assert_eq!(&got, want, "rate {rate}");
        assert!(!want.is_empty() || *rate < 0.05);
    }
    assert_eq!((0..1024).filter(|r| rank_is_sampled(*r, 1.0)).count(), 1024);
    assert_eq!((0..1024).filter(|r| rank_is_sampled(*r, 0.0)).count(), 0);
    assert_eq!(
        (0..1024).filter(|r| rank_is_sampled(*r, f64::NAN)).count(),
        0
    );
}

fn cfg(strategy: &str) -> LensConfig {
    let mut c = LensConfig::default();
    c.export_strategy = strategy.into();
    c
}

#[test]
fn builtins() {
    assert!((0..8).all(|r| should_export(&cfg("all_ranks"), r, 8).unwrap()));
    let single: Vec<u32> = (0..8)
        .filter(|r| should_export(&cfg("single_rank"), *r, 8).unwrap())
        .collect();
    assert_eq!(single, [7], "export_rank -1 = last rank");
    let mut c = cfg("single_rank");
    c.export_rank = 2;
    assert_eq!(
        (0..8)
            .filter(|r| should_export(&c, *r, 8).unwrap())
            .collect::<Vec<_>>(),
        [2]
    );
    let mut c = cfg("sampled");
    c.export_sample_rate = 0.5;
    for r in 0..64 {
        assert_eq!(should_export(&c, r, 64).unwrap(), rank_is_sampled(r, 0.5));
    }
    // LOCAL_RANK is unset in the test environment: missing = 0, so exports
    assert!(std::env::var_os("LOCAL_RANK").is_none());
    assert!(should_export(&cfg("first_rank_per_node"), 5, 8).unwrap());
}

#[test]
fn registry_errors_are_clear() {
    assert_eq!(
        lens::register_export_strategy("  ", |_, _, _| true),
        Err(StrategyError::EmptyName)
    );
    lens::register_export_strategy("Odd_Ranks", |_, r, _| r % 2 == 1).unwrap();
    let dup = lens::register_export_strategy("odd_ranks", |_, _, _| true).unwrap_err();
    assert!(dup.to_string().contains("replace_export_strategy"), "{dup}");
    assert!(should_export(&cfg("odd_ranks"), 3, 8).unwrap());
    assert!(!should_export(&cfg("odd_ranks"), 2, 8).unwrap());
    // a registered custom name passes config validation
    cfg("odd_ranks").validate().unwrap();
    let e = lens::remove_export_strategy("all_ranks", false).unwrap_err();
    assert!(matches!(e, StrategyError::BuiltinProtected(_)), "{e}");
    assert!(e.to_string().contains("allow_builtin"));
    let e = lens::replace_export_strategy("single_rank", |_, _, _| true, false).unwrap_err();
    assert!(matches!(e, StrategyError::BuiltinProtected(_)));
    lens::replace_export_strategy("odd_ranks", |_, r, _| r == 0, false).unwrap();
    assert!(should_export(&cfg("odd_ranks"), 0, 8).unwrap());
    lens::remove_export_strategy("odd_ranks", false).unwrap();
    let e = should_export(&cfg("odd_ranks"), 0, 8).unwrap_err();
    assert!(
        e.to_string().contains("all_ranks") && e.to_string().contains("odd_ranks"),
        "{e}"
    );
    assert!(lens::is_export_strategy_registered("ALL_RANKS"));
}
