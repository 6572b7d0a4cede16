//! Classic pcap files (the libpcap format, link type Ethernet): a reader, a writer, and
//! [`PcapPort`], a [`Port`] that receives from one file and transmits into another.
//!
//! Both byte orders and both timestamp resolutions (micro-, nanoseconds) are read; files are
//! written little-endian with microsecond timestamps. Records longer than the snap length in the
//! header or than 256 KiB are refused with [`Error::BadPcap`], never trusted.

use crate::port::{FRAME_CAPACITY, IoKind, Port, PortStats};
use crate::{Error, Result};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Link type of Ethernet frames (LINKTYPE_ETHERNET).
pub const LINKTYPE_ETHERNET: u32 = 1;
const MAX_RECORD: u32 = 256 * 1024;

/// One record read from a pcap file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// Capture time since the Unix epoch.
    pub timestamp: Duration,
    /// Length of the frame on the wire (≥ `data.len()` when the capture was truncated).
    pub orig_len: u32,
    /// The captured bytes.
    pub data: &'a [u8],
}

/// Reads the records of a classic pcap file one at a time into an internal buffer.
pub struct PcapReader<R: Read = BufReader<File>> {
    input: R,
    path: String,
    swapped: bool,
    nanos: bool,
    snaplen: u32,
    buf: Vec<u8>,
}

impl PcapReader {
    /// Open `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let p = path.as_ref();
        let f = File::open(p).map_err(|e| Error::Io { path: p.display().to_string(), source: e })?;
        Self::new(BufReader::new(f), p.display().to_string())
    }
}

impl<R: Read> PcapReader<R> {
    /// Read the global header from `input`; `name` names the input in errors.
    pub fn new(mut input: R, name: impl Into<String>) -> Result<Self> {
        let path = name.into();
        let mut h = [0u8; 24];
        read_exact_or(&mut input, &mut h, &path, "file shorter than the 24-byte pcap header")?;
        let m = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let (swapped, nanos) = match m {
            MAGIC_US => (false, false),
            MAGIC_NS => (false, true),
            _ if m.swap_bytes() == MAGIC_US => (true, false),
            _ if m.swap_bytes() == MAGIC_NS => (true, true),
            _ => {
                return Err(Error::BadPcap {
                    path,
                    reason: format!("bad magic {m:#010x} (pcapng is not read: convert with `editcap -F pcap`)"),
                });
            }
        };
        let rd = |o: usize| {
            let v = u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
            if swapped { v.swap_bytes() } else { v }
        };
        let snaplen = rd(16);
        let linktype = rd(20) & 0x0fff_ffff;
        if linktype != LINKTYPE_ETHERNET {
            return Err(Error::BadPcap { path, reason: format!("link type {linktype}, only Ethernet (1) is read") });
        }
        Ok(PcapReader { input, path, swapped, nanos, snaplen, buf: Vec::new() })
    }

    /// The snap length from the file header.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The next record, or `None` at the end of the file.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>> {
        let mut h = [0u8; 16];
        // End of file exactly at a record boundary is the normal end.
        let mut got = 0;
        while got < 16 {
            match self.input.read(&mut h[got..]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => {
                    return Err(Error::BadPcap { path: self.path.clone(), reason: "truncated record header".into() });
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Io { path: self.path.clone(), source: e }),
            }
        }
        let rd = |o: usize| {
            let v = u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
            if self.swapped { v.swap_bytes() } else { v }
        };
        let (sec, frac, incl, orig) = (rd(0), rd(4), rd(8), rd(12));
        let limit = MAX_RECORD;
        if incl > limit {
            return Err(Error::BadPcap {
                path: self.path.clone(),
                reason: format!("record of {incl} captured bytes exceeds the limit of {limit}"),
            });
        }
        self.buf.resize(incl as usize, 0);
        read_exact_or(&mut self.input, &mut self.buf, &self.path, "truncated record data")?;
        let nanos = if self.nanos { frac.min(999_999_999) } else { frac.min(999_999) * 1000 };
        Ok(Some(Record { timestamp: Duration::new(sec as u64, nanos), orig_len: orig.max(incl), data: &self.buf }))
    }
}

fn read_exact_or(r: &mut impl Read, buf: &mut [u8], path: &str, why: &str) -> Result<()> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::BadPcap { path: path.to_string(), reason: why.to_string() }
        } else {
            Error::Io { path: path.to_string(), source: e }
        }
    })
}

/// Writes a classic pcap file (little-endian, microseconds, link type Ethernet).
pub struct PcapWriter<W: Write = BufWriter<File>> {
    out: W,
    path: String,
    snaplen: u32,
    deterministic: bool,
    written: u64,
}

