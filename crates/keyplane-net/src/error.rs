//! The one error type of keyplane-net.

use crate::parse::ParseError;

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in keyplane-net. Messages say what was wrong and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call failed.
    #[error("{what} failed: {source} (are you root, and does the interface exist?)")]
    Sys {
        /// The call and its target, e.g. `bind(AF_PACKET, veth0)`.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
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
    /// No network interface of that name (in the current network namespace).
    #[error("no network interface named {0:?} in this network namespace (check `ip link`)")]
    NoSuchInterface(String),
    /// The back end cannot be used here (kernel, driver or permissions).
    #[error("{kind} is not available on {ifname}: {reason}")]
    Unsupported {
        /// The back end.
        kind: &'static str,
        /// The interface.
        ifname: String,
        /// Why.
        reason: String,
    },
    /// A pcap file is not in the classic pcap format this crate reads.
    #[error("{path}: not a readable pcap file: {reason}")]
    BadPcap {
        /// The file.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// A frame could not be parsed (malformed or truncated).
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// An output buffer is too small for the frame being built.
    #[error("output buffer of {have} bytes is too small: {need} bytes needed")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        have: usize,
    },
    /// A parameter (option, size, address, name) is out of range.
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// An external command (`ip`, ...) failed.
    #[error("command `{cmd}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// Exit status.
        status: String,
        /// Its standard error, trimmed.
        stderr: String,
    },
    /// A worker thread panicked.
    #[error("worker thread {0} panicked; see its message above")]
    WorkerPanicked(usize),
}

impl Error {
    /// An [`Error::Sys`] from `errno` for the call described by `what`.
    pub(crate) fn last_os(what: impl Into<String>) -> Self {
        Error::Sys { what: what.into(), source: std::io::Error::last_os_error() }
    }
}
