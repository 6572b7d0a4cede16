//! The benchmarks' typed arguments, parsed with clap (derive) by the
//! `keyplane bench` command, the `keyplane-bench` binary and the report.
//! Every value is checked while parsing, before any key is generated: an
//! unknown flag, an out-of-range value or a count that would not fit in
//! memory is clap's usage error (exit 2), and `NAME --help` runs nothing.

use clap::{Args, Subcommand, ValueEnum};
use keyplane_keygen::{KeyType, parse_num};

/// One benchmark and its flags: `keyplane bench NAME [FLAGS]`.
#[derive(Subcommand, Debug, Clone)]
pub enum Bench {
    /// Othello / Concise FIB / OFW, with hashbrown and xorf baselines.
    Othello(OthelloArgs),
    /// Ludo hashing, with the PtrHash MPHF baseline.
    Ludo(LudoArgs),
    /// ScaleBricks SetSep.
    Setsep(SetSepArgs),
    /// CuckooSwitch (2,4) cuckoo hash, with hashbrown, RwLock and dashmap baselines.
    Cuckoo(CuckooArgs),
    /// The partial-key cuckoo hash (thesis §4.5): one record per fingerprint width.
    #[command(name = "cuckoo-partial", visible_alias = "pkcuckoo")]
    CuckooPartial(CuckooPartialArgs),
    /// Cuckoo Filtable forwarder.
    Cfw(CfwArgs),
    /// Bloom forwarder.
    Bfw(BfwArgs),
    /// Fingerprint hash table for names.
    Fht(FhtArgs),
    /// Fingerprint Patricia trie for names.
    Fpt(FptArgs),
    /// Concury load balancer, with the Maglev and SilkRoad balancers (`keyplane::lb::{maglev, silkroad}`).
    Lb(LbArgs),
    /// Key hash functions.
    Hash(HashArgs),
}

impl Bench {
    /// The benchmark's canonical name (`cuckoo-partial` for `pkcuckoo`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Othello(_) => "othello",
            Self::Ludo(_) => "ludo",
            Self::Setsep(_) => "setsep",
            Self::Cuckoo(_) => "cuckoo",
            Self::CuckooPartial(_) => "cuckoo-partial",
            Self::Cfw(_) => "cfw",
            Self::Bfw(_) => "bfw",
            Self::Fht(_) => "fht",
            Self::Fpt(_) => "fpt",
            Self::Lb(_) => "lb",
            Self::Hash(_) => "hash",
        }
    }

    /// The flags every benchmark takes.
    pub fn common(&self) -> &Common {
        match self {
            Self::Othello(a) => &a.common,
            Self::Ludo(a) => &a.common,
            Self::Setsep(a) => &a.common,
            Self::Cuckoo(a) => &a.common,
            Self::CuckooPartial(a) => &a.common,
            Self::Cfw(a) => &a.common,
            Self::Bfw(a) => &a.common,
            Self::Fht(a) => &a.common,
            Self::Fpt(a) => &a.common,
            Self::Lb(a) => &a.common,
            Self::Hash(a) => &a.common,
        }
    }
}

/// Query key distribution.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dist {
    /// Every key equally likely.
    #[default]
    Uniform,
    /// Zipf popularity (`--zipf-s`).
    Zipf,
}

/// Flags every benchmark takes.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Number of keys: 1000, 64K (= 64,000), 1M, 1Mi (= 1,048,576).
    #[arg(long, default_value = "1Mi", value_parser = keys)]
    pub keys: u64,
    /// Value width in bits, 1..=64.
    #[arg(long, default_value = "8", value_parser = value_bits)]
    pub value_bits: u32,
    /// Key type: u64, mac, ipv4, ipv6, fivetuple or name.
    #[arg(long, default_value = "u64", value_parser = KeyType::parse)]
    pub key_type: KeyType,
    /// Threads for the multi-threaded figure, 1..=1024.
    #[arg(long, default_value = "2", value_parser = threads)]
    pub threads: usize,
    /// Updates to time.
    #[arg(long, default_value = "1Mi", value_parser = count)]
    pub updates: u64,
    /// Query distribution.
    #[arg(long, value_enum, default_value_t = Dist::Uniform)]
    pub dist: Dist,
    /// Zipf exponent (with --dist zipf).
    #[arg(long, default_value = "1", value_parser = non_negative)]
    pub zipf_s: f64,
    /// The common measurements at --keys only (no paper tables or sweeps at other sizes; lb: one round).
    #[arg(long)]
    pub core: bool,
    /// Print one JSON object per measurement on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// `othello` flags.
#[derive(Args, Debug, Clone)]
pub struct OthelloArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Fingerprint width of the filtered (OFW) variant, 1..=32 bits.
    #[arg(long, default_value = "8", value_parser = fingerprint)]
    pub fingerprint_bits: u32,
}

