//! Headers given in code (`TelemetryBuilder::with_header`), set on every
//! export after the exporter has added its own. The OTLP exporters apply
//! `OTEL_EXPORTER_OTLP_*HEADERS` over the headers code hands them, which
//! would reverse lens's order (code over environment over default); set
//! last, a code header replaces every value the variables gave its name.

#[cfg(feature = "otlp-grpc")]
pub(crate) use grpc::GrpcHeaders;
#[cfg(feature = "otlp-http")]
pub(crate) use http_client::HttpHeaders;

#[cfg(feature = "otlp-grpc")]
mod grpc {
    use crate::sdk::export::build_error::BuildError;
    use std::sync::Arc;
    use tonic::metadata::{Ascii, MetadataKey, MetadataValue};

    /// A tonic interceptor setting the code headers as gRPC metadata.
    #[derive(Clone)]
    pub(crate) struct GrpcHeaders(Arc<Vec<(MetadataKey<Ascii>, MetadataValue<Ascii>)>>);

    impl GrpcHeaders {
        /// The interceptor for `headers` (checked by the configuration
        /// already; a failure here is reported, never a panic).
        pub(crate) fn new(headers: &[(String, String)]) -> Result<Self, BuildError> {
            let mut out = Vec::with_capacity(headers.len());
            for (name, value) in headers {
                let key = MetadataKey::from_bytes(name.as_bytes());
                let value = MetadataValue::try_from(value.as_str());
                match (key, value) {
                    (Ok(k), Ok(v)) => out.push((k, v)),
                    _ => {
                        return Err(BuildError::new(format!(
                            "the header {name:?} (TelemetryBuilder::with_header) is not valid gRPC metadata"
                        )))
                    }
                }
            }
            Ok(Self(Arc::new(out)))
        }
    }

    impl tonic::service::Interceptor for GrpcHeaders {
        fn call(
            &mut self,
            mut request: tonic::Request<()>,
        ) -> Result<tonic::Request<()>, tonic::Status> {
            let metadata = request.metadata_mut();
            for (k, _) in self.0.iter() {
                metadata.remove(k);
            }
            for (k, v) in self.0.iter() {
                metadata.append(k.clone(), v.clone());
            }
            Ok(request)
        }
    }
}

#[cfg(feature = "otlp-http")]
mod http_client {
    use crate::sdk::export::build_error::BuildError;
    use http::{HeaderName, HeaderValue};
    use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
    use std::fmt;

    /// An HTTP client that sets the code headers on each request, then
    /// sends it through `inner`.
    pub(crate) struct HttpHeaders {
        inner: Box<dyn HttpClient>,
        headers: Vec<(HeaderName, HeaderValue)>,
    }

    impl HttpHeaders {
        /// `inner` with `headers` set on every request.
        pub(crate) fn new(
            inner: Box<dyn HttpClient>,
            headers: &[(String, String)],
        ) -> Result<Self, BuildError> {
            let mut out = Vec::with_capacity(headers.len());
            for (name, value) in headers {
                match (
                    HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(value),
                ) {
                    (Ok(k), Ok(mut v)) => {
                        v.set_sensitive(true);
                        out.push((k, v));
                    }
                    _ => {
                        return Err(BuildError::new(format!(
                            "the header {name:?} (TelemetryBuilder::with_header) is not a valid HTTP header"
                        )))
                    }
                }
            }
            Ok(Self {
                inner,
                headers: out,
            })
        }
    }

    // the values are often credentials: only the names are shown
    impl fmt::Debug for HttpHeaders {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("HttpHeaders")
                .field("inner", &self.inner)
                .field(
                    "names",
                    &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                )
                .finish()
        }
    }

    #[async_trait::async_trait]
    impl HttpClient for HttpHeaders {
        async fn send_bytes(
            &self,
            mut request: Request<Bytes>,
        ) -> Result<Response<Bytes>, HttpError> {
            let headers = request.headers_mut();
            for (k, _) in &self.headers {
                headers.remove(k);
            }
            for (k, v) in &self.headers {
                headers.append(k.clone(), v.clone());
            }
            self.inner.send_bytes(request).await
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "otlp-grpc")]
    #[test]
    fn a_code_header_replaces_every_value_the_variables_gave_its_name() {
        use tonic::service::Interceptor;
        let mut i = super::GrpcHeaders::new(&[
            ("x-team".into(), "code".into()),
            ("x-extra".into(), "1".into()),
        ])
        .unwrap();
        let mut req = tonic::Request::new(());
        req.metadata_mut()
            .append("x-team", "env-a".parse().unwrap());
        req.metadata_mut()
            .append("x-team", "env-b".parse().unwrap());
        req.metadata_mut().append("x-other", "env".parse().unwrap());
        let req = i.call(req).unwrap();
        let m = req.metadata();
        let team: Vec<_> = m.get_all("x-team").iter().collect();
        assert_eq!(team, ["code"]);
        assert_eq!(m.get("x-other").unwrap(), "env");
        assert_eq!(m.get("x-extra").unwrap(), "1");
    }
}
