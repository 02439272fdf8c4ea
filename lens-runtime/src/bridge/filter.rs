//! The bridge's filter: each callsite's route, found once and kept in the
//! callsite table; per span, the route's group bit.

use super::callsites::Callsites;
use super::route::{Route, Routes, TracingMode};
use crate::api::targets::{target_matches, INTERNAL_TARGETS};
use tracing::subscriber::Interest;
use tracing::Metadata;

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

    /// `Layer::register_callsite`: a routed span callsite is `sometimes`
    /// (its group is tested per span); everything else is `always` for the
    /// bridge (other layers decide), so the bridge never hides what it does
    /// not route.
    pub(crate) fn register(&self, meta: &'static Metadata<'static>) -> Interest {
        if !meta.is_span() {
            return Interest::always();
        }
        let i = self.resolve(meta);
        self.callsites
            .insert(meta as *const Metadata<'static> as usize, i);
        if i == 0 {
            Interest::always()
        } else {
            Interest::sometimes()
        }
    }

    /// `Layer::enabled`: `false` only for a routed lifetime-mode span whose
    /// group is off (the span is then not created at all); a per-entry span
    /// is created (its group is tested at every entry).
    #[inline]
    pub(crate) fn enabled(&self, meta: &Metadata<'_>) -> bool {
        if !meta.is_span() {
            return true;
        }
        match self.route(meta) {
            Some(r) if r.mode == TracingMode::Lifetime => r.group.is_enabled(),
            _ => true,
        }
    }
}
