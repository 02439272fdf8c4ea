//! A span's optional parts at its start: a builder's links, events and
//! start time, or none (the macros' spans).

use opentelemetry::trace::{Event, Link};
use std::time::SystemTime;

/// What a span may start with beyond its name, kind and attributes: a
/// builder's links, events and start time, or nothing (the macros' spans,
/// for which no empty list is made or looked at).
pub(super) trait StartOptions {
    /// The links the sampler is shown.
    fn links(&self) -> &[Link];
    /// Whether there are events or links.
    fn has_any(&self) -> bool;
    /// The start time given, if any.
    fn start_time(&self) -> Option<SystemTime>;
    /// The events and links.
    fn into_lists(self) -> (Vec<Event>, Vec<Link>);
}

/// No links, events or start time.
pub(super) struct NoOptions;

impl StartOptions for NoOptions {
    #[inline(always)]
    fn links(&self) -> &[Link] {
        &[]
    }
    #[inline(always)]
    fn has_any(&self) -> bool {
        false
    }
    #[inline(always)]
    fn start_time(&self) -> Option<SystemTime> {
        None
    }
    #[inline(always)]
    fn into_lists(self) -> (Vec<Event>, Vec<Link>) {
        (Vec::new(), Vec::new())
    }
}

/// A builder's links, events and start time.
pub(super) struct BuilderOptions {
    pub(super) links: Vec<Link>,
    pub(super) events: Vec<Event>,
    pub(super) start_time: Option<SystemTime>,
}

impl StartOptions for BuilderOptions {
    fn links(&self) -> &[Link] {
        &self.links
    }
    fn has_any(&self) -> bool {
        !self.events.is_empty() || !self.links.is_empty()
    }
    fn start_time(&self) -> Option<SystemTime> {
        self.start_time
    }
    fn into_lists(self) -> (Vec<Event>, Vec<Link>) {
        (self.events, self.links)
    }
}
