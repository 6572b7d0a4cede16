//! The conformance suite: the checks every [`ControlTable`] / [`LookupTable`]
//! pair must pass, written once and instantiated per structure with
//! [`conformance_suite!`](crate::conformance_suite) — oracle property runs
//! with delta replay through bytes, a reader-vs-writer stress run,
//! corruption sweeps of blobs and deltas, hostile payloads with valid
//! checksums, lost / repeated / foreign deltas, sequence numbers at the edges
//! (`0`, `u64::MAX - 1`, `u64::MAX`) and edge cases (empty table, empty key,
//! value widths).
//!
//! Behind the `conformance` cargo feature (keyplane's own tests turn it on
//! through a dev-dependency); a user implementing a structure of their own
//! can do the same. Failures are returned as `Err(String)` describing the
//! first divergence; the macro turns them into test failures.
//!
//! ```
//! # mod m {
//! keyplane::conformance_suite!(keyplane::othello::Control);
//! # }
//! ```

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

/// What a structure promises about the value a present key reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answers {
    /// Every inserted key reads exactly its value (Othello, Ludo, SetSep,
    /// cuckoo, CFW, FHT, FPT).
    Exact,
    /// An inserted key may read another value (Bloom false positives in BFW,
    /// fingerprint collisions in partial-key cuckoo). The suite then checks
    /// what can be checked without an oracle of the collisions: a replica fed
    /// only deltas answers exactly like a fresh export (and serialises to the
    /// same bytes); the structure's own tests check the rates.
    Approximate,
}

/// Per-structure parameters of the suite (the checks are the same for all).
#[derive(Debug, Clone)]
pub struct Suite {
    /// How present keys read ([`Answers`]).
    pub answers: Answers,
    /// The widest value width the structure takes.
    pub max_value_bits: u32,
    /// Value width of the runs that do not sweep widths.
    pub value_bits: u32,
    /// Operations of one oracle run (growth runs do three times as many).
    pub oracle_ops: usize,
    /// Deltas the writer applies in the reader-vs-writer run.
    pub stress_updates: usize,
    /// Keys bulk-loaded for the corruption sweeps and the sequence checks.
    pub sample_keys: u64,
    /// Random single-bit flips per corruption sweep.
    pub flips: usize,
}

impl Default for Suite {
    fn default() -> Self {
        Self {
            answers: Answers::Exact,
            max_value_bits: 64,
            value_bits: 8,
            oracle_ops: 20_000,
            stress_updates: 300_000,
            sample_keys: 300,
            flips: 2_000,
        }
    }
}

impl Suite {
    /// The value widths the width sweep runs: 1, 2, 7, 16, 33, 63, 64 up to
    /// [`Suite::max_value_bits`], and the maximum itself.
    pub fn widths(&self) -> Vec<u32> {
        let mut w: Vec<u32> = [1, 2, 7, 16, 33, 63, 64].into_iter().filter(|b| *b <= self.max_value_bits).collect();
        if !w.contains(&self.max_value_bits) {
            w.push(self.max_value_bits);
        }
        w
    }

    fn exact(&self) -> bool {
        self.answers == Answers::Exact
    }
}

