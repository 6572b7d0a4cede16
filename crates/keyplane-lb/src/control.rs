//! The LB's control side: owns the lookup engine's control form, turns the
//! configuration and health into backend pools, records connections from
//! the data plane's reports and publishes pool changes.
//!
//! One rule ties pools together: a VIP's pool in force is its configured
//! backends that are healthy, each with its configured weight (0 when
//! drained). Reloads and health transitions both recompute it and hand the
//! difference to the engine as [`PoolOp`]s (add / remove / reweight).
//!
//! Concury mode: reports become `Control::connection_start` /
//! `connection_end`; a pool change is `Control::update_pool`, whose delta
//! the data plane applies in place. Before every pool change the report
//! channel is drained, closing the thesis' window (§5.5) down to the
//! reports still inside a worker's current burst. Maglev mode: the data
//! plane tracks connections itself; pool changes rebuild its table.

use crate::config::{Config, Method, VipConfig};
use crate::conntrack::{ConnTable, Inserted};
use crate::dataplane::{Engine, Event, Report, Service, Services};
use crate::error::{Error, Result};
use crate::metrics::Counters;
use arc_swap::ArcSwap;
use keyplane::lb::Balancer;
use keyplane::lb::maglev::{DEFAULT_TABLE_SIZE, Maglev};
use keyplane::lb::{Backend, Control, DataPlane, Params, PoolOp, Vip, VipId};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Which lookup engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Concury (thesis ch. 5): stateless data plane, states on the control side.
    Concury,
    /// Maglev table + connection tracking on the data plane.
    Maglev,
}

/// A backend to health-check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The VIP.
    pub vip: Vip,
    /// Backend address.
    pub addr: IpAddr,
    /// Port to check.
    pub port: u16,
    /// Settings.
    pub health: crate::config::Health,
}

/// Bytes of Concury control state one tracked connection may take at most
/// (OthelloMap: Othello with 44-bit values at ≤ 3.5 slots per state, key
/// store, graph links, `C` entry; measured ≈ 118 B per state at 1M).
pub const CONTROL_BYTES_PER_STATE: usize = 400;
/// Work units of one [`ControlSide::reap_step`] in the Concury control
/// plane (`keyplane::lb::Reaped::work`: 1 per key id looked at, 32 per state
/// reaped): at most 1,024 states or 32,768 ids, about 1–2 ms of CPU on this
/// project's 2-core VM, so a removal at millions of states never holds the
/// control thread longer than that.
pub const REAP_BUDGET: usize = 32_768;
/// Queue positions of one [`ControlSide::reap_step`] in the connection table
/// (`ConnTable::sweep`): at 1M tracked states a position costs ~0.7 µs of
/// CPU here (a hash lookup in a table far larger than the caches), so about
/// 1.5 ms a step.
pub const SWEEP_BUDGET: usize = 2048;
/// Fixed Concury control state per VIP at most (DIP row, plane, pool and an
/// empty OthelloMap; generous since session 9, when a VIP's Othello starts
/// at 16 states instead of 2^12).
pub const CONTROL_BYTES_PER_VIP: usize = 256 << 10;

/// The bound on the control side's connection-state memory (the
/// `control_state_bytes` gauge) for `max_connections` states over `vips`
/// VIPs: the connection table's bound plus the Concury control state.
pub fn memory_bound(max_connections: usize, vips: usize) -> usize {
    ConnTable::memory_bound(max_connections, vips)
        + max_connections * CONTROL_BYTES_PER_STATE
        + vips * CONTROL_BYTES_PER_VIP
}

/// The control side. See the [module docs](self).
pub struct ControlSide {
    mode: Mode,
    concury: Option<(Control, Arc<DataPlane>)>,
    maglev: Option<Arc<Mutex<Maglev>>>,
    conns: ConnTable,
    config: Config,
    ids: HashMap<Vip, VipId>,
    applied: HashMap<Vip, Vec<(Backend, u32)>>,
    down: HashSet<(Vip, IpAddr)>,
    /// Backends removed from the configuration that still drain.
    leaving: HashMap<(Vip, IpAddr), Instant>,
    services: Arc<ArcSwap<Services>>,
    counters: Arc<Counters>,
    evicted: Vec<(VipId, keyplane::lb::StateKey)>,
}

