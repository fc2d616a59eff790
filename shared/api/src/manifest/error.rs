//! Load errors that say where: file, document, object, field.

use std::fmt;

use thiserror::Error;

use dovetail_core::ceilings::OverCeiling;

use super::Source;
use crate::convert::ConvertError;

/// Why [`super::load`] rejected its input. Nothing is returned on error: the input is all or
/// nothing.
///
/// Displays as `<file>: <problem>` for whole-file problems, otherwise
/// `<file>: document <n>[, item <m>][ (<Kind> <namespace>/<name>)]: <problem>`, e.g.
/// `examples/web.yaml: document 2 (Deployment shop/web): spec.template.spec.containers[0].resources.requests.cpu: "1x" is not a valid Kubernetes quantity: …`.
/// Document and item numbers are **1-based**, as an editor counts: document 1 is the text
/// before the first `---` separator that is followed by content (or the first top-level JSON
/// value), item 1 the first entry of a `kind: List`.
#[derive(Debug, Error)]
pub struct LoadError {
    pub file: String,
    /// 1-based document number within the file; `None` for whole-file problems (unreadable).
    pub document: Option<usize>,
    /// 1-based index within a `List` document's `items`.
    pub item: Option<usize>,
    /// `Kind namespace/name` (or `Kind name` for cluster-scoped kinds) when known.
    pub object: Option<String>,
    /// Boxed so `Result<_, LoadError>` stays small on the happy path.
    #[source]
    pub kind: Box<LoadErrorKind>,
}

impl LoadError {
    pub(crate) fn file(file: &str, kind: LoadErrorKind) -> Self {
        LoadError { file: file.to_string(), document: None, item: None, object: None, kind: Box::new(kind) }
    }

    /// An error about one object, shaped like every other load error. Lets code that converts
    /// the objects kept in [`super::Inputs`] (NodePools, EC2NodeClasses, PDBs) report problems
    /// the same way.
    pub fn at(source: &Source, object: Option<&str>, kind: impl Into<LoadErrorKind>) -> Self {
        LoadError {
            file: source.file.clone(),
            document: Some(source.document),
            item: source.item,
            object: object.map(str::to_string),
            kind: Box::new(kind.into()),
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(d) = self.document {
            write!(f, ": document {d}")?;
            if let Some(i) = self.item {
                write!(f, ", item {i}")?;
            }
        }
        if let Some(o) = &self.object {
            write!(f, " ({o})")?;
        }
        write!(f, ": {}", self.kind)
    }
}

/// The problem itself.
#[derive(Debug, Error)]
pub enum LoadErrorKind {
    #[error("cannot read: {0}")]
    Io(#[source] std::io::Error),
    /// Malformed YAML or JSON; the message gives the line and column in the file.
    #[error("invalid {format}: {message}")]
    Syntax { format: &'static str, message: String },
    #[error("expected a Kubernetes object (a mapping with apiVersion and kind), found {0}")]
    NotAnObject(&'static str),
    #[error("missing \"apiVersion\"")]
    MissingApiVersion,
    #[error("missing \"kind\"")]
    MissingKind,
    /// A kind this loader reads, under an API version it does not (removed or pre-v1 versions).
    #[error("apiVersion {api_version:?} is not supported for {kind}; use {expected}")]
    UnsupportedVersion { kind: String, api_version: String, expected: &'static str },
    /// The document does not fit the object's schema: `<field path>: <what>`, e.g.
    /// `spec.replicas: invalid type: string "three", expected i32`.
    #[error("{0}")]
    Schema(String),
    /// The object fits the schema but a value is wrong (a quantity, an operator, …).
    #[error(transparent)]
    Convert(#[from] ConvertError),
    /// Two documents define the same object.
    #[error("defined twice (first in {0})")]
    Duplicate(String),
    #[error("{0}")]
    Invalid(String),
    /// Over one of the supported ceilings (file size, objects per file, pods per plan).
    #[error(transparent)]
    OverCeiling(#[from] OverCeiling),
}
