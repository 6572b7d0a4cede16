//! Blob and delta encoding: framing, versions, checksums, bounds-checked reads.
//!
//! Every object that crosses a process boundary (a lookup form, a delta or a
//! control-form snapshot, see [`crate::snapshot`]) is
//! framed the same way, little-endian throughout:
//!
//! ```text
//! offset  size  field
//! 0       4     magic  b"KPLN"
//! 4       2     format version (currently 2; 2 added the lineage prologue, see [`crate::lineage`])
//! 6       2     kind code (see [`Kind`]): which structure, blob or delta
//! 8       8     payload length in bytes
//! 16      len   payload (structure-specific: parameters, seeds, arrays)
//! 16+len  8     XXH3-64 checksum of bytes 0..16+len
//! ```
//!
//! [`Frame::open`] checks magic, version, kind, length and checksum before a
//! structure sees a single payload byte; [`Reader`] then hands out
//! bounds-checked reads that fail with [`Error::Truncated`] instead of
//! panicking, and [`Reader::count`] refuses element counts that the remaining
//! bytes cannot possibly hold, so a corrupted length never triggers a huge
//! allocation.

use crate::error::{Error, Result};

/// Magic bytes at the start of every keyplane blob and delta.
pub const MAGIC: [u8; 4] = *b"KPLN";
/// Format version written by this build.
pub(crate) const FORMAT_VERSION: u16 = 2;
/// Size of the frame header.
pub const HEADER_LEN: usize = 16;
/// Size of the trailing checksum.
pub const TRAILER_LEN: usize = 8;

/// Anything that crosses a process boundary: lookup forms and deltas.
pub trait Wire: Sized {
    /// The frame kind of this type (declared by its structure's module).
    const KIND: Kind;
    /// Encodes `self` into a framed, checksummed byte string.
    fn to_bytes(&self) -> Vec<u8>;
    /// Decodes and validates. Never panics: bad bytes give a typed error.
    fn from_bytes(bytes: &[u8]) -> Result<Self>;
}

/// What a framed byte string holds: a stable 16-bit code and a
/// human-readable label (`"othello lookup"`).
///
/// Kinds are owned by the structures: each declares its own in its module
/// (`LOOKUP_KIND`, `DELTA_KIND`, `CONTROL_KIND`, e.g. `othello/mod.rs`) and
/// names them through [`Wire::KIND`] and
/// [`Snapshot::SNAPSHOT_KIND`](crate::Snapshot::SNAPSHOT_KIND); this module
/// keeps no list. A code is `structure << 8 | role`, role 1 for a lookup
/// blob, 2 for a delta, 3 for a control snapshot. [`Frame::open`] checks
/// the code the caller expects; identifying an unknown frame is the front
/// ends' job (`keyplane_any::identify`, one registry line per structure).
/// Two kinds are equal when their codes are.
#[derive(Clone, Copy)]
pub struct Kind {
    code: u16,
    label: &'static str,
}

impl Kind {
    /// A kind with its code and label.
    pub const fn new(code: u16, label: &'static str) -> Kind {
        Kind { code, label }
    }
    /// The code written in the frame header.
    pub const fn code(self) -> u16 {
        self.code
    }
    /// Human-readable name, e.g. `"othello lookup"`; for a frame read by
    /// [`Frame::inspect`], only its role (`"delta"`) until a front end
    /// identifies the code.
    pub const fn label(self) -> &'static str {
        self.label
    }
    /// The role byte: 1 lookup blob, 2 delta, 3 control snapshot.
    pub(crate) const fn role(self) -> u8 {
        self.code as u8
    }
    /// A kind read from a frame header, labelled by its role only.
    pub(crate) const fn unidentified(code: u16) -> Kind {
        let label = match code as u8 {
            1 => "lookup blob",
            2 => "delta",
            3 => "control snapshot",
            _ => "object",
        };
        Kind { code, label }
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
    }
}
impl Eq for Kind {}
impl std::hash::Hash for Kind {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.code.hash(h)
    }
}
impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kind({:#06x} {:?})", self.code, self.label)
    }
}

