//! The burst interface: [`Port`], [`Burst`], [`open`].

use crate::{Error, Result};
use std::os::fd::RawFd;
use std::time::Duration;

/// Default burst size: frames received or transmitted per call.
pub const BURST: usize = 32;

/// Bytes of buffer per frame in a [`Burst`] (and the largest frame a port accepts for TX).
/// Standard Ethernet frames (1514 bytes, 1518 with an 802.1Q tag) fit; jumbo frames do not.
pub const FRAME_CAPACITY: usize = 2048;

/// Which packet-I/O back end to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IoKind {
    /// AF_XDP if it can be set up on the interface, else AF_PACKET (the reason is logged).
    #[default]
    Auto,
    /// An AF_XDP socket (copy mode on veth; zero-copy where the driver supports it).
    AfXdp,
    /// An AF_PACKET socket with a TPACKET_V3 RX ring.
    AfPacket,
    /// Pcap files (only through `open("pcap:IN:OUT", ..)` or [`crate::pcap::PcapPort`]).
    Pcap,
}

impl IoKind {
    /// The name used on command lines (`auto`, `af_xdp`, `af_packet`, `pcap`).
    pub fn as_str(self) -> &'static str {
        match self {
            IoKind::Auto => "auto",
            IoKind::AfXdp => "af_xdp",
            IoKind::AfPacket => "af_packet",
            IoKind::Pcap => "pcap",
        }
    }
}

impl std::fmt::Display for IoKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for IoKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "auto" => Ok(IoKind::Auto),
            "af_xdp" | "xdp" | "afxdp" => Ok(IoKind::AfXdp),
            "af_packet" | "packet" | "afpacket" => Ok(IoKind::AfPacket),
            "pcap" => Ok(IoKind::Pcap),
            _ => Err(Error::InvalidParameter(format!("unknown I/O kind {s:?}: use auto, af_xdp, af_packet or pcap"))),
        }
    }
}

/// How the AF_XDP redirect program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Native (driver) mode if the driver accepts it, else generic (SKB) mode.
    #[default]
    Auto,
    /// Native (driver) mode only (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// Generic mode (`XDP_FLAGS_SKB_MODE`): works on every interface, slower.
    Skb,
}

/// Copy or zero-copy AF_XDP binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpCopy {
    /// Zero-copy if the driver supports it, else copy mode.
    #[default]
    Auto,
    /// Copy mode only (`XDP_COPY`): what veth offers.
    Copy,
    /// Zero-copy only (`XDP_ZEROCOPY`): fails where the driver cannot.
    ZeroCopy,
}

/// How an AF_PACKET fanout group spreads frames over its sockets (`PACKET_FANOUT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FanoutMode {
    /// By flow hash (`PACKET_FANOUT_HASH`): a flow always reaches the same socket.
    #[default]
    Hash,
    /// By the NIC receive queue (`PACKET_FANOUT_QM`): socket *i* of the group gets queue *i*
    /// (modulo the group size), which keeps RSS's spreading and one worker per queue.
    Queue,
    /// By the CPU that received the frame (`PACKET_FANOUT_CPU`).
    Cpu,
}

/// Options for [`open`]. Build with `PortOptions { field: x, ..Default::default() }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortOptions {
    /// RX ring size in frames (AF_PACKET: frames per ring; AF_XDP: RX / fill ring entries). Power of two.
    pub ring_frames: u32,
    /// TX ring size in frames (AF_XDP TX / completion ring; AF_PACKET: staged frames per flush). Power of two.
    pub tx_frames: u32,
    /// Put the interface in promiscuous mode (needed by a switch; an LB usually sets it too).
    pub promiscuous: bool,
    /// AF_PACKET: join this `PACKET_FANOUT` group (queue-mapped hashing) so several sockets on the
    /// same interface share its traffic, one per worker. `None`: no fanout.
    pub fanout_group: Option<u16>,
    /// AF_PACKET: how a fanout group spreads frames over its sockets.
    pub fanout_mode: FanoutMode,
    /// AF_PACKET: TPACKET_V3 block retire timeout in milliseconds (latency bound at low rates).
    pub block_timeout_ms: u32,
    /// AF_XDP: how to attach the redirect program.
    pub xdp_mode: XdpMode,
    /// AF_XDP: copy or zero-copy.
    pub xdp_copy: XdpCopy,
    /// AF_XDP: use `XDP_USE_NEED_WAKEUP` (fewer syscalls when the kernel is busy).
    pub need_wakeup: bool,
}

