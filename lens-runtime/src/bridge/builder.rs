//! [`TracingBridge`]: the bridge's configuration, from the environment or
//! built by hand.

use super::layer::TracingLayer;
use super::route::{Route, Routes, TracingMode};
use super::spec::{parse_level, parse_route, parse_routes, DEFAULT_VAR, GROUPS_VAR, LEVEL_VAR};
use crate::api::groups::{span_group_families, SpanGroup, SpanGroupFamily};
use crate::config::ConfigError;
use std::sync::Mutex;

/// The bridge's configuration: which `tracing` targets are recorded, in
/// which span group and mode, and the level floor. Build the layer with
/// [`layer`](Self::layer).
///
/// ```
/// use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
/// use lens::tracing::TracingBridge;
/// lens::define_span_group! {
///     /// My model's spans.
///     pub llm { groups: [layer, request] }
/// }
/// let bridge = TracingBridge::new()
///     .route_per_entry("candle_transformers", &llm::LAYER) // span once, enter per forward
///     .route("my_server", &llm::REQUEST)                    // async handlers
///     .route_off("my_server::health")
///     .level(lens::tracing::tracing::Level::DEBUG);
/// let subscriber = registry().with(bridge.layer());
/// # drop(subscriber);
/// ```
#[derive(Debug, Clone)]
pub struct TracingBridge {
    routes: Routes,
    global: bool,
}

impl Default for TracingBridge {
    fn default() -> Self {
        TracingBridge::new()
    }
}

impl TracingBridge {
    /// Nothing mapped, the default group `off`, every level: records
    /// nothing until routes are added.
    ///
    /// ```
    /// let b = lens::tracing::TracingBridge::new();
    /// # drop(b);
    /// ```
    pub fn new() -> Self {
        TracingBridge {
            routes: Routes {
                targets: Vec::new(),
                default: None,
                level: tracing::Level::TRACE,
            },
            global: false,
        }
    }

