//! The bridge's filter: each callsite's route, found once and kept in the
//! callsite table; per span, the route's group bit.
//!
//! Two modes, chosen with `TracingBridge::global_filter`:
//!
//! * **Per layer** (the default): the bridge never vetoes a callsite or a
//!   span. `register_callsite` says `always` (so `tracing` never asks
//!   `enabled`, and never disables a callsite for the other layers: a
//!   layer's `Interest::never()` or `enabled == false` holds for the whole
//!   subscriber, as `Layered` combines them), and the group bit is tested
//!   in `on_new_span`, which records or skips the span for lens alone.
//! * **Global**: a routed lifetime-mode callsite is `sometimes`, and
//!   `enabled` answers with the group bit, so a span whose group is off is
//!   not created at all, for any layer: the cheapest off path.

use super::callsites::Callsites;
use super::route::{Route, Routes, TracingMode};
use crate::api::targets::{target_matches, INTERNAL_TARGETS};
use tracing::subscriber::Interest;
use tracing::Metadata;

/// What the filter and the layer share: the routes and the callsite table.
#[derive(Debug)]
pub(crate) struct RouteTable {
    /// `(target prefix, index into routes + 1, or 0 for off)`, longest first.
    targets: Box<[(String, u32)]>,
    /// Index + 1 of the default route, 0 for off.
    default: u32,
    routes: Box<[Route]>,
    pub(crate) floor: tracing::Level,
    /// Global mode: `enabled` refuses a span whose group is off.
    global: bool,
    callsites: Callsites,
}

impl RouteTable {
    pub(crate) fn new(bridge: Routes, global: bool) -> Self {
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
        RouteTable {
            targets: targets.into_boxed_slice(),
            default,
            routes: routes.into_boxed_slice(),
            floor: bridge.level,
            global,
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

    /// `Layer::register_callsite`: in global mode a routed lifetime-mode
    /// span callsite is `sometimes` (its group is tested per span in
    /// `enabled`); everything else is `always` for the bridge (the other
    /// layers decide), so the bridge never hides what it does not route,
    /// and in per-layer mode never hides anything. Never `never`: that
    /// would disable the callsite for every layer.
    pub(crate) fn register(&self, meta: &'static Metadata<'static>) -> Interest {
        if !meta.is_span() {
            return Interest::always();
        }
        let i = self.resolve(meta);
        self.callsites
            .insert(meta as *const Metadata<'static> as usize, i);
        let vetoes =
            self.global && i != 0 && self.routes[i as usize - 1].mode == TracingMode::Lifetime;
        if vetoes {
            Interest::sometimes()
        } else {
            Interest::always()
        }
    }

    /// `Layer::enabled`: `false` only in global mode, for a routed
    /// lifetime-mode span whose group is off (the span is then not created
    /// at all); a per-entry span is created (its group is tested at every
    /// entry). Always `true` in per-layer mode.
    #[inline]
    pub(crate) fn enabled(&self, meta: &Metadata<'_>) -> bool {
        if !self.global || !meta.is_span() {
            return true;
        }
        match self.route(meta) {
            Some(r) if r.mode == TracingMode::Lifetime => r.group.is_enabled(),
            _ => true,
        }
    }
}