/// Builds a framed object: write the payload, then [`Writer::finish`].
#[derive(Debug)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// Starts an object of `kind`.
    pub fn new(kind: Kind) -> Self {
        Self::with_capacity(kind, 64)
    }

    /// Starts an object of `kind` with room for `payload` bytes.
    pub(crate) fn with_capacity(kind: Kind, payload: usize) -> Self {
        let mut buf = Vec::with_capacity(HEADER_LEN + payload + TRAILER_LEN);
        buf.extend_from_slice(&MAGIC);
        buf.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        buf.extend_from_slice(&kind.code.to_le_bytes());
        buf.extend_from_slice(&0u64.to_le_bytes());
        Self { buf }
    }

    /// Appends one byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    /// Appends a little-endian u16.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends a little-endian u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends a little-endian u64.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends raw bytes (no length prefix).
    pub fn raw(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }
    /// Appends a u32 length prefix and the bytes.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(v.len() as u32).raw(v)
    }
    /// Appends a u64 count and the words.
    pub fn u64s(&mut self, v: &[u64]) -> &mut Self {
        self.u64(v.len() as u64);
        self.buf.reserve(v.len() * 8);
        for w in v {
            self.buf.extend_from_slice(&w.to_le_bytes());
        }
        self
    }
    /// Appends a u64 count and the u32s.
    pub(crate) fn u32s(&mut self, v: &[u32]) -> &mut Self {
        self.u64(v.len() as u64);
        self.buf.reserve(v.len() * 4);
        for w in v {
            self.buf.extend_from_slice(&w.to_le_bytes());
        }
        self
    }
    /// Appends a variable-length unsigned integer (LEB128), for compact deltas.
    pub fn varint(&mut self, mut v: u64) -> &mut Self {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(b);
                return self;
            }
            self.buf.push(b | 0x80);
        }
    }
    /// Fills in the length, appends the checksum and returns the bytes.
    pub fn finish(mut self) -> Vec<u8> {
        let len = (self.buf.len() - HEADER_LEN) as u64;
        self.buf[8..16].copy_from_slice(&len.to_le_bytes());
        let sum = checksum(&self.buf);
        self.buf.extend_from_slice(&sum.to_le_bytes());
        self.buf
    }
}

/// Checksum used by the frame (XXH3-64, seed 0).
pub fn checksum(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// A validated frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameInfo {
    /// Format version.
    pub version: u16,
    /// Object kind (labelled by its role; see [`Kind`]).
    pub kind: Kind,
    /// Payload length.
    pub payload_len: usize,
    /// Stored checksum.
    pub checksum: u64,
}

/// Frame validation.
pub struct Frame;

impl Frame {
    /// Reads and validates the header and checksum without checking the kind.
    pub fn inspect(bytes: &[u8]) -> Result<FrameInfo> {
        if bytes.len() < 4 {
            return Err(Error::Truncated { offset: 0, needed: HEADER_LEN, available: bytes.len() });
        }
        if bytes[0..4] != MAGIC {
            return Err(Error::BadMagic);
        }
        if bytes.len() < HEADER_LEN {
            return Err(Error::Truncated { offset: 0, needed: HEADER_LEN, available: bytes.len() });
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != FORMAT_VERSION {
            return Err(Error::UnsupportedVersion { found: version, supported: FORMAT_VERSION });
        }
        let code = u16::from_le_bytes([bytes[6], bytes[7]]);
        let mut lenb = [0u8; 8];
        lenb.copy_from_slice(&bytes[8..16]);
        let len = u64::from_le_bytes(lenb);
        let avail = (bytes.len() - HEADER_LEN) as u64;
        if len.checked_add(TRAILER_LEN as u64).is_none_or(|need| need > avail) {
            return Err(Error::Truncated {
                offset: HEADER_LEN,
                needed: usize::try_from(len.saturating_add(TRAILER_LEN as u64)).unwrap_or(usize::MAX),
                available: avail as usize,
            });
        }
        let len = len as usize;
        let end = HEADER_LEN + len;
        if bytes.len() != end + TRAILER_LEN {
            return Err(Error::Corrupt(format!(
                "{} trailing bytes after the checksum",
                bytes.len() - end - TRAILER_LEN
            )));
        }
        let mut sb = [0u8; 8];
        sb.copy_from_slice(&bytes[end..end + 8]);
        let stored = u64::from_le_bytes(sb);
        let computed = checksum(&bytes[..end]);
        if stored != computed {
            return Err(Error::ChecksumMismatch { stored, computed });
        }
        Ok(FrameInfo { version, kind: Kind::unidentified(code), payload_len: len, checksum: stored })
    }

    /// Validates the frame and that it holds `kind`; returns a reader over the payload.
    pub fn open(bytes: &[u8], kind: Kind) -> Result<Reader<'_>> {
        let info = Self::inspect(bytes)?;
        if info.kind != kind {
            return Err(Error::KindMismatch {
                expected: kind.label().to_string(),
                found: format!("{} of kind {:#06x}", info.kind.label(), info.kind.code),
            });
        }
        Ok(Reader { buf: &bytes[HEADER_LEN..HEADER_LEN + info.payload_len], pos: 0, base: HEADER_LEN })
    }
}

