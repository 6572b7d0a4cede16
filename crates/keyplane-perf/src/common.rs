//! Shared benchmark machinery: key generation (from `keyplane-keygen`), timing, the generic
//! measurement of any `ControlTable`, baselines, the DRAM floor, output.

use keyplane::{ControlTable, LookupTable, ReadHandle};
use serde_json::{Map, Value, json};
use std::hint::black_box;
use std::time::Instant;

pub use crate::args::*;
pub use keyplane_keygen::{
    KeySet, KeyType, gen_keys, gen_names, gen_values, mix, parse_num, sample_indices, stream, zipf_stream,
};

/// Seconds of a closure.
pub fn time<R>(f: impl FnOnce() -> R) -> (R, f64) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed().as_secs_f64())
}

/// Best-of-`reps` nanoseconds per operation of a closure that performs `ops`
/// operations.
pub fn best_ns(reps: usize, ops: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_nanos() as f64 / ops as f64);
    }
    best
}

/// One measurement, printed as one JSON object.
#[derive(Debug, Clone, Default)]
pub struct Record(pub Map<String, Value>);

impl Record {
    /// A record with the common identifying fields.
    pub fn new(structure: &str, n: usize, value_bits: u32, key_type: KeyType) -> Self {
        let mut m = Map::new();
        m.insert("structure".into(), json!(structure));
        m.insert("n".into(), json!(n));
        m.insert("value_bits".into(), json!(value_bits));
        m.insert("key_type".into(), json!(key_type.label()));
        Record(m)
    }
    /// Sets a field.
    pub fn set(&mut self, k: &str, v: impl Into<Value>) -> &mut Self {
        self.0.insert(k.to_string(), v.into());
        self
    }
    /// A numeric field.
    pub fn num(&self, k: &str) -> Option<f64> {
        self.0.get(k).and_then(|v| v.as_f64())
    }
}

/// Loaded state the measurements share.
pub struct Workload {
    /// Key type.
    pub kt: KeyType,
    /// Keys.
    pub keys: KeySet,
    /// Values (`value_bits` wide).
    pub values: Vec<u64>,
    /// Keys never inserted.
    pub alien: KeySet,
    /// Query stream: keys in random lookup order, laid out contiguously (as
    /// packets arrive), so timing measures the table and not the key set.
    pub queries: KeySet,
    /// Alien query stream (keys never inserted).
    pub alien_queries: KeySet,
    /// Value width.
    pub value_bits: u32,
    /// Threads for the multi-threaded lookup figure.
    pub threads: usize,
    /// Updates to time.
    pub updates: usize,
}

impl Workload {
    /// Generates a workload from `--keys`, `--value-bits`, `--key-type`, `--threads`.
    pub fn from_args(a: &Common) -> Result<Self, String> {
        let n = a.keys as usize;
        let bits = a.value_bits;
        let kt = a.key_type;
        let (keys, t) = time(|| gen_keys(kt, n, 1));
        let alien = gen_keys(kt, (n / 4).clamp(1000, 1 << 20), 2);
        eprintln!("# generated {n} {} keys in {t:.2}s", kt.label());
        // `--dist zipf [--zipf-s 1.0]` skews the query stream (Concise Fig. 5, thesis Figs. 4.17–4.18).
        let queries = match a.dist {
            Dist::Uniform => stream(&keys, n.clamp(1, 2 << 20), 4),
            Dist::Zipf => zipf_stream(&keys, n.clamp(1, 2 << 20), a.zipf_s, 4),
        };
        let alien_queries = stream(&alien, n.clamp(1, 1 << 20), 5);
        Ok(Self {
            kt,
            values: gen_values(n, bits, 3),
            queries,
            alien_queries,
            keys,
            alien,
            value_bits: bits,
            threads: a.threads,
            updates: a.updates as usize,
        })
    }
    /// Number of keys.
    pub fn n(&self) -> usize {
        self.keys.len()
    }
    /// `(key, value)` pairs.
    pub fn items(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.keys.iter().zip(self.values.iter().copied())
    }
}

