//! The bridge's configuration from text: `NEMO_LENS_TRACING_GROUPS`
//! (`target=group[:mode],...`), `NEMO_LENS_TRACING_DEFAULT` (`group[:mode]`
//! or `off`) and `NEMO_LENS_TRACING_LEVEL`; every error names the
//! variable, the value and what is accepted.

use super::route::{Route, TracingMode};
use crate::api::groups::{SpanGroup, SpanGroupFamily};
use crate::config::error::invalid;
use crate::config::ConfigError;

/// Target → group map.
pub(crate) const GROUPS_VAR: &str = "NEMO_LENS_TRACING_GROUPS";
/// Group of a target that has no entry (default `off`).
pub(crate) const DEFAULT_VAR: &str = "NEMO_LENS_TRACING_DEFAULT";
/// Level floor (default `trace`: every level).
pub(crate) const LEVEL_VAR: &str = "NEMO_LENS_TRACING_LEVEL";

const ENTRY_SHAPE: &str = "comma-separated `target=group[:mode]` entries, e.g. \
     `candle_transformers=layer:per_entry,my_server=job` (mode: `lifetime`, the default, or `per_entry`; group `off` switches a target off)";

/// A group by name (`group` or `family.group`, case-insensitive) in one of
/// `families`.
fn find_group(name: &str, families: &[&'static SpanGroupFamily]) -> Option<&'static SpanGroup> {
    let (family, group) = match name.split_once('.') {
        Some((f, g)) => (Some(f), g),
        None => (None, name),
    };
    families
        .iter()
        .filter(|f| family.is_none_or(|n| f.name().eq_ignore_ascii_case(n)))
        .flat_map(|f| f.groups().iter())
        .find(|g| g.name().eq_ignore_ascii_case(group))
        .copied()
}

fn group_names(families: &[&'static SpanGroupFamily]) -> String {
    let mut names: Vec<&str> = families
        .iter()
        .flat_map(|f| f.groups().iter().map(|g| g.name()))
        .collect();
    names.sort_unstable();
    names.dedup();
    names.join(", ")
}

/// `group[:mode]` or `off` (`None`).
pub(crate) fn parse_route(
    variable: &str,
    value: &str,
    text: &str,
    families: &[&'static SpanGroupFamily],
) -> Result<Option<Route>, ConfigError> {
    let (group, mode) = match text.split_once(':') {
        Some((g, m)) => (g.trim(), Some(m.trim())),
        None => (text.trim(), None),
    };
    let mode = match mode.map(str::to_ascii_lowercase).as_deref() {
        None | Some("lifetime") => TracingMode::Lifetime,
        Some("per_entry") => TracingMode::PerEntry,
        Some(other) => {
            return Err(invalid(
                variable,
                value,
                &format!("a mode of `lifetime` or `per_entry` after `{group}:` (got `{other}`)"),
            ))
        }
    };
    if group.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    match find_group(group, families) {
        Some(group) => Ok(Some(Route { group, mode })),
        None => Err(invalid(
            variable,
            value,
            &format!(
                "a span group name or `off` (`{group}` is not a group; the groups are: {}; \
                 declare your own with `define_span_group!` and pass its family)",
                group_names(families)
            ),
        )),
    }
}

/// `target=group[:mode],...`; blank entries are ignored.
pub(crate) fn parse_routes(
    variable: &str,
    value: &str,
    families: &[&'static SpanGroupFamily],
) -> Result<Vec<(String, Option<Route>)>, ConfigError> {
    let mut out = Vec::new();
    for entry in value.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let Some((target, route)) = entry.split_once('=') else {
            return Err(invalid(
                variable,
                value,
                &format!("{ENTRY_SHAPE} (`{entry}` has no `=`)"),
            ));
        };
        let target = target.trim();
        if target.is_empty() || target.contains(char::is_whitespace) {
            return Err(invalid(
                variable,
                value,
                &format!("{ENTRY_SHAPE} (`{entry}` has no target, or one with spaces)"),
            ));
        }
        out.push((
            target.to_owned(),
            parse_route(variable, value, route, families)?,
        ));
    }
    Ok(out)
}

/// `trace`, `debug`, `info`, `warn` (`warning`), `error`.
pub(crate) fn parse_level(variable: &str, value: &str) -> Result<tracing::Level, ConfigError> {
    Ok(match value.trim().to_ascii_lowercase().as_str() {
        "trace" => tracing::Level::TRACE,
        "debug" => tracing::Level::DEBUG,
        "info" => tracing::Level::INFO,
        "warn" | "warning" => tracing::Level::WARN,
        "error" => tracing::Level::ERROR,
        _ => {
            return Err(invalid(
                variable,
                value,
                "one of: trace, debug, info, warn, error (the least severe level recorded)",
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::groups::base;

    const BASE: &[&SpanGroupFamily] = &[&base::FAMILY];

    #[test]
    fn routes_parse() {
        let r = parse_routes(GROUPS_VAR, "", BASE).unwrap();
        assert!(r.is_empty());
        let r = parse_routes(
            GROUPS_VAR,
            " a=step , b::c=base.forward_backward:per_entry,, d=OFF,e=job:Lifetime ",
            BASE,
        )
        .unwrap();
        let shape: Vec<(&str, Option<(&str, TracingMode)>)> = r
            .iter()
            .map(|(t, r)| (t.as_str(), r.map(|r| (r.group.name(), r.mode))))
            .collect();
        assert_eq!(
            shape,
            [
                ("a", Some(("step", TracingMode::Lifetime))),
                ("b::c", Some(("forward_backward", TracingMode::PerEntry))),
                ("d", None),
                ("e", Some(("job", TracingMode::Lifetime))),
            ]
        );
    }

    #[test]
    fn errors_name_variable_value_and_choices() {
        let e = parse_routes(GROUPS_VAR, "a=stpe", BASE)
            .unwrap_err()
            .to_string();
        assert!(e.contains(GROUPS_VAR) && e.contains("\"a=stpe\""), "{e}");
        assert!(
            e.contains("`stpe` is not a group") && e.contains("checkpoint, evaluate"),
            "{e}"
        );
        let e = parse_routes(GROUPS_VAR, "a=step:per-entry", BASE)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`lifetime` or `per_entry`") && e.contains("per-entry"),
            "{e}"
        );
        let e = parse_routes(GROUPS_VAR, "a", BASE).unwrap_err().to_string();
        assert!(
            e.contains("`a` has no `=`") && e.contains("target=group"),
            "{e}"
        );
        let e = parse_routes(GROUPS_VAR, "a b=step", BASE)
            .unwrap_err()
            .to_string();
        assert!(e.contains("spaces"), "{e}");
        let e = parse_level(LEVEL_VAR, "loud").unwrap_err().to_string();
        assert!(
            e.contains(LEVEL_VAR) && e.contains("trace, debug, info, warn, error"),
            "{e}"
        );
        assert_eq!(
            parse_level(LEVEL_VAR, " Warning ").unwrap(),
            tracing::Level::WARN
        );
    }

    #[test]
    fn module_path_targets() {}
}
