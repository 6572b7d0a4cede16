//! The Concury control plane's snapshot ([`crate::snapshot`]): the same
//! frame, lineage prologue, state version and corruption guarantees as every
//! other control form. The state is written field by field — parameters,
//! counters, the VIP index, and per VIP its pool, Dcode row and pins, the
//! OthelloMap (its Othello control form, array `C`, free list, BAS slice,
//! pin counts, dropped-state bookkeeping) and its published plane — so a
//! loaded control plane continues exactly where the saved one stopped (same
//! table id, next delta number, same future deltas) without rebuilding
//! anything: one read pass over the states checks their indices.

use super::{Control, Entry, Member, NO_BACKEND, NarrowBas, OthelloMap, Stats, VipCtl, VipPlane};
use crate::ControlTable;
use crate::error::Result;
use crate::lb::{Backend, Params, Vip};
use crate::lineage::Lineage;
use crate::othello;
use crate::snapshot::{ControlState, Persist, check_ids, ensure, persist};
use crate::wire::{Reader, Writer};
use std::sync::Arc;

persist!(Params { dcode_bits, max_vips, seed });
persist!(Stats { rebuilds, dcodes_moved, states_repinned, states_dropped, reports });
persist!(Entry { backend, dcode, conns });
persist!(Member { backend, weight, tracked });
persist!(OthelloMap { o, c, free, dbits, bas, pins, dead, dead_states, reap_cursor });
persist!(VipCtl { vip, pool, map, row, pin, plane, generation });

impl Persist for Vip {
    fn put(&self, w: &mut Writer) {
        crate::lb::put_vip(w, self)
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        crate::lb::get_vip(r)
    }
}

impl Persist for Backend {
    fn put(&self, w: &mut Writer) {
        crate::lb::put_backend(w, self)
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        crate::lb::get_backend(r)
    }
}

/// A VIP's Othello control form, nested: its lineage and sequence number,
/// then its own snapshot state (checked by its own post-load check).
impl Persist for othello::Control {
    fn put(&self, w: &mut Writer) {
        let (l, seq) = self.lineage_seq();
        l.put(w);
        seq.put(w);
        self.save_state(w);
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        let l = Lineage::take(r)?;
        let seq = u64::take(r)?;
        othello::Control::load_state(r, l, seq)
    }
}

/// The BAS slice's byte images, checked against the sizes they must have.
impl Persist for NarrowBas {
    fn put(&self, w: &mut Writer) {
        self.p.put(w);
        w.bytes(&self.a).bytes(&self.b);
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        let p = othello::Params::take(r)?;
        let (a, b): (Arc<[u8]>, Arc<[u8]>) = (r.bytes()?.into(), r.bytes()?.into());
        let bytes = |m: u32| crate::bits::words_for(m as usize, p.vbits) * 8;
        ensure(a.len() == bytes(p.ma) && b.len() == bytes(p.mb), || {
            "BAS slice images do not match their sizes".into()
        })?;
        Ok(Self { p, a, b })
    }
}

/// The published plane, in its data-plane encoding (validated on load).
impl Persist for Arc<VipPlane> {
    fn put(&self, w: &mut Writer) {
        self.encode(w)
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        Ok(Arc::new(VipPlane::decode(r)?))
    }
}

crate::snapshot::control_snapshot!(
    Control, crate::lb::CONTROL_KIND, lineage: table, seq: seq,
    state { p, stats, vips, by_addr },
    check: Control::check_snapshot,
);

impl Control {
    /// Invariants of a loaded snapshot that later operations index by.
    fn check_snapshot(&self) -> Result<()> {
        self.p.validate()?;
        ensure(self.vips.len() == self.p.max_vips as usize, || "VIP array does not match max_vips".into())?;
        ensure(self.by_addr.len() == self.vips.iter().flatten().count(), || {
            "VIP index does not match the VIPs".into()
        })?;
        for (vip, &id) in &self.by_addr {
            let at = self.vips.get(id as usize).and_then(Option::as_ref);
            ensure(at.is_some_and(|v| v.vip == *vip), || format!("VIP index entry {id} does not hold {vip:?}"))?;
        }
        self.vips.iter().flatten().try_for_each(|v| v.check_snapshot(&self.p))
    }
}

impl VipCtl {
    fn check_snapshot(&self, p: &Params) -> Result<()> {
        let what = || format!("VIP {:?}", self.vip);
        ensure(self.row.len() == 1 << p.dcode_bits, || format!("{}: Dcode row length", what()))?;
        ensure(self.pin.len() == self.pool.len(), || format!("{}: pins do not match the pool", what()))?;
        let live = self.pool.iter().any(Option::is_some);
        ensure(self.row.iter().all(|&s| (s as usize) < self.pool.len() || (!live && s == NO_BACKEND)), || {
            format!("{}: Dcode row names a slot outside the pool", what())
        })?;
        ensure(self.plane.vip == self.vip && self.plane.dbits == p.dcode_bits, || format!("{}: plane", what()))?;
        self.map.check_snapshot(p.dcode_bits).map_err(|e| crate::Error::Corrupt(format!("{}: {e}", what())))
    }
}

impl OthelloMap {
    fn check_snapshot(&self, dbits: u32) -> Result<()> {
        ensure(self.dbits == dbits, || "map Dcode width".into())?;
        ensure(self.bas.p.vbits == dbits, || "BAS slice width".into())?;
        ensure(self.dead_states <= self.o.len(), || "more dropped states than states".into())?;
        check_ids("map free list", &self.free, self.c.len(), u32::MAX)?;
        // Every state's value names an entry of `C`.
        ensure(self.o.iter().all(|(_, v)| ((v >> self.dbits) as usize) < self.c.len()), || {
            "a state's index lies outside array C".into()
        })
    }
}