fn fail<T>(r: Result<T, String>, what: &str) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// A replica fed only decoded deltas, checked against a fresh export after
/// every step (for [`Answers::Approximate`] structures, which have no value
/// oracle for present keys).
fn replica_run<C: ControlTable>(cfg: &OracleConfig) -> Result<(), String> {
    let mut rng = Rng::new(cfg.seed);
    let vmask = crate::mask(cfg.value_bits);
    let mut oracle: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut ctl = C::with_value_bits(cfg.value_bits).map_err(|e| e.to_string())?;
    let replica = C::Lookup::from_bytes(&ctl.export().to_bytes()).map_err(|e| format!("blob decode: {e}"))?;
    for step in 0..cfg.ops {
        let k = make_key(cfg.shape, rng.below(cfg.key_space));
        let d = if rng.chance(cfg.remove_ratio) {
            let had = oracle.remove(&k).is_some();
            let d = ctl.remove(&k).map_err(|e| format!("step {step}: remove: {e}"))?;
            if d.is_some() != had {
                return Err(format!("step {step}: remove of a key present={had} returned a delta={}", d.is_some()));
            }
            d
        } else {
            let v = rng.next_u64() & vmask;
            oracle.insert(k.clone(), v);
            Some(ctl.insert(&k, v).map_err(|e| format!("step {step}: insert: {e}"))?)
        };
        if let Some(d) = d {
            let d = C::Delta::from_bytes(&d.to_bytes()).map_err(|e| format!("step {step}: delta decode: {e}"))?;
            replica.apply(&d).map_err(|e| format!("step {step}: apply: {e}"))?;
        }
        if ctl.len() != oracle.len() || ctl.get(&k) != oracle.get(&k).copied() {
            return Err(format!("step {step}: the control form disagrees with the oracle on {k:02x?}"));
        }
        if (step + 1) % cfg.check_every == 0 || step + 1 == cfg.ops {
            let fresh = ctl.export();
            for key in oracle.keys() {
                if ctl.get(key) != Some(oracle[key]) || replica.get(key) != fresh.get(key) {
                    return Err(format!(
                        "step {step}: key {key:02x?}: control {:?}, oracle {}, replica {:?}, export {:?}",
                        ctl.get(key),
                        oracle[key],
                        replica.get(key),
                        fresh.get(key)
                    ));
                }
            }
            if replica.to_bytes() != fresh.to_bytes() {
                return Err(format!("step {step}: the delta-fed replica's blob differs from a fresh export"));
            }
        }
    }
    Ok(())
}

fn oracle_or_replica<C: ControlTable>(s: &Suite, cfg: &OracleConfig) -> Result<(), String> {
    if s.exact() { oracle_run::<C>(cfg) } else { replica_run::<C>(cfg) }
}

/// Oracle runs over mixed keys (the empty key, short and long keys), four seeds.
pub fn oracle_mixed_keys<C: ControlTable>(s: &Suite) -> Result<(), String> {
    for seed in 0..4 {
        let cfg =
            OracleConfig { seed, ops: s.oracle_ops, key_space: 3_000, value_bits: s.value_bits, ..Default::default() };
        fail(oracle_or_replica::<C>(s, &cfg), &format!("seed {seed}"))?;
    }
    Ok(())
}

/// Oracle runs at every value width of [`Suite::widths`].
pub fn oracle_value_widths<C: ControlTable>(s: &Suite) -> Result<(), String> {
    for bits in s.widths() {
        let cfg = OracleConfig {
            value_bits: bits,
            seed: bits as u64,
            ops: s.oracle_ops * 2 / 5,
            key_space: 2_000,
            ..Default::default()
        };
        fail(oracle_or_replica::<C>(s, &cfg), &format!("{bits}-bit values"))?;
    }
    Ok(())
}

/// From a small bulk load far past its capacity (growth, rebuilds), for
/// integer and mixed keys; then mostly removes after a large bulk load
/// (shrinking).
pub fn oracle_growth_and_shrink<C: ControlTable>(s: &Suite) -> Result<(), String> {
    for shape in [KeyShape::U64, KeyShape::Mixed] {
        let cfg = OracleConfig {
            ops: s.oracle_ops * 3,
            key_space: (s.oracle_ops * 2) as u64,
            remove_ratio: 0.1,
            initial: 100,
            check_every: 5_000,
            shape,
            value_bits: s.value_bits,
            seed: 11,
        };
        fail(oracle_or_replica::<C>(s, &cfg), &format!("growth, {shape:?} keys"))?;
    }
    let cfg = OracleConfig {
        ops: s.oracle_ops / 2,
        key_space: 12_000,
        remove_ratio: 0.9,
        initial: 12_000,
        check_every: 3_000,
        value_bits: s.value_bits,
        seed: 12,
        ..Default::default()
    };
    if s.exact() { fail(oracle_run::<C>(&cfg), "shrink") } else { Ok(()) }
}

