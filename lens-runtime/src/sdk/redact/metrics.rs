//! Metric attributes: redacted at the measurement (the SDK's aggregated data cannot be edited).

use super::rule::Redactor;
use opentelemetry::metrics::{
    AsyncInstrument, AsyncInstrumentBuilder, Counter, Gauge, Histogram, HistogramBuilder,
    InstrumentBuilder, InstrumentProvider, Meter, MeterProvider, ObservableCounter,
    ObservableGauge, ObservableUpDownCounter, SyncInstrument, UpDownCounter,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use std::sync::Arc;

/// A meter provider whose instruments redact measurement attributes before
/// they reach `inner` (the SDK's aggregated metrics cannot be edited, so
/// redaction happens at the measurement). Sync instruments copy the
/// attributes only when one is sensitive; observable instruments' callbacks
/// observe through a redacting instrument.
#[derive(Debug, Clone)]
pub(crate) struct RedactingMeterProvider<P = SdkMeterProvider> {
    inner: P,
    redactor: Redactor,
}

impl<P> RedactingMeterProvider<P> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: P, redactor: Redactor) -> Self {
        RedactingMeterProvider { inner, redactor }
    }
}

impl<P: MeterProvider> MeterProvider for RedactingMeterProvider<P> {
    fn meter_with_scope(&self, scope: InstrumentationScope) -> Meter {
        let scope = self.redactor.redact_scope(&scope).unwrap_or(scope);
        Meter::new(Arc::new(RedactingInstruments {
            meter: self.inner.meter_with_scope(scope),
            redactor: self.redactor.clone(),
        }))
    }
}

/// Builds each instrument on the inner meter and wraps it.
#[derive(Debug)]
struct RedactingInstruments {
    meter: Meter,
    redactor: Redactor,
}

/// A sync instrument that redacts attributes, then records on `inner`.
struct RedactingSync<I> {
    inner: I,
    redactor: Redactor,
    /// The fork epoch the instrument was made in ([`crate::sdk::fork::epoch`]).
    epoch: u64,
}

macro_rules! redacting_sync {
    ($($inst:ident::$record:ident),*) => {$(
        impl<T> SyncInstrument<T> for RedactingSync<$inst<T>> {
            fn measure(&self, measurement: T, attributes: &[KeyValue]) {
                // an instrument of an ancestor's pipeline, in a forked
                // child: the SDK's locks may be held forever by a parent
                // thread that does not exist here
                if self.epoch != crate::sdk::fork::epoch() {
                    return;
                }
                self.inner
                    .$record(measurement, &self.redactor.redacted_attributes(attributes));
            }
        }
    )*};
}
redacting_sync!(
    Counter::add,
    UpDownCounter::add,
    Histogram::record,
    Gauge::record
);

/// What an observable instrument's callback observes through.
struct RedactingObserver<'a, M> {
    inner: &'a dyn AsyncInstrument<M>,
    redactor: &'a Redactor,
}

impl<M> AsyncInstrument<M> for RedactingObserver<'_, M> {
    fn observe(&self, measurement: M, attributes: &[KeyValue]) {
        self.inner
            .observe(measurement, &self.redactor.redacted_attributes(attributes));
    }
}

macro_rules! sync_builders {
    ($($method:ident: $inst:ident<$t:ty>),*) => {$(
        fn $method(&self, b: InstrumentBuilder<'_, $inst<$t>>) -> $inst<$t> {
            let mut inner = self.meter.$method(b.name);
            if let Some(d) = b.description {
                inner = inner.with_description(d);
            }
            if let Some(u) = b.unit {
                inner = inner.with_unit(u);
            }
            $inst::new(Arc::new(RedactingSync {
                inner: inner.build(),
                redactor: self.redactor.clone(),
                epoch: crate::sdk::fork::epoch(),
            }))
        }
    )*};
}

macro_rules! histogram_builders {
    ($($method:ident: $t:ty),*) => {$(
        fn $method(&self, b: HistogramBuilder<'_, Histogram<$t>>) -> Histogram<$t> {
            let mut inner = self.meter.$method(b.name);
            if let Some(d) = b.description {
                inner = inner.with_description(d);
            }
            if let Some(u) = b.unit {
                inner = inner.with_unit(u);
            }
            if let Some(bounds) = b.boundaries {
                inner = inner.with_boundaries(bounds);
            }
            Histogram::new(Arc::new(RedactingSync {
                inner: inner.build(),
                redactor: self.redactor.clone(),
                epoch: crate::sdk::fork::epoch(),
            }))
        }
    )*};
}

macro_rules! observable_builders {
    ($($method:ident: $inst:ident<$t:ty>),*) => {$(
        fn $method(&self, b: AsyncInstrumentBuilder<'_, $inst<$t>, $t>) -> $inst<$t> {
            let mut inner = self.meter.$method(b.name);
            if let Some(d) = b.description {
                inner = inner.with_description(d);
            }
            if let Some(u) = b.unit {
                inner = inner.with_unit(u);
            }
            for callback in b.callbacks {
                let redactor = self.redactor.clone();
                inner = inner.with_callback(move |observer: &dyn AsyncInstrument<$t>| {
                    // a panicking user callback must not kill the SDK's
                    // metric reader thread (every later export would fail)
                    let observe = std::panic::AssertUnwindSafe(|| {
                        callback(&RedactingObserver {
                            inner: observer,
                            redactor: &redactor,
                        })
                    });
                    if std::panic::catch_unwind(observe).is_err() {
                        crate::diag::warn(format_args!(
                            "a metric callback panicked; its observations of this collection are lost"
                        ));
                    }
                });
            }
            inner.build()
        }
    )*};
}

impl InstrumentProvider for RedactingInstruments {
    sync_builders!(
        u64_counter: Counter<u64>,
        f64_counter: Counter<f64>,
        i64_up_down_counter: UpDownCounter<i64>,
        f64_up_down_counter: UpDownCounter<f64>,
        u64_gauge: Gauge<u64>,
        f64_gauge: Gauge<f64>,
        i64_gauge: Gauge<i64>
    );
    histogram_builders!(u64_histogram: u64, f64_histogram: f64);
    observable_builders!(
        u64_observable_counter: ObservableCounter<u64>,
        f64_observable_counter: ObservableCounter<f64>,
        i64_observable_up_down_counter: ObservableUpDownCounter<i64>,
        f64_observable_up_down_counter: ObservableUpDownCounter<f64>,
        u64_observable_gauge: ObservableGauge<u64>,
        i64_observable_gauge: ObservableGauge<i64>,
        f64_observable_gauge: ObservableGauge<f64>
    );
}