/// Bounds-checked reads over a payload. Every method returns an error instead
/// of panicking.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Reader<'a> {
    /// A reader over raw bytes (no frame), for nested encodings.
    pub fn over(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0, base: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let avail = self.buf.len() - self.pos;
        if n > avail {
            return Err(Error::Truncated { offset: self.base + self.pos, needed: n, available: avail });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    /// Reads a little-endian u16.
    pub fn u16(&mut self) -> Result<u16> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64> {
        let s = self.take(8)?;
        let mut b = [0u8; 8];
        b.copy_from_slice(s);
        Ok(u64::from_le_bytes(b))
    }
    /// Reads `n` raw bytes.
    pub fn raw(&mut self, n: usize) -> Result<&'a [u8]> {
        self.take(n)
    }
    /// Reads a u32-length-prefixed byte string.
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// Reads an element count (u64) and checks that `count * elem_size`
    /// bytes can still follow, so a corrupted count cannot cause a huge
    /// allocation.
    pub fn count(&mut self, elem_size: usize) -> Result<usize> {
        let at = self.base + self.pos;
        let n = self.u64()?;
        self.check_count(n, elem_size, at)
    }
    /// Like [`Reader::count`] for a varint count.
    pub(crate) fn varint_count(&mut self, min_elem_size: usize) -> Result<usize> {
        let at = self.base + self.pos;
        let n = self.varint()?;
        self.check_count(n, min_elem_size, at)
    }
    fn check_count(&self, n: u64, elem_size: usize, at: usize) -> Result<usize> {
        let need = n.checked_mul(elem_size.max(1) as u64);
        match need {
            Some(need) if need <= self.remaining() as u64 => Ok(n as usize),
            _ => Err(Error::Corrupt(format!(
                "element count {n} at offset {at} exceeds the {} bytes that follow",
                self.remaining()
            ))),
        }
    }
    /// Reads a u64-count-prefixed vector of u64.
    pub(crate) fn u64s(&mut self) -> Result<Vec<u64>> {
        let n = self.count(8)?;
        let s = self.take(n * 8)?;
        Ok(s.chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                u64::from_le_bytes(b)
            })
            .collect())
    }
    /// Reads a u64-count-prefixed vector of u32.
    pub(crate) fn u32s(&mut self) -> Result<Vec<u32>> {
        let n = self.count(4)?;
        let s = self.take(n * 4)?;
        Ok(s.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
    /// Reads a LEB128 varint (at most 10 bytes).
    pub(crate) fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8()?;
            let part = (b & 0x7f) as u64;
            if i == 9 && part > 1 {
                return Err(Error::Corrupt("varint overflows 64 bits".into()));
            }
            v |= part << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Error::Corrupt("varint longer than 10 bytes".into()))
    }
    /// Fails unless every payload byte was consumed.
    pub fn finish(self) -> Result<()> {
        if self.pos != self.buf.len() {
            return Err(Error::Corrupt(format!(
                "{} unread payload bytes at offset {}",
                self.buf.len() - self.pos,
                self.base + self.pos
            )));
        }
        Ok(())
    }
    /// Fails with [`Error::Corrupt`] naming `what` unless `cond` holds.
    pub(crate) fn ensure(cond: bool, what: impl FnOnce() -> String) -> Result<()> {
        if cond { Ok(()) } else { Err(Error::Corrupt(what())) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOKUP: Kind = Kind::new(0x0101, "othello lookup");
    const DELTA: Kind = Kind::new(0x0102, "othello delta");
    const OTHER: Kind = Kind::new(0x0201, "ludo lookup");

    fn sample() -> Vec<u8> {
        let mut w = Writer::new(LOOKUP);
        w.u8(1).u16(2).u32(3).u64(4).bytes(b"abc").u64s(&[5, 6]).u32s(&[7]).varint(300).varint(u64::MAX);
        w.finish()
    }

    #[test]
    fn round_trip() {
        let b = sample();
        let mut r = Frame::open(&b, LOOKUP).unwrap();
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.u16().unwrap(), 2);
        assert_eq!(r.u32().unwrap(), 3);
        assert_eq!(r.u64().unwrap(), 4);
        assert_eq!(r.bytes().unwrap(), b"abc");
        assert_eq!(r.u64s().unwrap(), vec![5, 6]);
        assert_eq!(r.u32s().unwrap(), vec![7]);
        assert_eq!(r.varint().unwrap(), 300);
        assert_eq!(r.varint().unwrap(), u64::MAX);
        r.finish().unwrap();
    }

    #[test]
    fn every_truncation_and_flip_is_an_error() {
        let b = sample();
        for n in 0..b.len() {
            assert!(Frame::open(&b[..n], LOOKUP).is_err(), "truncation at {n}");
        }
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut c = b.clone();
                c[i] ^= 1 << bit;
                assert!(Frame::open(&c, LOOKUP).is_err(), "flip at {i}:{bit}");
            }
        }
    }

    #[test]
    fn wrong_kind_is_reported() {
        let b = sample();
        match Frame::open(&b, OTHER) {
            Err(Error::KindMismatch { expected, found }) => {
                assert_eq!(expected, "ludo lookup");
                assert_eq!(found, "lookup blob of kind 0x0101");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn huge_counts_are_refused_without_allocating() {
        let mut w = Writer::new(DELTA);
        w.u64(u64::MAX / 2);
        let b = w.finish();
        let mut r = Frame::open(&b, DELTA).unwrap();
        assert!(matches!(r.u64s(), Err(Error::Corrupt(_))));
    }
}
