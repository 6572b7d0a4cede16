//! The burst interface: [`Port`], [`Burst`], [`open`].

use crate::forward::{Forwarded, FwdFrame, FwdScratch, Verdict};
use crate::{Burst, Error, Result};
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
    /// Native (driver) mode if the driver accepts it, else generic (SKB) mode; on a
    /// single-queue veth generic first (measured faster there, see `docs/net.md`). Multi-queue
    /// veths need native mode for frames to reach queues other than 0.
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
    /// AF_PACKET: complete the TCP / UDP checksum of frames that the sending host's stack left
    /// partial (checksum offload; `TP_STATUS_CSUMNOTREADY`), so they can be forwarded as they
    /// are. AF_XDP cannot tell such frames apart: turn TX checksum offload off on the senders
    /// (`ethtool -K IF tx off`, [`crate::testnet::TestNet::tx_checksum_offload`]).
    pub complete_checksums: bool,
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
            complete_checksums: true,
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
/// [`forward_burst`](Port::forward_burst) lends a whole burst for in-place rewriting and sends the
/// frames back out of the same port (AF_XDP: without copying them in user space).
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

    /// Receive up to `max` ready frames (never blocks; at most `scratch.capacity()`), lend them
    /// all at once to `f`, which rewrites them in place (growing them at the front if it needs
    /// to, see [`FwdFrame::grow_front`]) and sets each one's [`FwdFrame::verdict`]; then transmit
    /// the [`Verdict::Transmit`] frames on this port (staged and flushed), copy the
    /// [`Verdict::Slow`] ones into `scratch.slow` (cleared first) and drop the rest. `f` is not
    /// called when nothing is ready.
    ///
    /// AF_XDP does this without copying in user space: frames stay in their UMEM chunks, with the
    /// copy mode's 256 bytes of room in front, and a transmitted frame's chunk moves from the RX
    /// ring to the TX ring. This default, used by the other back ends, copies each frame once into
    /// `scratch` and transmits through [`tx_stage`](Port::tx_stage), like a `recv` + `send` loop.
    fn forward_burst(
        &mut self,
        max: usize,
        scratch: &mut FwdScratch,
        f: &mut dyn FnMut(&mut [FwdFrame<'_>]),
    ) -> Result<Forwarded> {
        scratch.clear();
        let max = max.min(scratch.capacity());
        self.rx_burst_with(max, &mut |fr: &mut [u8]| {
            scratch.push(fr);
        })?;
        let mut out = Forwarded { rx: scratch.len(), ..Forwarded::default() };
        if out.rx == 0 {
            return Ok(out);
        }
        let mut err = None;
        let (frames, slow) = scratch.parts();
        frames.lend(f, &mut |fr, v| match v {
            Verdict::Drop => {}
            Verdict::Transmit => match self.tx_stage(fr) {
                Ok(true) => out.tx += 1,
                Ok(false) => out.tx_failed += 1,
                Err(e) => {
                    out.tx_failed += 1;
                    err.get_or_insert(e);
                }
            },
            Verdict::Slow => {
                if slow.push(fr) {
                    out.slow += 1;
                } else {
                    out.slow_dropped += 1;
                }
            }
        });
        if out.tx > 0 {
            self.tx_flush()?;
        }
        match err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

/// A boxed port is a port (so generic code over `P: Port` takes `Box<dyn Port>` from [`open`]).
impl<P: Port + ?Sized> Port for Box<P> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn kind(&self) -> IoKind {
        (**self).kind()
    }
    fn rx_burst_with(&mut self, max: usize, f: &mut dyn FnMut(&mut [u8])) -> Result<usize> {
        (**self).rx_burst_with(max, f)
    }
    fn tx_stage(&mut self, frame: &[u8]) -> Result<bool> {
        (**self).tx_stage(frame)
    }
    fn tx_flush(&mut self) -> Result<usize> {
        (**self).tx_flush()
    }
    fn wait_rx(&mut self, timeout: Duration) -> Result<bool> {
        (**self).wait_rx(timeout)
    }
    fn stats(&self) -> PortStats {
        (**self).stats()
    }
    fn raw_fd(&self) -> Option<RawFd> {
        (**self).raw_fd()
    }
    fn forward_burst(
        &mut self,
        max: usize,
        scratch: &mut FwdScratch,
        f: &mut dyn FnMut(&mut [FwdFrame<'_>]),
    ) -> Result<Forwarded> {
        (**self).forward_burst(max, scratch, f)
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
/// (at `warn`, or on stderr when no logger is installed) why AF_XDP was not used.
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
            Err(e @ Error::NoSuchInterface(_)) => Err(e),
            Err(e) => {
                let msg = format!("{ifname} queue {queue}: AF_XDP not used ({e}); falling back to AF_PACKET");
                // Without a logger installed the `log` facade drops everything: say it on stderr.
                if log::max_level() < log::LevelFilter::Warn {
                    eprintln!("keyplane-net: {msg}");
                } else {
                    log::warn!("{msg}");
                }
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