impl Default for PortOptions {
    fn default() -> Self {
        PortOptions {
            ring_frames: 4096,
            tx_frames: 2048,
            promiscuous: true,
            fanout_group: None,
            fanout_mode: FanoutMode::Hash,
            block_timeout_ms: 1,
            xdp_mode: XdpMode::Auto,
            xdp_copy: XdpCopy::Auto,
            need_wakeup: true,
        }
    }
}

impl PortOptions {
    pub(crate) fn validate(&self) -> Result<()> {
        for (name, v) in [("ring_frames", self.ring_frames), ("tx_frames", self.tx_frames)] {
            if !v.is_power_of_two() || !(64..=1 << 20).contains(&v) {
                return Err(Error::InvalidParameter(format!(
                    "{name} = {v}: must be a power of two between 64 and 1048576"
                )));
            }
        }
        Ok(())
    }
}

/// Counters of one port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames received and handed to the caller.
    pub rx_frames: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames handed to the kernel (or file) for transmission.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Frames the port refused to send: TX ring full, or longer than [`FRAME_CAPACITY`].
    pub tx_dropped: u64,
    /// Frames the kernel dropped before the port saw them (ring full), where the back end can tell.
    pub rx_kernel_drops: u64,
}

impl PortStats {
    /// Add another port's counters (for totals over queues).
    pub fn add(&mut self, o: &PortStats) {
        self.rx_frames += o.rx_frames;
        self.rx_bytes += o.rx_bytes;
        self.tx_frames += o.tx_frames;
        self.tx_bytes += o.tx_bytes;
        self.tx_dropped += o.tx_dropped;
        self.rx_kernel_drops += o.rx_kernel_drops;
    }
}

impl PortStats {
    /// Append these counters as Prometheus text (`{prefix}_rx_frames_total{port="..."} N`, ...),
    /// for a [`crate::metrics::MetricsServer`] render closure. `port` is escaped.
    ///
    /// ```
    /// let s = keyplane_net::PortStats { rx_frames: 3, ..Default::default() };
    /// let mut out = String::new();
    /// s.write_prometheus(&mut out, "kp_switch", "p1");
    /// assert!(out.contains("kp_switch_rx_frames_total{port=\"p1\"} 3\n"));
    /// ```
    pub fn write_prometheus(&self, out: &mut String, prefix: &str, port: &str) {
        use std::fmt::Write;
        let port = port.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
        for (name, v) in [
            ("rx_frames_total", self.rx_frames),
            ("rx_bytes_total", self.rx_bytes),
            ("tx_frames_total", self.tx_frames),
            ("tx_bytes_total", self.tx_bytes),
            ("tx_dropped_total", self.tx_dropped),
            ("rx_kernel_drops_total", self.rx_kernel_drops),
        ] {
            let _ = writeln!(out, "{prefix}_{name}{{port=\"{port}\"}} {v}");
        }
    }
}

impl std::fmt::Display for PortStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rx {} frames / {} bytes, tx {} frames / {} bytes, tx dropped {}, rx kernel drops {}",
            self.rx_frames, self.rx_bytes, self.tx_frames, self.tx_bytes, self.tx_dropped, self.rx_kernel_drops
        )
    }
}

