//! End-to-end test of `examples/w3c_service`: the service side of the W3C
//! Trace Context validation suite, driven the way the suite drives it.
//!
//! The test starts the example binary (built by
//! `cargo test --workspace --all-targets`, which builds examples; it is never
//! built from here) on a free port, runs a small HTTP receiver standing in for
//! the suite's harness, POSTs test cases to `/test` with raw HTTP (so header
//! names, casing, duplicates and non-ASCII bytes reach the service exactly as
//! written) and checks the `traceparent` / `tracestate` the service sends to
//! the receiver. Finally it stops the service with SIGINT and checks the
//! exported spans: the service's spans are children of the remote parent.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TRACE: &str = "12345678901234567890123456789012";
const PARENT: &str = "1234567890123456";
const TIMEOUT: Duration = Duration::from_secs(5);

fn example_binary() -> PathBuf {
    tests::example_binary("w3c_service")
}

/// The running example; killed when dropped.
struct Service {
    child: Child,
    addr: SocketAddr,
    spans_file: PathBuf,
    dir: PathBuf,
}

impl Service {
    fn start() -> Service {
        let dir = std::env::temp_dir().join(format!("lens-w3c-service-{}", std::process::id()));
        let spans_file = dir.join("spans.jsonl");
        let mut child = Command::new(example_binary())
            .arg("127.0.0.1:0")
            .env("NEMO_LENS_ENABLED", "true")
            .env("NEMO_LENS_EXPORTER", "file")
            .env("NEMO_LENS_FILE_PATH", &spans_file)
            .env("NEMO_LENS_EXPORT_STRATEGY", "all_ranks")
            .env("NEMO_LENS_METRICS_ENABLED", "false")
            .env("NEMO_LENS_LOGS_ENABLED", "false")
            .env("NEMO_LENS_SAMPLER_ENABLED", "false")
            .env_remove("OTEL_TRACES_SAMPLER")
            .env_remove("OTEL_TRACES_SAMPLER_ARG")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the w3c_service example");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("w3c_service listening on http://")
            .and_then(|rest| rest.strip_suffix("/test"))
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!("unexpected first line from w3c_service: {line:?}")
            })
            .parse()
            .unwrap();
        Service {
            child,
            addr,
            spans_file,
            dir,
        }
    }

    /// Stops the service with SIGINT (graceful: telemetry is flushed) and
    /// returns the spans it exported.
    fn stop(mut self) -> Vec<serde_json::Value> {
        // SAFETY: kill(2) on the pid of a child we started and have not waited for.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "w3c_service exited with {status}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "w3c_service did not stop on SIGINT"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let text = std::fs::read_to_string(&self.spans_file).expect("the exported spans file");
        let mut spans = Vec::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("each line is JSON");
            for rs in v["resourceSpans"].as_array().into_iter().flatten() {
                for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                    spans.extend(ss["spans"].as_array().into_iter().flatten().cloned());
                }
            }
        }
        spans
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

type Headers = Vec<(String, String)>;

/// The harness side: records the headers of every request it receives, by
/// path, and answers 200.
struct Receiver {
    addr: SocketAddr,
    seen: Arc<Mutex<HashMap<String, Headers>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let record = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                // recorded before the 200 goes out, so the service's reply to
                // `/test` (sent after our 200) never races the record
                read_request(stream, |path, headers| {
                    record.lock().unwrap().insert(path, headers);
                });
            }
        });
        Receiver { addr, seen }
    }

    fn url(&self, id: &str) -> String {
        format!("http://{}/cb/{id}", self.addr)
    }

    fn take(&self, id: &str) -> Headers {
        self.seen
            .lock()
            .unwrap()
            .remove(&format!("/cb/{id}"))
            .unwrap_or_else(|| panic!("the service made no callback for {id}"))
    }
}

/// Reads one HTTP/1.1 request, hands it to `on_request`, then answers 200
/// and closes the connection.
fn read_request(stream: TcpStream, on_request: impl FnOnce(String, Headers)) -> Option<()> {
    stream.set_read_timeout(Some(TIMEOUT)).ok()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_owned();
    let mut headers = Vec::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        let value = value.trim_matches([' ', '\t']).to_owned();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().ok()?;
        }
        headers.push((name.to_owned(), value));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    on_request(path, headers);
    let mut stream = reader.into_inner();
    let reply = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    stream.write_all(reply.as_bytes()).ok()?;
    Some(())
}

