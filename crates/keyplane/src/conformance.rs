//! Reusable correctness checks for any [`ControlTable`] / [`LookupTable`]
//! pair: the oracle property run, delta replay through bytes, corruption
//! sweeps of decoders and a reader/writer stress test.
//!
//! The library's own test-suite runs every structure through these; a user
//! implementing a structure of their own can do the same. Failures are
//! returned as `Err(String)` describing the first divergence.

use crate::{ControlTable, LookupTable, ReadHandle, Wire};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Small deterministic PRNG (xorshift64*), so the checks need no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Self {
        Self(crate::hash::mix64(seed ^ 0x5eed) | 1)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        crate::hash::reduce64(self.next_u64(), n)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 1.0 < p
    }
}

/// Shapes of generated keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyShape {
    /// 8-byte little-endian integers.
    U64,
    /// Lengths 0..=40, including the empty key.
    Mixed,
}

/// The `i`-th key of a key space.
pub fn make_key(shape: KeyShape, i: u64) -> Vec<u8> {
    match shape {
        KeyShape::U64 => i.to_le_bytes().to_vec(),
        KeyShape::Mixed => {
            if i == 0 {
                return Vec::new();
            }
            let h = crate::hash::mix64(i);
            let len = 1 + (h % 40) as usize;
            let mut k = Vec::with_capacity(len);
            k.extend_from_slice(&i.to_le_bytes()[..len.min(8)]);
            let mut x = h;
            while k.len() < len {
                x = crate::hash::mix64(x);
                k.push(x as u8);
            }
            k
        }
    }
}

/// Parameters of [`oracle_run`].
#[derive(Debug, Clone)]
pub struct OracleConfig {
    /// Operations to run.
    pub ops: usize,
    /// Keys are drawn from `0..key_space`.
    pub key_space: u64,
    /// Value width.
    pub value_bits: u32,
    /// Probability that an operation is a remove.
    pub remove_ratio: f64,
    /// Full verification every this many operations (and at the end).
    pub check_every: usize,
    /// Key shape.
    pub shape: KeyShape,
    /// PRNG seed.
    pub seed: u64,
    /// Keys bulk-loaded with `from_items` before the operations.
    pub initial: usize,
}

impl Default for OracleConfig {
    fn default() -> Self {
        Self {
            ops: 20_000,
            key_space: 5_000,
            value_bits: 8,
            remove_ratio: 0.3,
            check_every: 1_000,
            shape: KeyShape::Mixed,
            seed: 1,
            initial: 0,
        }
    }
}