fn vip_of(v: &VipConfig) -> Vip {
    Vip::new(v.address, v.port, v.protocol.number())
}

impl ControlSide {
    /// Builds the engine for `config` and publishes its services.
    pub fn new(mode: Mode, config: Config, counters: Arc<Counters>) -> Result<Self> {
        let (concury, maglev) = match mode {
            Mode::Concury => {
                let ctl = Control::new(Params { dcode_bits: config.lb.dcode_bits, ..Params::default() })?;
                let dp = Arc::new(ctl.export());
                (Some((ctl, dp)), None)
            }
            Mode::Maglev => {
                // Connection tracking is per VIP: max_connections is shared
                // by the VIPs configured at start (at least 1024 each).
                let per_vip = (config.lb.max_connections / config.vips.len().max(1)).max(1024);
                let m = Maglev::new(DEFAULT_TABLE_SIZE, per_vip, 32)?;
                (None, Some(Arc::new(Mutex::new(m))))
            }
        };
        let mut c = Self {
            mode,
            concury,
            maglev,
            conns: ConnTable::new(config.lb.max_connections),
            config: Config::default(),
            ids: HashMap::new(),
            applied: HashMap::new(),
            down: HashSet::new(),
            leaving: HashMap::new(),
            services: Arc::new(ArcSwap::from_pointee(Services::default())),
            counters,
            evicted: Vec::new(),
        };
        c.apply_config(config)?;
        Ok(c)
    }

    /// The engine the data plane reads.
    pub fn engine(&self) -> Engine {
        match (&self.concury, &self.maglev) {
            (Some((_, dp)), _) => Engine::Concury(dp.clone()),
            (_, Some(m)) => Engine::Maglev(m.clone()),
            _ => unreachable!("one engine is always built"),
        }
    }

    /// The services the data plane reads (replaced on every change).
    pub fn services(&self) -> Arc<ArcSwap<Services>> {
        self.services.clone()
    }

    /// The counters the control side updates.
    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Engine index of a VIP.
    pub fn vip_id(&self, vip: &Vip) -> Option<VipId> {
        self.ids.get(vip).copied()
    }

    /// Connection states tracked.
    pub fn tracked(&self) -> usize {
        self.conns.len()
    }

    /// The backend the control side has recorded for a connection.
    pub fn tracked_backend(&self, vip: VipId, key: &keyplane::lb::StateKey) -> Option<Backend> {
        self.conns.get(vip, key)
    }

    /// Handles one data-plane report.
    pub fn report(&mut self, r: Report) {
        let Some((ctl, _)) = self.concury.as_mut() else { return };
        match r.event {
            Event::New => {
                self.evicted.clear();
                if self.conns.insert(r.vip, r.key, r.backend, &mut self.evicted) == Inserted::New {
                    for (v, k) in self.evicted.drain(..) {
                        let _ = ctl.connection_end(v, k.as_ref());
                    }
                    // The backend may have left the pool since the packet was
                    // looked up: then there is nothing to keep.
                    if ctl.connection_start(r.vip, r.key.as_ref(), r.backend).is_err() {
                        self.conns.remove(r.vip, &r.key);
                    }
                }
            }
            Event::Confirm => {
                self.conns.confirm(r.vip, &r.key);
            }
            Event::End => {
                if self.conns.remove(r.vip, &r.key) {
                    let _ = ctl.connection_end(r.vip, r.key.as_ref());
                }
            }
        }
    }

    /// Handles every report waiting in `rx` (called before each pool change).
    pub fn drain(&mut self, rx: &Receiver<Report>) -> usize {
        let mut n = 0;
        while let Ok(r) = rx.try_recv() {
            self.report(r);
            n += 1;
        }
        self.publish_gauges();
        n
    }

