//! TLS for `https://` OTLP endpoints (the `tls` feature): rustls with the
//! `ring` provider, for gRPC (tonic) and HTTP (hyper with a rustls connector:
//! plain `http://` keeps the exporter's reqwest client) alike.
//!
//! Trust: the webpki roots plus the machine's native certificates, or,
//! when `OTEL_EXPORTER_OTLP_CERTIFICATE` (or its per-signal form) names a
//! PEM file, only the certificates in that file (as the Go and Java SDKs
//! do: a private CA replaces the public ones rather than joining them).
//! Client authentication (mTLS): `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`
//! and `OTEL_EXPORTER_OTLP_CLIENT_KEY`, both or neither. Certificate
//! verification is always on.

use super::endpoint::Signal;
#[cfg(feature = "otlp-grpc")]
use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig, Identity};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The TLS settings of one signal's exporter, read and checked from the
/// environment before anything is built.
#[derive(Debug)]
pub(crate) struct Settings {
    /// PEM certificates to trust instead of the default roots.
    ca: Option<Vec<u8>>,
    /// PEM client certificate chain and key.
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// A PEM file named by a variable: its bytes and the variable.
struct PemFile {
    var: String,
    path: String,
    bytes: Vec<u8>,
}

impl PemFile {
    fn read(signal: Signal, setting: &str) -> Result<Option<PemFile>, String> {
        let Some((path, var)) = signal.setting(setting) else {
            return Ok(None);
        };
        let bytes =
            std::fs::read(&path).map_err(|e| format!("{var}={path}: cannot read the file: {e}"))?;
        Ok(Some(PemFile { var, path, bytes }))
    }

    fn certificates(&self) -> Result<Vec<CertificateDer<'static>>, String> {
        let certs = CertificateDer::pem_slice_iter(&self.bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                format!(
                    "{}={}: not a PEM certificate file: {e}",
                    self.var, self.path
                )
            })?;
        if certs.is_empty() {
            return Err(format!(
                "{}={}: holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
                self.var, self.path
            ));
        }
        Ok(certs)
    }

    fn key(&self) -> Result<PrivateKeyDer<'static>, String> {
        PrivateKeyDer::from_pem_slice(&self.bytes).map_err(|e| {
            format!(
                "{}={}: holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}",
                self.var, self.path
            )
        })
    }
}

impl Settings {
    /// Reads and checks the certificate variables of `signal`; an error
    /// names the variable, the path and what is wrong.
    pub(crate) fn from_env(signal: Signal) -> Result<Settings, String> {
        let ca = PemFile::read(signal, "CERTIFICATE")?;
        if let Some(ca) = &ca {
            ca.certificates()?;
        }
        let cert = PemFile::read(signal, "CLIENT_CERTIFICATE")?;
        let key = PemFile::read(signal, "CLIENT_KEY")?;
        let identity = match (cert, key) {
            (None, None) => None,
            (Some(cert), Some(key)) => {
                cert.certificates()?;
                key.key()?;
                Some((cert.bytes, key.bytes))
            }
            (Some(only), None) | (None, Some(only)) => {
                return Err(format!(
                    "{} is set but its pair is not: client authentication needs both \
                     OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY \
                     (or their per-signal forms)",
                    only.var
                ))
            }
        };
        Ok(Settings {
            ca: ca.map(|f| f.bytes),
            identity,
        })
    }

    /// The tonic TLS configuration (gRPC).
    #[cfg(feature = "otlp-grpc")]
    pub(crate) fn grpc(&self) -> ClientTlsConfig {
        let c = ClientTlsConfig::new();
        let c = match &self.ca {
            Some(pem) => c.ca_certificate(Certificate::from_pem(pem)),
            None => c.with_enabled_roots(),
        };
        match &self.identity {
            Some((cert, key)) => c.identity(Identity::from_pem(cert, key)),
            None => c,
        }
    }

    /// An HTTP client for the OTLP HTTP exporter: rustls with the same
    /// trust, and the export timeout the exporter would have given its own
    /// client (`OTEL_EXPORTER_OTLP_<SIGNAL>_TIMEOUT`, else
    /// `OTEL_EXPORTER_OTLP_TIMEOUT`, else 10 s).
    #[cfg(feature = "otlp-http")]
    pub(crate) fn http_client(
        &self,
        signal: Signal,
        code_timeout: Option<std::time::Duration>,
    ) -> Result<KeepsCause, String> {
        let err =
            |e: &dyn std::fmt::Display| format!("cannot set up TLS for OTLP {}: {e}", signal.name);
        let mut roots = rustls::RootCertStore::empty();
        match &self.ca {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem).flatten() {
                    roots.add(cert).map_err(|e| err(&e))?;
                }
            }
            None => {
                roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
                // unreadable native certificates leave the webpki roots
                let native = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(native.certs);
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| err(&e))?
            .with_root_certificates(roots);
        let config = match &self.identity {
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert).flatten().collect();
                let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| err(&e))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| err(&e))?
            }
            None => builder.with_no_client_auth(),
        };
        let timeout = signal.http_timeout(code_timeout);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_only()
            .enable_http1()
            .build();
        Ok(KeepsCause(HyperClient::new(connector, timeout, None)))
    }
}

/// The OTLP HTTP client for `https://`: hyper over lens's rustls connector.
#[cfg(feature = "otlp-http")]
type HyperClient = opentelemetry_http::hyper::HyperClient<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
>;

/// The HTTP client, keeping the cause of a failed request: the OTLP
/// HTTP exporter reports every transport failure as "network error", which
/// hides a certificate problem. The cause goes to
/// [`super::endpoint::note_transport_error`], which the first-failure report
/// reads.
#[cfg(feature = "otlp-http")]
#[derive(Debug)]
pub(crate) struct KeepsCause(HyperClient);

#[cfg(feature = "otlp-http")]
#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for KeepsCause {
    async fn send_bytes(
        &self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> Result<
        opentelemetry_http::Response<opentelemetry_http::Bytes>,
        opentelemetry_http::HttpError,
    > {
        self.0.send_bytes(request).await.inspect_err(|e| {
            let mut cause = e.to_string();
            let mut source = e.source();
            while let Some(s) = source {
                let text = s.to_string();
                if !cause.contains(&text) {
                    cause.push_str(": ");
                    cause.push_str(&text);
                }
                source = s.source();
            }
            super::endpoint::note_transport_error(cause);
        })
    }
}
