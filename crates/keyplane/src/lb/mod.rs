//! Concury: a stateful layer-4 load balancer built on Othello (thesis
//! chapter 5, Appendix A.3) — the engine as a library, without packet I/O.
//! Design notes, measurements and the test list: `docs/structures/lb.md` in
//! the repository.
//!
//! ```
//! use keyplane::Wire;
//! use keyplane::lb::{Backend, Control, DataPlane, Delta, Params, PoolOp, StateKey, Vip};
//! use std::net::{Ipv4Addr, Ipv6Addr};
//!
//! let mut ctl = Control::new(Params::default())?;
//! let web = Vip::new(Ipv4Addr::new(192, 0, 2, 10), 443, 6);
//! let (a, b) = (Backend::new(Ipv4Addr::new(10, 0, 0, 1), 8443), Backend::new(Ipv6Addr::LOCALHOST, 8443));
//! let (vip, d1) = ctl.add_vip(web, &[(a, 1), (b, 3)])?;
//! let dp = DataPlane::from_bytes(&ctl.export().to_bytes())?; // ship to the packet path
//!
//! // A new connection: the data plane picks a backend; its host agent reports it.
//! let conn = StateKey::four_tuple(Ipv4Addr::new(198, 51, 100, 7).into(), 50123, 443, 6);
//! let first = dp.lookup(vip, conn.as_ref()).unwrap();
//! ctl.connection_start(vip, conn.as_ref(), first)?; // no data-plane update
//!
//! // A pool change is the only thing that updates the data plane; the
//! // connection keeps its backend (unless that backend is the one removed).
//! let c = Backend::new(Ipv4Addr::new(10, 0, 0, 3), 8443);
//! let d2 = ctl.update_pool(vip, &[PoolOp::Add(c, 2)])?;
//! dp.apply(&Delta::from_bytes(&d2.to_bytes())?)?;
//! assert_eq!(dp.reader().lookup(vip, conn.as_ref()), Some(first));
//! # let _ = d1;
//! # Ok::<(), keyplane::Error>(())
//! ```
//!
//! # Data plane (§5.4.2, Fig. 5.2)
//!
//! [`DataPlane::lookup`] takes a VIP index and a state id (the connection's
//! 4-tuple, or whatever id the host agents report) and runs the paper's
//! three steps in one call, with no allocation and no branch on whether the
//! connection is new:
//!
//! 1. **VIP array**: the VIP index selects that VIP's plane (one pointer).
//! 2. **BAS** (Bloomier array set, one per VIP): an Othello lookup form
//!    ([`crate::othello::Lookup`]) answers `τ(k) = A[h_a(k)] ⊕ B[h_b(k)]`,
//!    XORed with the key's whitening [`whitening`], an `l_d`-bit **Dcode**
//!    (`l_d = 12` by default).
//! 3. **DIP array**: `DA[vip][Dcode]` is an index into the VIP's backend list
//!    (address + port, IPv4 or IPv6). VIPs whose rows are equal share one
//!    copy in a data plane ([`DataPlane::distinct_rows`]).
//!
//! For a state the control plane knew when the BAS was built, the Dcode is
//! the one chosen for it; for any other key it is an arbitrary Dcode, and
//! since every one of the `2^l_d` entries of `DA[vip]` names a backend of the
//! VIP, a new connection always lands on a valid backend (§5.5 case 2).
//! [`DataPlane::lookup_batch`] serves packet bursts (hash, prefetch, then
//! read). IPv4 and IPv6 VIPs and backends mix freely.
//!
//! **Free slots hold random values, and Dcodes are whitened.** The paper
//! assigns uniformly random values to the "free" Othello slots — those no
//! state constrains: isolated slots and one slot per tree — so that unknown
//! keys get uniform Dcodes (§5.4.3). Othello construction does exactly that
//! ([`crate::othello::Control`] fills every slot with pseudo-random value bits
//! before colouring the trees, and [`crate::othello::Control::export_with`]
//! keeps the roots' values), and incremental inserts only XOR whole trees or
//! solve a new slot from its neighbour, so each tree keeps one random
//! constant. But an unknown key's slot pair is one of only `m_a · m_b`, so a
//! small VIP's BAS would spread new connections unevenly; the BAS therefore
//! stores a tracked state's `Dcode ⊕ w(k)` ([`whitening`]: one multiply of
//! the key words the hash reads anyway, independent of the BAS seed) and a
//! lookup XORs `w(k)` back. Unknown keys get uniform Dcodes whatever the
//! BAS size, so a VIP's BAS is sized to its states (from 16, growing ×1.5).
//! The chi-squared test in `tests/lb.rs` checks the result (Figs. 5.3–5.5),
//! down to empty and 1K-state BASes.
//!
//! # Weighted randomizer (§5.4.3)
//!
//! Each VIP has `2^l_d` Dcodes, at least 8 per backend (so a VIP holds at most
//! `2^l_d / 8` backends: 512 at `l_d = 12`). A backend's weight is realised
//! by the number of Dcodes pointing at it (largest-remainder apportionment).
//! On a weight or pool change the control plane moves the fewest Dcodes: a
//! backend keeps its existing Dcodes up to its new count, and only the
//! surplus of shrinking backends (plus those of removed backends) is handed
//! to growing ones.
//!
//! **Weight 0 (drain).** A drained backend gets no Dcodes for new
//! connections. Existing connections must still reach it, and an Othello
//! answers arbitrary Dcodes for unknown keys, so a drained backend that still
//! has tracked states keeps exactly **one** pin Dcode shared by all of them:
//! it receives at most `2^-l_d` of the VIP's new connections (0.024% at
//! `l_d = 12`), and none once its last tracked state ended and the next
//! update ran. The same rule gives a pin Dcode to any backend whose weight
//! share rounds to zero Dcodes while it has tracked states. If every backend
//! of a VIP is drained, Dcodes are shared equally among them (new
//! connections must go somewhere).
//!
//! # Control plane (§5.4.4, §5.4.5)
//!
//! [`Control`] keeps one OthelloMap per VIP: an array `C` of
//! state → backend entries plus an Othello control form whose value for a
//! state is its index in `C` (set query, add and delete in O(1)). It is fed
//! by [`Control::connection_start`] / [`Control::connection_end`] reports,
//! which **never** produce a data-plane update. Only backend-pool changes
//! (add, remove or fail a backend, change a weight; [`Control::update_pool`])
//! do, and only for the affected VIP: the control plane rebalances the
//! VIP's DIP-array row with the fewest moves (keeping the Dcodes tracked
//! states hold), re-pins the tracked states whose Dcode moved to their
//! backend's pin Dcode (none in the common case), and publishes the VIP's
//! new BAS, which is the low `l_d` bits of the OthelloMap's own Othello,
//! kept current as states arrive (same graph, Dcode values; see
//! `OthelloMap` (lb/control.rs) for why this beats recolouring the graph with
//! `export_with` at every change, and [`Control::recoloured_bas`] for
//! that route). The resulting [`Delta`] replaces that VIP's plane (BAS + DIP
//! row + backend list) as one unit. A pool change touches no per-state data
//! unless a state must move Dcode; a removed backend's states are dropped in
//! O(1) and reaped later, in bounded slices ([`Control::reap_step`]; a
//! budget of `usize::MAX` reaps them all at once).
//!
//! # Consistency guarantee (§5.5)
//!
//! Let "the VIP's plane" be what the data plane holds for a VIP; it changes
//! only when a [`Delta`] for that VIP (or a new blob) is applied.
//!
//! 1. **Atomic planes.** Every lookup reads one complete plane: BAS, DIP row
//!    and backend list are swapped together with one pointer swap, so a
//!    lookup racing an update answers entirely from the old or entirely from
//!    the new plane, never a backend outside that plane's pool.
//! 2. **Stateless stickiness.** A lookup is a pure function of (plane, key).
//!    A new connection's first and later packets therefore go to the same
//!    backend for as long as the VIP's plane is not replaced — connection
//!    arrivals and departures (of any VIP) never replace it.
//! 3. **Tracked states survive updates.** Every state reported by
//!    `connection_start` before the control plane computes an update keeps
//!    its backend in the new plane, across any sequence of pool changes,
//!    weight changes (including drain) and VIP changes, unless its backend
//!    was removed (its states are then forgotten; their next packets are
//!    treated as new connections). Other VIPs' planes are untouched.
//! 4. **The window.** A connection whose first packet was served by the old
//!    plane but whose start report reaches the control plane only after the
//!    update was computed is unknown to the new BAS: from the moment the new
//!    plane is published its packets get an arbitrary Dcode and may move. The
//!    paper closes this window by buffering stateless packets during the
//!    update; a packet path built on this library should do the same (or
//!    flush host-agent report queues immediately before calling
//!    [`Control::update_pool`]). Updates happen once per pool change, not
//!    per connection, so the window is rare.
//! 5. **No false hits.** There are no digests: a tracked state reads exactly
//!    its Dcode; an unknown key reads some valid backend of its own VIP
//!    (VIPs have separate BASes), never another VIP's.
//!
//! Property test: `tests/lb.rs::consistency_under_random_churn_*`.
//!
//! # Maglev and SilkRoad
//!
//! [`maglev`] and [`silkroad`] are the two stateful designs the thesis
//! compares against (§5.6.1), behind the same [`Balancer`] interface as
//! [`Concury`]: Maglev (per-VIP permutation lookup table of prime size + a
//! connection-tracking hash table of digests; `keyplane-lb`'s Maglev mode)
//! and a SilkRoad-style multi-stage digest table (connection digest → pool
//! version), both with measurable false hits.