/// Times single lookups over a query stream, returns ns per lookup (best of 3).
pub fn lookup_ns(queries: &KeySet, get: impl Fn(&[u8]) -> Option<u64>) -> f64 {
    best_ns(3, queries.len(), || {
        let mut acc = 0u64;
        for k in queries.iter() {
            acc = acc.wrapping_add(get(k).unwrap_or(1));
        }
        black_box(acc);
    })
}

/// Times `get_batch` in batches of `batch` keys over a query stream.
pub fn batch_ns<L: LookupTable>(t: &L, queries: &KeySet, batch: usize) -> f64 {
    let refs: Vec<&[u8]> = queries.iter().collect();
    let mut out = vec![None; batch];
    best_ns(3, refs.len(), || {
        let mut acc = 0u64;
        for ch in refs.chunks(batch) {
            t.get_batch(ch, &mut out[..ch.len()]);
            acc = acc.wrapping_add(out[0].unwrap_or(1));
        }
        black_box(acc);
    })
}

/// Lookups per second with `threads` threads sharing one table, each
/// through its own read handle ([`LookupTable::reader`]).
pub fn threaded_mops<L: LookupTable>(t: &L, queries: &KeySet, threads: usize) -> f64 {
    let refs: Vec<&[u8]> = queries.iter().collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for th in 0..threads {
            let refs = &refs;
            s.spawn(move || {
                let rd = t.reader();
                let mut out = vec![None; 16];
                let mut acc = 0u64;
                let rot = th * refs.len() / threads.max(1);
                for i in (0..refs.len()).step_by(16) {
                    let j = (i + rot) % refs.len();
                    let end = (j + 16).min(refs.len());
                    rd.get_batch(&refs[j..end], &mut out[..end - j]);
                    acc = acc.wrapping_add(out[0].unwrap_or(1));
                }
                black_box(acc);
            });
        }
    });
    (refs.len() * threads) as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// The measurements every `ControlTable` gets: build, memory, lookups
/// (single, batched, alien, multi-threaded) and updates (an equal mix of
/// insert / value change / delete, control plane producing deltas and the
/// lookup form applying them). Fails loudly if any key reads wrong.
pub fn measure<C: ControlTable>(
    name: &str,
    w: &Workload,
    build: impl Fn(&Workload) -> keyplane::Result<C>,
) -> (Record, C, C::Lookup) {
    let n = w.n();
    let (ctl, build_s) = time(|| build(w).expect("build"));
    let table = ctl.export();
    // Verify every key before timing anything.
    for (i, k) in w.keys.iter().enumerate() {
        assert_eq!(table.get(k), Some(w.values[i]), "{name}: key {i} wrong after build");
    }
    let mut r = Record::new(name, n, w.value_bits, w.kt);
    let mem = table.memory_bytes();
    r.set("memory_bytes", mem);
    r.set("bits_per_key", mem as f64 * 8.0 / n as f64);
    r.set("build_ns_per_key", build_s * 1e9 / n as f64);
    r.set("build_keys_per_s", n as f64 / build_s);
    r.set("lookup_ns", lookup_ns(&w.queries, |k| table.get(k)));
    {
        let rd = table.reader();
        r.set("reader_lookup_ns", lookup_ns(&w.queries, |k| rd.get(k)));
    }
    r.set("batch_lookup_ns", batch_ns(&table, &w.queries, 16));
    r.set("alien_lookup_ns", lookup_ns(&w.alien_queries, |k| table.get(k)));
    let fp = w.alien.iter().filter(|k| table.get(k).is_some()).count();
    r.set("alien_positive_rate", fp as f64 / w.alien.len() as f64);
    r.set("threads", w.threads);
    r.set("threaded_lookup_mops", threaded_mops(&table, &w.queries, w.threads));
    (r, ctl, table)
}

