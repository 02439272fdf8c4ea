//! What a flush or a shutdown reached: per signal, what was exported, what
//! was lost, and why. Lost telemetry is reported, never an error: the job's
//! exit status is the job's, not its telemetry's.

use std::fmt;
use std::time::Duration;

/// What a [`shutdown`](crate::TelemetryHandle::shutdown) or a
/// [`force_flush`](crate::TelemetryHandle::force_flush) reached, per signal.
///
/// Lost telemetry is not an error of the job: `shutdown` prints one warning
/// line on stderr naming the cause, and returns this report for a caller
/// who wants more. Call [`into_result`](Self::into_result) to turn a loss
/// into an error on purpose (a test, a telemetry-checking CI gate).
///
/// ```
/// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
/// let report = h.shutdown(std::time::Duration::from_secs(5));
/// assert!(report.is_clean());
/// assert_eq!(report.traces.lost, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Spans.
    pub traces: SignalReport,
    /// Metric exports (one per collection of every instrument).
    pub metrics: SignalReport,
    /// Log records.
    pub logs: SignalReport,
}

/// What one signal reached. Counts are spans and log records; for metrics,
/// exports (each carries every instrument's points at one collection).
///
/// ```
/// let s = lens::SignalReport::default();
/// assert_eq!((s.exported, s.lost, s.timed_out, s.cause.is_none()), (0, 0, false, true));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SignalReport {
    /// Accepted by the exporter (written, or answered with success).
    pub exported: u64,
    /// Never exported: refused, dropped from a full queue, not written, or
    /// still in flight when the deadline passed.
    pub lost: u64,
    /// The exporter had not finished when the deadline passed; it goes on
    /// in the background and what it still delivers is not counted here.
    pub timed_out: bool,
    /// Why telemetry was lost, when it was.
    pub cause: Option<LossCause>,
}

/// Why telemetry was lost, as far as lens can tell.
///
/// ```
/// let c = lens::LossCause::QueueFull { variable: "OTEL_BSP_MAX_QUEUE_SIZE" };
/// assert!(c.to_string().contains("OTEL_BSP_MAX_QUEUE_SIZE"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossCause {
    /// Nothing listens at the destination, or it refused the connection.
    Unreachable {
        /// Where the telemetry was going.
        destination: String,
        /// The transport's own words.
        detail: String,
    },
    /// The destination did not answer within the deadline.
    TimedOut {
        /// Where the telemetry was going.
        destination: String,
        /// The deadline that passed.
        after: Duration,
    },
    /// Records came faster than the exporter took them; the queue was full.
    QueueFull {
        /// The variable that sizes the queue.
        variable: &'static str,
    },
    /// The telemetry file could not be written (disk full, file-size limit).
    WriteFailed {
        /// The file.
        destination: String,
        /// The operating system's words.
        detail: String,
    },
    /// The exporter or the destination answered with an error.
    Exporter {
        /// Where the telemetry was going.
        destination: String,
        /// The exporter's words.
        detail: String,
    },
    /// Recorded in a child forked while the parent's pipeline was live
    /// (lens is inert there until set up again).
    ForkedChild,
}

impl fmt::Display for LossCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // the transport's innermost words ("Connection refused (os
            // error 111)"), not the exporter's chain of wrappers
            LossCause::Unreachable {
                destination,
                detail,
            } => write!(f, "{destination} is unreachable: {}", innermost(detail)),
            LossCause::TimedOut { destination, after } => {
                write!(f, "{destination} did not answer within {after:?}")
            }
            LossCause::QueueFull { variable } => {
                write!(f, "the export queue was full (raise {variable})")
            }
            LossCause::WriteFailed {
                destination,
                detail,
            } => write!(f, "cannot write {destination}: {detail}"),
            LossCause::Exporter {
                destination,
                detail,
            } => write!(f, "exporting to {destination} failed: {detail}"),
            LossCause::ForkedChild => f.write_str(
                "recorded in a forked child (set lens up again in the child to record there)",
            ),
        }
    }
}

impl LossCause {
    /// Names the cause of an exporter's error text: a refused or failed
    /// connection, a timeout (of `export_timeout`), a failed write, or else
    /// the text itself.
    pub(crate) fn of_error(
        destination: &str,
        detail: &str,
        disk: bool,
        export_timeout: Duration,
    ) -> LossCause {
        let d = detail.to_ascii_lowercase();
        let (destination, detail) = (destination.to_owned(), detail.to_owned());
        if disk {
            LossCause::WriteFailed {
                destination,
                detail,
            }
        } else if ["certificate", "tls", "handshake", "unknownissuer"]
            .iter()
            .any(|w| d.contains(w))
        {
            // reached, but the secure connection failed: the words matter
            LossCause::Exporter {
                destination,
                detail,
            }
        } else if [
            "refused",
            "connect",
            "dns error",
            "unreachable",
            "no route",
            "broken pipe",
            "reset by peer",
            // the OTLP HTTP exporter's words for any transport failure
            "network error",
        ]
        .iter()
        .any(|w| d.contains(w))
        {
            LossCause::Unreachable {
                destination,
                detail,
            }
        } else if ["timed out", "timeout", "deadline"]
            .iter()
            .any(|w| d.contains(w))
        {
            LossCause::TimedOut {
                destination,
                after: export_timeout,
            }
        } else {
            LossCause::Exporter {
                destination,
                detail,
            }
        }
    }
}