mod balancer;
mod control;
pub mod maglev;
mod plane;
pub mod silkroad;
mod weights;

pub use balancer::{Balancer, Concury, Packet};
pub use control::{Control, PoolOp, REAP_REMOVE_UNITS, Reaped, Stats};
pub use plane::{DataPlane, Delta, PacketReader, PlaneImage};

use crate::error::{Error, Result};
use crate::wire::{Reader, Writer};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Default Dcode length `l_d` (§5.4.3: "In our implementation, we set l_d = 12").
pub(crate) const DEFAULT_DCODE_BITS: u32 = 12;
/// Shortest supported Dcode.
pub const MIN_DCODE_BITS: u32 = 4;
/// Longest supported Dcode (DIP-array entries are 16-bit backend indices).
pub const MAX_DCODE_BITS: u32 = 16;
/// Dcodes per backend at least (§5.4.3: "larger than the number of DIPs by … >8x").
pub(crate) const DCODES_PER_BACKEND: usize = 8;

/// Index of a VIP in the VIP array (§5.4.2 step 1). The paper derives it from
/// the VIP address (e.g. its last 10 bits); [`DataPlane::vip_id`] resolves it
/// from the address when the caller does not.
pub type VipId = u32;

/// A backend server (a DIP and its port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Backend {
    /// Direct IP of the server.
    pub addr: IpAddr,
    /// Service port on the server.
    pub port: u16,
}

