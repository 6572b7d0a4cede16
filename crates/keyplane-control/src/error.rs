//! The crate's error type.

/// Everything that can go wrong in the service, the store or a subscriber.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// A file or socket operation failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The embedded store failed (disk full, damaged file, permissions).
    #[error(
        "store error: {0} (check the --store directory: free space, permissions, no second `keyplane serve` on it)"
    )]
    Store(String),
    /// The etcd store failed.
    #[error("etcd error: {0} (check that the --etcd endpoints are reachable)")]
    Etcd(String),
    /// A table operation was refused by the library.
    #[error("table error: {0}")]
    Table(#[from] keyplane::Error),
    /// A bad command-line or file configuration.
    #[error("configuration error: {0}")]
    Config(String),
    /// The topology file does not parse or is inconsistent.
    #[error("topology error: {0}")]
    Topology(String),
    /// Connecting to the service failed.
    #[error("cannot connect to {url}: {msg} (is `keyplane serve` running there?)")]
    Connect {
        /// The URL tried.
        url: String,
        /// What failed.
        msg: String,
    },
    /// The service answered with an error status.
    #[error("{}: {}", code_name(.0.code()), .0.message())]
    Status(#[from] tonic::Status),
    /// A subscription broke the ordering rules (the subscriber resyncs).
    #[error("subscription out of order: {0}")]
    Order(String),
}

fn code_name(c: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match c {
        C::InvalidArgument => "invalid argument",
        C::NotFound => "not found",
        C::AlreadyExists => "already exists",
        C::FailedPrecondition => "failed precondition",
        C::Unavailable => "unavailable",
        C::Internal => "internal error",
        C::Aborted => "aborted",
        _ => "error",
    }
}

/// Result alias of this crate.
pub type Result<T, E = ControlError> = std::result::Result<T, E>;
