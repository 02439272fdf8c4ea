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
use std::sync::Arc;
use tracing::subscriber::Interest;
use tracing::Metadata;
use tracing_subscriber::layer::{Context as LayerContext, Filter};

/// What the filter and the layer share: the routes and the callsite table.
#[derive(Debug)]
pub(crate) struct Shared {
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

impl Shared {
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
        Shared {
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
        let i = self.register_index(meta);
        let vetoes =
            self.global && i != 0 && self.routes[i as usize - 1].mode == TracingMode::Lifetime;
        if vetoes {
            Interest::sometimes()
        } else {
            Interest::always()
        }
    }

    /// Resolves a span callsite's route and keeps it in the table.
    fn register_index(&self, meta: &'static Metadata<'static>) -> u32 {
        let i = self.resolve(meta);
        self.callsites
            .insert(meta as *const Metadata<'static> as usize, i);
        i
    }

    /// [`TracingFilter`]'s interest: a routed lifetime-mode span callsite
    /// is `sometimes` (its group is tested per span), a routed per-entry one
    /// `always`, an unrouted one `never` (for lens's layer alone: a
    /// per-layer filter), events `always`.
    fn filter_interest(&self, meta: &'static Metadata<'static>) -> Interest {
        if !meta.is_span() {
            return Interest::always();
        }
        match self.register_index(meta) {
            0 => Interest::never(),
            i if self.routes[i as usize - 1].mode == TracingMode::Lifetime => Interest::sometimes(),
            _ => Interest::always(),
        }
    }

    /// [`TracingFilter`]'s answer: an unrouted span no, a routed lifetime
    /// span its group's bit, anything else yes.
    #[inline]
    fn wanted(&self, meta: &Metadata<'_>) -> bool {
        if !meta.is_span() {
            return true;
        }
        match self.route(meta) {
            None => false,
            Some(r) if r.mode == TracingMode::Lifetime => r.group.is_enabled(),
            Some(_) => true,
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

/// The bridge's decision as a `tracing_subscriber` per-layer
/// [`Filter`](tracing_subscriber::layer::Filter), for
/// [`TracingBridge::filtered_layer`](crate::TracingBridge::filtered_layer):
/// the registry then makes a span only if some layer wants it, and a span
/// whose group is off (or of a target the bridge does not route) is hidden
/// from lens's layer alone.
///
/// ```
/// use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
/// let layer = lens::tracing::TracingBridge::new()
///     .route("candle_nn", &lens::groups::FORWARD_BACKWARD)
///     .filtered_layer();
/// let subscriber = registry().with(layer);
/// # drop(subscriber);
/// ```
#[derive(Debug, Clone)]
pub struct TracingFilter {
    pub(crate) shared: Arc<Shared>,
}

impl<S> Filter<S> for TracingFilter {
    #[inline]
    fn enabled(&self, meta: &Metadata<'_>, _cx: &LayerContext<'_, S>) -> bool {
        self.shared.wanted(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        self.shared.filter_interest(meta)
    }
}