impl Backend {
    /// A backend from an address and a port.
    pub fn new(addr: impl Into<IpAddr>, port: u16) -> Self {
        Self { addr: addr.into(), port }
    }
}

/// A service: virtual IP, port and protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Vip {
    /// Virtual IP address.
    pub addr: IpAddr,
    /// Service port.
    pub port: u16,
    /// IP protocol (6 = TCP, 17 = UDP).
    pub proto: u8,
}

impl Vip {
    /// A VIP from an address, port and protocol.
    pub fn new(addr: impl Into<IpAddr>, port: u16, proto: u8) -> Self {
        Self { addr: addr.into(), port, proto }
    }
}

/// Construction parameters of a Concury instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Dcode length `l_d` ([`MIN_DCODE_BITS`]..=[`MAX_DCODE_BITS`]).
    pub dcode_bits: u32,
    /// Size of the VIP array.
    pub max_vips: u32,
    /// Seed for the per-VIP Othello skeletons.
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Self { dcode_bits: DEFAULT_DCODE_BITS, max_vips: 1024, seed: 0xc0c0_0c0c_5eed }
    }
}

/// Most VIPs a VIP array may hold.
pub(crate) const MAX_VIPS: u32 = 1 << 20;

impl Params {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        crate::check_value_bits(self.dcode_bits, MIN_DCODE_BITS, MAX_DCODE_BITS)?;
        if self.max_vips == 0 || self.max_vips > MAX_VIPS {
            return Err(Error::InvalidParameter(format!("max_vips {} outside 1..={MAX_VIPS}", self.max_vips)));
        }
        Ok(())
    }

    /// Backends a VIP may hold (`2^l_d / 8`).
    pub(crate) fn max_backends(&self) -> usize {
        (1usize << self.dcode_bits) / DCODES_PER_BACKEND
    }
}