/// Many short random operation sequences (random value width, a small key
/// space with the empty key), every key checked after every operation.
pub fn oracle_short_sequences<C: ControlTable>(s: &Suite) -> Result<(), String> {
    let mut rng = Rng::new(0x5e9);
    for case in 0..48 {
        let cfg = OracleConfig {
            ops: 1 + rng.below(400) as usize,
            key_space: 300,
            value_bits: 1 + rng.below(s.max_value_bits as u64) as u32,
            remove_ratio: 0.25,
            check_every: 1,
            shape: KeyShape::Mixed,
            seed: rng.next_u64(),
            initial: 0,
        };
        fail(
            oracle_or_replica::<C>(s, &cfg),
            &format!("case {case} ({} ops, {}-bit values)", cfg.ops, cfg.value_bits),
        )?;
    }
    Ok(())
}

/// Reader threads against one writer ([`stress`]); for exact structures only.
pub fn stress_readers_vs_writer<C: ControlTable>(s: &Suite) -> Result<(), String>
where
    C::Lookup: 'static,
{
    if !s.exact() {
        return Ok(());
    }
    let cfg = StressConfig { updates: s.stress_updates, value_bits: s.value_bits, ..Default::default() };
    let r = stress::<C>(&cfg)?;
    if r.reads == 0 || r.updates < s.stress_updates as u64 {
        return Err(format!("stress made {} reads and {} updates", r.reads, r.updates));
    }
    Ok(())
}

/// A control form, its lookup blob and deltas of every kind ([`samples`]).
type Samples<C> = (C, Vec<u8>, Vec<Vec<u8>>);

/// A bulk-loaded control form of [`Suite::sample_keys`] mixed keys, its
/// lookup blob, and delta bytes of every kind the control form emits for
/// single operations: insert, overwrite, remove, and the largest delta seen
/// while growing an empty table (a rebuild or growth delta).
fn samples<C: ControlTable>(s: &Suite) -> Result<Samples<C>, String> {
    let vmask = crate::mask(s.value_bits);
    let items = (0..s.sample_keys).map(|i| (make_key(KeyShape::Mixed, i), i & vmask));
    let mut ctl = C::from_items(items, s.value_bits).map_err(|e| format!("from_items: {e}"))?;
    let blob = ctl.export().to_bytes();
    let mut deltas = Vec::new();
    let e = |e: crate::Error| e.to_string();
    deltas.push(ctl.insert(b"a new and rather long key, longer than eight bytes", 1).map_err(e)?.to_bytes());
    deltas.push(ctl.insert(&make_key(KeyShape::Mixed, 5), 3 & vmask).map_err(e)?.to_bytes());
    deltas.push(
        ctl.remove(&make_key(KeyShape::Mixed, 7))
            .map_err(e)?
            .ok_or("remove of a present key gave no delta")?
            .to_bytes(),
    );
    let mut grow = C::with_value_bits(s.value_bits).map_err(e)?;
    let mut largest = Vec::new();
    for i in 0..3_000u64 {
        let d = grow.insert(&i.to_le_bytes(), i & vmask).map_err(e)?.to_bytes();
        if d.len() > largest.len() {
            largest = d;
        }
    }
    deltas.push(largest);
    Ok((ctl, blob, deltas))
}