/// Runs random insert / overwrite / remove sequences against a `HashMap`
/// oracle. After every check point, every live key must return its value
/// from the control form, from a freshly exported lookup form, and from a
/// replica kept current only by applying deltas that went through
/// `to_bytes` / `from_bytes`. The replica also round-trips through its blob.
pub fn oracle_run<C: ControlTable>(cfg: &OracleConfig) -> Result<(), String> {
    let mut rng = Rng::new(cfg.seed);
    let vmask = crate::mask(cfg.value_bits);
    let mut oracle: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut items = Vec::new();
    for _ in 0..cfg.initial {
        let k = make_key(cfg.shape, rng.below(cfg.key_space));
        let v = rng.next_u64() & vmask;
        oracle.insert(k.clone(), v);
        items.push((k, v));
    }
    let mut ctl = C::from_items(items, cfg.value_bits).map_err(|e| format!("from_items: {e}"))?;
    let replica = C::Lookup::from_bytes(&ctl.export().to_bytes()).map_err(|e| format!("blob decode: {e}"))?;
    let mut replica = Some(replica);
    for step in 0..cfg.ops {
        let k = make_key(cfg.shape, rng.below(cfg.key_space));
        let delta = if rng.chance(cfg.remove_ratio) {
            let had = oracle.remove(&k).is_some();
            let d = ctl.remove(&k).map_err(|e| format!("step {step}: remove: {e}"))?;
            if d.is_some() != had {
                return Err(format!("step {step}: remove returned {:?} delta for a key present={had}", d.is_some()));
            }
            d
        } else {
            let v = rng.next_u64() & vmask;
            oracle.insert(k.clone(), v);
            Some(ctl.insert(&k, v).map_err(|e| format!("step {step}: insert: {e}"))?)
        };
        if let Some(d) = delta {
            let d2 = C::Delta::from_bytes(&d.to_bytes()).map_err(|e| format!("step {step}: delta decode: {e}"))?;
            replica.as_ref().expect("replica").apply(&d2).map_err(|e| format!("step {step}: apply: {e}"))?;
        }
        if ctl.len() != oracle.len() {
            return Err(format!("step {step}: len {} != oracle {}", ctl.len(), oracle.len()));
        }
        if ctl.get(&k) != oracle.get(&k).copied() {
            return Err(format!("step {step}: control get({k:02x?}) = {:?}, oracle {:?}", ctl.get(&k), oracle.get(&k)));
        }
        if (step + 1) % cfg.check_every == 0 || step + 1 == cfg.ops {
            let fresh = ctl.export();
            let r = replica.take().expect("replica");
            let rt =
                C::Lookup::from_bytes(&r.to_bytes()).map_err(|e| format!("step {step}: replica re-decode: {e}"))?;
            let mut keys: Vec<&Vec<u8>> = oracle.keys().collect();
            keys.sort();
            let reader = r.reader();
            for key in &keys {
                let want = Some(oracle[*key]);
                let c = ctl.get(key);
                let f = fresh.get(key);
                let p = r.get(key);
                let q = rt.get(key);
                let h = reader.get(key);
                if c != want || f != want || p != want || q != want || h != want {
                    return Err(format!(
                        "step {step}: key {key:02x?}: oracle {want:?}, control {c:?}, export {f:?}, delta replica {p:?}, replica after blob round trip {q:?}, reader handle {h:?}"
                    ));
                }
            }
            let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
            let mut out = vec![None; refs.len()];
            r.get_batch(&refs, &mut out);
            for (key, got) in keys.iter().zip(&out) {
                if *got != Some(oracle[*key]) {
                    return Err(format!("step {step}: get_batch({key:02x?}) = {got:?}, oracle {:?}", oracle[*key]));
                }
            }
            out.fill(None);
            reader.get_batch(&refs, &mut out);
            for (key, got) in keys.iter().zip(&out) {
                if *got != Some(oracle[*key]) {
                    return Err(format!(
                        "step {step}: reader get_batch({key:02x?}) = {got:?}, oracle {:?}",
                        oracle[*key]
                    ));
                }
            }
            drop(reader);
            replica = Some(rt);
        }
    }
    Ok(())
}

/// Every truncation of `bytes` and `flips` random single-bit flips must be
/// rejected by `T::from_bytes` with an error (never a panic, never success).
pub fn corruption_sweep<T: Wire>(bytes: &[u8], flips: usize, seed: u64) -> Result<(), String> {
    T::from_bytes(bytes).map_err(|e| format!("intact input rejected: {e}"))?;
    for n in 0..bytes.len() {
        if T::from_bytes(&bytes[..n]).is_ok() {
            return Err(format!("truncation to {n} of {} bytes accepted", bytes.len()));
        }
    }
    let mut rng = Rng::new(seed);
    let mut c = bytes.to_vec();
    for _ in 0..flips {
        let i = rng.below(bytes.len() as u64) as usize;
        let b = 1u8 << rng.below(8);
        c[i] ^= b;
        if T::from_bytes(&c).is_ok() {
            return Err(format!("bit flip at byte {i} accepted"));
        }
        c[i] ^= b;
    }
    Ok(())
}

/// Random garbage (including a valid header with a garbage payload and a
/// valid checksum) must be rejected or decoded without panicking. Returns the
/// number of inputs that happened to decode (structure-valid garbage is legal
/// for some encodings; panics are what this guards against).
pub fn garbage_sweep<T: Wire>(kind: crate::wire::Kind, rounds: usize, seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut ok = 0;
    for _ in 0..rounds {
        let len = rng.below(256) as usize;
        let payload: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let mut w = crate::wire::Writer::new(kind);
        w.raw(&payload);
        if T::from_bytes(&w.finish()).is_ok() {
            ok += 1;
        }
        if T::from_bytes(&payload).is_ok() {
            ok += 1;
        }
    }
    ok
}

/// Parameters of [`stress`].
#[derive(Debug, Clone)]
pub struct StressConfig {
    /// Keys that never change while readers run.
    pub stable: usize,
    /// Keys the writer churns (insert / overwrite / remove).
    pub churn: u64,
    /// Deltas the writer applies.
    pub updates: usize,
    /// Reader threads.
    pub readers: usize,
    /// Value width.
    pub value_bits: u32,
    /// PRNG seed.
    pub seed: u64,
}