/// Sends `POST /test` with `headers` (written as given: any casing,
/// duplicates, raw bytes) asking the service to call back `ids`.
fn post_test(service: &Service, receiver: &Receiver, headers: &[(&str, &[u8])], ids: &[&str]) {
    let calls: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| serde_json::json!({ "url": receiver.url(id), "arguments": [] }))
        .collect();
    let body = serde_json::to_vec(&calls).unwrap();
    let mut request = format!(
        "POST /test HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n",
        service.addr,
        body.len()
    )
    .into_bytes();
    for (name, value) in headers {
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(b": ");
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"\r\n");
    request.extend_from_slice(&body);
    let mut stream = TcpStream::connect(service.addr).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    stream.write_all(&request).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8_lossy(&response);
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "POST /test with {headers:?}: {response}"
    );
}

/// The one `traceparent` the service sent: (trace id, parent id, flags).
fn traceparent(headers: &Headers) -> (String, String, String) {
    let found: Vec<&String> = headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("traceparent"))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(found.len(), 1, "exactly one traceparent: {headers:?}");
    let parts: Vec<&str> = found[0].split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    assert!(
        parts.len() == 4
            && parts[0] == "00"
            && hex(parts[1], 32)
            && hex(parts[2], 16)
            && hex(parts[3], 2),
        "a version 00 traceparent: {}",
        found[0]
    );
    assert_ne!(parts[1], "0".repeat(32));
    assert_ne!(parts[2], "0".repeat(16));
    (
        parts[1].to_owned(),
        parts[2].to_owned(),
        parts[3].to_owned(),
    )
}

/// The `tracestate` the service sent, combined (`None` if none).
fn tracestate(headers: &Headers) -> Option<String> {
    let found: Vec<&str> = headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("tracestate"))
        .map(|(_, v)| v.as_str())
        .collect();
    (!found.is_empty()).then(|| found.join(","))
}

fn tp(flags: &str) -> String {
    format!("00-{TRACE}-{PARENT}-{flags}")
}

