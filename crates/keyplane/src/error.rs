//! The one error type of the library.

/// Everything that can go wrong in keyplane. Messages say what was wrong and
/// what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `value_bits` outside the range a structure supports.
    #[error("value_bits must be between {min} and {max}, got {got}")]
    InvalidValueBits {
        /// What was asked for.
        got: u32,
        /// Smallest supported width.
        min: u32,
        /// Largest supported width.
        max: u32,
    },
    /// A value that does not fit the table's value width. Values are never truncated.
    #[error("value {value:#x} does not fit in {bits} value bits; widen value_bits or mask the value")]
    ValueTooWide {
        /// The offending value.
        value: u64,
        /// The table's value width.
        bits: u32,
    },
    /// A parameter (option, size, configuration) is out of range.
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// Input bytes ended before the encoded object did.
    #[error("truncated input: needed {needed} more bytes at offset {offset}, only {available} left")]
    Truncated {
        /// Offset at which the read was attempted.
        offset: usize,
        /// Bytes the read needed.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// The bytes do not start with the keyplane magic.
    #[error("not a keyplane blob or delta (bad magic bytes)")]
    BadMagic,
    /// The encoding is from a format version this build does not read.
    #[error("unsupported format version {found}; this build reads version {supported}")]
    UnsupportedVersion {
        /// Version in the input.
        found: u16,
        /// Version this build reads.
        supported: u16,
    },
    /// The bytes encode a different structure or object than the one asked for.
    #[error("wrong kind of object: expected {expected}, found {found}")]
    KindMismatch {
        /// What the caller asked to decode.
        expected: String,
        /// What the header says it is.
        found: String,
    },
    /// The checksum over the bytes does not match: the input is corrupted.
    #[error("checksum mismatch (stored {stored:#018x}, computed {computed:#018x}): the input is corrupted")]
    ChecksumMismatch {
        /// Checksum stored in the input.
        stored: u64,
        /// Checksum of the bytes actually received.
        computed: u64,
    },
    /// The bytes pass the checksum but describe an impossible object.
    #[error("corrupt encoding: {0}")]
    Corrupt(String),
    /// A delta that does not belong to this lookup form (other skeleton,
    /// other generation, out-of-range index).
    #[error("delta does not fit this table: {0}")]
    DeltaMismatch(String),
    /// Construction could not finish (for example too many re-seeds).
    #[error("construction failed: {0}")]
    BuildFailed(String),
    /// The structure cannot hold more keys with its current parameters.
    #[error("capacity exceeded: {0}")]
    CapacityExceeded(String),
    /// The operation is not supported by this structure.
    #[error("unsupported operation: {0}")]
    Unsupported(String),
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Checks a value against a width, the way every `insert` must.
#[inline]
pub fn check_value(value: u64, bits: u32) -> Result<()> {
    if bits < 64 && value >> bits != 0 { Err(Error::ValueTooWide { value, bits }) } else { Ok(()) }
}

/// Checks `value_bits` against a supported range.
pub(crate) fn check_value_bits(got: u32, min: u32, max: u32) -> Result<()> {
    if got < min || got > max { Err(Error::InvalidValueBits { got, min, max }) } else { Ok(()) }
}

/// Mask of the low `bits` bits (`bits` in 0..=64).
#[inline]
pub const fn mask(bits: u32) -> u64 {
    if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 }
}