impl Default for StressConfig {
    fn default() -> Self {
        Self { stable: 20_000, churn: 50_000, updates: 200_000, readers: 2, value_bits: 8, seed: 7 }
    }
}

/// Outcome of [`stress`].
#[derive(Debug, Clone, Copy)]
pub struct StressReport {
    /// Lookups the readers made.
    pub reads: u64,
    /// Deltas applied.
    pub updates: u64,
    /// Lookups of churned keys whose value was neither the old nor the new
    /// value (only counted for overwrites, where both are known).
    pub churn_reads: u64,
}

/// Reader threads hammer stable keys (and, with `get_batch`, batches of
/// them) on a shared lookup form while the writer applies `updates` deltas
/// produced by the control form for other keys. Any wrong value for a stable
/// key fails the run. Additionally, each churned key is overwritten only with
/// values from a two-value alphabet, and readers check those keys too: a
/// present churned key must read one of its two values.
pub fn stress<C: ControlTable>(cfg: &StressConfig) -> Result<StressReport, String>
where
    C::Lookup: 'static,
{
    let vmask = crate::mask(cfg.value_bits);
    let stable: Vec<(Vec<u8>, u64)> =
        (0..cfg.stable as u64).map(|i| (make_key(KeyShape::U64, i), crate::hash::mix64(i) & vmask)).collect();
    let churn_key = |i: u64| make_key(KeyShape::U64, (1 << 40) + i);
    // Each odd churn key alternates between two values a(i) and b(i); they are
    // all present before the readers start, so a reader may check them.
    let va = move |i: u64| crate::hash::mix64(i ^ 0xa) & vmask;
    let vb = move |i: u64| crate::hash::mix64(i ^ 0xb) & vmask;
    let initial = stable.iter().cloned().chain((1..cfg.churn).step_by(2).map(|i| (churn_key(i), va(i))));
    let mut ctl = C::from_items(initial, cfg.value_bits).map_err(|e| e.to_string())?;
    let table = Arc::new(ctl.export());
    let stop = Arc::new(AtomicBool::new(false));
    let failure: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let stable = Arc::new(stable);
    let mut handles = Vec::new();
    for t in 0..cfg.readers {
        let (table, stop, failure, stable) = (table.clone(), stop.clone(), failure.clone(), stable.clone());
        let churn = cfg.churn;
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng::new(t as u64 + 99);
            let mut n = 0u64;
            let mut cn = 0u64;
            let mut out = vec![None; 16];
            // Odd threads read through a long-lived per-thread handle, even
            // ones through the table's `&self` methods.
            let handle = table.reader();
            let shared = crate::SharedReader(&*table);
            let table: &dyn ReadHandle = if t % 2 == 1 { &handle } else { &shared };
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..64 {
                    let (k, v) = &stable[rng.below(stable.len() as u64) as usize];
                    let got = table.get(k);
                    if got != Some(*v) {
                        *failure.lock().unwrap() = Some(format!("stable key {k:02x?}: got {got:?}, want {v}"));
                        return (n, cn);
                    }
                    n += 1;
                }
                let batch: Vec<&(Vec<u8>, u64)> =
                    (0..16).map(|_| &stable[rng.below(stable.len() as u64) as usize]).collect();
                let keys: Vec<&[u8]> = batch.iter().map(|(k, _)| k.as_slice()).collect();
                table.get_batch(&keys, &mut out);
                for ((k, v), got) in batch.iter().zip(&out) {
                    if *got != Some(*v) {
                        *failure.lock().unwrap() = Some(format!("batch: stable key {k:02x?}: got {got:?}, want {v}"));
                        return (n, cn);
                    }
                }
                n += 16;
                // Churned keys: only check those the writer only ever overwrites (odd ids).
                let i = rng.below(churn) | 1;
                if i < churn
                    && let Some(got) = table.get(&churn_key(i))
                {
                    if got != va(i) && got != vb(i) {
                        *failure.lock().unwrap() =
                            Some(format!("churn key {i}: got {got}, neither {} nor {}", va(i), vb(i)));
                        return (n, cn);
                    }
                    cn += 1;
                }
            }
            (n, cn)
        }));
    }
    let fail = |msg: String, stop: &AtomicBool| {
        stop.store(true, Ordering::Relaxed);
        msg
    };
    let mut updates = 0u64;
    let mut rng = Rng::new(cfg.seed);
    let mut state: HashMap<u64, bool> = HashMap::new();
    while (updates as usize) < cfg.updates {
        if failure.lock().unwrap().is_some() {
            break;
        }
        let i = rng.below(cfg.churn);
        let d = if i & 1 == 1 {
            let flip = state.entry(i).or_insert(false);
            *flip = !*flip;
            Some(ctl.insert(&churn_key(i), if *flip { vb(i) } else { va(i) }))
        } else if rng.chance(0.5) {
            Some(ctl.insert(&churn_key(i), rng.next_u64() & vmask))
        } else {
            ctl.remove(&churn_key(i)).transpose()
        };
        if let Some(d) = d {
            let d = d.map_err(|e| fail(e.to_string(), &stop))?;
            table.apply(&d).map_err(|e| fail(format!("apply: {e}"), &stop))?;
            updates += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    let mut ctotal = 0;
    for h in handles {
        let (n, c) = h.join().map_err(|_| "reader panicked".to_string())?;
        total += n;
        ctotal += c;
    }
    if let Some(f) = failure.lock().unwrap().take() {
        return Err(f);
    }
    // After the storm, the lookup form must agree with the control form everywhere.
    for (k, v) in stable.iter() {
        if table.get(k) != Some(*v) {
            return Err(format!("after stress: stable key {k:02x?} wrong"));
        }
    }
    for i in 0..cfg.churn {
        let k = churn_key(i);
        if let Some(v) = ctl.get(&k)
            && table.get(&k) != Some(v)
        {
            return Err(format!("after stress: churn key {i}: table {:?}, control {v}", table.get(&k)));
        }
    }
    Ok(StressReport { reads: total, updates, churn_reads: ctotal })
}

/// Defines `struct $name($control)`: a [`ControlTable`] whose constructors use
/// fixed non-default options, so [`oracle_run`] and [`stress`] can drive any
/// configuration. `$control` must have `with_options(value_bits, opts)` and
/// `from_items_with(items, value_bits, opts)` (every keyplane structure with
/// options does).
///
/// ```
/// use keyplane::othello::{Control, Options};
/// keyplane::configured_table!(Filtered, Control, Options::filtered(6));
/// keyplane::conformance::oracle_run::<Filtered>(&Default::default()).unwrap();
/// ```
#[macro_export]
macro_rules! configured_table {
    ($name:ident, $control:ty, $opts:expr) => {
        struct $name($control);
        impl $crate::ControlTable for $name {
            type Delta = <$control as $crate::ControlTable>::Delta;
            type Lookup = <$control as $crate::ControlTable>::Lookup;
            fn with_value_bits(b: u32) -> $crate::Result<Self> {
                <$control>::with_options(b, $opts).map($name)
            }
            fn from_items<I, K>(items: I, b: u32) -> $crate::Result<Self>
            where
                I: IntoIterator<Item = (K, u64)>,
                K: AsRef<[u8]>,
            {
                <$control>::from_items_with(items, b, $opts).map($name)
            }
            fn insert(&mut self, k: &[u8], v: u64) -> $crate::Result<Self::Delta> {
                $crate::ControlTable::insert(&mut self.0, k, v)
            }
            fn remove(&mut self, k: &[u8]) -> $crate::Result<Option<Self::Delta>> {
                $crate::ControlTable::remove(&mut self.0, k)
            }
            fn get(&self, k: &[u8]) -> Option<u64> {
                $crate::ControlTable::get(&self.0, k)
            }
            fn len(&self) -> usize {
                $crate::ControlTable::len(&self.0)
            }
            fn value_bits(&self) -> u32 {
                $crate::ControlTable::value_bits(&self.0)
            }
            fn export(&self) -> Self::Lookup {
                $crate::ControlTable::export(&self.0)
            }
            fn memory_bytes(&self) -> usize {
                $crate::ControlTable::memory_bytes(&self.0)
            }
            fn lineage(&self) -> $crate::lineage::Lineage {
                $crate::ControlTable::lineage(&self.0)
            }
            fn set_lineage(&mut self, l: $crate::lineage::Lineage) {
                $crate::ControlTable::set_lineage(&mut self.0, l)
            }
        }
    };
}