/// Every truncation and random bit flips of a blob and of every kind of
/// delta are refused; random payloads in a valid frame never panic; a blob
/// is not a delta and a delta is not a blob.
pub fn corruption_sweeps<C: ControlTable>(s: &Suite) -> Result<(), String> {
    let (_, blob, deltas) = samples::<C>(s)?;
    fail(corruption_sweep::<C::Lookup>(&blob, s.flips, 1), "lookup blob")?;
    for (i, d) in deltas.iter().enumerate() {
        fail(corruption_sweep::<C::Delta>(d, s.flips, 2 + i as u64), &format!("delta {i}"))?;
    }
    let lookup_kind = crate::wire::Frame::inspect(&blob).map_err(|e| e.to_string())?.kind;
    let delta_kind = crate::wire::Frame::inspect(&deltas[0]).map_err(|e| e.to_string())?.kind;
    if lookup_kind != <C::Lookup as Wire>::KIND || delta_kind != <C::Delta as Wire>::KIND {
        return Err(format!("frames carry kinds {lookup_kind:?} / {delta_kind:?}, not the types' own Wire::KIND"));
    }
    garbage_sweep::<C::Lookup>(lookup_kind, 3_000, 7);
    garbage_sweep::<C::Delta>(delta_kind, 3_000, 8);
    if !matches!(C::Delta::from_bytes(&blob), Err(crate::Error::KindMismatch { .. })) {
        return Err("a lookup blob decoded as a delta (or failed with another error)".into());
    }
    if !matches!(C::Lookup::from_bytes(&deltas[0]), Err(crate::Error::KindMismatch { .. })) {
        return Err("a delta decoded as a lookup blob (or failed with another error)".into());
    }
    Ok(())
}

/// Overwrites `bytes[at..at + n]` with `patch` and recomputes the frame
/// checksum, so the result passes every framing check.
pub fn patch_framed(bytes: &[u8], at: usize, patch: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[at..at + patch.len()].copy_from_slice(patch);
    let end = b.len() - crate::wire::TRAILER_LEN;
    let sum = crate::wire::checksum(&b[..end]);
    b[end..].copy_from_slice(&sum.to_le_bytes());
    b
}

/// Random bytes written over the payload of blobs and deltas, with a valid
/// checksum: decoding and applying what decodes never panics (any build
/// profile), and a table that refused a delta still answers its keys.
pub fn hostile_payloads_never_panic<C: ControlTable>(s: &Suite) -> Result<(), String> {
    let (ctl, blob, deltas) = samples::<C>(s)?;
    let mut rng = Rng::new(0xbad);
    let start = crate::wire::HEADER_LEN + crate::lineage::PROLOGUE_LEN;
    let probe = make_key(KeyShape::Mixed, 3);
    for round in 0..1_500 {
        let src = if round % 4 == 0 { &blob } else { &deltas[round % deltas.len()] };
        let end = src.len() - crate::wire::TRAILER_LEN;
        if end <= start {
            continue;
        }
        let at = start + rng.below((end - start) as u64) as usize;
        let n = (1 + rng.below(8) as usize).min(end - at);
        let patch: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
        let bad = patch_framed(src, at, &patch);
        if round % 4 == 0 {
            if let Ok(t) = C::Lookup::from_bytes(&bad) {
                let _ = t.get(&probe);
                let mut out = [None; 2];
                t.get_batch(&[probe.as_slice(), b"x"], &mut out);
            }
        } else if let Ok(d) = C::Delta::from_bytes(&bad) {
            // A fresh table at the sequence number the delta expects.
            let table = C::Lookup::from_bytes(&blob).map_err(|e| e.to_string())?;
            let _ = table.apply(&d);
            let _ = table.get(&probe);
        }
    }
    let table = ctl.export();
    if s.exact() && table.get(&probe) != ctl.get(&probe) {
        return Err("the sample table lost a key".into());
    }
    Ok(())
}

