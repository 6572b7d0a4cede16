//! The crate's error type.

use thiserror::Error;

/// Everything `keyplane switch` can refuse or fail at.
#[derive(Debug, Error)]
pub enum SwitchError {
    /// A command-line or configuration value is wrong.
    #[error("{0}")]
    Config(String),
    /// A FIB blob or delta is not usable (bad bytes, wrong kind, wrong table).
    #[error("{what}: {source}")]
    Table {
        /// Which blob or delta.
        what: String,
        /// The library's reason.
        #[source]
        source: keyplane::Error,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A line of a text input file (next hops, static entries) does not parse.
    #[error("{path}:{line}: {msg}")]
    Input {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong and what was expected.
        msg: String,
    },
    /// Packet I/O failed (opening a port, a socket call).
    #[error("port {port}: {msg}")]
    Port {
        /// Interface name.
        port: String,
        /// What failed.
        msg: String,
    },
}

impl SwitchError {
    /// A configuration error.
    pub fn config(m: impl Into<String>) -> Self {
        Self::Config(m.into())
    }
    /// A table error about `what`.
    pub fn table(what: impl Into<String>, source: keyplane::Error) -> Self {
        Self::Table { what: what.into(), source }
    }
    /// An I/O error on `path`.
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}

/// Result with [`SwitchError`].
pub type Result<T> = std::result::Result<T, SwitchError>;
