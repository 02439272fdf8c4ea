//! The logger the appenders write through: named after lens, stamping each
//! record with the time it happened, inert in a forked child.

use opentelemetry::logs::{LogRecord as _, Logger, LoggerProvider, Severity};
use opentelemetry::InstrumentationScope;
use opentelemetry_sdk::logs::{SdkLogRecord, SdkLogger, SdkLoggerProvider};
use std::time::SystemTime;

/// The SDK's logger provider, handing out [`StampingLogger`]s named after
/// lens (the appender crates ask for an unnamed logger; OTLP names the scope
/// after each record's target anyway).
#[derive(Debug, Clone)]
pub(crate) struct StampingProvider(pub(crate) SdkLoggerProvider);

impl LoggerProvider for StampingProvider {
    type Logger = StampingLogger;

    fn logger_with_scope(&self, _scope: InstrumentationScope) -> StampingLogger {
        let scope = InstrumentationScope::builder(crate::api::span::SCOPE_NAME).build();
        StampingLogger(self.0.logger_with_scope(scope), crate::sdk::fork::epoch())
    }
}

/// The SDK's logger, setting each record's `Timestamp` (when the event
/// happened) at creation: neither appender crate sets one, which leaves only
/// the `ObservedTimestamp` for backends to sort by. The second field is the
/// fork epoch it was made in ([`crate::sdk::fork::epoch`]).
#[derive(Debug)]
pub(crate) struct StampingLogger(SdkLogger, u64);

impl Logger for StampingLogger {
    type LogRecord = SdkLogRecord;

    fn create_log_record(&self) -> SdkLogRecord {
        let mut record = self.0.create_log_record();
        record.set_timestamp(SystemTime::now());
        record
    }

    fn emit(&self, record: SdkLogRecord) {
        // a logger of an ancestor's pipeline, in a forked child: the SDK's
        // queue and locks belong to the parent's threads
        if self.1 != crate::sdk::fork::epoch() {
            return;
        }
        self.0.emit(record);
    }

    fn event_enabled(&self, level: Severity, target: &str, name: Option<&str>) -> bool {
        self.0.event_enabled(level, target, name)
    }
}
