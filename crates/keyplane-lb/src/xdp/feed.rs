//! The consumer side of the XDP program: its new-flow reports (the
//! `kp_reports` ring buffer, read through its mmap) and its per-CPU counters
//! (`kp_stats`, `kp_cnt`), folded into the LB's [`Counters`].

use super::{Maps, REPORT_BYTES, cnt, page_size, sys};
use crate::dataplane::{Event, Report, Services};
use crate::error::Result;
use crate::metrics::Counters;
use keyplane::lb::{Backend, StateKey, VipId};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The ring buffer's consumer side.
struct Ring {
    cons: sys::Mmap,
    prod: sys::Mmap,
    mask: u64,
    page: usize,
}

/// Reads the program's new-flow reports and counters (one reader thread).
pub struct Feed {
    maps: Arc<Maps>,
    ring: Ring,
    ctrs: Arc<Mutex<Vec<(u32, VipId, Backend)>>>,
    last: HashMap<u32, [u64; 3]>,
    last_cnt: [u64; cnt::N],
}

/// Counter changes since the last [`Feed::stats`].
#[derive(Debug, Clone, Default)]
pub struct StatsDelta {
    /// (VIP, backend, [packets, bytes, new connections]).
    pub per: Vec<(VipId, Backend, [u64; 3])>,
    /// `kp_cnt` deltas (indices in [`cnt`]).
    pub cnt: [u64; cnt::N],
}

impl Feed {
    pub(super) fn new(maps: Arc<Maps>, ctrs: Arc<Mutex<Vec<(u32, VipId, Backend)>>>) -> Result<Self> {
        let page = page_size();
        let size = maps.reports.def.entries as usize;
        let fd = maps.reports.raw();
        let cons = sys::Mmap::new(fd, page, 0, true, "kp_reports consumer page")?;
        let prod = sys::Mmap::new(fd, page + 2 * size, page, false, "kp_reports data")?;
        let ring = Ring { cons, prod, mask: size as u64 - 1, page };
        Ok(Self { maps, ring, ctrs, last: HashMap::new(), last_cnt: [0; cnt::N] })
    }

    /// Waits up to `timeout` for reports.
    pub fn wait(&self, timeout: Duration) {
        let mut p = libc::pollfd { fd: self.maps.reports.raw(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, timeout.as_millis() as i32) };
    }

    /// Hands every report waiting in the ring to `f`; returns how many.
    pub fn reports(&mut self, mut f: impl FnMut(Report)) -> usize {
        let r = &self.ring;
        // SAFETY: the consumer and producer positions are the first words of
        // their pages, 8-aligned, alive as long as the mappings.
        let (cons_pos, prod_pos) =
            unsafe { (&*(r.cons.ptr() as *const AtomicU64), &*(r.prod.ptr() as *const AtomicU64)) };
        let mut cons = cons_pos.load(Ordering::Relaxed);
        let prod = prod_pos.load(Ordering::Acquire);
        let mut n = 0;
        while cons < prod {
            let off = r.page + (cons & r.mask) as usize;
            // SAFETY: `off + 8` is inside the data pages (mapped twice, so a
            // record never wraps); the header word is written atomically.
            let hdr = unsafe { (*(r.prod.ptr().add(off) as *const AtomicU32)).load(Ordering::Acquire) };
            if hdr & (1 << 31) != 0 {
                break; // still being written
            }
            let len = (hdr & !(3 << 30)) as usize;
            if hdr & (1 << 30) == 0 && len >= REPORT_BYTES && off + 8 + REPORT_BYTES <= r.prod.len() {
                let mut rec = [0u8; REPORT_BYTES];
                // SAFETY: the record's bytes are inside the mapping (checked).
                unsafe { std::ptr::copy_nonoverlapping(r.prod.ptr().add(off + 8), rec.as_mut_ptr(), REPORT_BYTES) };
                if let Some(rep) = decode_report(&rec) {
                    f(rep);
                    n += 1;
                }
            }
            cons += (len as u64 + 8).div_ceil(8) * 8;
            cons_pos.store(cons, Ordering::Release);
        }
        n
    }

    /// Counter changes since the last call.
    pub fn stats(&mut self) -> StatsDelta {
        let mut d = StatsDelta::default();
        let ctrs = self.ctrs.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (id, vip, b) in ctrs {
            let Ok(v) = self.maps.percpu(&self.maps.stats, id, 3) else { continue };
            let last = self.last.entry(id).or_default();
            let delta = [v[0] - last[0], v[1] - last[1], v[2] - last[2]];
            *last = [v[0], v[1], v[2]];
            if delta != [0; 3] {
                d.per.push((vip, b, delta));
            }
        }
        for i in 0..cnt::N {
            if let Ok(v) = self.maps.percpu(&self.maps.cnt, i as u32, 1) {
                d.cnt[i] = v[0].wrapping_sub(self.last_cnt[i]);
                self.last_cnt[i] = v[0];
            }
        }
        d
    }

    /// Folds [`Self::stats`] into the LB's counters.
    pub fn fold(&mut self, counters: &Counters, services: &Services) {
        let d = self.stats();
        let mut per: Vec<Vec<(Backend, [u64; 3])>> = Vec::new();
        for (vip, b, c) in d.per {
            let v = vip as usize;
            if per.len() <= v {
                per.resize_with(v + 1, Vec::new);
            }
            per[v].push((b, c));
        }
        counters.merge(services, &mut per, &mut []);
        counters.rx.add(d.cnt[cnt::TX]);
        counters.tx.add(d.cnt[cnt::TX]);
        counters.xdp_tx.add(d.cnt[cnt::TX]);
        counters.xdp_pass.add(d.cnt[cnt::PASS]);
        counters.xdp_slow.add(d.cnt[cnt::SLOW]);
        counters.xdp_ring_full.add(d.cnt[cnt::RING_FULL]);
        for _ in 0..d.cnt[cnt::NO_ROOM] {
            counters.count_drop(crate::metrics::DropReason::TooBig);
        }
    }
}

/// A ring-buffer record as a [`Report`].
fn decode_report(r: &[u8; REPORT_BYTES]) -> Option<Report> {
    let vip = u32::from_ne_bytes(r[0..4].try_into().ok()?) as VipId;
    let event = match r[4] {
        0 => Event::New,
        1 => Event::Confirm,
        2 => Event::End,
        _ => return None,
    };
    let k = &r[8..32];
    let be16 = |o: usize| u16::from_be_bytes([k[o], k[o + 1]]);
    let key = match r[5] {
        9 => StateKey::four_tuple(Ipv4Addr::new(k[0], k[1], k[2], k[3]).into(), be16(4), be16(6), k[8]),
        21 => {
            let a: [u8; 16] = k[..16].try_into().ok()?;
            StateKey::four_tuple(Ipv6Addr::from(a).into(), be16(16), be16(18), k[20])
        }
        _ => return None,
    };
    let addr: IpAddr = match r[6] {
        4 => Ipv4Addr::new(r[32], r[33], r[34], r[35]).into(),
        6 => Ipv6Addr::from(<[u8; 16]>::try_from(&r[32..48]).ok()?).into(),
        _ => return None,
    };
    let port = u16::from_ne_bytes([r[48], r[49]]);
    Some(Report { vip, key, backend: Backend::new(addr, port), event })
}