    /// Updates the memory and state gauges.
    pub fn publish_gauges(&self) {
        self.counters.tracked.set(self.conns.len() as u64);
        self.counters.evictions.set(self.conns.evictions);
        match (&self.concury, &self.maglev) {
            (Some((ctl, dp)), _) => {
                self.counters.control_bytes.set((ctl.memory_bytes() + self.conns.memory_bytes()) as u64);
                self.counters.dataplane_bytes.set(dp.memory_bytes() as u64);
            }
            (_, Some(m)) => {
                let m = m.lock().unwrap_or_else(|e| e.into_inner());
                self.counters.dataplane_bytes.set(m.memory_bytes() as u64);
            }
            _ => {}
        }
    }

    /// The pool a VIP should have now: configured, healthy, weighted; plus
    /// the healthy backends still leaving, at weight 0.
    fn wanted(&self, v: &VipConfig) -> Vec<(Backend, u32)> {
        let vip = vip_of(v);
        let mut w: Vec<(Backend, u32)> = v
            .backends
            .iter()
            .filter(|b| !self.down.contains(&(vip, b.address)))
            .map(|b| (Backend::new(b.address, v.port), b.effective_weight()))
            .collect();
        let mut leaving: Vec<IpAddr> = self
            .leaving
            .keys()
            .filter(|(lv, a)| *lv == vip && !self.down.contains(&(vip, *a)))
            .map(|(_, a)| *a)
            .collect();
        leaving.sort();
        w.extend(leaving.into_iter().map(|a| (Backend::new(a, v.port), 0)));
        w
    }

    /// Finishes graceful removals: a leaving backend goes once no tracked
    /// connection is on it (Concury) or its grace time passed. Returns how
    /// many left.
    pub fn tick(&mut self, now: Instant) -> Result<usize> {
        let mut done = Vec::new();
        for (&(vip, addr), &deadline) in &self.leaving {
            let empty = match (&self.concury, self.ids.get(&vip)) {
                (Some((ctl, _)), Some(&id)) => {
                    ctl.pool(id).iter().all(|(b, _, tracked, _)| b.addr != addr || *tracked == 0)
                }
                _ => false,
            };
            if empty || now >= deadline {
                done.push((vip, addr));
            }
        }
        for k in &done {
            self.leaving.remove(k);
            self.down.remove(k);
            self.counters.retain_health(|v, a| (*v, *a) != *k);
            if let Some(v) = self.config.vips.iter().find(|v| vip_of(v) == k.0).cloned() {
                let want = self.wanted(&v);
                self.reconcile(k.0, &want)?;
            }
        }
        if !done.is_empty() {
            self.publish_services();
            self.publish_gauges();
        }
        Ok(done.len())
    }

    /// Replaces the configuration (already validated): adds and removes
    /// VIPs, reconciles every pool, republishes the services.
    pub fn apply_config(&mut self, new: Config) -> Result<()> {
        let new_vips: HashSet<Vip> = new.vips.iter().map(vip_of).collect();
        // VIPs that went away.
        let gone: Vec<Vip> = self.ids.keys().filter(|v| !new_vips.contains(v)).copied().collect();
        for vip in gone {
            self.remove_vip(vip)?;
        }
        // Backends that left a VIP that stays: drain them first (graceful removal).
        let now = Instant::now();
        let grace = std::time::Duration::from_millis(new.lb.remove_grace_ms);
        for old in &self.config.vips {
            let vip = vip_of(old);
            let Some(nv) = new.vips.iter().find(|c| vip_of(c) == vip) else { continue };
            for b in &old.backends {
                if !nv.backends.iter().any(|x| x.address == b.address) && !grace.is_zero() {
                    self.leaving.entry((vip, b.address)).or_insert(now + grace);
                }
            }
        }
        self.leaving.retain(|(v, a), _| {
            new.vips.iter().any(|c| vip_of(c) == *v && !c.backends.iter().any(|b| b.address == *a))
        });
        let leaving = &self.leaving;
        self.down.retain(|(v, a)| {
            leaving.contains_key(&(*v, *a))
                || new.vips.iter().any(|c| vip_of(c) == *v && c.backends.iter().any(|b| b.address == *a))
        });
        self.config = new;
        let vips = self.config.vips.clone();
        for v in &vips {
            let vip = vip_of(v);
            let want = self.wanted(v);
            if !self.ids.contains_key(&vip) {
                self.add_vip(vip, &want)?;
            } else {
                self.reconcile(vip, &want)?;
            }
        }
        let leaving = &self.leaving;
        self.counters.retain_health(|v, a| {
            leaving.contains_key(&(*v, *a))
                || (new_vips.contains(v)
                    && vips.iter().any(|c| vip_of(c) == *v && c.backends.iter().any(|b| b.address == *a)))
        });
        for v in &vips {
            for b in &v.backends {
                let vip = vip_of(v);
                self.counters.set_health(vip, b.address, !self.down.contains(&(vip, b.address)), b.effective_weight());
            }
        }
        self.publish_services();
        self.publish_gauges();
        Ok(())
    }