/// Update throughput: `ops` operations, an equal mix of insert (fresh keys),
/// value change and delete, each producing a delta that `table` applies.
/// Returns (ops/s end to end, ops/s control plane only).
pub fn measure_updates<C: ControlTable>(ctl: &mut C, table: &C::Lookup, w: &Workload, ops: usize) -> (f64, f64) {
    let fresh = gen_keys(w.kt, ops / 3 + 1, 7);
    let vm = keyplane::mask(w.value_bits);
    let n = w.n();
    let mut del = 0usize;
    // Chunks keep the pending deltas cache-sized: the control plane produces
    // a chunk (timed), then the lookup form applies it (timed).
    const CHUNK: usize = 4096;
    let mut deltas = Vec::with_capacity(CHUNK);
    let (mut ctl_s, mut apply_s) = (0.0, 0.0);
    let mut i = 0;
    while i < ops {
        let end = (i + CHUNK).min(ops);
        let t0 = Instant::now();
        for i in i..end {
            let d = match i % 3 {
                0 => Some(ctl.insert(fresh.get(i / 3), mix(i as u64) & vm).expect("insert")),
                1 => {
                    let k = (mix(i as u64 ^ 0x77) % n as u64) as usize;
                    Some(ctl.insert(w.keys.get(k), (w.values[k] + 1) & vm).expect("change"))
                }
                _ => {
                    // Delete keys inserted earlier in this loop, oldest first.
                    let d = ctl.remove(fresh.get(del)).expect("remove");
                    del += 1;
                    d
                }
            };
            if let Some(d) = d {
                deltas.push(d);
            }
        }
        ctl_s += t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        for d in deltas.drain(..) {
            table.apply(&d).expect("apply");
        }
        apply_s += t1.elapsed().as_secs_f64();
        i = end;
    }
    (ops as f64 / (ctl_s + apply_s), ops as f64 / ctl_s)
}

/// The memory floor for batched lookups: ns per key for `reads` independent
/// random 8-byte reads into a buffer of `bytes`, with the same prefetching
/// pattern (hash, prefetch a batch, then read).
pub fn dram_floor_ns(bytes: usize, reads: usize) -> f64 {
    let words = (bytes / 8).max(1 << 16);
    // calloc'd pages are mapped on first touch: advise before filling.
    let mut v: Vec<u64> = vec![0; words];
    keyplane::ext::mem::advise_hugepages(&v);
    v.iter_mut().for_each(|x| *x = 1);
    let keys = 1 << 21;
    best_ns(3, keys, || {
        let mut acc = 0u64;
        let mut idx = [0usize; 16 * 4];
        for b in 0..keys / 16 {
            for (j, slot) in idx[..16 * reads].iter_mut().enumerate() {
                let i = keyplane::hash::reduce64(mix((b * 64 + j) as u64), words as u64) as usize;
                *slot = i;
                keyplane::ext::mem::prefetch(&v[i] as *const u64);
            }
            for &i in &idx[..16 * reads] {
                acc = acc.wrapping_add(v[i]);
            }
        }
        black_box(acc);
    })
}

/// hashbrown `HashMap<Box<[u8]>, u64>` baseline (foldhash): memory, lookups.
pub fn baseline_hashbrown(w: &Workload) -> Record {
    let n = w.n();
    let (m, build_s) = time(|| {
        let mut m: hashbrown::HashMap<Box<[u8]>, u64> = hashbrown::HashMap::with_capacity(n);
        for (k, v) in w.items() {
            m.insert(k.into(), v);
        }
        m
    });
    let mut r = Record::new("hashbrown", n, w.value_bits, w.kt);
    let mem = m.capacity() * (std::mem::size_of::<(Box<[u8]>, u64)>() + 1) + w.keys.bytes();
    r.set("memory_bytes", mem);
    r.set("bits_per_key", mem as f64 * 8.0 / n as f64);
    r.set("build_ns_per_key", build_s * 1e9 / n as f64);
    r.set("lookup_ns", lookup_ns(&w.queries, |k| m.get(k).copied()));
    r.set("alien_lookup_ns", lookup_ns(&w.alien_queries, |k| m.get(k).copied()));
    r.set("note", "full keys (Box<[u8]>) + u64 values, foldhash; memory = table + key heap bytes");
    r
}