/// `ludo` flags.
#[derive(Args, Debug, Clone)]
pub struct LudoArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Fingerprint width of the fingerprinted variant, 1..=32 bits.
    #[arg(long, default_value = "8", value_parser = fingerprint)]
    pub fingerprint_bits: u32,
    /// Only the memory figures.
    #[arg(long)]
    pub memory_only: bool,
    /// Skip the fingerprinted variant.
    #[arg(long)]
    pub no_fingerprints: bool,
    /// Update rate during the concurrent lookup run.
    #[arg(long, default_value = "10K", value_parser = count)]
    pub concurrent_updates_per_s: u64,
    /// Seconds of the concurrent lookup run.
    #[arg(long, default_value = "3", value_parser = non_negative)]
    pub secs: f64,
}

/// `setsep` flags.
#[derive(Args, Debug, Clone)]
pub struct SetSepArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Skip the paper table.
    #[arg(long)]
    pub no_table: bool,
    /// Keys inserted in the growth run (default: 1Mi; with --core, at most --keys).
    #[arg(long, value_parser = count)]
    pub growth_keys: Option<u64>,
    /// Updates in the update run.
    #[arg(long, default_value = "200K", value_parser = count)]
    pub max_updates: u64,
    /// Repetitions.
    #[arg(long, default_value = "5", value_parser = positive)]
    pub rounds: u64,
    /// Value widths of the paper table (comma-separated, 1..=64).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4", value_parser = value_bits)]
    pub table_bits: Vec<u32>,
    /// Thread counts of the paper table (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = threads)]
    pub table_threads: Vec<usize>,
}

/// Value layouts of the `cuckoo` benchmark.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Values {
    /// Values next to their keys.
    #[default]
    Interleaved,
    /// Values in a separate array.
    Separate,
    /// Both layouts.
    Both,
}

/// `cuckoo` flags.
#[derive(Args, Debug, Clone)]
pub struct CuckooArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Repetitions (default 3; 1 with --core).
    #[arg(long, value_parser = positive)]
    pub reps: Option<u64>,
    /// Batch sizes (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,16", value_parser = positive)]
    pub batch: Vec<u64>,
    /// Update rates of the concurrent run (comma-separated; default 64K,500K; 64K with --core).
    #[arg(long, value_delimiter = ',', value_parser = count)]
    pub rates: Vec<u64>,
    /// Seconds per concurrent run (default 2; 0.25 with --core).
    #[arg(long, value_parser = non_negative)]
    pub secs: Option<f64>,
    /// Value layout.
    #[arg(long, value_enum, default_value_t = Values::Interleaved)]
    pub values: Values,
}

/// `cuckoo-partial` flags.
#[derive(Args, Debug, Clone)]
pub struct CuckooPartialArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Fingerprint widths (comma-separated, 1..=32 bits).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,6,8,10,12,14,16,18,20", value_parser = fingerprint)]
    pub fingerprint_bits: Vec<u32>,
}

/// `cfw` flags.
#[derive(Args, Debug, Clone)]
pub struct CfwArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Fingerprint widths (comma-separated, 1..=32 bits).
    #[arg(long, value_delimiter = ',', default_value = "8,10,12,16", value_parser = fingerprint)]
    pub fingerprint_bits: Vec<u32>,
}

/// `bfw` flags.
#[derive(Args, Debug, Clone)]
pub struct BfwArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Bloom hash counts (comma-separated, 1..=32; default: the structure's default).
    #[arg(long, value_delimiter = ',', value_parser = hash_count)]
    pub hashes: Vec<u64>,
}

/// `fht` flags.
#[derive(Args, Debug, Clone)]
pub struct FhtArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Fingerprint width, 1..=32 bits.
    #[arg(long, default_value = "16", value_parser = fingerprint)]
    pub fingerprint_bits: u32,
    /// Names in the distributed-share experiment (Table 3).
    #[arg(long, default_value = "8Mi", value_parser = positive)]
    pub share_names: u64,
    /// Fingerprint widths of Table 2 (comma-separated, 1..=32 bits).
    #[arg(long, value_delimiter = ',', default_value = "12,16,20,24", value_parser = fingerprint)]
    pub table2_widths: Vec<u32>,
    /// Only Table 2.
    #[arg(long)]
    pub table2_only: bool,
    /// Skip Table 2.
    #[arg(long)]
    pub no_table2: bool,
    /// Skip Table 3.
    #[arg(long)]
    pub no_table3: bool,
}

/// `fpt` flags.
#[derive(Args, Debug, Clone)]
pub struct FptArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Fingerprint widths of the depth experiment (comma-separated, 0..=32 bits;
    /// default 0,4,...,32; 0,20 with --core).
    #[arg(long, value_delimiter = ',', value_parser = width)]
    pub widths: Vec<u32>,
    /// Generated names in the depth experiment.
    #[arg(long, default_value = "1Mi", value_parser = positive)]
    pub depth_names: u64,
}

/// Client address sets of the `lb` benchmark (thesis §5.6).
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Setup {
    /// Fixed DIP count per VIP.
    #[default]
    DipE,
    /// Varied DIP counts per VIP.
    DipV,
}