    fn add_vip(&mut self, vip: Vip, pool: &[(Backend, u32)]) -> Result<()> {
        let t = Instant::now();
        let id = match (&mut self.concury, &self.maglev) {
            (Some((ctl, dp)), _) => {
                let (id, d) = ctl.add_vip(vip, pool)?;
                dp.apply(&d)?;
                id
            }
            (_, Some(m)) => m.lock().unwrap_or_else(|e| e.into_inner()).add_vip(vip, pool)?,
            _ => unreachable!("one engine is always built"),
        };
        self.ids.insert(vip, id);
        self.applied.insert(vip, pool.to_vec());
        self.counters.pool_update(vip, 0, t.elapsed().as_micros() as u64);
        Ok(())
    }

    fn remove_vip(&mut self, vip: Vip) -> Result<()> {
        let Some(id) = self.ids.remove(&vip) else { return Ok(()) };
        let pool = self.applied.remove(&vip).unwrap_or_default();
        match (&mut self.concury, &self.maglev) {
            (Some((ctl, dp)), _) => {
                let d = ctl.remove_vip(id)?;
                dp.apply(&d)?;
            }
            (_, Some(m)) => {
                // Maglev indices are never reused: empty the pool.
                let ops: Vec<PoolOp> = pool.iter().map(|(b, _)| PoolOp::Remove(*b)).collect();
                m.lock().unwrap_or_else(|e| e.into_inner()).update_pool(id, &ops)?;
            }
            _ => {}
        }
        self.conns.remove_vip(id);
        Ok(())
    }

    /// Moves a VIP's pool in force to `want` with the fewest operations.
    fn reconcile(&mut self, vip: Vip, want: &[(Backend, u32)]) -> Result<()> {
        let id = *self.ids.get(&vip).ok_or_else(|| Error::Setup(format!("VIP {vip:?} has no engine index")))?;
        let have = self.applied.get(&vip).cloned().unwrap_or_default();
        let mut ops = Vec::new();
        for (b, _) in &have {
            if !want.iter().any(|(x, _)| x == b) {
                ops.push(PoolOp::Remove(*b));
            }
        }
        for (b, w) in want {
            match have.iter().find(|(x, _)| x == b) {
                None => ops.push(PoolOp::Add(*b, *w)),
                Some((_, w0)) if w0 != w => ops.push(PoolOp::SetWeight(*b, *w)),
                _ => {}
            }
        }
        if ops.is_empty() {
            return Ok(());
        }
        let t = Instant::now();
        let remaps = match (&mut self.concury, &self.maglev) {
            (Some((ctl, dp)), _) => {
                let before = ctl.stats().states_repinned;
                let d = ctl.update_pool(id, &ops)?;
                dp.apply(&d)?;
                ctl.stats().states_repinned - before
            }
            (_, Some(m)) => {
                m.lock().unwrap_or_else(|e| e.into_inner()).update_pool(id, &ops)?;
                0
            }
            _ => 0,
        };
        let us = t.elapsed().as_micros() as u64;
        // A removal dropped its states in O(1) in both tables; they leave
        // them in bounded slices ([`Self::reap_step`], run by the control
        // loop between reports).
        for op in &ops {
            if let PoolOp::Remove(b) = op {
                self.conns.remove_backend(id, *b);
            }
        }
        self.applied.insert(vip, want.to_vec());
        self.counters.pool_update(vip, remaps, us);
        Ok(())
    }