/// A skipped delta and a repeated delta are refused ([`crate::Error::DeltaMismatch`])
/// and change nothing; the deltas then apply in order.
pub fn deltas_apply_in_order_only<C: ControlTable>(s: &Suite) -> Result<(), String> {
    let vmask = crate::mask(s.value_bits);
    let mut ctl =
        C::from_items((0..1000u64).map(|i| (i.to_le_bytes(), i & vmask)), s.value_bits).map_err(|e| e.to_string())?;
    let t = ctl.export();
    let d1 = ctl.insert(b"a", 1).map_err(|e| e.to_string())?;
    let d2 = ctl.insert(b"b", 1).map_err(|e| e.to_string())?;
    if !matches!(t.apply(&d2), Err(crate::Error::DeltaMismatch(_))) {
        return Err("delta #2 applied to a table at #0".into());
    }
    t.apply(&d1).map_err(|e| format!("delta #1: {e}"))?;
    if !matches!(t.apply(&d1), Err(crate::Error::DeltaMismatch(_))) {
        return Err("delta #1 applied twice".into());
    }
    t.apply(&d2).map_err(|e| format!("delta #2: {e}"))?;
    if s.exact() && (t.get(b"a") != Some(1) || t.get(b"b") != Some(1)) {
        return Err("keys of the applied deltas are missing".into());
    }
    Ok(())
}

/// A delta of another table with the same structure, parameters, keys and
/// sequence number is refused as belonging to another table, including a
/// whole-table (rebuild) delta, and changes nothing: the genuine delta
/// still applies afterwards.
pub fn foreign_deltas_refused<C: ControlTable>(s: &Suite) -> Result<(), String> {
    let vmask = crate::mask(s.value_bits);
    let items = || (0..s.sample_keys).map(|i| (make_key(KeyShape::Mixed, i), i & vmask));
    let mut ctl = C::from_items(items(), s.value_bits).map_err(|e| e.to_string())?;
    let mut other = C::from_items(items(), s.value_bits).map_err(|e| e.to_string())?;
    if ctl.table_id() == other.table_id() {
        return Err("two control forms drew the same table id".into());
    }
    let table = ctl.export();
    let before: Vec<Option<u64>> = items().map(|(k, _)| table.get(&k)).collect();
    let genuine = ctl.insert(b"one more key", 1).map_err(|e| e.to_string())?;
    let alien = other.insert(b"one more key", 1).map_err(|e| e.to_string())?;
    let mut aliens = vec![alien.to_bytes()];
    // The other table's growth deltas (the largest is a whole-table one).
    let mut largest = Vec::new();
    for i in 0..3_000u64 {
        let d = other.insert(&(i | 1 << 50).to_le_bytes(), i & vmask).map_err(|e| e.to_string())?.to_bytes();
        if d.len() > largest.len() {
            largest = d;
        }
    }
    aliens.push(largest);
    for (i, a) in aliens.iter().enumerate() {
        let d = C::Delta::from_bytes(a).map_err(|e| e.to_string())?;
        match table.apply(&d) {
            Err(crate::Error::DeltaMismatch(m)) if m.contains("belongs to table") => {}
            r => return Err(format!("another table's delta {i} gave {r:?}")),
        }
    }
    let after: Vec<Option<u64>> = items().map(|(k, _)| table.get(&k)).collect();
    if before != after {
        return Err("a refused delta changed answers".into());
    }
    table.apply(&genuine).map_err(|e| format!("the genuine delta after the refusals: {e}"))?;
    if s.exact() && table.get(b"one more key") != Some(1) {
        return Err("the genuine delta did not insert its key".into());
    }
    Ok(())
}