/// `lb` flags.
#[derive(Args, Debug, Clone)]
pub struct LbArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// VIPs.
    #[arg(long, default_value = "128", value_parser = positive)]
    pub vips: u64,
    /// DIPs per VIP.
    #[arg(long, default_value = "32", value_parser = positive)]
    pub backends_per_vip: u64,
    /// Connection states (default: --keys).
    #[arg(long, value_parser = positive)]
    pub states: Option<u64>,
    /// Dcode width in bits.
    #[arg(long, default_value = "12", value_parser = dcode_bits)]
    pub dcode_bits: u32,
    /// Setup.
    #[arg(long, value_enum, default_value_t = Setup::DipE)]
    pub setup: Setup,
    /// Maglev connection-table digest bits.
    #[arg(long, default_value = "32", value_parser = digest_bits)]
    pub maglev_digest_bits: u32,
    /// SilkRoad digest bits.
    #[arg(long, default_value = "16", value_parser = digest_bits)]
    pub silkroad_digest_bits: u32,
    /// Repetitions (default 5; 1 with --core).
    #[arg(long, value_parser = positive)]
    pub rounds: Option<u64>,
    /// Skip the dynamic pool-change run.
    #[arg(long)]
    pub skip_dynamic: bool,
    /// Skip the response-time run.
    #[arg(long)]
    pub skip_response: bool,
    /// Seconds of each dynamic run.
    #[arg(long, default_value = "3", value_parser = non_negative)]
    pub dyn_secs: f64,
    /// Pool change period in milliseconds.
    #[arg(long, default_value = "1000", value_parser = positive)]
    pub pool_every_ms: u64,
    /// Pool-change rates of the dynamic run (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1Ki,4Ki,16Ki,64Ki,256Ki", value_parser = positive)]
    pub rates: Vec<u64>,
    /// State counts of the response run (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "8Ki,16Ki,32Ki,64Ki,128Ki", value_parser = positive)]
    pub response_states: Vec<u64>,
}

/// `hash` flags.
#[derive(Args, Debug, Clone)]
pub struct HashArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
}

const NOT_A_COUNT: &str = "is not a count (1000, 64K, 1M, 1Mi)";

/// A benchmark's peak bytes per key (keys, queries, the structure and its
/// baselines); 16M keys peak near 4 GB.
const BYTES_PER_KEY: u128 = 200;

/// `MemAvailable` from /proc/meminfo, in bytes.
fn mem_available() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    let l = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
    l.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb.saturating_mul(1024))
}

fn count(v: &str) -> Result<u64, String> {
    parse_num(v).ok_or_else(|| format!("{v:?} {NOT_A_COUNT}"))
}

fn positive(v: &str) -> Result<u64, String> {
    match count(v)? {
        0 => Err("must be at least 1".into()),
        n => Ok(n),
    }
}

fn keys(v: &str) -> Result<u64, String> {
    let n = positive(v)?;
    if n > 1 << 34 {
        return Err(format!("{n} keys is more than this harness generates (at most 2^34)"));
    }
    match mem_available() {
        Some(m) if n as u128 * BYTES_PER_KEY > m as u128 => Err(format!(
            "{n} keys need about {:.1} GB, more than the {:.1} GB available (MemAvailable)",
            n as f64 * BYTES_PER_KEY as f64 / 1e9,
            m as f64 / 1e9
        )),
        _ => Ok(n),
    }
}

fn ranged(v: &str, lo: u64, hi: u64, what: &str) -> Result<u32, String> {
    match parse_num(v) {
        Some(n) if (lo..=hi).contains(&n) => Ok(n as u32),
        _ => Err(format!("{v:?}: {what} are {lo}..={hi} bits")),
    }
}

fn value_bits(v: &str) -> Result<u32, String> {
    ranged(v, 1, 64, "value widths")
}

fn fingerprint(v: &str) -> Result<u32, String> {
    ranged(v, 1, 32, "fingerprints")
}

fn width(v: &str) -> Result<u32, String> {
    ranged(v, 0, 32, "fingerprints")
}

fn digest_bits(v: &str) -> Result<u32, String> {
    ranged(v, 1, 64, "digests")
}

fn dcode_bits(v: &str) -> Result<u32, String> {
    ranged(v, keyplane::lb::MIN_DCODE_BITS as u64, keyplane::lb::MAX_DCODE_BITS as u64, "Dcodes")
}

fn hash_count(v: &str) -> Result<u64, String> {
    match parse_num(v) {
        Some(n @ 1..=32) => Ok(n),
        _ => Err(format!("{v:?}: 1..=32 hash functions")),
    }
}

fn threads(v: &str) -> Result<usize, String> {
    match parse_num(v) {
        Some(n @ 1..=1024) => Ok(n as usize),
        _ => Err(format!("{v:?}: 1..=1024 threads")),
    }
}

fn non_negative(v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite() && *f >= 0.0)
        .ok_or_else(|| format!("{v:?} is not a non-negative number"))
}
