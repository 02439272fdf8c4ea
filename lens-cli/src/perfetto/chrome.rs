//! Chrome Trace Event JSON (`{"traceEvents":[…]}`), written as it streams:
//! complete events (`ph:"X"`, µs), one `pid` per rank, `process_name` and
//! `thread_name` metadata, metrics as counter events (`ph:"C"`), links and
//! cross-rank parents as flow events (`ph:"s"` / `ph:"f"`, see [`super::flows`]).

use std::io::Write;

use rustc_hash::FxHashSet as HashSet;
use serde_json::{json, Value};

use super::flows::Flows;
use super::{each_point, process_name, thread_of, TwoPass, REMOTE_PARENT};
use crate::input::otlp::{span_id_u64, Metric, Span};
use crate::input::{Origin, Sink};
use lens_perfetto::packing::Packing;

/// Microseconds with 3 decimals, from nanoseconds, as a JSON number.
fn us(ns: u64) -> Value {
    Value::from(ns as f64 / 1000.0)
}

/// Appends nanoseconds as exact microseconds (`123.456`).
fn push_us(o: &mut Vec<u8>, ns: u64) {
    push_uint(o, ns / 1000);
    let frac = ns % 1000;
    o.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

/// Appends `v` in decimal (two digits per division).
fn push_uint(o: &mut Vec<u8>, mut v: u64) {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + v as u8;
    }
    o.extend_from_slice(&digits[at..]);
}

/// Appends `v` in decimal.
fn push_int(o: &mut Vec<u8>, v: i64) {
    if v < 0 {
        o.push(b'-');
    }
    push_uint(o, v.unsigned_abs());
}

/// Appends `s` as a JSON string, escaped as serde_json does (only quotes,
/// backslashes and control characters need it).
fn json_str(o: &mut Vec<u8>, s: &str) {
    if s.bytes().any(|c| c == b'"' || c == b'\\' || c < 0x20) {
        // serde_json's own escaping; writing to a Vec cannot fail
        let _ = serde_json::to_writer(&mut *o, s);
    } else {
        o.push(b'"');
        o.extend_from_slice(s.as_bytes());
        o.push(b'"');
    }
}

pub(super) struct ChromeSink<W: Write> {
    out: W,
    buf: Vec<u8>,
    first: bool,
    processes: HashSet<i64>,
    threads: HashSet<(i64, i64)>,
    packing: Packing,
    error: Option<std::io::Error>,
    flows: Flows,
    second_pass: bool,
}