/// Sequence numbers at the edges: a delta numbered `u64::MAX`,
/// `u64::MAX - 1`, `0` or `2` on a table at `0`, and any delta on a table
/// whose (checksummed) blob says `u64::MAX`, are
/// [`crate::Error::DeltaMismatch`] — never a panic, in any build profile.
pub fn sequence_edges<C: ControlTable>(s: &Suite) -> Result<(), String> {
    let seq_at = crate::wire::HEADER_LEN + 16;
    let vmask = crate::mask(s.value_bits);
    let mut ctl = C::from_items((0..s.sample_keys).map(|i| (make_key(KeyShape::Mixed, i), i & vmask)), s.value_bits)
        .map_err(|e| e.to_string())?;
    let table = ctl.export();
    let delta = ctl.insert(b"one more key", 1).map_err(|e| e.to_string())?;
    let dbytes = delta.to_bytes();
    if dbytes[seq_at..seq_at + 8] != 1u64.to_le_bytes() {
        return Err("the delta's sequence number is not where the lineage prologue puts it".into());
    }
    let renumbered = |seq: u64| {
        C::Delta::from_bytes(&patch_framed(&dbytes, seq_at, &seq.to_le_bytes()))
            .map_err(|e| format!("a renumbered delta does not decode: {e}"))
    };
    for seq in [u64::MAX, u64::MAX - 1, 0, 2] {
        match table.apply(&renumbered(seq)?) {
            Err(crate::Error::DeltaMismatch(_)) => {}
            r => return Err(format!("delta #{seq} on a table at #0 gave {r:?}")),
        }
    }
    let blob = patch_framed(&table.to_bytes(), seq_at, &u64::MAX.to_le_bytes());
    if let Ok(at_max) = C::Lookup::from_bytes(&blob) {
        for seq in [u64::MAX, u64::MAX - 1, 0, 1] {
            match at_max.apply(&renumbered(seq)?) {
                Err(crate::Error::DeltaMismatch(_)) => {}
                r => return Err(format!("delta #{seq} on a table at u64::MAX gave {r:?}")),
            }
        }
    }
    table.apply(&delta).map_err(|e| format!("the genuine delta: {e}"))?;
    if s.exact() && table.get(b"one more key") != Some(1) {
        return Err("the genuine delta did not insert its key".into());
    }
    Ok(())
}

/// Empty tables, the empty key, keys differing only in trailing zero bytes,
/// value-width bounds, values too wide, the widest value, repeated keys in
/// a bulk load, removing absent and last keys, mismatched batch lengths.
pub fn edge_cases<C: ControlTable>(s: &Suite) -> Result<(), String> {
    let e = |e: crate::Error| e.to_string();
    let check = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_string()) };
    let mut ctl = C::with_value_bits(1).map_err(e)?;
    check(ctl.is_empty() && ctl.get(b"").is_none(), "a new control form is not empty")?;
    let t = ctl.export();
    let rt = C::Lookup::from_bytes(&t.to_bytes()).map_err(|e| format!("empty blob: {e}"))?;
    let mut out = [Some(0); 2];
    rt.get_batch(&[b"".as_slice(), b"x"], &mut out);
    rt.get_batch(&[], &mut []);
    let mut one = [None; 1];
    rt.get_batch(&[b"a".as_slice(), b"b"], &mut one);
    t.apply(&ctl.insert(b"", 1).map_err(e)?).map_err(e)?;
    check(t.get(b"") == Some(1) && ctl.len() == 1, "the empty key")?;
    // Same value again: a delta that still applies in order.
    t.apply(&ctl.insert(b"", 1).map_err(e)?).map_err(e)?;
    check(ctl.remove(b"absent").map_err(e)?.is_none(), "removing an absent key gave a delta")?;
    check(
        matches!(ctl.insert(b"x", 2), Err(crate::Error::ValueTooWide { value: 2, bits: 1 })),
        "a 2-bit value went into a 1-bit table",
    )?;
    check(ctl.get(b"x").is_none(), "a refused insert left its key")?;
    check(matches!(C::with_value_bits(0), Err(crate::Error::InvalidValueBits { .. })), "0-bit values accepted")?;
    check(C::with_value_bits(s.max_value_bits + 1).is_err(), "values wider than the maximum accepted")?;
    let max = crate::mask(s.max_value_bits);
    let mut wide = C::with_value_bits(s.max_value_bits).map_err(e)?;
    let w = wide.export();
    w.apply(&wide.insert(b"max", max).map_err(e)?).map_err(e)?;
    check(w.get(b"max") == Some(max), "the widest value")?;
    let b = C::from_items([(b"k".to_vec(), 1), (b"k".to_vec(), 2)], 4).map_err(e)?;
    check(b.len() == 1 && b.export().get(b"k") == Some(2), "a repeated key in a bulk load: the last value wins")?;
    check(C::from_items([(b"k".to_vec(), 16)], 4).is_err(), "a bulk load with a value too wide")?;
    if s.exact() {
        let mut c = C::with_value_bits(8).map_err(e)?;
        let keys: [&[u8]; 6] = [b"\0", b"\0\0", b"ab", b"ab\0", b"12345678", b"123456780"];
        for (i, k) in keys.iter().enumerate() {
            c.insert(k, i as u64).map_err(e)?;
        }
        let x = c.export();
        for (i, k) in keys.iter().enumerate() {
            check(x.get(k) == Some(i as u64), "keys differing only in trailing zero bytes")?;
        }
    }
    // Remove the last key, then insert it again.
    t.apply(&ctl.remove(b"").map_err(e)?.ok_or("removing the last key gave no delta")?).map_err(e)?;
    check(ctl.is_empty(), "the table is not empty after removing its last key")?;
    t.apply(&ctl.insert(b"", 0).map_err(e)?).map_err(e)?;
    check(t.get(b"") == Some(0), "re-inserting a removed key")?;
    Ok(())
}