/// xorf binary fuse filter baselines (8- and 16-bit fingerprints): static
/// membership filters over the keys' 64-bit hashes, the most compact
/// comparable static structure (it stores no values).
pub fn baseline_xorf(w: &Workload) -> Vec<Record> {
    use xorf::{BinaryFuse8, BinaryFuse16, Filter};
    let n = w.n();
    let hashes: Vec<u64> = w.keys.iter().map(|k| keyplane::hash::hash64(k, 0)).collect();
    let mut out = Vec::new();
    {
        let (f, s) = time(|| BinaryFuse8::try_from(&hashes[..]).expect("fuse8"));
        let mut r = Record::new("xorf_binary_fuse8", n, 8, w.kt);
        let mem = f.fingerprints.len();
        r.set("memory_bytes", mem).set("bits_per_key", mem as f64 * 8.0 / n as f64);
        r.set("build_ns_per_key", s * 1e9 / n as f64);
        r.set("lookup_ns", lookup_ns(&w.queries, |k| f.contains(&keyplane::hash::hash64(k, 0)).then_some(0)));
        r.set("note", "membership filter, no values");
        out.push(r);
    }
    {
        let (f, s) = time(|| BinaryFuse16::try_from(&hashes[..]).expect("fuse16"));
        let mut r = Record::new("xorf_binary_fuse16", n, 16, w.kt);
        let mem = f.fingerprints.len() * 2;
        r.set("memory_bytes", mem).set("bits_per_key", mem as f64 * 8.0 / n as f64);
        r.set("build_ns_per_key", s * 1e9 / n as f64);
        r.set("lookup_ns", lookup_ns(&w.queries, |k| f.contains(&keyplane::hash::hash64(k, 0)).then_some(0)));
        r.set("note", "membership filter, no values");
        out.push(r);
    }
    out
}

/// Prints records: JSON lines on stdout with `--json`, and a table on stderr
/// (stdout without `--json`).
pub fn emit(records: &[Record], json: bool) {
    let cols = [
        "structure",
        "n",
        "value_bits",
        "key_type",
        "bits_per_key",
        "build_ns_per_key",
        "lookup_ns",
        "batch_lookup_ns",
        "alien_lookup_ns",
        "update_ops_per_s",
    ];
    // Records that are not table measurements (e.g. hash timings) get their own columns.
    let owned: Vec<String>;
    let cols: Vec<&str> = if records.iter().any(|r| r.0.contains_key("bits_per_key") || r.0.contains_key("lookup_ns")) {
        cols.to_vec()
    } else {
        owned = records.first().map(|r| r.0.keys().cloned().collect()).unwrap_or_default();
        owned.iter().map(String::as_str).collect()
    };
    let mut table = String::new();
    table.push_str(&format!("| {} |\n", cols.join(" | ")));
    table.push_str(&format!("|{}\n", "---|".repeat(cols.len())));
    for r in records {
        let cells: Vec<String> = cols
            .iter()
            .map(|c| match r.0.get(*c) {
                Some(Value::Number(x)) => {
                    let f = x.as_f64().unwrap_or(0.0);
                    if f.fract() == 0.0 && f.abs() < 1e15 {
                        format!("{f}")
                    } else if f >= 1e5 {
                        format!("{f:.3e}")
                    } else {
                        format!("{f:.2}")
                    }
                }
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => "–".into(),
            })
            .collect();
        table.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    if json {
        for r in records {
            println!("{}", Value::Object(r.0.clone()));
        }
        eprint!("{table}");
    } else {
        print!("{table}");
    }
}