impl<W: Write> ChromeSink<W> {
    pub(super) fn new(out: W) -> Self {
        ChromeSink {
            out,
            buf: Vec::with_capacity(1024),
            first: true,
            processes: HashSet::default(),
            threads: HashSet::default(),
            packing: Packing::default(),
            error: None,
            flows: Flows::default(),
            second_pass: false,
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

    /// A flow event: `s` starts flow `id` at the source span, `f` ends it
    /// in the span that starts at `ts` (binding to the enclosing slice).
    fn flow(&mut self, ph: &str, id: u64, pid: i64, tid: i64, ts: u64) {
        let mut v = json!({"name": "flow", "cat": "lens.flow", "ph": ph, "id": format!("{id:#x}"), "pid": pid, "tid": tid, "ts": us(ts)});
        if ph == "f" {
            v["bp"] = json!("e");
        }
        self.event(&v);
    }

    /// One `ph:"X"` event, formatted into the reused buffer, then written.
    fn complete(&mut self, pid: i64, tid: i64, s: &Span<'_>, dur: u64) -> std::io::Result<()> {
        if self.error.is_some() {
            return Ok(());
        }
        let o = &mut self.buf;
        o.clear();
        o.extend_from_slice(if self.first {
            b"{\"traceEvents\":[\n"
        } else {
            b",\n"
        });
        self.first = false;
        o.extend_from_slice(b"{\"name\":");
        json_str(o, &s.name);
        o.extend_from_slice(b",\"ph\":\"X\",\"pid\":");
        push_int(o, pid);
        o.extend_from_slice(b",\"tid\":");
        push_int(o, tid);
        o.extend_from_slice(b",\"ts\":");
        push_us(o, s.start_time_unix_nano);
        o.extend_from_slice(b",\"dur\":");
        push_us(o, dur);
        o.extend_from_slice(b",\"args\":{");
        for kv in s.attributes.iter().filter(|kv| kv.key != "thread.id") {
            json_str(o, &kv.key);
            o.push(b':');
            // the value as text (`Value`'s Display), as a JSON string
            let v = &kv.value;
            if let Some(t) = &v.string_value {
                json_str(o, t);
            } else if let Some(i) = v.int_value {
                o.push(b'"');
                push_int(o, i);
                o.push(b'"');
            } else if let Some(b) = v.bool_value.filter(|_| v.double_value.is_none()) {
                o.extend_from_slice(if b { b"\"true\"" } else { b"\"false\"" });
            } else {
                json_str(o, &v.to_value().to_string());
            }
            o.push(b',');
        }
        if s.status.code == 2 {
            o.extend_from_slice(b"\"status\":");
            json_str(o, &format!("ERROR {}", s.status.message));
            o.push(b',');
        }
        o.extend_from_slice(b"\"span_id\":");
        json_str(o, &s.span_id);
        o.extend_from_slice(b"}}");
        self.out.write_all(&self.buf)
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
            let id = span_id_u64(&s.span_id);
            if self.second_pass {
                for e in self.flows.take(id).unwrap_or_default() {
                    self.flow("s", e, pid, tid, s.start_time_unix_nano);
                }
                continue;
            }
            self.flows.saw(id);
            let mut ends: Vec<u64> = Vec::new();
            if s.flags & REMOTE_PARENT == REMOTE_PARENT {
                ends.extend(self.flows.edge(span_id_u64(&s.parent_span_id), id));
            }
            for l in &s.links {
                ends.extend(self.flows.edge(span_id_u64(&l.span_id), id));
            }
            // overlapping spans of one thread go to extra lanes (tids)
            let end = s.end_time_unix_nano.max(s.start_time_unix_nano);
            let lane = self.packing.lane(pid, tid, s.start_time_unix_nano, end);
            let lane_tid = tid + ((lane as i64) << 40);
            for e in ends {
                self.flow("f", e, pid, lane_tid, s.start_time_unix_nano);
            }
            if self.threads.insert((pid, lane_tid)) {
                let mut name = if tid == 0 {
                    "spans".to_owned()
                } else {
                    format!("thread {tid}")
                };
                if lane > 0 {
                    name.push_str(&format!(" #{}", lane + 1));
                }
                self.event(&json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": lane_tid, "args": {"name": name}}));
            }
            let tid = lane_tid;
            let dur = s.end_time_unix_nano.saturating_sub(s.start_time_unix_nano);
            if let Err(e) = self.complete(pid, tid, s, dur) {
                self.error.get_or_insert(e);
            }
        }
    }

    fn file(&mut self, index: usize, path: &std::path::Path) {
        if !self.second_pass {
            self.flows.file(index, path);
        }
    }

    fn metrics(&mut self, origin: &Origin, metrics: &[Metric<'_>]) {
        if self.second_pass {
            return;
        }
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

impl<W: Write> TwoPass for ChromeSink<W> {
    fn flows(&mut self) -> &mut Flows {
        &mut self.flows
    }

    fn begin_second_pass(&mut self) {
        self.second_pass = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A complete event as it was written with `write!` and serde_json.
    fn reference(
        o: &mut Vec<u8>,
        pid: i64,
        tid: i64,
        s: &Span<'_>,
        dur: u64,
    ) -> std::io::Result<()> {
        fn write_us(o: &mut impl Write, ns: u64) -> std::io::Result<()> {
            write!(o, "{}.{:03}", ns / 1000, ns % 1000)
        }
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

    #[test]
    fn integers_are_written_like_display() {
        let mut o = Vec::new();
        for v in [
            0,
            1,
            9,
            10,
            99,
            100,
            101,
            999,
            1000,
            12345,
            i64::MAX,
            i64::MIN,
            -1,
            -10,
        ] {
            o.clear();
            push_int(&mut o, v);
            assert_eq!(String::from_utf8_lossy(&o), v.to_string());
        }
        for v in [u64::MAX, u64::MAX / 10, 10_000_000_000_000_000_000] {
            o.clear();
            push_uint(&mut o, v);
            assert_eq!(String::from_utf8_lossy(&o), v.to_string());
        }
    }

    #[test]
    fn complete_events_are_written_as_before() {
        let lines = [
            r#"{"name":"a","spanId":"00ff","startTimeUnixNano":"1796000000005050007","attributes":[{"key":"thread.id","value":{"intValue":"3"}},{"key":"i","value":{"intValue":"-9223372036854775808"}}]}"#,
            r#"{"name":"q\"\\\n\u0001\u007f é","startTimeUnixNano":"999","attributes":[{"key":"d","value":{"doubleValue":1.5}},{"key":"d2","value":{"doubleValue":1e300,"boolValue":true}},{"key":"b","value":{"boolValue":false}},{"key":"s\t","value":{"stringValue":"\"x\""}},{"key":"arr","value":{"arrayValue":{"values":[{"intValue":"1"}]}}},{"key":"none","value":{}},{"key":"both","value":{"intValue":"5","stringValue":"s"}}],"status":{"code":2,"message":"bad\n"}}"#,
            r#"{"name":"","startTimeUnixNano":"0","status":{"code":1}}"#,
        ];
        for line in lines {
            let s: Span<'_> = serde_json::from_str(line).expect("span");
            for (pid, tid, dur) in [
                (0, 0, 0),
                (-1, -(1 << 40), 1_000_999),
                (i64::MAX, i64::MIN, u64::MAX),
            ] {
                let mut sink = ChromeSink::new(Vec::new());
                sink.first = false;
                sink.complete(pid, tid, &s, dur).expect("a Vec");
                let mut want = b",\n".to_vec();
                reference(&mut want, pid, tid, &s, dur).expect("a Vec");
                assert_eq!(
                    String::from_utf8_lossy(&sink.out),
                    String::from_utf8_lossy(&want)
                );
            }
        }
    }
}