/// Instantiates the conformance suite for one structure: one `#[test]`
/// function per check of [`conformance`](crate::conformance), named after
/// it (`oracle_mixed_keys`, `oracle_value_widths`, `oracle_growth_and_shrink`,
/// `oracle_short_sequences`, `stress_readers_vs_writer`, `corruption_sweeps`,
/// `hostile_payloads_never_panic`, `deltas_apply_in_order_only`,
/// `foreign_deltas_refused`, `sequence_edges`, `edge_cases`). Put each
/// instantiation in its own module. The second argument is a
/// [`Suite`](crate::conformance::Suite) (default: exact answers, values up
/// to 64 bits); after a `;`, a list of checks runs only those (for extra
/// configurations of a structure already run through the whole suite).
///
/// ```
/// mod othello {
///     keyplane::conformance_suite!(keyplane::othello::Control);
/// }
/// mod bfw {
///     use keyplane::conformance::{Answers, Suite};
///     keyplane::conformance_suite!(keyplane::bfw::Control, Suite {
///         answers: Answers::Approximate,
///         max_value_bits: 16,
///         ..Suite::default()
///     });
/// }
/// ```
#[macro_export]
macro_rules! conformance_suite {
    (@tests $control:ty, $suite:expr; $($check:ident),*) => {
        $(
            #[test]
            fn $check() {
                let suite: $crate::conformance::Suite = $suite;
                if let Err(e) = $crate::conformance::$check::<$control>(&suite) {
                    panic!("{} for {}: {e}", stringify!($check), stringify!($control));
                }
            }
        )*
    };
    ($control:ty) => {
        $crate::conformance_suite!($control, $crate::conformance::Suite::default());
    };
    ($control:ty, $suite:expr; $($check:ident),+ $(,)?) => {
        $crate::conformance_suite!(@tests $control, $suite; $($check),+);
    };
    ($control:ty, $suite:expr) => {
        $crate::conformance_suite!(@tests $control, $suite;
            oracle_mixed_keys, oracle_value_widths, oracle_growth_and_shrink, oracle_short_sequences,
            stress_readers_vs_writer, corruption_sweeps, hostile_payloads_never_panic,
            deltas_apply_in_order_only, foreign_deltas_refused, sequence_edges, edge_cases);
    };
}