/// A packet port: one queue of one interface (or a pcap file pair).
///
/// RX is zero-copy: [`rx_burst_with`](Port::rx_burst_with) lends each received frame, still in the
/// ring (TPACKET block, UMEM chunk), to a closure that may parse it and rewrite it in place and
/// stage it on another port. TX copies each frame once into the TX ring (AF_XDP UMEM chunk) or TX
/// buffer ([`tx_stage`](Port::tx_stage)) and hands the staged frames to the kernel in one call
/// ([`tx_flush`](Port::tx_flush)). Nothing allocates per packet.
///
/// [`recv`](Port::recv) / [`send_burst`](Port::send_burst) are the copying variants over a
/// caller-owned [`Burst`], convenient when frames must outlive the RX call.
pub trait Port: Send {
    /// Interface name (or the pcap spec).
    fn name(&self) -> &str;
    /// The back end actually in use (never [`IoKind::Auto`]).
    fn kind(&self) -> IoKind;
    /// Receive up to `max` frames that are ready now (never blocks), calling `f` on each. A frame
    /// is valid only during its call and may be modified in place. Returns the frames delivered.
    fn rx_burst_with(&mut self, max: usize, f: &mut dyn FnMut(&mut [u8])) -> Result<usize>;
    /// Copy one frame into the TX ring. `Ok(false)`: not queued (ring full or frame longer than
    /// [`FRAME_CAPACITY`]); it is counted in [`PortStats::tx_dropped`]. Staged frames are sent by
    /// [`tx_flush`](Port::tx_flush).
    fn tx_stage(&mut self, frame: &[u8]) -> Result<bool>;
    /// Hand every staged frame to the kernel (one system call per burst where the back end
    /// allows). Returns the number of frames handed over.
    fn tx_flush(&mut self) -> Result<usize>;
    /// Block until frames are ready to receive or `timeout` passes. `Ok(true)`: ready. A pcap
    /// reader is ready while records remain; at end of file it returns `Ok(false)` at once.
    fn wait_rx(&mut self, timeout: Duration) -> Result<bool>;
    /// Counters so far.
    fn stats(&self) -> PortStats;
    /// The socket, for callers that multiplex ports with their own `poll()`.
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }

    /// Receive up to `burst.capacity()` ready frames, copying them into `burst` (cleared first).
    fn recv(&mut self, burst: &mut Burst) -> Result<usize> {
        burst.clear();
        let cap = burst.capacity();
        self.rx_burst_with(cap, &mut |f: &mut [u8]| {
            burst.push(f);
        })
    }
    /// Like [`recv`](Port::recv), but waits up to `timeout` when nothing is ready.
    fn recv_timeout(&mut self, burst: &mut Burst, timeout: Duration) -> Result<usize> {
        let n = self.recv(burst)?;
        if n > 0 || !self.wait_rx(timeout)? {
            return Ok(n);
        }
        self.recv(burst)
    }
    /// Stage and flush `frames`. Returns how many were queued.
    fn send(&mut self, frames: &[&[u8]]) -> Result<usize> {
        let mut n = 0;
        for f in frames {
            n += self.tx_stage(f)? as usize;
        }
        self.tx_flush()?;
        Ok(n)
    }
    /// Stage and flush every frame of `burst`. Returns how many were queued.
    fn send_burst(&mut self, burst: &Burst) -> Result<usize> {
        let mut n = 0;
        for f in burst.iter() {
            n += self.tx_stage(f)? as usize;
        }
        self.tx_flush()?;
        Ok(n)
    }
}

/// A reusable, caller-owned set of up to `capacity` frame buffers of [`FRAME_CAPACITY`] bytes each,
/// allocated once. Frames are parsed and rewritten in place and sent with [`Port::send_burst`].
///
/// ```
/// use keyplane_net::Burst;
/// let mut b = Burst::new();
/// assert!(b.push(&[0u8; 60]));
/// b.frame_mut(0)[0] = 0xff;
/// assert_eq!(b.len(), 1);
/// assert_eq!(b.frame(0)[0], 0xff);
/// ```
pub struct Burst {
    buf: Box<[u8]>,
    lens: Box<[u16]>,
    count: usize,
}

impl Default for Burst {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Burst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Burst").field("len", &self.count).field("capacity", &self.capacity()).finish()
    }
}

