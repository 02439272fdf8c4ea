//! The per-layer filter: each callsite's route, found once and kept in the
//! callsite table; per span, the route's group bit.

use super::callsites::Callsites;
use super::route::{Route, Routes, TracingMode};
use super::spec::target_matches;
use std::sync::Arc;
use tracing::subscriber::Interest;
use tracing::Metadata;
use tracing_subscriber::layer::{Context as LayerContext, Filter};

/// Targets never bridged by the default group: the OpenTelemetry crates
/// and the network stack the OTLP exporter runs on (their spans, made while
/// exporting, would need exporting). An explicit entry still routes them,
/// except the OpenTelemetry crates.
const INTERNAL_TARGETS: &[&str] = &[
    "hyper",
    "hyper_util",
    "h2",
    "tonic",
    "tower",
    "tower_http",
    "reqwest",
];

/// What the filter and the layer share: the routes and the callsite table.
#[derive(Debug)]
pub(crate) struct Shared {
    /// `(target prefix, index into routes + 1, or 0 for off)`, longest first.
    targets: Box<[(String, u32)]>,
    /// Index + 1 of the default route, 0 for off.
    default: u32,
    routes: Box<[Route]>,
    pub(crate) floor: tracing::Level,
    callsites: Callsites,
}

impl Shared {
    pub(crate) fn new(bridge: Routes) -> Self {
        let mut routes = Vec::new();
        let mut index = |r: Option<Route>| match r {
            Some(r) => {
                routes.push(r);
                routes.len() as u32
            }
            None => 0,
        };
        // later entries for the same target win
        let mut targets: Vec<(String, u32)> = Vec::new();
        for (t, r) in bridge.targets {
            let i = index(r);
            targets.retain(|(old, _)| *old != t);
            targets.push((t, i));
        }
        targets.sort_by_key(|t| std::cmp::Reverse(t.0.len()));
        let default = index(bridge.default);
        Shared {
            targets: targets.into_boxed_slice(),
            default,
            routes: routes.into_boxed_slice(),
            floor: bridge.level,
            callsites: Callsites::new(),
        }
    }

    /// The route index of a callsite, from its target and level.
    fn resolve(&self, meta: &Metadata<'_>) -> u32 {
        let target = meta.target();
        if target.starts_with("opentelemetry") || *meta.level() > self.floor {
            return 0;
        }
        if let Some((_, i)) = self.targets.iter().find(|(p, _)| target_matches(p, target)) {
            return *i;
        }
        if INTERNAL_TARGETS.iter().any(|p| target_matches(p, target)) {
            return 0;
        }
        self.default
    }

    /// The route index of a span's callsite: the table, or its target.
    #[inline]
    fn index(&self, meta: &Metadata<'_>) -> u32 {
        let addr = meta as *const Metadata<'_> as usize;
        match self.callsites.get(addr) {
            Some(i) => i,
            None => self.resolve(meta),
        }
    }

    #[inline]
    pub(crate) fn route(&self, meta: &Metadata<'_>) -> Option<Route> {
        match self.index(meta) {
            0 => None,
            i => Some(self.routes[i as usize - 1]),
        }
    }

    /// Whether an event may be recorded: a span event (level floor), or a
    /// log record of the log bridge (its own level).
    #[inline]
    fn event_wanted(&self, meta: &Metadata<'_>) -> bool {
        #[cfg(feature = "sdk")]
        if crate::sdk::logs::tracing_level_bridged(meta.level()) {
            return true;
        }
        *meta.level() <= self.floor
    }
}

/// The per-layer filter: a span is let through when its callsite's group is
/// enabled (lifetime mode) or has a route at all (per-entry mode, whose
/// group is tested at every entry).
#[derive(Debug, Clone)]
pub(crate) struct BridgeFilter {
    pub(crate) shared: Arc<Shared>,
}

impl<S> Filter<S> for BridgeFilter {
    #[inline]
    fn enabled(&self, meta: &Metadata<'_>, _cx: &LayerContext<'_, S>) -> bool {
        if !meta.is_span() {
            return self.shared.event_wanted(meta);
        }
        match self.shared.route(meta) {
            None => false,
            Some(r) => r.mode == TracingMode::PerEntry || r.group.is_enabled(),
        }
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if !meta.is_span() {
            return if meta.target().starts_with("opentelemetry") {
                Interest::never()
            } else {
                Interest::sometimes()
            };
        }
        let i = self.shared.resolve(meta);
        self.shared
            .callsites
            .insert(meta as *const Metadata<'static> as usize, i);
        if i == 0 {
            Interest::never()
        } else {
            // the group may be switched at any time: test it per span
            Interest::sometimes()
        }
    }
}