/// A state id built from a connection's 4-tuple (§5.4.2: source address,
/// source port, destination port, protocol; the destination address is the
/// VIP and selects the BAS). 9 bytes for IPv4, 21 for IPv6.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StateKey {
    len: u8,
    buf: [u8; 21],
}

impl StateKey {
    /// The 4-tuple key of a connection.
    pub fn four_tuple(src: IpAddr, src_port: u16, dst_port: u16, proto: u8) -> Self {
        let mut buf = [0u8; 21];
        let n = match src {
            IpAddr::V4(a) => {
                buf[..4].copy_from_slice(&a.octets());
                4
            }
            IpAddr::V6(a) => {
                buf[..16].copy_from_slice(&a.octets());
                16
            }
        };
        buf[n..n + 2].copy_from_slice(&src_port.to_be_bytes());
        buf[n + 2..n + 4].copy_from_slice(&dst_port.to_be_bytes());
        buf[n + 4] = proto;
        Self { len: (n + 5) as u8, buf }
    }
}

impl AsRef<[u8]> for StateKey {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateKey({:02x?})", self.as_ref())
    }
}

/// Multiplier of the Dcode whitening ([`whitening`]): 2^64 / φ, odd.
const WHITE_MUL: u64 = 0x9e37_79b9_7f4a_7c15;
/// Seed of the whitening of keys outside 9..=32 bytes.
const WHITE_SEED: u64 = 0x5717_e0dc_0de5_eed5;

/// The whitening of a state's Dcode: a tracked state's BAS holds `Dcode ^
/// whitening(key)` (low `l_d` bits) and every lookup XORs it back, so an
/// **unknown** key's Dcode is uniform whatever the size of the VIP's BAS
/// arrays. Without it an unknown key's Dcode is the XOR of two random
/// free slots, which has only `ma · mb` equally likely values: a small VIP's
/// BAS then needs arrays of `2^l_d` slots a side (a floor of 4,096 states
/// at `l_d` = 12) for its new connections to be spread evenly, and 64 VIPs
/// of 1,024 states each take 4.6× the memory of one VIP of 65,536.
///
/// It must not depend on the BAS seed (the control plane's Othello
/// re-seeds when an insert closes a cycle, and the states' values must
/// survive that), so it is a hash of its own: for 9- to 16-byte keys (IPv4
/// 4-tuples) the key's first and last 8 bytes (the words the BAS hash reads
/// anyway) XORed and multiplied once, for 17 to 32 bytes (IPv6) the four
/// words covering the key folded the same way, otherwise `hash64` with its
/// own seed; 16 bits, which callers mask to `l_d`.
#[inline(always)]
pub fn whitening(key: &[u8]) -> u32 {
    let n = key.len();
    if n.wrapping_sub(9) < 8 {
        let w = |i: usize| u64::from_le_bytes(key.get(i..i + 8).and_then(|s| s.try_into().ok()).unwrap_or_default());
        white_words(w(0), w(n - 8))
    } else {
        white_cold(key)
    }
}

