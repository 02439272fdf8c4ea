//! Chrome Trace Event JSON (`{"traceEvents":[…]}`), written as it streams:
//! complete events (`ph:"X"`, µs), one `pid` per rank, `process_name` and
//! `thread_name` metadata, metrics as counter events (`ph:"C"`).

use std::collections::HashSet;
use std::io::Write;

use serde_json::{json, Map, Value};

use super::{each_point, process_name, thread_of};
use crate::input::otlp::{Metric, Span};
use crate::input::{Origin, Sink};

/// Microseconds with 3 decimals, from nanoseconds, as a JSON number.
fn us(ns: u64) -> Value {
    Value::from(ns as f64 / 1000.0)
}

pub(super) struct ChromeSink<W: Write> {
    out: W,
    first: bool,
    processes: HashSet<i64>,
    threads: HashSet<(i64, i64)>,
    error: Option<std::io::Error>,
}

impl<W: Write> ChromeSink<W> {
    pub(super) fn new(out: W) -> Self {
        ChromeSink {
            out,
            first: true,
            processes: HashSet::new(),
            threads: HashSet::new(),
            error: None,
        }
    }

    fn event(&mut self, v: &Value) {
        if self.error.is_some() {
            return;
        }
        let sep: &[u8] = if self.first {
            b"{\"traceEvents\":[\n"
        } else {
            b",\n"
        };
        self.first = false;
        let r = self
            .out
            .write_all(sep)
            .and_then(|()| serde_json::to_writer(&mut self.out, v).map_err(std::io::Error::other));
        if let Err(e) = r {
            self.error = Some(e);
        }
    }

    fn pid(&mut self, o: &Origin) -> i64 {
        if self.processes.insert(o.rank) {
            let name = process_name(o);
            self.event(
                &json!({"name": "process_name", "ph": "M", "pid": o.rank, "args": {"name": name}}),
            );
            self.event(&json!({"name": "process_sort_index", "ph": "M", "pid": o.rank, "args": {"sort_index": o.rank}}));
        }
        o.rank
    }

    pub(super) fn finish(mut self) -> std::io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.first {
            self.out.write_all(b"{\"traceEvents\":[")?;
        }
        self.out.write_all(b"\n],\"displayTimeUnit\":\"ms\"}\n")?;
        self.out.flush()
    }
}

impl<W: Write> Sink for ChromeSink<W> {
    fn spans(&mut self, origin: &Origin, spans: &[Span<'_>]) {
        let pid = self.pid(origin);
        for s in spans {
            let tid = thread_of(&s.attributes).unwrap_or(0);
            if self.threads.insert((pid, tid)) {
                let name = if tid == 0 {
                    "spans".to_owned()
                } else {
                    format!("thread {tid}")
                };
                self.event(&json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}));
            }
            let mut args = Map::new();
            for kv in s.attributes.iter().filter(|kv| kv.key != "thread.id") {
                args.insert(
                    kv.key.to_string(),
                    Value::String(kv.value.to_value().to_string()),
                );
            }
            args.insert("span_id".to_owned(), Value::String(s.span_id.to_string()));
            if s.status.code == 2 {
                args.insert(
                    "status".to_owned(),
                    Value::String(format!("ERROR {}", s.status.message)),
                );
            }
            let dur = s.end_time_unix_nano.saturating_sub(s.start_time_unix_nano);
            self.event(&json!({
                "name": s.name, "ph": "X", "pid": pid, "tid": tid,
                "ts": us(s.start_time_unix_nano), "dur": us(dur), "args": args,
            }));
        }
    }

    fn metrics(&mut self, origin: &Origin, metrics: &[Metric<'_>]) {
        let pid = self.pid(origin);
        let mut pts = Vec::new();
        each_point(metrics, |n, t, v| pts.push((n.to_owned(), t, v)));
        for (n, t, v) in pts {
            self.event(
                &json!({"name": n, "ph": "C", "pid": pid, "ts": us(t), "args": {"value": v}}),
            );
        }
    }
}
