//! The crate's one error type.

/// Everything that can go wrong in the load balancer. Messages are one line
/// and say what was wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration file is invalid (the running LB keeps its old one).
    #[error("config: {0}")]
    Config(String),
    /// A system call or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The lookup engine refused an operation.
    #[error("lookup engine: {0}")]
    Engine(#[from] keyplane::Error),
    /// The LB cannot start on this port (no address, no such interface...).
    #[error("setup: {0}")]
    Setup(String),
}

impl Error {
    /// An I/O error with its context.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { what: what.into(), source }
    }
    /// The last OS error with its context.
    pub fn last_os(what: impl Into<String>) -> Self {
        Error::io(what, std::io::Error::last_os_error())
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
