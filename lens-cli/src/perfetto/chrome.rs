//! Chrome Trace Event JSON (`{"traceEvents":[…]}`), written as it streams:
//! complete events (`ph:"X"`, µs), one `pid` per rank, `process_name` and
//! `thread_name` metadata, metrics as counter events (`ph:"C"`).

use std::collections::HashSet;
use std::io::Write;

use serde_json::{json, Value};

use super::{each_point, process_name, thread_of};
use crate::input::otlp::{Metric, Span};
use crate::input::{Origin, Sink};

/// Microseconds with 3 decimals, from nanoseconds, as a JSON number.
fn us(ns: u64) -> Value {
    Value::from(ns as f64 / 1000.0)
}

/// Writes nanoseconds as exact microseconds (`123.456`).
fn write_us(o: &mut impl Write, ns: u64) -> std::io::Result<()> {
    write!(o, "{}.{:03}", ns / 1000, ns % 1000)
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

    /// One `ph:"X"` event, written directly (no intermediate JSON value).
    fn complete(&mut self, pid: i64, tid: i64, s: &Span<'_>, dur: u64) -> std::io::Result<()> {
        if self.error.is_some() {
            return Ok(());
        }
        let o = &mut self.out;
        o.write_all(if self.first {
            b"{\"traceEvents\":[\n"
        } else {
            b",\n"
        })?;
        self.first = false;
        o.write_all(b"{\"name\":")?;
        serde_json::to_writer(&mut *o, s.name.as_ref())?;
        write!(o, ",\"ph\":\"X\",\"pid\":{pid},\"tid\":{tid},\"ts\":")?;
        write_us(o, s.start_time_unix_nano)?;
        o.write_all(b",\"dur\":")?;
        write_us(o, dur)?;
        o.write_all(b",\"args\":{")?;
        for kv in s.attributes.iter().filter(|kv| kv.key != "thread.id") {
            serde_json::to_writer(&mut *o, kv.key.as_ref())?;
            o.write_all(b":")?;
            serde_json::to_writer(&mut *o, &kv.value.to_value().to_string())?;
            o.write_all(b",")?;
        }
        if s.status.code == 2 {
            o.write_all(b"\"status\":")?;
            serde_json::to_writer(&mut *o, &format!("ERROR {}", s.status.message))?;
            o.write_all(b",")?;
        }
        o.write_all(b"\"span_id\":")?;
        serde_json::to_writer(&mut *o, s.span_id.as_ref())?;
        o.write_all(b"}}")
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
            let dur = s.end_time_unix_nano.saturating_sub(s.start_time_unix_nano);
            if let Err(e) = self.complete(pid, tid, s, dur) {
                self.error.get_or_insert(e);
            }
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
