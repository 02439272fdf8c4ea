//! What a pipeline's flush or shutdown lost, per signal, and why: the
//! export counters read before and after, and the troubles of the flush
//! or shutdown, made into a [`ShutdownReport`].

use crate::sdk::deadline::{Trouble, Troubles};
use crate::sdk::report::{LossCause, ShutdownReport, SignalReport};
use std::time::Duration;

impl super::Pipeline {
    /// The counters now.
    pub(super) fn tally(&self) -> Tally {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.counters;
        let m = &self.metric_counters;
        Tally {
            spans_ended: c.ended.load(Relaxed),
            spans_exported: c.exported.load(Relaxed),
            spans_dropped: c.dropped.load(Relaxed),
            spans_failed: c.failed.load(Relaxed),
            unwritten: self.sink.as_ref().map_or(0, |s| s.dropped_records())
                + self.perfetto.as_ref().map_or(0, |p| p.dropped_records()),
            metrics_started: m.started.load(Relaxed),
            metrics_exported: m.exported.load(Relaxed),
            logs_emitted: self.log_counters.emitted(),
            logs_exported: self.log_counters.exported(),
        }
    }

    /// What happened since `before`, per signal, with the cause of a loss.
    pub(super) fn report(
        &self,
        before: &Tally,
        troubles: &Troubles,
        timeout: Duration,
        logs_lost: u64,
    ) -> ShutdownReport {
        let now = self.tally();
        let trouble = |name: &str| troubles.iter().find(|(n, _)| *n == name).map(|(_, t)| t);
        let of = |signal: usize, detail: &str, disk: bool| {
            LossCause::of_error(
                &self.destinations[signal],
                detail,
                disk,
                self.export_timeout,
            )
        };
        let timed_out = |signal: usize| LossCause::TimedOut {
            destination: self.destinations[signal].clone(),
            after: timeout,
        };
        let failed = |signal: usize, detail: &str| LossCause::Exporter {
            destination: self.destinations[signal].clone(),
            detail: detail.to_owned(),
        };
        let unwritten = now.unwritten - before.unwritten;
        let disk_error = || {
            self.sink
                .as_ref()
                .and_then(|s| s.first_error())
                .or(self.counters.first_error.get().map(String::as_str))
                .unwrap_or("a write failed")
                .to_owned()
        };
        let signal = |i: usize,
                      name: &str,
                      exported: u64,
                      lost: u64,
                      first_error: Option<&String>,
                      queue_full: Option<LossCause>| {
            let t = trouble(name);
            let timed = t == Some(&Trouble::TimedOut);
            // a file (JSON lines or Perfetto traces) that could not be
            // written explains any loss
            let files = self.sink.is_some() || self.perfetto.is_some();
            let cause = if unwritten > 0 && (lost > 0 || t.is_some()) && files {
                Some(of(i, &disk_error(), true))
            } else if lost == 0 && t.is_none() {
                None
            } else if let Some(e) = first_error {
                Some(of(i, e, false))
            } else if timed {
                Some(timed_out(i))
            } else if let Some(q) = queue_full.filter(|_| lost > 0) {
                Some(q)
            } else if let Some(Trouble::Failed(e)) = t {
                Some(failed(i, e))
            } else {
                Some(failed(i, "lost without an error from the exporter"))
            };
            SignalReport {
                exported,
                lost,
                timed_out: timed,
                cause,
            }
        };
        let ended = now.spans_ended - before.spans_ended;
        // a batch whose export ends after a shutdown gave up on it is
        // counted twice (lost when given up, then by its outcome)
        let spans_lost =
            (now.spans_dropped + now.spans_failed - before.spans_dropped - before.spans_failed)
                .min(ended);
        let spans_failed_now = now.spans_failed > before.spans_failed;
        let traces = signal(
            0,
            "traces",
            now.spans_exported - before.spans_exported,
            spans_lost,
            self.counters.first_error.get().filter(|_| spans_failed_now),
            Some(LossCause::QueueFull {
                variable: "OTEL_BSP_MAX_QUEUE_SIZE",
            }),
        );
        let metrics_exported = now.metrics_exported - before.metrics_exported;
        let metrics = signal(
            1,
            "metrics",
            metrics_exported,
            (now.metrics_started - before.metrics_started).saturating_sub(metrics_exported),
            self.metric_counters.first_error.get(),
            None,
        );
        let logs = signal(
            2,
            "logs",
            now.logs_exported - before.logs_exported,
            logs_lost,
            self.log_counters.first_error.get(),
            Some(LossCause::QueueFull {
                variable: "OTEL_BLRP_MAX_QUEUE_SIZE",
            }),
        );
        ShutdownReport {
            traces,
            metrics,
            logs,
        }
    }
}

/// The export counters of a pipeline at one moment.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Tally {
    spans_ended: u64,
    spans_exported: u64,
    spans_dropped: u64,
    spans_failed: u64,
    /// Records of any signal that could not be written to a file.
    unwritten: u64,
    metrics_started: u64,
    metrics_exported: u64,
    pub(super) logs_emitted: u64,
    logs_exported: u64,
}
