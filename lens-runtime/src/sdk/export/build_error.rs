//! Why an exporter could not be built.

/// An exporter that cannot be built: what, and the underlying error when
/// there is one (setup turns it into `SetupError::Exporter`).
#[derive(Debug)]
pub(crate) struct BuildError {
    pub(crate) what: String,
    pub(crate) source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl BuildError {
    /// An error without an underlying error.
    pub(crate) fn new(what: impl Into<String>) -> Self {
        BuildError {
            what: what.into(),
            source: None,
        }
    }

    /// `what` failed because of `source`.
    pub(crate) fn caused(
        what: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        BuildError {
            what: what.into(),
            source: Some(Box::new(source)),
        }
    }
}