fn members(range: std::ops::RangeInclusive<usize>) -> String {
    range
        .map(|i| format!("bar{i:02}={i:02}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn w3c_service_follows_trace_context_level_2() {
    let started = Instant::now();
    let receiver = Receiver::start();
    let service = Service::start();
    let mut n = 0;
    let mut call = |headers: &[(&str, &[u8])]| -> Headers {
        n += 1;
        let id = n.to_string();
        post_test(&service, &receiver, headers, &[&id]);
        receiver.take(&id)
    };

    // no context: a new valid trace
    let fresh = traceparent(&call(&[]));
    assert_ne!(fresh.0, TRACE);

    // valid traceparent: same trace id, new parent id, flags kept
    // (01 sampled, 00 not, 02 random, 03 sampled + random as the Python SDK 1.45 sends)
    let mut continued_parent = String::new();
    for flags in ["01", "00", "02", "03"] {
        let value = tp(flags);
        let headers = call(&[("traceparent", value.as_bytes())]);
        let (trace, parent, sent_flags) = traceparent(&headers);
        assert_eq!(trace, TRACE, "flags {flags}");
        assert_ne!(parent, PARENT, "flags {flags}: a new parent id");
        assert_eq!(sent_flags, flags, "flags kept");
        assert_eq!(tracestate(&headers), None);
        if flags == "01" {
            continued_parent = parent;
        }
    }

    // future version: the known prefix is used, version 00 is sent
    for value in [
        format!("cc-{TRACE}-{PARENT}-01"),
        format!("cc-{TRACE}-{PARENT}-01-what-the-future-will-be-like"),
    ] {
        let (trace, _, flags) = traceparent(&call(&[("traceparent", value.as_bytes())]));
        assert_eq!((trace.as_str(), flags.as_str()), (TRACE, "01"), "{value}");
    }

    // header names in any casing, optional whitespace around the value
    for name in ["TraceParent", "TrAcEpArEnT", "TRACEPARENT"] {
        let (trace, ..) = traceparent(&call(&[(name, tp("01").as_bytes())]));
        assert_eq!(trace, TRACE, "{name}");
    }
    for value in [
        format!(" {}", tp("01")),
        format!("{}\t", tp("01")),
        format!("\t {} \t", tp("01")),
    ] {
        let (trace, ..) = traceparent(&call(&[("traceparent", value.as_bytes())]));
        assert_eq!(trace, TRACE, "{value:?}");
    }

    // invalid traceparent: the trace restarts with a new trace id
    let invalid: Vec<(&str, Vec<u8>)> = vec![
        (
            "uppercase trace id",
            format!("00-{}-{PARENT}-01", "ABCDEF78901234567890123456789012").into(),
        ),
        (
            "uppercase parent id",
            format!("00-{TRACE}-ABCDEF7890123456-01").into(),
        ),
        (
            "trace id too short",
            format!("00-{}-{PARENT}-01", &TRACE[1..]).into(),
        ),
        (
            "trace id too long",
            format!("00-{TRACE}3-{PARENT}-01").into(),
        ),
        (
            "parent id too short",
            format!("00-{TRACE}-{}-01", &PARENT[1..]).into(),
        ),
        (
            "parent id too long",
            format!("00-{TRACE}-{PARENT}7-01").into(),
        ),
        ("flags too short", format!("00-{TRACE}-{PARENT}-1").into()),
        ("flags too long", format!("00-{TRACE}-{PARENT}-001").into()),
        ("version too short", format!("0-{TRACE}-{PARENT}-01").into()),
        (
            "version too long",
            format!("000-{TRACE}-{PARENT}-01").into(),
        ),
        ("version ff", format!("ff-{TRACE}-{PARENT}-01").into()),
        ("illegal version", format!(".0-{TRACE}-{PARENT}-01").into()),
        ("illegal flags", format!("00-{TRACE}-{PARENT}-.0").into()),
        (
            "zero trace id",
            format!("00-{}-{PARENT}-01", "0".repeat(32)).into(),
        ),
        (
            "zero parent id",
            format!("00-{TRACE}-{}-01", "0".repeat(16)).into(),
        ),
        (
            "version 00 with a suffix",
            format!("00-{TRACE}-{PARENT}-01.").into(),
        ),
        (
            "version 00 with more fields",
            format!("00-{TRACE}-{PARENT}-01-what-the-future-will-be-like").into(),
        ),
        (
            "future version, suffix without dash",
            format!("cc-{TRACE}-{PARENT}-01.what-the-future").into(),
        ),
        (
            "non-ASCII byte",
            [format!("00-{TRACE}-{PARENT}-0").as_bytes(), &[0xe9]].concat(),
        ),
        ("empty", Vec::new()),
    ];
    for (what, value) in &invalid {
        let headers = call(&[
            ("traceparent", value.as_slice()),
            ("tracestate", b"foo=1".as_slice()),
        ]);
        let (trace, ..) = traceparent(&headers);
        assert_ne!(trace, TRACE, "{what}: a new trace id");
        assert_ne!(trace, "0".repeat(32), "{what}");
        assert_eq!(
            tracestate(&headers),
            None,
            "{what}: tracestate is not parsed"
        );
    }
    // wrong header names are not traceparent
    for name in ["trace-parent", "trace.parent"] {
        let (trace, ..) = traceparent(&call(&[(name, tp("01").as_bytes())]));
        assert_ne!(trace, TRACE, "{name}");
    }
    // duplicated traceparent headers (also equal ones, also in two casings)
    let other = format!("00-{}1-{PARENT}-01", &TRACE[..31]);
    for (a, b) in [
        (("traceparent", other.as_str()), ("traceparent", tp("01"))),
        (
            ("traceparent", tp("01").as_str()),
            ("traceparent", tp("01")),
        ),
        (
            ("traceparent", tp("01").as_str()),
            ("TraceParent", tp("01")),
        ),
    ] {
        let (trace, ..) = traceparent(&call(&[(a.0, a.1.as_bytes()), (b.0, b.1.as_bytes())]));
        assert_ne!(trace, TRACE, "duplicated: a new trace id");
        assert_ne!(trace, other, "duplicated: a new trace id");
    }

    // tracestate: repeated headers combined in order, empty members ignored
    let mut with_state = |states: &[&str]| -> (String, Option<String>) {
        let value = tp("00");
        let mut headers: Vec<(&str, &[u8])> = vec![("traceparent", value.as_bytes())];
        headers.extend(states.iter().map(|s| ("tracestate", s.as_bytes())));
        let sent = call(&headers);
        (traceparent(&sent).0, tracestate(&sent))
    };
    let (trace, state) = with_state(&["foo=1,bar=2", "rojo=1,congo=2", "", "baz=3"]);
    assert_eq!(trace, TRACE);
    assert_eq!(state.as_deref(), Some("foo=1,bar=2,rojo=1,congo=2,baz=3"));
    // 32 members kept
    let split = [
        members(1..=10),
        members(11..=20),
        members(21..=30),
        members(31..=32),
    ];
    let split: Vec<&str> = split.iter().map(String::as_str).collect();
    assert_eq!(
        with_state(&split),
        (TRACE.to_owned(), Some(members(1..=32)))
    );
    // 33 members: tracestate dropped, traceparent kept
    let split = [
        members(1..=10),
        members(11..=20),
        members(21..=30),
        members(31..=33),
    ];
    let split: Vec<&str> = split.iter().map(String::as_str).collect();
    assert_eq!(with_state(&split), (TRACE.to_owned(), None));
    // duplicated keys: inherited, the first member of a key kept
    for dup in [&["foo=1", "foo=2"][..], &["foo=1,foo=1"], &["foo=1,foo=2"]] {
        assert_eq!(
            with_state(dup),
            (TRACE.to_owned(), Some("foo=1".to_owned())),
            "{dup:?}"
        );
    }
    // illegal keys and values: tracestate dropped
    for bad in [
        &["FOO=1"][..],
        &["foo.bar=1"],
        &["foo=bar=baz"],
        &["foo=,bar=3"],
    ] {
        assert_eq!(with_state(bad), (TRACE.to_owned(), None), "{bad:?}");
    }
    // '@' is an ordinary key character; OWS around members is dropped
    let (_, state) = with_state(&["foo@=1 , foo@@bar=2,\tt@vvvvvvvvvvvvvvv=3", "a@b@c=4"]);
    assert_eq!(
        state.as_deref(),
        Some("foo@=1,foo@@bar=2,t@vvvvvvvvvvvvvvv=3,a@b@c=4")
    );
    // tracestate header names in any casing
    let (_, state) = {
        let value = tp("01");
        let sent = call(&[
            ("traceparent", value.as_bytes()),
            ("TraceState", b"foo=1".as_slice()),
            ("TRACESTATE", b"bar=2".as_slice()),
        ]);
        (traceparent(&sent).0, tracestate(&sent))
    };
    assert_eq!(state.as_deref(), Some("foo=1,bar=2"));
    // tracestate without traceparent is discarded
    let sent = call(&[("tracestate", b"foo=1,bar=2".as_slice())]);
    assert_ne!(traceparent(&sent).0, TRACE);
    assert_eq!(tracestate(&sent), None);

    // several callbacks: the same trace id, a different parent id each
    let ids = ["multi-a", "multi-b", "multi-c"];
    post_test(
        &service,
        &receiver,
        &[("traceparent", tp("01").as_bytes())],
        &ids,
    );
    let sent: Vec<(String, String, String)> = ids
        .iter()
        .map(|id| traceparent(&receiver.take(id)))
        .collect();
    assert!(sent.iter().all(|(trace, _, _)| trace == TRACE));
    let parents: std::collections::HashSet<&String> = sent.iter().map(|(_, p, _)| p).collect();
    assert_eq!(parents.len(), 3, "{sent:?}");

    // the exported spans: w3c.test is a child of the remote parent, and the
    // callback span is the parent id the receiver saw
    let spans = service.stop();
    let callback = spans
        .iter()
        .find(|s| s["name"] == "w3c.callback" && s["spanId"] == continued_parent.as_str())
        .unwrap_or_else(|| panic!("a w3c.callback span with id {continued_parent} in {spans:#?}"));
    assert_eq!(callback["traceId"], TRACE);
    let request = spans
        .iter()
        .find(|s| s["name"] == "w3c.test" && s["spanId"] == callback["parentSpanId"])
        .expect("the callback's parent is the w3c.test span");
    assert_eq!(request["traceId"], TRACE);
    assert_eq!(
        request["parentSpanId"], PARENT,
        "w3c.test continues the remote parent"
    );

    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}
