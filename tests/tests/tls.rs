//! TLS to a collector, as a hosted backend would be reached: the probe
//! exports over `https://` (gRPC and HTTP) to a TLS endpoint this test
//! starts on 127.0.0.1 in front of a real collector, with certificates made
//! at test time, verification on and client authentication required.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tests::{get, lens_command, Rotel};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, server::WebPkiClientVerifier, RootCertStore, ServerConfig};

const PROBE: &str = env!("CARGO_BIN_EXE_lens-probe");

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

/// A certificate for `names` signed by `ca`: (certificate PEM, key PEM).
fn leaf(
    ca: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let mut p =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, names[0]);
    p.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, ca).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// A TLS endpoint on 127.0.0.1 that forwards to `upstream` (a collector
/// port) and keeps what clients sent, decrypted, and each failed handshake.
struct TlsFront {
    port: u16,
    handshakes: Arc<AtomicUsize>,
    failures: Arc<Mutex<Vec<String>>>,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl TlsFront {
    fn start(config: Arc<ServerConfig>, upstream: u16) -> TlsFront {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let front = TlsFront {
            port: std_listener.local_addr().unwrap().port(),
            handshakes: Arc::default(),
            failures: Arc::default(),
            seen: Arc::default(),
        };
        let (handshakes, failures, seen) = (
            front.handshakes.clone(),
            front.failures.clone(),
            front.seen.clone(),
        );
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
                let acceptor = tokio_rustls::TlsAcceptor::from(config);
                while let Ok((tcp, _)) = listener.accept().await {
                    let (acceptor, handshakes, failures, seen) = (
                        acceptor.clone(),
                        handshakes.clone(),
                        failures.clone(),
                        seen.clone(),
                    );
                    tokio::spawn(async move {
                        let tls = match acceptor.accept(tcp).await {
                            Ok(tls) => tls,
                            Err(e) => return failures.lock().unwrap().push(e.to_string()),
                        };
                        handshakes.fetch_add(1, Ordering::SeqCst);
                        let Ok(up) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                        else {
                            return;
                        };
                        let (mut tr, mut tw) = tokio::io::split(tls);
                        let (mut ur, mut uw) = up.into_split();
                        let to_collector = async {
                            let mut buf = vec![0; 16 * 1024];
                            while let Ok(n @ 1..) = tr.read(&mut buf).await {
                                seen.lock().unwrap().extend_from_slice(&buf[..n]);
                                if uw.write_all(&buf[..n]).await.is_err() {
                                    break;
                                }
                            }
                            let _ = uw.shutdown().await;
                        };
                        let to_client = async {
                            let _ = tokio::io::copy(&mut ur, &mut tw).await;
                            let _ = tw.shutdown().await;
                        };
                        tokio::join!(to_collector, to_client);
                    });
                }
            });
        });
        front
    }

    fn seen(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).to_ascii_lowercase()
    }
}

struct Pki {
    dir: PathBuf,
    ca: String,
    other_ca: String,
    client_cert: String,
    client_key: String,
    server: Arc<ServerConfig>,
}

fn pki() -> Pki {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("lens-tls-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = ca("lens test CA");
    let other = ca("some other CA");
    let (server_cert, server_key) = leaf(
        &root,
        &["127.0.0.1", "localhost"],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (client_cert, client_key) =
        leaf(&root, &["lens-probe"], ExtendedKeyUsagePurpose::ClientAuth);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots.add(root.der().clone()).unwrap();
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .unwrap();
    let mut server = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            CertificateDer::pem_slice_iter(server_cert.as_bytes())
                .map(Result::unwrap)
                .collect(),
            PrivateKeyDer::from_pem_slice(server_key.as_bytes()).unwrap(),
        )
        .unwrap();
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Pki {
        ca: write(&dir, "ca.pem", &root.pem()),
        other_ca: write(&dir, "other-ca.pem", &other.pem()),
        client_cert: write(&dir, "client.pem", &client_cert),
        client_key: write(&dir, "client.key", &client_key),
        server: Arc::new(server),
        dir,
    }
}

fn probe(env: &[(&str, &str)]) -> Output {
    let mut cmd = lens_command(PROBE);
    cmd.args(["spans", "sync"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn https_over_grpc_and_http_with_verification_and_client_certificates() {
    let rotel = Rotel::start();
    let pki = pki();
    let grpc = TlsFront::start(pki.server.clone(), rotel.grpc_port);
    let http = TlsFront::start(pki.server.clone(), rotel.http_port);
    for (protocol, front) in [
        ("grpc", &grpc),
        ("http/protobuf", &http),
        ("http/json", &http),
    ] {
        let run_id = format!("tls-{}", protocol.replace('/', "-"));
        let endpoint = format!("https://127.0.0.1:{}", front.port);
        let out = probe(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", &pki.ca),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &pki.client_cert),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", &pki.client_key),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=general,x-team=ml"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-api-key=for-traces"),
            ("NEMO_LENS_RUN_ID", &run_id),
        ]);
        assert!(out.status.success(), "{protocol}: {}", text(&out));
        let r = rotel.wait_for(
            Duration::from_secs(20),
            &format!("spans of {run_id}"),
            |r| {
                r.spans.iter().any(|s| {
                    s.name == "probe.job" && get(&s.resource, "nemo.run.id") == Some(&run_id)
                })
            },
        );
        let steps = r
            .spans
            .iter()
            .filter(|s| s.name == "probe.step" && get(&s.resource, "nemo.run.id") == Some(&run_id))
            .count();
        assert_eq!(steps, 3, "{protocol}");
        assert!(front.handshakes.load(Ordering::SeqCst) >= 1, "{protocol}");
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("failed"),
            "{protocol}: {}",
            text(&out)
        );
    }
    // HTTP/1.1 headers are readable in what the endpoint decrypted: the
    // per-signal variable wins over the general one for its key
    let seen = http.seen();
    assert!(seen.contains("post /v1/traces"), "{seen}");
    assert!(seen.contains("x-api-key: for-traces"), "{seen}");
    assert!(!seen.contains("x-api-key: general"), "{seen}");
    assert!(grpc.failures.lock().unwrap().is_empty());
    assert!(http.failures.lock().unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&pki.dir);
}