/// [`whitening`] of a 9- to 16-byte key from its first and last 8 bytes
/// (little endian): one multiply, the product's top 16 bits (a
/// multiplicative hash of the folded words; the two words overlap unless the
/// key has 16 bytes, and their XOR keeps all but 8 of the key's bits).
#[inline(always)]
pub(crate) fn white_words(first: u64, last: u64) -> u32 {
    ((first ^ last).wrapping_mul(WHITE_MUL) >> 48) as u32
}

/// [`whitening`] of keys outside 9..=16 bytes (out of the packet loops).
#[cold]
#[inline(never)]
pub(crate) fn white_cold(key: &[u8]) -> u32 {
    let n = key.len();
    if (17..=32).contains(&n) {
        let w = |i: usize| u64::from_le_bytes(key.get(i..i + 8).and_then(|s| s.try_into().ok()).unwrap_or_default());
        let first = w(0) ^ w(8).rotate_left(16);
        let last = w(n - 16).rotate_left(48) ^ w(n - 8).rotate_left(32);
        white_words(first, last)
    } else {
        (crate::hash::hash64(key, WHITE_SEED) >> 48) as u32
    }
}

/// Seed of the control plane's spreading hash, which picks among a
/// backend's Dcodes the one a new state is pinned to (it never runs on the
/// data plane).
pub(crate) const SPREAD_SEED: u64 = 0x0c0c_0a11_b1ea_c4ed;

/// The spreading hash of a state (see [`SPREAD_SEED`]).
#[inline(always)]
pub(crate) fn spread(key: &[u8]) -> u64 {
    crate::hash::hash64(key, SPREAD_SEED)
}

pub(crate) fn put_ip(w: &mut Writer, ip: &IpAddr) {
    match ip {
        IpAddr::V4(a) => {
            w.u8(4).raw(&a.octets());
        }
        IpAddr::V6(a) => {
            w.u8(6).raw(&a.octets());
        }
    }
}

pub(crate) fn get_ip(r: &mut Reader<'_>) -> Result<IpAddr> {
    match r.u8()? {
        4 => {
            let b = r.raw(4)?;
            Ok(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])))
        }
        6 => {
            let b = r.raw(16)?;
            let mut o = [0u8; 16];
            o.copy_from_slice(b);
            Ok(IpAddr::V6(Ipv6Addr::from(o)))
        }
        f => Err(Error::Corrupt(format!("address family tag {f} (expected 4 or 6)"))),
    }
}

pub(crate) fn put_vip(w: &mut Writer, v: &Vip) {
    put_ip(w, &v.addr);
    w.u16(v.port).u8(v.proto);
}

pub(crate) fn get_vip(r: &mut Reader<'_>) -> Result<Vip> {
    Ok(Vip { addr: get_ip(r)?, port: r.u16()?, proto: r.u8()? })
}

pub(crate) fn put_backend(w: &mut Writer, b: &Backend) {
    put_ip(w, &b.addr);
    w.u16(b.port);
}

pub(crate) fn get_backend(r: &mut Reader<'_>) -> Result<Backend> {
    Ok(Backend { addr: get_ip(r)?, port: r.u16()? })
}

/// Frame kinds of the Concury core (data plane, delta, control snapshot).
pub(crate) const LOOKUP_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0a01, "lb data plane");
pub(crate) const DELTA_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0a02, "lb delta");
pub(crate) const CONTROL_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0a03, "lb control snapshot");