impl PcapWriter {
    /// Create (truncate) `path`. Records are time-stamped with the wall clock.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let p = path.as_ref();
        let f = File::create(p).map_err(|e| Error::Io { path: p.display().to_string(), source: e })?;
        Self::new(BufWriter::new(f), p.display().to_string())
    }
}

impl<W: Write> PcapWriter<W> {
    /// Write the global header to `out` (snap length 65535); `name` names it in errors.
    pub fn new(mut out: W, name: impl Into<String>) -> Result<Self> {
        let path = name.into();
        let snaplen = 65535u32;
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&MAGIC_US.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&snaplen.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h).map_err(|e| Error::Io { path: path.clone(), source: e })?;
        Ok(PcapWriter { out, path, snaplen, deterministic: false, written: 0 })
    }

    /// Time-stamp record *n* with *n* microseconds instead of the wall clock, so the same frames
    /// always give the same file (for golden-file tests).
    pub fn deterministic(mut self, yes: bool) -> Self {
        self.deterministic = yes;
        self
    }

    /// Append `frame` (cut to the snap length) with the clock chosen above.
    pub fn write(&mut self, frame: &[u8]) -> Result<()> {
        let ts = if self.deterministic {
            Duration::from_micros(self.written)
        } else {
            SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
        };
        self.write_at(frame, ts)
    }

    /// Append `frame` with timestamp `ts`.
    pub fn write_at(&mut self, frame: &[u8], ts: Duration) -> Result<()> {
        let incl = frame.len().min(self.snaplen as usize);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&(ts.as_secs() as u32).to_le_bytes());
        h[4..8].copy_from_slice(&ts.subsec_micros().to_le_bytes());
        h[8..12].copy_from_slice(&(incl as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        let r = self.out.write_all(&h).and_then(|_| self.out.write_all(&frame[..incl]));
        r.map_err(|e| Error::Io { path: self.path.clone(), source: e })?;
        self.written += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Flush buffered records to the file.
    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| Error::Io { path: self.path.clone(), source: e })
    }

    /// Flush and return the underlying writer.
    pub fn into_inner(mut self) -> Result<W> {
        self.flush()?;
        Ok(self.out)
    }
}

/// Every frame of the pcap file at `path`, in order.
pub fn read_frames(path: impl AsRef<Path>) -> Result<Vec<Vec<u8>>> {
    let mut r = PcapReader::open(path)?;
    let mut v = Vec::new();
    while let Some(rec) = r.next_record()? {
        v.push(rec.data.to_vec());
    }
    Ok(v)
}

/// Write `frames` to a new pcap file at `path` with deterministic timestamps.
pub fn write_frames<F: AsRef<[u8]>>(path: impl AsRef<Path>, frames: &[F]) -> Result<()> {
    let mut w = PcapWriter::create(path)?.deterministic(true);
    for f in frames {
        w.write(f.as_ref())?;
    }
    w.flush()
}

/// A [`Port`] over pcap files: RX replays a capture, TX appends to another (deterministic
/// timestamps, flushed on [`tx_flush`](Port::tx_flush)). Either side may be absent: RX then
/// delivers nothing, TX returns [`Error::InvalidParameter`].
pub struct PcapPort {
    name: String,
    reader: Option<PcapReader>,
    writer: Option<PcapWriter>,
    frame: Vec<u8>,
    pending: u64,
    stats: PortStats,
}

impl PcapPort {
    /// Replay `input` (if any), record into `output` (if any).
    pub fn new(input: Option<&Path>, output: Option<&Path>) -> Result<Self> {
        let reader = input.map(PcapReader::open).transpose()?;
        let writer = output.map(|p| PcapWriter::create(p).map(|w| w.deterministic(true))).transpose()?;
        let name = format!(
            "pcap:{}:{}",
            input.map(|p| p.display().to_string()).unwrap_or_default(),
            output.map(|p| p.display().to_string()).unwrap_or_default()
        );
        Ok(PcapPort {
            name,
            reader,
            writer,
            frame: Vec::with_capacity(FRAME_CAPACITY),
            pending: 0,
            stats: PortStats::default(),
        })
    }

    /// From the `IN:OUT` part of a `pcap:IN:OUT` port name.
    pub fn from_spec(spec: &str) -> Result<Self> {
        let mut it = spec.splitn(2, ':');
        let input = it.next().filter(|s| !s.is_empty()).map(PathBuf::from);
        let output = it.next().filter(|s| !s.is_empty()).map(PathBuf::from);
        if input.is_none() && output.is_none() {
            return Err(Error::InvalidParameter("pcap port needs an input or an output file: pcap:IN:OUT".into()));
        }
        Self::new(input.as_deref(), output.as_deref())
    }
}