impl Burst {
    /// A burst of [`BURST`] frames.
    pub fn new() -> Self {
        Self::with_capacity(BURST)
    }
    /// A burst of `capacity` frames (at least 1).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Burst {
            buf: vec![0u8; capacity * FRAME_CAPACITY].into_boxed_slice(),
            lens: vec![0u16; capacity].into_boxed_slice(),
            count: 0,
        }
    }
    /// Most frames this burst holds.
    pub fn capacity(&self) -> usize {
        self.lens.len()
    }
    /// Frames held.
    pub fn len(&self) -> usize {
        self.count
    }
    /// No frames held.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Forget all frames (buffers are kept).
    pub fn clear(&mut self) {
        self.count = 0;
    }
    /// Frame `i`. Panics if `i >= len()`, like slice indexing.
    pub fn frame(&self, i: usize) -> &[u8] {
        assert!(i < self.count, "frame index {i} out of range (burst holds {})", self.count);
        let o = i * FRAME_CAPACITY;
        &self.buf[o..o + self.lens[i] as usize]
    }
    /// Frame `i`, mutable. Panics if `i >= len()`.
    pub fn frame_mut(&mut self, i: usize) -> &mut [u8] {
        assert!(i < self.count, "frame index {i} out of range (burst holds {})", self.count);
        let o = i * FRAME_CAPACITY;
        &mut self.buf[o..o + self.lens[i] as usize]
    }
    /// The whole [`FRAME_CAPACITY`]-byte buffer of frame `i` (for growing a frame, e.g. pushing a
    /// VLAN tag; then call [`set_frame_len`](Burst::set_frame_len)). Panics if `i >= len()`.
    pub fn buffer_mut(&mut self, i: usize) -> &mut [u8] {
        assert!(i < self.count, "frame index {i} out of range (burst holds {})", self.count);
        let o = i * FRAME_CAPACITY;
        &mut self.buf[o..o + FRAME_CAPACITY]
    }
    /// Set the length of frame `i`. Errors if `len > FRAME_CAPACITY`; panics if `i >= len()`.
    pub fn set_frame_len(&mut self, i: usize, len: usize) -> Result<()> {
        assert!(i < self.count, "frame index {i} out of range (burst holds {})", self.count);
        if len > FRAME_CAPACITY {
            return Err(Error::BufferTooSmall { need: len, have: FRAME_CAPACITY });
        }
        self.lens[i] = len as u16;
        Ok(())
    }
    /// Append a copy of `frame`. `false` (nothing appended) if the burst is full or the frame is
    /// longer than [`FRAME_CAPACITY`].
    pub fn push(&mut self, frame: &[u8]) -> bool {
        self.push_with(|buf| {
            if frame.len() > buf.len() {
                return 0;
            }
            buf[..frame.len()].copy_from_slice(frame);
            frame.len()
        })
    }
    /// Append a frame written in place by `build`, which gets the whole [`FRAME_CAPACITY`]-byte
    /// buffer and returns the frame length (0: nothing appended). `false` if the burst is full or
    /// nothing was appended. Pairs with the builders of [`crate::build`].
    pub fn push_with(&mut self, build: impl FnOnce(&mut [u8]) -> usize) -> bool {
        if self.count == self.capacity() {
            return false;
        }
        let o = self.count * FRAME_CAPACITY;
        let n = build(&mut self.buf[o..o + FRAME_CAPACITY]).min(FRAME_CAPACITY);
        if n == 0 {
            return false;
        }
        self.lens[self.count] = n as u16;
        self.count += 1;
        true
    }
    /// Drop frame `i`, moving the last frame into its place (order is not kept). Panics if
    /// `i >= len()`.
    pub fn swap_remove(&mut self, i: usize) {
        assert!(i < self.count, "frame index {i} out of range (burst holds {})", self.count);
        let last = self.count - 1;
        if i != last {
            let (a, b) = self.buf.split_at_mut(last * FRAME_CAPACITY);
            let n = self.lens[last] as usize;
            a[i * FRAME_CAPACITY..i * FRAME_CAPACITY + n].copy_from_slice(&b[..n]);
            self.lens[i] = self.lens[last];
        }
        self.count = last;
    }
    /// The frames, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.count).map(move |i| self.frame(i))
    }
}

/// Port `i` of `ports` mutably, together with mutable access to all the others: what a
/// forwarding loop needs to lend frames of the RX port to the TX paths of other ports inside
/// [`Port::rx_burst_with`]. `None` if `i` is out of range.
///
/// ```
/// use keyplane_net::split_at_port;
/// let mut v = vec![10, 20, 30];
/// let (me, mut others) = split_at_port(&mut v, 1).unwrap();
/// *me += 1;
/// *others.get_mut(2).unwrap() += 1;
/// assert!(others.get_mut(1).is_none(), "the RX port itself is not among the others");
/// others.for_each(|j, p| *p += j as i32);
/// assert_eq!(v, vec![10, 21, 33]);
/// ```
pub fn split_at_port<T>(ports: &mut [T], i: usize) -> Option<(&mut T, OtherPorts<'_, T>)> {
    if i >= ports.len() {
        return None;
    }
    let (left, rest) = ports.split_at_mut(i);
    let (me, right) = rest.split_first_mut()?;
    Some((me, OtherPorts { left, right, skip: i }))
}