/// The transport's innermost words: the last `: `-separated part of an
/// error chain, without the closing parentheses of the wrappers around it.
fn innermost(detail: &str) -> &str {
    let mut last = detail.rsplit(": ").next().unwrap_or(detail);
    while last.ends_with(')') && last.matches(')').count() > last.matches('(').count() {
        last = &last[..last.len() - 1];
    }
    last
}

impl SignalReport {
    /// Whether nothing was lost and nothing timed out.
    ///
    /// ```
    /// assert!(lens::SignalReport::default().is_clean());
    /// ```
    pub fn is_clean(&self) -> bool {
        self.lost == 0 && !self.timed_out && self.cause.is_none()
    }

    fn describe(&self, f: &mut fmt::Formatter<'_>, unit: &str) -> fmt::Result {
        match (self.lost, self.timed_out) {
            (0, true) => write!(f, "still exporting at the deadline")?,
            (n, _) => write!(f, "{n} of {} {unit} lost", n + self.exported)?,
        }
        match &self.cause {
            Some(c) => write!(f, " ({c})"),
            None => Ok(()),
        }
    }
}

impl ShutdownReport {
    /// Whether every signal was exported in full, in time.
    ///
    /// ```
    /// assert!(lens::ShutdownReport::default().is_clean());
    /// ```
    pub fn is_clean(&self) -> bool {
        self.signals().all(|(_, _, s)| s.is_clean())
    }

    /// `Ok(())` when clean, else the report as an error: for a caller who
    /// wants lost telemetry to fail (a test, a CI gate on telemetry).
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// h.shutdown(std::time::Duration::from_secs(1)).into_result().unwrap();
    /// ```
    pub fn into_result(self) -> Result<(), Box<ShutdownReport>> {
        match self.is_clean() {
            true => Ok(()),
            false => Err(Box::new(self)),
        }
    }

    fn signals(&self) -> impl Iterator<Item = (&'static str, &'static str, &SignalReport)> {
        [
            ("traces", "spans", &self.traces),
            ("metrics", "metric exports", &self.metrics),
            ("logs", "log records", &self.logs),
        ]
        .into_iter()
    }
}

/// One line: what was lost per signal and why, or that nothing was.
impl fmt::Display for ShutdownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_clean() {
            return write!(
                f,
                "telemetry exported in full: {} spans, {} metric exports, {} log records",
                self.traces.exported, self.metrics.exported, self.logs.exported
            );
        }
        f.write_str("telemetry was lost (the job itself is not affected): ")?;
        let mut first = true;
        for (name, unit, s) in self.signals().filter(|(_, _, s)| !s.is_clean()) {
            if !first {
                f.write_str("; ")?;
            }
            first = false;
            write!(f, "{name}: ")?;
            s.describe(f, unit)?;
        }
        Ok(())
    }
}

impl std::error::Error for ShutdownReport {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_named_from_the_transport_s_words() {
        let t = Duration::from_secs(10);
        let c = |d: &str| LossCause::of_error("http://localhost:4317", d, false, t);
        assert!(matches!(
            c("tcp connect error: Connection refused (os error 111)"),
            LossCause::Unreachable { .. }
        ));
        assert!(matches!(c("status: Internal"), LossCause::Exporter { .. }));
        let tls =
            c("network error (error sending request: invalid peer certificate: UnknownIssuer)");
        assert!(matches!(tls, LossCause::Exporter { .. }), "{tls:?}");
        let http = c("HTTP export failed: network error (client error (Connect): tcp connect error: Connection refused (os error 111))");
        assert_eq!(
            http.to_string(),
            "http://localhost:4317 is unreachable: Connection refused (os error 111)"
        );
        assert!(matches!(
            c("the request timed out"),
            LossCause::TimedOut { after, .. } if after == t
        ));
        assert!(matches!(
            LossCause::of_error("/x", "No space left on device", true, t),
            LossCause::WriteFailed { .. }
        ));
    }

    #[test]
    fn a_lossy_report_is_one_line_naming_each_signal_and_its_cause() {
        let r = ShutdownReport {
            traces: SignalReport {
                exported: 0,
                lost: 3,
                timed_out: false,
                cause: Some(LossCause::Unreachable {
                    destination: "http://localhost:4317 (traces, grpc)".into(),
                    detail: "Connection refused".into(),
                }),
            },
            metrics: SignalReport {
                timed_out: true,
                cause: Some(LossCause::TimedOut {
                    destination: "http://localhost:4317".into(),
                    after: Duration::from_secs(2),
                }),
                ..Default::default()
            },
            logs: SignalReport::default(),
        };
        let s = r.to_string();
        assert!(!s.contains('\n'));
        assert_eq!(
            s,
            "telemetry was lost (the job itself is not affected): traces: 3 of 3 spans lost \
             (http://localhost:4317 (traces, grpc) is unreachable: Connection refused); \
             metrics: still exporting at the deadline (http://localhost:4317 did not answer \
             within 2s)"
        );
        assert!(r.clone().into_result().is_err());
        assert!(ShutdownReport::default().into_result().is_ok());
    }
}