impl Port for PcapPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> IoKind {
        IoKind::Pcap
    }
    fn rx_burst_with(&mut self, max: usize, f: &mut dyn FnMut(&mut [u8])) -> Result<usize> {
        let Some(r) = self.reader.as_mut() else { return Ok(0) };
        let mut n = 0;
        while n < max {
            let Some(rec) = r.next_record()? else {
                self.reader = None;
                break;
            };
            self.frame.clear();
            self.frame.extend_from_slice(rec.data);
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += self.frame.len() as u64;
            f(&mut self.frame);
            n += 1;
        }
        Ok(n)
    }
    fn tx_stage(&mut self, frame: &[u8]) -> Result<bool> {
        let Some(w) = self.writer.as_mut() else {
            return Err(Error::InvalidParameter(format!("{}: no output file to transmit into", self.name)));
        };
        if frame.len() > FRAME_CAPACITY {
            self.stats.tx_dropped += 1;
            return Ok(false);
        }
        w.write(frame)?;
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += frame.len() as u64;
        self.pending += 1;
        Ok(true)
    }
    fn tx_flush(&mut self) -> Result<usize> {
        if let Some(w) = self.writer.as_mut() {
            w.flush()?;
        }
        Ok(std::mem::take(&mut self.pending) as usize)
    }
    fn wait_rx(&mut self, _timeout: Duration) -> Result<bool> {
        Ok(self.reader.is_some())
    }
    fn stats(&self) -> PortStats {
        self.stats
    }
}

impl Drop for PcapPort {
    fn drop(&mut self) {
        if let Some(w) = self.writer.as_mut() {
            let _ = w.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<Vec<u8>> {
        (0..100u32).map(|i| (0..(14 + (i as usize * 37) % 1500)).map(|j| (j as u32 ^ i) as u8).collect()).collect()
    }

    #[test]
    fn write_read_round_trip() {
        let dir = std::env::temp_dir().join(format!("kpnet-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.pcap");
        let fs = frames();
        write_frames(&p, &fs).unwrap();
        assert_eq!(read_frames(&p).unwrap(), fs);
        // Through the port interface: replay a.pcap into b.pcap.
        let q = dir.join("b.pcap");
        let mut port = PcapPort::new(Some(&p), Some(&q)).unwrap();
        let mut seen = Vec::new();
        loop {
            let mut got = Vec::new();
            let n = port.rx_burst_with(crate::BURST, &mut |f: &mut [u8]| got.push(f.to_vec())).unwrap();
            for f in &got {
                assert!(port.tx_stage(f).unwrap());
            }
            port.tx_flush().unwrap();
            seen.extend(got);
            if n == 0 {
                break;
            }
        }
        assert!(!port.wait_rx(Duration::ZERO).unwrap());
        assert_eq!(port.stats().rx_frames, 100);
        assert_eq!(port.stats().tx_frames, 100);
        drop(port);
        assert_eq!(seen, fs);
        assert_eq!(read_frames(&q).unwrap(), fs);
        // Deterministic: the same frames give the same bytes.
        assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(&q).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn big_endian_and_nanosecond_files_read() {
        let mut f = Vec::new();
        f.extend_from_slice(&MAGIC_NS.to_be_bytes());
        f.extend_from_slice(&[0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 1]);
        f.extend_from_slice(&[0, 0, 0, 5, 0, 0, 0, 7, 0, 0, 0, 3, 0, 0, 0, 60, 9, 8, 7]);
        let mut r = PcapReader::new(&f[..], "mem").unwrap();
        let rec = r.next_record().unwrap().unwrap();
        assert_eq!(rec.timestamp, Duration::new(5, 7));
        assert_eq!(rec.orig_len, 60);
        assert_eq!(rec.data, &[9, 8, 7]);
        assert!(r.next_record().unwrap().is_none());
    }

    #[test]
    fn bad_files_are_errors() {
        assert!(matches!(PcapReader::new(&b"abc"[..], "m"), Err(Error::BadPcap { .. })));
        assert!(matches!(PcapReader::new(&[0u8; 24][..], "m"), Err(Error::BadPcap { .. })));
        let mut w = PcapWriter::new(Vec::new(), "m").unwrap().deterministic(true);
        w.write(&[1, 2, 3, 4]).unwrap();
        let bytes = w.into_inner().unwrap();
        for cut in 0..bytes.len() {
            // Every truncation is an error or a clean end, never a panic or a wrong frame.
            if let Ok(mut r) = PcapReader::new(&bytes[..cut], "m") {
                match r.next_record() {
                    Ok(None) => assert_eq!(cut, 24),
                    Ok(Some(_)) => panic!("truncated file gave a record"),
                    Err(e) => assert!(matches!(e, Error::BadPcap { .. })),
                }
            }
        }
        // An absurd record length is refused, not allocated.
        let mut huge = bytes.clone();
        huge[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut r = PcapReader::new(&huge[..], "m").unwrap();
        assert!(matches!(r.next_record(), Err(Error::BadPcap { .. })));
    }
}