    /// Reads `NEMO_LENS_TRACING_GROUPS`, `NEMO_LENS_TRACING_DEFAULT` and
    /// `NEMO_LENS_TRACING_LEVEL`; group names are looked up in every family
    /// the program knows ([`span_group_families`](crate::span_group_families):
    /// the base family, every family declared with `define_span_group!` in
    /// the program, every registered family).
    ///
    /// ```
    /// let bridge = lens::tracing::TracingBridge::from_env()?;
    /// # drop(bridge);
    /// # Ok::<(), lens::ConfigError>(())
    /// ```
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&[], crate::vars::var)
    }

    /// [`from_env`](Self::from_env), also looking group names up in
    /// `families`.
    ///
    /// ```
    /// lens::define_span_group! { pub serving { groups: [request] } }
    /// let bridge = lens::tracing::TracingBridge::from_env_with(&[&serving::FAMILY])?;
    /// # drop(bridge);
    /// # Ok::<(), lens::ConfigError>(())
    /// ```
    pub fn from_env_with(families: &[&'static SpanGroupFamily]) -> Result<Self, ConfigError> {
        Self::from_lookup(families, crate::vars::var)
    }

    /// [`from_env_with`](Self::from_env_with), reading variables through
    /// `lookup` (for tests and embedding). Blank values are unset.
    ///
    /// ```
    /// use lens::tracing::TracingBridge;
    /// let env = |v: &str| match v {
    ///     "NEMO_LENS_TRACING_GROUPS" => Some("candle_nn=forward_backward:per_entry".to_owned()),
    ///     _ => None,
    /// };
    /// TracingBridge::from_lookup(&[], env)?;
    /// let err = TracingBridge::from_lookup(&[], |v: &str| {
    ///     (v == "NEMO_LENS_TRACING_DEFAULT").then(|| "stpe".to_owned())
    /// })
    /// .unwrap_err();
    /// assert!(err.to_string().contains("NEMO_LENS_TRACING_DEFAULT"));
    /// # Ok::<(), lens::ConfigError>(())
    /// ```
    pub fn from_lookup(
        families: &[&'static SpanGroupFamily],
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut all = span_group_families();
        for f in families {
            if !all.iter().any(|k| std::ptr::eq(*k, *f)) {
                all.push(f);
            }
        }
        let get = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
        let mut bridge = TracingBridge::new();
        if let Some(v) = get(GROUPS_VAR) {
            bridge.routes.targets = parse_routes(GROUPS_VAR, &v, &all)?;
        }
        if let Some(v) = get(DEFAULT_VAR) {
            bridge.routes.default = parse_route(DEFAULT_VAR, &v, &v, &all)?;
        }
        if let Some(v) = get(LEVEL_VAR) {
            bridge.routes.level = parse_level(LEVEL_VAR, &v)?;
        }
        Ok(bridge)
    }

    /// Records spans of `target` (a module path: it covers the targets
    /// below it) in `group`, one lens span per `tracing` span (lifetime
    /// mode). A later route for the same target replaces an earlier one;
    /// the longest matching target wins.
    ///
    /// ```
    /// let b = lens::tracing::TracingBridge::new().route("my_server", &lens::groups::JOB);
    /// # drop(b);
    /// ```
    pub fn route(self, target: impl Into<String>, group: &'static SpanGroup) -> Self {
        self.route_with(target, group, TracingMode::Lifetime)
    }

    /// Records spans of `target` in `group`, one lens span per entry
    /// (per-entry mode).
    ///
    /// ```
    /// let b = lens::tracing::TracingBridge::new()
    ///     .route_per_entry("candle_transformers", &lens::groups::FORWARD_BACKWARD);
    /// # drop(b);
    /// ```
    pub fn route_per_entry(self, target: impl Into<String>, group: &'static SpanGroup) -> Self {
        self.route_with(target, group, TracingMode::PerEntry)
    }

    /// Records spans of `target` in `group` in `mode`.
    ///
    /// ```
    /// use lens::tracing::{TracingBridge, TracingMode};
    /// let b = TracingBridge::new().route_with("burn", &lens::groups::STEP, TracingMode::Lifetime);
    /// # drop(b);
    /// ```
    pub fn route_with(
        mut self,
        target: impl Into<String>,
        group: &'static SpanGroup,
        mode: TracingMode,
    ) -> Self {
        self.routes
            .targets
            .push((target.into(), Some(Route { group, mode })));
        self
    }

    /// Never records spans of `target` (e.g. a noisy module below a routed
    /// one, or one the default group would take).
    ///
    /// ```
    /// let b = lens::tracing::TracingBridge::new()
    ///     .default_group(&lens::groups::STEP)
    ///     .route_off("noisy_crate");
    /// # drop(b);
    /// ```
    pub fn route_off(mut self, target: impl Into<String>) -> Self {
        self.routes.targets.push((target.into(), None));
        self
    }

    /// Adds the entries of a `NEMO_LENS_TRACING_GROUPS`-style spec
    /// (`target=group[:mode],...`), group names looked up in every family the
    /// program knows and `families`.
    ///
    /// ```
    /// let b = lens::tracing::TracingBridge::new()
    ///     .routes("candle_nn=forward_backward:per_entry, my_server=job", &[])?;
    /// # drop(b);
    /// # Ok::<(), lens::ConfigError>(())
    /// ```
    pub fn routes(
        mut self,
        spec: &str,
        families: &[&'static SpanGroupFamily],
    ) -> Result<Self, ConfigError> {
        let mut all = span_group_families();
        all.extend_from_slice(families);
        self.routes
            .targets
            .extend(parse_routes("TracingBridge::routes", spec, &all)?);
        Ok(self)
    }

    /// The group of targets that have no route, in lifetime mode (default:
    /// none, so unrouted targets are not recorded).
    ///
    /// ```
    /// let b = lens::tracing::TracingBridge::new().default_group(&lens::groups::STEP);
    /// # drop(b);
    /// ```
    pub fn default_group(self, group: &'static SpanGroup) -> Self {
        self.default_route(Some((group, TracingMode::Lifetime)))
    }

    /// The group and mode of targets that have no route; `None`: not
    /// recorded (the default).
    ///
    /// ```
    /// use lens::tracing::{TracingBridge, TracingMode};
    /// let b = TracingBridge::new().default_route(Some((&lens::groups::STEP, TracingMode::PerEntry)));
    /// let off = b.default_route(None);
    /// # drop(off);
    /// ```
    pub fn default_route(mut self, route: Option<(&'static SpanGroup, TracingMode)>) -> Self {
        self.routes.default = route.map(|(group, mode)| Route { group, mode });
        self
    }

    /// The level floor: spans and events less severe than `level` are not
    /// recorded (default `TRACE`: every level).
    ///
    /// ```
    /// let b = lens::tracing::TracingBridge::new().level(lens::tracing::tracing::Level::INFO);
    /// # drop(b);
    /// ```
    pub fn level(mut self, level: tracing::Level) -> Self {
        self.routes.level = level;
        self
    }

    /// How a group that is off filters the spans routed to it.
    ///
    /// * `false` (the default): **per layer**. The group decides for lens's
    ///   layer alone: the span is still created, and every other layer of
    ///   the subscriber (`fmt`, `tracing-chrome`, ...) sees it as it would
    ///   without lens. The bridge never vetoes a callsite or a span.
    /// * `true`: **global**. A span routed (lifetime mode) to a group that
    ///   is off is not created at all, for any layer: the group switches its
    ///   targets off for the whole subscriber. The cheapest off path (one
    ///   callsite lookup and the group's bit test, no span in the registry):
    ///   for a subscriber where lens is the only layer that wants these
    ///   spans. Per-entry spans are always created (their group is tested at
    ///   each entry).
    ///
    /// ```
    /// use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
    /// let bridge = lens::tracing::TracingBridge::new()
    ///     .route("candle_nn", &lens::groups::FORWARD_BACKWARD)
    ///     .global_filter(true); // off: candle_nn's spans are not created
    /// let subscriber = registry().with(bridge.layer());
    /// # drop(subscriber);
    /// ```
    pub fn global_filter(mut self, global: bool) -> Self {
        self.global = global;
        self
    }

    /// The layer for a `tracing_subscriber` registry.
    ///
    /// ```
    /// use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
    /// let subscriber = registry().with(lens::tracing::TracingBridge::new().layer());
    /// # drop(subscriber);
    /// ```
    pub fn layer(self) -> TracingLayer {
        remember_routes(&self.routes);
        TracingLayer::new(self.routes, self.global)
    }
}

// Routes of every layer built so far, for the setup's off-groups warning
// (routes are known when a layer is built; sites only when they run).
static BUILT_ROUTES: Mutex<Vec<(String, &'static SpanGroup)>> = Mutex::new(Vec::new());

/// The name a default route is shown with in the setup's warning.
const DEFAULT_TARGET: &str = "(default)";

fn routed(routes: &Routes) -> impl Iterator<Item = (String, &'static SpanGroup)> + '_ {
    routes
        .targets
        .iter()
        .filter_map(|(t, r)| r.map(|r| (t.clone(), r.group)))
        .chain(routes.default.map(|r| (DEFAULT_TARGET.to_owned(), r.group)))
}

fn remember_routes(routes: &Routes) {
    let mut built = BUILT_ROUTES.lock().unwrap_or_else(|e| e.into_inner());
    for (t, g) in routed(routes) {
        if !built.iter().any(|(bt, bg)| *bt == t && bg.same(g)) {
            built.push((t, g));
        }
    }
}

/// Every bridge route known now, `(target, group)`: those of
/// `NEMO_LENS_TRACING_GROUPS` / `NEMO_LENS_TRACING_DEFAULT` (what
/// `lens::tracing::layer()` reads; an invalid value adds nothing here, the
/// bridge reports it) and those of every layer built so far, each once.
/// Setup's warning about groups that are off reads it (an SDK build).
#[cfg(feature = "sdk-core")]
pub(crate) fn known_routes() -> Vec<(String, &'static SpanGroup)> {
    let mut all: Vec<(String, &'static SpanGroup)> = TracingBridge::from_env()
        .map(|b| routed(&b.routes).collect())
        .unwrap_or_default();
    let built = BUILT_ROUTES.lock().unwrap_or_else(|e| e.into_inner());
    for (t, g) in built.iter() {
        if !all.iter().any(|(at, ag)| at == t && std::ptr::eq(*ag, *g)) {
            all.push((t.clone(), g));
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::groups::{LinkedFamily, Preset};
    use std::sync::atomic::AtomicU64;

    static WORD: AtomicU64 = AtomicU64::new(0);
    static ZROUTE: SpanGroup = SpanGroup::__new("zroute", "zz_bridge", &WORD, 0);
    static FAMILY: SpanGroupFamily = SpanGroupFamily::__new(
        "zz_bridge",
        &WORD,
        &[&ZROUTE],
        &[Preset::__new("all", 0xff, 1)],
    );
    inventory::submit! { LinkedFamily(&FAMILY) }

    #[test]
    fn routes_resolve_against_linked_families_without_passing_them() {
        let env = |v: &str| (v == GROUPS_VAR).then(|| "zz_target=zroute:per_entry".to_owned());
        let b = TracingBridge::from_lookup(&[], env).unwrap();
        let (t, r) = &b.routes.targets[0];
        assert_eq!(t, "zz_target");
        assert!(std::ptr::eq(r.unwrap().group, &ZROUTE));
        let b = TracingBridge::new()
            .routes("zz_other=zz_bridge.zroute", &[])
            .unwrap();
        assert!(std::ptr::eq(b.routes.targets[0].1.unwrap().group, &ZROUTE));
    }

    #[test]
    fn a_built_layer_s_routes_are_known_to_setup() {
        let layer = TracingBridge::new()
            .route("zz_built", &ZROUTE)
            .route_off("zz_built::quiet")
            .layer();
        drop(layer);
        let known = known_routes();
        assert!(known
            .iter()
            .any(|(t, g)| t == "zz_built" && std::ptr::eq(*g, &ZROUTE)));
        assert!(!known.iter().any(|(t, _)| t == "zz_built::quiet"));
    }
}