/// Every port but one (see [`split_at_port`]), addressed by its index in the original slice.
pub struct OtherPorts<'a, T> {
    left: &'a mut [T],
    right: &'a mut [T],
    skip: usize,
}

impl<T> OtherPorts<'_, T> {
    /// Port `j` (`None` for the split-off port or out of range).
    pub fn get_mut(&mut self, j: usize) -> Option<&mut T> {
        match j.cmp(&self.skip) {
            std::cmp::Ordering::Less => self.left.get_mut(j),
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => self.right.get_mut(j - self.skip - 1),
        }
    }
    /// Call `f(index, port)` on every other port, in index order (flooding).
    pub fn for_each(&mut self, mut f: impl FnMut(usize, &mut T)) {
        for (j, p) in self.left.iter_mut().enumerate() {
            f(j, p);
        }
        for (j, p) in self.right.iter_mut().enumerate() {
            f(self.skip + 1 + j, p);
        }
    }
}

/// Open queue `queue` of interface `ifname` with back end `kind`.
///
/// `ifname` of the form `pcap:IN:OUT` opens a [`crate::pcap::PcapPort`] instead: frames are read
/// from file `IN` (empty: nothing to receive) and written to file `OUT` (empty or absent: transmit
/// is refused); paths cannot contain `:`. [`IoKind::Auto`] tries AF_XDP, then AF_PACKET, and logs
/// (at `warn`) why AF_XDP was not used.
pub fn open(ifname: &str, kind: IoKind, queue: u32, opts: &PortOptions) -> Result<Box<dyn Port>> {
    if let Some(spec) = ifname.strip_prefix("pcap:") {
        return Ok(Box::new(crate::pcap::PcapPort::from_spec(spec)?));
    }
    opts.validate()?;
    match kind {
        IoKind::AfPacket => Ok(Box::new(crate::afpacket::AfPacketPort::open(ifname, queue, opts)?)),
        IoKind::AfXdp => Ok(Box::new(crate::afxdp::XdpPort::open(ifname, queue, opts)?)),
        IoKind::Auto => match crate::afxdp::XdpPort::open(ifname, queue, opts) {
            Ok(p) => Ok(Box::new(p)),
            Err(e) => {
                log::warn!("{ifname} queue {queue}: AF_XDP not used ({e}); falling back to AF_PACKET");
                Ok(Box::new(crate::afpacket::AfPacketPort::open(ifname, queue, opts)?))
            }
        },
        IoKind::Pcap => Err(Error::InvalidParameter(format!("pcap ports are named pcap:IN:OUT, got {ifname:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_push_and_remove() {
        let mut b = Burst::with_capacity(3);
        assert!(b.push(&[1; 60]));
        assert!(b.push(&[2; 1514]));
        assert!(!b.push(&[3; FRAME_CAPACITY + 1]));
        assert!(b.push_with(|buf| {
            buf[..5].copy_from_slice(b"hello");
            5
        }));
        assert!(!b.push(&[4; 10]), "full");
        assert_eq!(b.iter().map(|f| f.len()).collect::<Vec<_>>(), vec![60, 1514, 5]);
        b.swap_remove(0);
        assert_eq!(b.frame(0), b"hello");
        assert_eq!(b.frame(1), &[2; 1514][..]);
        assert!(b.set_frame_len(0, FRAME_CAPACITY + 1).is_err());
        b.set_frame_len(0, 2).unwrap();
        assert_eq!(b.frame(0), b"he");
    }

    #[test]
    fn io_kind_names_round_trip() {
        for k in [IoKind::Auto, IoKind::AfXdp, IoKind::AfPacket, IoKind::Pcap] {
            assert_eq!(k.as_str().parse::<IoKind>().unwrap(), k);
        }
        assert!("dpdk".parse::<IoKind>().is_err());
    }

    #[test]
    fn options_validated() {
        let bad = PortOptions { ring_frames: 1000, ..Default::default() };
        assert!(bad.validate().is_err());
        assert!(PortOptions::default().validate().is_ok());
    }
}