#[test]
fn a_certificate_from_the_wrong_ca_fails_verification_and_says_so() {
    let rotel = Rotel::start();
    let pki = pki();
    for (protocol, upstream) in [
        ("grpc", rotel.grpc_port),
        ("http/protobuf", rotel.http_port),
    ] {
        let front = TlsFront::start(pki.server.clone(), upstream);
        let endpoint = format!("https://127.0.0.1:{}", front.port);
        let run_id = format!("tls-wrong-ca-{}", protocol.replace('/', "-"));
        let out = probe(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", &pki.other_ca),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &pki.client_cert),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", &pki.client_key),
            ("NEMO_LENS_RUN_ID", &run_id),
        ]);
        // the failed export is reported on stderr (when it happens, or in
        // the shutdown's one warning line when it happens there), with
        // where it went and why; lost telemetry never fails the probe
        assert!(out.status.success(), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            (stderr.contains(&format!("exporting spans to {endpoint}"))
                || stderr.contains(&format!("exporting to {endpoint}")))
                && stderr.contains("failed"),
            "{protocol}: {}",
            text(&out)
        );
        assert!(
            stderr.contains("invalid peer certificate: UnknownIssuer"),
            "{protocol}: the report names the certificate problem: {}",
            text(&out)
        );
        assert_eq!(front.handshakes.load(Ordering::SeqCst), 0, "{protocol}");
        assert!(!front.failures.lock().unwrap().is_empty(), "{protocol}");
        let r = rotel.received();
        assert!(
            !r.spans
                .iter()
                .any(|s| get(&s.resource, "nemo.run.id") == Some(&run_id)),
            "{protocol}: nothing reached the collector"
        );
    }
    let _ = std::fs::remove_dir_all(&pki.dir);
}

#[test]
fn bad_certificate_settings_are_setup_errors_that_name_the_variable() {
    let pki = pki();
    let missing = pki.dir.join("missing.pem").to_string_lossy().into_owned();
    let not_pem = write(&pki.dir, "not.pem", "hello\n");
    type Env<'a> = &'a [(&'a str, &'a str)];
    let cases: [(Env, &[&str]); 4] = [
        (
            &[("OTEL_EXPORTER_OTLP_CERTIFICATE", &missing)],
            &["OTEL_EXPORTER_OTLP_CERTIFICATE", &missing, "cannot read"],
        ),
        (
            &[("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", &not_pem)],
            &[
                "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
                &not_pem,
                "no PEM certificate",
            ],
        ),
        (
            &[("OTEL_EXPORTER_OTLP_CLIENT_KEY", &pki.client_key)],
            &[
                "OTEL_EXPORTER_OTLP_CLIENT_KEY",
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                "both",
            ],
        ),
        (
            &[
                ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &pki.client_cert),
                ("OTEL_EXPORTER_OTLP_CLIENT_KEY", &pki.client_cert),
            ],
            &["OTEL_EXPORTER_OTLP_CLIENT_KEY", "no PEM private key"],
        ),
    ];
    for (env, expected) in cases {
        let mut all = vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:9"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        all.extend_from_slice(env);
        let out = probe(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{env:?}: {}", text(&out));
        for e in expected {
            assert!(
                stderr.contains(e),
                "{env:?}: expected {e:?} in {}",
                text(&out)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&pki.dir);
}