    /// Work still owed to removals: dropped states in the Concury control
    /// plane plus gone states in the connection table.
    pub fn reap_pending(&self) -> usize {
        self.concury.as_ref().map_or(0, |(c, _)| c.dropped_pending()) + self.conns.sweep_pending()
    }

    /// One bounded slice of the reaping that removals leave: at most
    /// [`REAP_BUDGET`] work units in the Concury control plane and
    /// [`SWEEP_BUDGET`] positions of the connection table. Returns the work
    /// done in those units (at most `REAP_BUDGET + SWEEP_BUDGET`) and what is
    /// still pending.
    pub fn reap_step(&mut self) -> Result<(usize, usize)> {
        let mut work = 0;
        if let Some((ctl, _)) = self.concury.as_mut()
            && ctl.dropped_pending() > 0
        {
            work += ctl.reap_step(REAP_BUDGET)?.work;
        }
        if self.conns.sweep_pending() > 0 {
            work += self.conns.sweep(SWEEP_BUDGET).scanned;
        }
        Ok((work, self.reap_pending()))
    }

    /// A health transition of one backend of one VIP.
    pub fn set_health(&mut self, vip: Vip, addr: IpAddr, up: bool) -> Result<()> {
        let changed = if up { self.down.remove(&(vip, addr)) } else { self.down.insert((vip, addr)) };
        if !changed {
            return Ok(());
        }
        self.counters.health_transitions.inc();
        let Some(v) = self.config.vips.iter().find(|v| vip_of(v) == vip).cloned() else { return Ok(()) };
        let want = self.wanted(&v);
        self.reconcile(vip, &want)?;
        let weight = v.backends.iter().find(|b| b.address == addr).map_or(0, |b| b.effective_weight());
        self.counters.set_health(vip, addr, up, weight);
        self.publish_services();
        self.publish_gauges();
        Ok(())
    }

    fn publish_services(&self) {
        let mut svcs = Vec::new();
        let mut nb = HashSet::new();
        for v in &self.config.vips {
            let vip = vip_of(v);
            if let Some(&id) = self.ids.get(&vip) {
                svcs.push(Service { id, vip, method: v.method });
            }
            for b in &v.backends {
                nb.insert(b.address);
            }
        }
        nb.extend(self.leaving.keys().map(|(_, a)| *a));
        let mut nb: Vec<IpAddr> = nb.into_iter().collect();
        nb.sort();
        self.services.store(Arc::new(Services::new(svcs, nb)));
    }

    /// Rebuilds every Concury VIP plane from the control state without a
    /// pool change (the data plane's BAS then holds every tracked state;
    /// otherwise it is rebuilt at the next pool change). Maglev: nothing.
    pub fn refresh_all(&mut self) -> Result<()> {
        if let Some((ctl, dp)) = self.concury.as_mut() {
            let mut ids: Vec<VipId> = self.ids.values().copied().collect();
            ids.sort_unstable();
            for id in ids {
                let d = ctl.refresh(id)?;
                dp.apply(&d)?;
            }
        }
        self.publish_gauges();
        Ok(())
    }

    /// The backends to health-check.
    pub fn targets(&self) -> Vec<Target> {
        let mut t = Vec::new();
        for v in &self.config.vips {
            let h = v.health(&self.config.health);
            if h.kind == crate::config::CheckKind::None {
                continue;
            }
            let vip = vip_of(v);
            let leaving = self.leaving.keys().filter(|(lv, _)| *lv == vip).map(|(_, a)| *a);
            for a in v.backends.iter().map(|b| b.address).chain(leaving) {
                t.push(Target { vip, addr: a, port: h.port.unwrap_or(v.port), health: h.clone() });
            }
        }
        t
    }

    /// The method of a VIP.
    pub fn method(&self, vip: &Vip) -> Option<Method> {
        self.config.vips.iter().find(|v| vip_of(v) == *vip).map(|v| v.method)
    }
}
