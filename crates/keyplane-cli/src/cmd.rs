//! The sub-commands.

use crate::input::{self, Format, Op, Sep};
use crate::state::{State, apply_op};
use crate::{CliError, Progress};
use clap::{Args, Subcommand};
use keyplane::ext::wire::Frame;
use keyplane_any::{AnyControl, AnyLookup, KeyFormat, Opts, STRUCTURES, split_frames};
use keyplane_keygen::{KeyType, gen_keys, gen_values};
use std::io::Write;
use std::time::Instant;

/// Sub-commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Build a table from a key file or a generated key set and write its lookup blob.
    Build(BuildArgs),
    /// Look keys up in a blob (keys from a file or stdin); prints `KEY<TAB>VALUE` (`-` when absent).
    Query(QueryArgs),
    /// Describe a blob, delta stream or control-state file and check its checksum.
    Inspect(InspectArgs),
    /// Change a table's control state (`--control` from `build`) and write the deltas.
    Update(UpdateArgs),
    /// Apply a delta stream (from `update`) to a blob.
    Apply(ApplyArgs),
    /// Write a fresh lookup blob from a control state (recovery after a lost delta).
    Export(crate::export::ExportArgs),
    /// Run a benchmark (`bench othello --keys 1M`) or the full report (`bench --report DIR`).
    Bench(BenchArgs),
    /// List the structures and their build options.
    Structures,
    /// End-to-end demo through build, query, update, apply and query again, verifying every key.
    Demo(DemoArgs),
    /// Layer-4 load balancer (Concury or Maglev) on one port: `lb --port IF --config lb.toml`.
    Lb(crate::lb::LbArgs),
    /// Run an L2 / L3 software switch whose FIB is a keyplane lookup form (see docs/switch.md).
    Switch(crate::switch::SwitchArgs),
    /// Run the control-plane service (gRPC; tables in an embedded store).
    Serve(crate::control::ServeArgs),
    /// Client of a running service: create, write, read, describe, list, drop.
    Ctl(crate::control::CtlArgs),
    /// Follow a table from a service and keep a blob file current.
    Follow(crate::control::FollowArgs),
}

/// How text and binary key files are read.
#[derive(Args, Debug, Clone)]
pub struct FormatArgs {
    /// Text separator: auto (from the first data line: tab, else comma, else whitespace), csv, tsv, ws.
    /// Whitespace-separated KEY VALUE lines split at the last run of whitespace (text and name keys
    /// may contain spaces); a query line without tabs is one whole key (`ws`: KEY VALUE lines).
    #[arg(long, default_value = "auto")]
    format: String,
    /// Key encoding in text files: text, hex, u64, ipv4, ipv6, mac, name, fivetuple. Default: the
    /// format recorded in the table when it was built (a different one is refused), else text.
    #[arg(long)]
    key_format: Option<String>,
    /// The first line of a text file is a header.
    #[arg(long)]
    header: bool,
    /// Binary records: each record is KEY_WIDTH key bytes followed by VALUE_BYTES value bytes (little-endian).
    #[arg(long)]
    key_width: Option<usize>,
    /// Binary records: value bytes per record (0..8; `query` ignores them).
    #[arg(long, default_value_t = 8)]
    value_bytes: usize,
}

impl FormatArgs {
    /// The input format; `recorded` is the key format stored in the table
    /// (used by default; a conflicting `--key-format` is refused).
    fn resolve(&self, recorded: Option<KeyFormat>) -> Result<Format, CliError> {
        let sep = Sep::from_format(&self.format)
            .ok_or_else(|| CliError::usage(&format!("--format {}: expected auto, csv, tsv or ws", self.format)))?;
        let key = match (self.key_format.as_deref().map(key_format).transpose()?, recorded) {
            (Some(given), Some(rec)) if given != rec && self.key_width.is_none() => {
                return Err(CliError::usage(&format!(
                    "--key-format {} conflicts with the table's key format {} (recorded when it was built); \
                     drop --key-format or pass --key-format {}",
                    given.name(),
                    rec.name(),
                    rec.name()
                )));
            }
            (Some(given), _) => given,
            (None, Some(rec)) => rec,
            (None, None) => KeyFormat::Text,
        };
        Ok(Format { sep, key, header: self.header, key_width: self.key_width, value_bytes: self.value_bytes })
    }
}

fn key_format(s: &str) -> Result<KeyFormat, CliError> {
    KeyFormat::from_name(s).ok_or_else(|| {
        let all: Vec<&str> = KeyFormat::ALL.iter().map(|(n, _)| *n).collect();
        CliError::usage(&format!("--key-format {s}: expected one of {}", all.join(", ")))
    })
}

/// `keyplane build`.
#[derive(Args, Debug, Clone)]
pub struct BuildArgs {
    /// Structure (see `keyplane structures`; `pkcuckoo` is accepted for `cuckoo-partial`).
    #[arg(short, long, default_value = "othello", value_parser = structure_name)]
    structure: String,
    /// Value width in bits.
    #[arg(short = 'l', long, default_value_t = 8)]
    value_bits: u32,
    /// Build option NAME=VALUE (repeatable, or comma-separated), e.g. `fingerprint_bits=8`.
    #[arg(short = 'O', long = "opt")]
    opts: Vec<String>,
    /// Key file: text lines `KEY<sep>VALUE` (`#` comments), or binary records with --key-width. `-` = stdin.
    #[arg(short, long, conflicts_with = "generate")]
    input: Option<String>,
    /// Generate N distinct keys with random values instead of reading a file (accepts 1M, 64K).
    #[arg(long)]
    generate: Option<String>,
    /// Key type of generated keys: u64, mac, ipv4, ipv6, fivetuple, name.
    #[arg(long, default_value = "u64")]
    gen_key_type: String,
    /// Write the generated keys as `HEXKEY<TAB>VALUE` lines (query them with --key-format hex).
    #[arg(long, requires = "generate")]
    dump_keys: Option<String>,
    #[command(flatten)]
    fmt: FormatArgs,
    /// Hash seed for a reproducible build: the same seed, structure, options and keys give the same
    /// blob, and the same table id (tables built with one seed accept each other's deltas).
    /// Default: a random seed and a random table id.
    #[arg(long)]
    seed: Option<String>,
    /// Output blob.
    #[arg(long)]
    out: String,
    /// Also write the control state (input for `keyplane update`).
    #[arg(long)]
    control: Option<String>,
}

/// `keyplane query`.
#[derive(Args, Debug, Clone)]
pub struct QueryArgs {
    /// Lookup blob.
    blob: String,
    /// Key file (first field of each line is the key), `-` = stdin.
    #[arg(short, long, default_value = "-")]
    keys: String,
    #[command(flatten)]
    fmt: FormatArgs,
    /// Refuse tables that cannot tell absent keys (e.g. Othello without fingerprints or emptiness) and exit 1 if any key is absent.
    #[arg(long)]
    checked: bool,
    /// Print only the values.
    #[arg(long)]
    values_only: bool,
    /// Longest-prefix match: by name components on name tables (fht, or fpt with -O check_bits=C;
    /// keys with --key-format name); tables built from IP prefixes (`build -s lpm`) always answer
    /// longest-prefix.
    #[arg(long)]
    lpm: bool,
}

/// `keyplane inspect`.
#[derive(Args, Debug, Clone)]
pub struct InspectArgs {
    /// Blob, delta stream or control-state files.
    #[arg(required = true)]
    files: Vec<String>,
}

/// `keyplane update`.
#[derive(Args, Debug, Clone)]
pub struct UpdateArgs {
    /// Control state written by `build --control` (rewritten with the new journal).
    #[arg(long)]
    control: String,
    /// Operations file: `set KEY VALUE` and `del KEY` lines.
    #[arg(long)]
    ops: Option<String>,
    /// Insert or change KEY=VALUE (repeatable; after --ops).
    #[arg(long = "set")]
    sets: Vec<String>,
    /// Remove KEY (repeatable; after --set).
    #[arg(long = "del")]
    dels: Vec<String>,
    #[command(flatten)]
    fmt: FormatArgs,
    /// Output delta stream (concatenated framed deltas, for `keyplane apply`).
    #[arg(long)]
    deltas: String,
}

/// `keyplane apply`.
#[derive(Args, Debug, Clone)]
pub struct ApplyArgs {
    /// Lookup blob.
    blob: String,
    /// Delta stream files, applied in order.
    #[arg(required = true)]
    deltas: Vec<String>,
    /// Write the result here instead of replacing BLOB.
    #[arg(long)]
    out: Option<String>,
}

/// `keyplane bench`.
#[derive(Args, Debug, Clone)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_value_name = "NAME",
    subcommand_help_heading = "Benchmarks"
)]
pub struct BenchArgs {
    /// Write the papers' figures, reproduced (SVG + PNG per figure, results.json, index.md) into this directory.
    #[arg(long)]
    report: Option<String>,
    /// Report scale: tiny (smoke test), small (≤ 10 min), medium (≤ 45 min), paper (as close to the papers as memory allows).
    #[arg(long, default_value = "small")]
    scale: String,
    /// With --report: only redraw the plots and index.md from DIR/results.json.
    #[arg(long, requires = "report")]
    plot_only: bool,
    /// Report only these figures (comma-separated ids or prefixes, e.g. concise,thesis-fig5.8; default: all).
    #[arg(long)]
    only: Option<String>,
    /// Without --report: a benchmark and its flags, e.g. `othello --keys 1M --json` (`bench NAME --help` lists them).
    #[command(subcommand)]
    bench: Option<keyplane_perf::Bench>,
}

/// `keyplane demo`.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Keys (accepts 1M, 64K).
    #[arg(long, default_value = "1M")]
    keys: String,
    /// Value width in bits.
    #[arg(long, default_value_t = 8)]
    value_bits: u32,
    /// Structure (`pkcuckoo` is accepted for `cuckoo-partial`).
    #[arg(short, long, default_value = "othello", value_parser = structure_name)]
    structure: String,
    /// Working directory for the demo's files (default: a fresh temporary directory, removed afterwards).
    #[arg(long)]
    dir: Option<String>,
}

/// Runs a command; returns the exit code on success.
pub fn run(cmd: Command) -> Result<u8, CliError> {
    match cmd {
        Command::Build(a) => build(&a).map(|_| 0),
        Command::Query(a) => query(&a),
        Command::Inspect(a) => inspect(&a),
        Command::Update(a) => update(&a).map(|_| 0),
        Command::Apply(a) => apply(&a).map(|_| 0),
        Command::Export(a) => crate::export::export(&a),
        Command::Bench(a) => bench(&a),
        Command::Structures => {
            structures();
            Ok(0)
        }
        Command::Demo(a) => demo(&a),
        Command::Lb(a) => crate::lb::run(&a),
        Command::Switch(a) => crate::switch::run(&a),
        Command::Serve(a) => crate::control::serve(&a),
        Command::Ctl(a) => crate::control::ctl(&a),
        Command::Follow(a) => crate::control::follow(&a),
    }
}

fn count(s: &str, flag: &str) -> Result<usize, CliError> {
    crate::limits::count(s, flag)
}

fn parse_opts(list: &[String]) -> Result<Opts, CliError> {
    let mut o = Opts::new();
    for s in list {
        for (k, v) in Opts::parse(s).map_err(|e| CliError::lib("", e))?.iter() {
            o.push(k, v);
        }
    }
    Ok(o)
}

pub(crate) fn read_file(path: &str) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|e| CliError::io(path, e))
}

/// Writes a file atomically (temporary file + rename).
pub(crate) fn write_file(path: &str, bytes: &[u8]) -> Result<(), CliError> {
    let tmp = format!("{path}.tmp{}", std::process::id());
    std::fs::write(&tmp, bytes).map_err(|e| CliError::io(path, e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError::io(path, e)
    })
}

fn load_lookup(path: &str) -> Result<AnyLookup, CliError> {
    let bytes = read_file(path)?;
    AnyLookup::from_bytes(&bytes).map_err(|e| CliError::lib(path, e))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What `build` produced.
pub struct Built {
    /// Keys in the table.
    pub n: usize,
    /// Blob size in bytes.
    pub blob_bytes: usize,
    /// Lookup-form heap bytes.
    pub memory: usize,
    /// Seconds spent building.
    pub build_s: f64,
}

/// `keyplane build`.
pub fn build(a: &BuildArgs) -> Result<Built, CliError> {
    if crate::lpm::wants(&a.structure, a.fmt.key_format.as_deref().unwrap_or("")) {
        let (input, out, control, generate) = (a.input.as_deref(), &a.out, a.control.as_deref(), a.generate.as_deref());
        let r = crate::lpm::BuildReq { input, out, control, generate, value_bits: a.value_bits, header: a.fmt.header };
        return crate::lpm::build(&r);
    }
    let mut outs = vec![("--out", a.out.as_str())];
    outs.extend(a.control.as_deref().map(|c| ("--control", c)));
    outs.extend(a.dump_keys.as_deref().map(|c| ("--dump-keys", c)));
    crate::paths::refuse_same(&a.input.as_deref().map(|i| ("--input", i)).into_iter().collect::<Vec<_>>(), &outs)?;
    let mut opts = parse_opts(&a.opts)?;
    let given_seed = match (&a.seed, opts.take("seed")) {
        (Some(_), Some(_)) => return Err(CliError::usage("give the seed once: --seed or --opt seed=…, not both")),
        (Some(s), None) => Some(s.clone()),
        (None, s) => s,
    };
    let seed = match &given_seed {
        Some(s) => keyplane_any::parse_u64(s)
            .ok_or_else(|| CliError::usage(&format!("--seed {s}: not an unsigned integer (decimal or 0x-hex)")))?,
        None => keyplane::lineage::random_seed(),
    };
    opts.push("seed", &format!("{seed:#x}"));
    if !STRUCTURES.iter().any(|s| s.name == a.structure) {
        let names: Vec<&str> = STRUCTURES.iter().map(|s| s.name).collect();
        return Err(CliError::usage(&format!("unknown structure {:?} (known: {})", a.structure, names.join(", "))));
    }
    if !(1..=64).contains(&a.value_bits) {
        return Err(CliError::usage(&format!("--value-bits {}: must be between 1 and 64", a.value_bits)));
    }
    let mut at = Vec::new();
    let items: Vec<(Vec<u8>, u64)> = match (&a.input, &a.generate) {
        (Some(path), None) => {
            if let Ok(m) = std::fs::metadata(path) {
                crate::limits::check_memory(m.len() as u128 * 8, &format!("building from {path}"))?;
            }
            let fmt = a.fmt.resolve(None)?;
            let items = input::read_items_at(path, &fmt, a.value_bits, &mut at)?;
            crate::checks::check_items(path, &items, &at, fmt.key_width.is_some())?;
            items
        }
        (None, Some(n)) => {
            let n = count(n, "--generate")?;
            crate::limits::check_memory(crate::limits::build_bytes(n, 16), &format!("--generate {n}"))?;
            let kt = KeyType::parse(&a.gen_key_type).map_err(|e| CliError::usage(&format!("--gen-key-type: {e}")))?;
            let sp = Progress::spinner("generating keys");
            let keys = gen_keys(kt, n, 1);
            let vals = gen_values(n, a.value_bits, 3);
            sp.finish();
            let items: Vec<(Vec<u8>, u64)> = keys.iter().map(|k| k.to_vec()).zip(vals).collect();
            if let Some(p) = &a.dump_keys {
                let f = std::fs::File::create(p).map_err(|e| CliError::io(p, e))?;
                let mut w = std::io::BufWriter::new(f);
                for (k, v) in &items {
                    writeln!(w, "{}\t{v}", hex(k)).map_err(|e| CliError::io(p, e))?;
                }
                w.flush().map_err(|e| CliError::io(p, e))?;
            }
            items
        }
        _ => return Err(CliError::usage("build needs --input FILE or --generate N")),
    };
    let sp = Progress::spinner(&format!("building {} over {} keys", a.structure, items.len()));
    let t = Instant::now();
    let mut ctl =
        AnyControl::build(&a.structure, items.iter().map(|(k, v)| (k, *v)), a.value_bits, &opts).map_err(|e| {
            crate::checks::locate(a.input.as_deref().unwrap_or(""), &items, &at, a.fmt.key_width.is_some(), e)
        })?;
    // Identity: random, or derived from the seed for a reproducible build.
    // Key format: as read (binary records and generated keys are raw bytes,
    // written as hex).
    let key_format =
        if a.input.is_some() && a.fmt.key_width.is_none() { a.fmt.resolve(None)?.key } else { KeyFormat::Hex };
    let id = if given_seed.is_some() { keyplane::TableId::from_seed(seed) } else { ctl.lineage().id };
    ctl.set_lineage(keyplane::lineage::Lineage { id, key_format: Some(key_format) });
    let build_s = t.elapsed().as_secs_f64();
    let table = ctl.export();
    let blob = table.to_bytes();
    sp.finish();
    write_file(&a.out, &blob)?;
    if let Some(state) = &a.control {
        write_file(state, &State::of(&a.structure, &opts, &ctl, 0).to_bytes())?;
    }
    let n = ctl.len();
    let memory = table.memory_bytes();
    eprintln!(
        "built {} over {n} keys in {build_s:.2} s: {memory} bytes = {:.2} bits/key, blob {} bytes → {}",
        a.structure,
        memory as f64 * 8.0 / n.max(1) as f64,
        blob.len(),
        a.out
    );
    Ok(Built { n, blob_bytes: blob.len(), memory, build_s })
}

/// Looks every key of a file up; calls `each(display, value)`.
fn query_each(
    table: &AnyLookup,
    keys: &str,
    fmt: &Format,
    each: impl FnMut(&str, Option<u64>) -> Result<(), CliError>,
) -> Result<input::BadLines, CliError> {
    query_each_lpm(table, keys, fmt, false, each)
}

fn query_each_lpm(
    table: &AnyLookup,
    keys: &str,
    fmt: &Format,
    lpm: bool,
    mut each: impl FnMut(&str, Option<u64>) -> Result<(), CliError>,
) -> Result<input::BadLines, CliError> {
    let reader = table.reader();
    input::read_keys(keys, fmt, |shown, k| {
        each(shown, if lpm { crate::name_lpm::get(&reader, k) } else { reader.get(k) })
    })
}

/// `keyplane query`.
pub fn query(a: &QueryArgs) -> Result<u8, CliError> {
    if let Some(code) = crate::lpm::query(&a.blob, &a.keys, a.checked, a.values_only)? {
        return Ok(code);
    }
    let table = load_lookup(&a.blob)?;
    if a.checked && !table.rejects_aliens() {
        let hint = match table.name() {
            "othello" => " (e.g. --opt filtered=8)",
            "ludo" => " (e.g. --opt fingerprint_bits=8)",
            "fpt" => " (e.g. --opt check_bits=8)",
            _ => "",
        };
        return Err(CliError::usage(&format!(
            "{}: this {} table cannot tell absent keys from present ones, so --checked is not supported; \
             rebuild it with an option that stores fingerprints{hint}",
            a.blob,
            table.name()
        )));
    }
    let fmt = a.fmt.resolve(table.key_format())?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut absent = 0usize;
    let werr = |e: std::io::Error| CliError::io("<stdout>", e);
    if a.lpm {
        crate::name_lpm::check(&table, &a.blob)?;
    }
    let bad = query_each_lpm(&table, &a.keys, &fmt, a.lpm, |shown, v| {
        let r = match (v, a.values_only) {
            (Some(v), true) => writeln!(out, "{v}"),
            (Some(v), false) => writeln!(out, "{shown}\t{v}"),
            (None, true) => writeln!(out, "-"),
            (None, false) => writeln!(out, "{shown}\t-"),
        };
        absent += v.is_none() as usize;
        match r {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            r => r.map_err(werr),
        }
    })?;
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(werr(e)),
        _ => {}
    }
    crate::warn::bad_lines(&bad)?;
    Ok(if a.checked && absent > 0 { 1 } else { 0 })
}

/// `keyplane inspect`.
pub fn inspect(a: &InspectArgs) -> Result<u8, CliError> {
    for path in &a.files {
        let bytes = read_file(path)?;
        println!("{path}:");
        if bytes.starts_with(b"KPCS") {
            let st = State::from_bytes(path, &bytes)?;
            println!("  object:           control state (for keyplane update)");
            println!("  structure:        {}", st.structure);
            println!("  value_bits:       {}", st.value_bits);
            println!("  table id:         {}", st.lineage.id);
            println!("  key format:       {}", st.lineage.key_format.map_or("(not recorded)", |f| f.name()));
            println!("  options:          {}", if st.opts.is_empty() { "(defaults)".into() } else { st.opts.render() });
            match &st.body {
                crate::state::Body::Snapshot(b) => {
                    let info = keyplane::snapshot::peek(b).map_err(|e| CliError::lib(path, e))?;
                    println!("  state:            {} ({} bytes, version 3)", keyplane_any::label(info.kind), b.len());
                    println!("  last delta:       #{}", info.seq);
                }
                crate::state::Body::Legacy(l) => {
                    println!("  state:            base items and journal (version 2; the next update migrates it)");
                    println!("  base keys:        {}", l.base.len());
                }
            }
            println!("  updates:          {}", st.updates);
            println!("  checksum:         OK");
            continue;
        }
        // The first frame says what the file holds (a delta stream has several).
        let first_end = match bytes.get(8..16) {
            Some(l) => {
                let mut lb = [0u8; 8];
                lb.copy_from_slice(l);
                u64::from_le_bytes(lb).saturating_add(24).min(bytes.len() as u64) as usize
            }
            None => bytes.len(),
        };
        let first = Frame::inspect(&bytes[..first_end]).map_err(|e| CliError::lib(path, e))?;
        if first.kind == <keyplane::lpm::Lookup as keyplane::Wire>::KIND {
            crate::lpm::inspect(path, &bytes)?;
            continue;
        }
        if keyplane_any::label(first.kind).ends_with("delta") {
            let frames = split_frames(&bytes).map_err(|e| CliError::lib(path, e))?;
            println!("  object:           delta stream of {} frame(s), {} bytes", frames.len(), bytes.len());
            for (i, f) in frames.iter().enumerate().take(20) {
                let fi = Frame::inspect(f).map_err(|e| CliError::lib(path, e))?;
                println!("    #{:<4} {} ({} bytes)", i + 1, keyplane_any::label(fi.kind), f.len());
            }
            if frames.len() > 20 {
                println!("    ... {} more", frames.len() - 20);
            }
            println!("  checksums:        OK");
            continue;
        }
        let info = Frame::inspect(&bytes).map_err(|e| CliError::lib(path, e))?;
        if info.kind == <keyplane::lb::DataPlane as keyplane::Wire>::KIND {
            inspect_lb(path, &bytes, info)?;
            continue;
        }
        let t = AnyLookup::from_bytes(&bytes).map_err(|e| CliError::lib(path, e))?;
        let mem = t.memory_bytes();
        println!("  object:           {} (format version {})", keyplane_any::label(info.kind), info.version);
        println!("  structure:        {}", t.name());
        println!("  table id:         {}", t.table_id());
        println!("  key format:       {}", t.key_format().map_or("(not recorded)", |f| f.name()));
        println!("  seq:              {}", t.seq());
        if let Some(v) = t.value_bits() {
            println!("  value_bits:       {v}");
        }
        for (k, v) in t.describe() {
            println!("  {:<17} {v}", format!("{k}:"));
        }
        match (t.key_count(), t.capacity()) {
            (Some(n), _) => {
                println!("  n:                {n}");
                println!("  bits/key:         {:.2}", mem as f64 * 8.0 / n.max(1) as f64);
            }
            (None, Some(c)) => {
                println!("  n:                not stored (this lookup form holds no keys); sized for {c}");
                println!("  bits/key:         {:.2} at that capacity", mem as f64 * 8.0 / c.max(1) as f64);
            }
            (None, None) => println!("  n:                not stored"),
        }
        println!("  memory:           {mem} bytes (blob {} bytes)", bytes.len());
        let absent = t.absent_keys();
        println!(
            "  absent keys:      {absent}{}",
            if absent.detected() { "; query --checked works" } else { "; query --checked is refused" }
        );
        if !t.exact_for_stored_keys() {
            println!("  stored keys:      may read another key's value (colliding fingerprints / filters)");
        }
        println!("  checksum:         OK ({:#018x})", info.checksum);
    }
    Ok(0)
}

/// `inspect` of a Concury load-balancer data plane (`keyplane::lb`).
fn inspect_lb(path: &str, bytes: &[u8], info: keyplane::ext::wire::FrameInfo) -> Result<(), CliError> {
    let dp = <keyplane::lb::DataPlane as keyplane::Wire>::from_bytes(bytes).map_err(|e| CliError::lib(path, e))?;
    println!("  object:           {} (format version {})", keyplane_any::label(info.kind), info.version);
    println!("  structure:        concury (keyplane::lb: VIP array, per-VIP Othello BAS, DIP array)");
    println!("  table id:         {}", dp.table_id());
    println!("  seq:              {}", dp.seq());
    println!("  max VIPs:         {}", dp.max_vips());
    let used: Vec<u32> = (0..dp.max_vips() as u32).filter(|&v| dp.pool(v).is_some()).collect();
    println!("  VIPs in use:      {}", used.len());
    for v in used.iter().take(20) {
        let pool = dp.pool(*v).unwrap_or_default();
        println!("    VIP #{v:<4} {} backend(s)", pool.len());
    }
    println!("  memory:           {} bytes (blob {} bytes)", dp.memory_bytes(), bytes.len());
    println!("  absent keys:      not detected (every connection state maps to a backend of its VIP)");
    println!("  checksum:         OK ({:#018x})", info.checksum);
    Ok(())
}

/// What `update` produced.
pub struct Updated {
    /// Deltas written.
    pub deltas: usize,
    /// Bytes written.
    pub bytes: usize,
    /// Keys after the update.
    pub n: usize,
}

/// `keyplane update`.
pub fn update(a: &UpdateArgs) -> Result<Updated, CliError> {
    let mut ins = vec![("--control", a.control.as_str())];
    ins.extend(a.ops.as_deref().map(|o| ("--ops", o)));
    crate::paths::refuse_same(&ins, &[("--deltas", &a.deltas)])?;
    let bytes = read_file(&a.control)?;
    let st = State::from_bytes(&a.control, &bytes)?;
    let fmt = a.fmt.resolve(st.lineage.key_format)?;
    let mut ops = Vec::new();
    if let Some(p) = &a.ops {
        ops.extend(input::read_ops(p, &fmt, st.value_bits)?);
    }
    for s in &a.sets {
        ops.push(input::parse_set(s, fmt.key, st.value_bits)?);
    }
    for k in &a.dels {
        ops.push(Op::Del(
            keyplane_any::parse_key(fmt.key, k).map_err(|m| CliError::usage(&format!("--del {k:?}: {m}")))?,
        ));
    }
    let sp = Progress::spinner("loading the control state");
    let hashed_before = keyplane::work::keys_hashed();
    let mut ctl = st.control(&a.control)?;
    sp.finish();
    let pb = Progress::items("updating", Some(ops.len() as u64));
    let mut stream = Vec::new();
    let mut deltas = 0;
    let mut logged = 0u64;
    for (i, op) in ops.iter().enumerate() {
        let where_ = || match (&a.ops, i) {
            (Some(p), _) => format!("{p}: operation {}", i + 1),
            (None, _) => format!("command-line operation {}", i + 1),
        };
        if let Op::Del(k) = op
            && ctl.get(k).is_none()
        {
            crate::warn::warn(&format!(
                "{}: del {:?}: the key is not in the table; nothing deleted (not recorded)",
                where_(),
                String::from_utf8_lossy(k)
            ))?;
            pb.inc(1);
            continue;
        }
        logged += 1;
        if let Some(d) = apply_op(&mut ctl, op).map_err(|e| CliError::lib(&where_(), e))? {
            stream.extend_from_slice(&d);
            deltas += 1;
        }
        pb.inc(1);
    }
    pb.finish();
    let st = State::of(&st.structure, &st.opts, &ctl, st.updates + logged);
    let out = crate::paths::fresh_delta_path(&a.deltas);
    if out != a.deltas {
        crate::warn::warn(&format!(
            "{} already exists (deltas not applied yet?), so the new deltas went to {out}; apply the files in order: keyplane apply BLOB {} {out}",
            a.deltas, a.deltas
        ))?;
    }
    write_file(&out, &stream)?;
    write_file(&a.control, &st.to_bytes())?;
    eprintln!("{deltas} delta(s), {} bytes → {out}; table now holds {} keys", stream.len(), ctl.len());
    // A debugging aid (and what the O(update) test reads): the keys the
    // control form hashed for this update, loading and saving included.
    if std::env::var_os("KEYPLANE_REPORT_WORK").is_some() {
        eprintln!("work: {} keys hashed", keyplane::work::keys_hashed() - hashed_before);
    }
    Ok(Updated { deltas, bytes: stream.len(), n: ctl.len() })
}

/// `keyplane apply`.
pub fn apply(a: &ApplyArgs) -> Result<usize, CliError> {
    let mut ins = vec![("BLOB", a.blob.as_str())];
    ins.extend(a.deltas.iter().map(|d| ("DELTAS", d.as_str())));
    crate::paths::refuse_same(&ins[1..], &[("BLOB", a.blob.as_str())])?;
    if let Some(o) = &a.out {
        crate::paths::refuse_same(&ins[1..], &[("--out", o)])?;
    }
    let table = load_lookup(&a.blob)?;
    let mut applied = 0;
    for path in &a.deltas {
        let bytes = read_file(path)?;
        let frames = split_frames(&bytes).map_err(|e| CliError::lib(path, e))?;
        let pb = Progress::items("applying deltas", Some(frames.len() as u64));
        let mut off = 0usize;
        for (i, f) in frames.iter().enumerate() {
            table
                .apply_bytes(f)
                .map_err(|e| CliError::lib(&format!("{path}: frame {} at byte offset {off}", i + 1), e))?;
            off += f.len();
            applied += 1;
            pb.inc(1);
        }
    }
    let out = a.out.as_deref().unwrap_or(&a.blob);
    write_file(out, &table.to_bytes())?;
    eprintln!("applied {applied} delta(s) → {out}");
    Ok(applied)
}

/// Other names a structure is known by: (alias, canonical name). The
/// canonical name is the one blobs, `inspect`, the Python and C front ends
/// and the benchmarks report; an alias is accepted on input only.
pub const STRUCTURE_ALIASES: &[(&str, &str)] = &[("pkcuckoo", "cuckoo-partial")];

/// `-s NAME`: the canonical name for an alias, other names unchanged (an
/// unknown name is reported with the list of known ones where it is used).
fn structure_name(s: &str) -> Result<String, String> {
    Ok(STRUCTURE_ALIASES.iter().find(|(a, _)| *a == s).map_or(s, |(_, c)| *c).to_string())
}

/// `keyplane structures`.
fn structures() {
    const LB: (&str, &str) = (
        "lb",
        "Concury load balancer (keyplane::lb): per-VIP Othello + Dcode, connection-consistent; Rust API and `keyplane bench lb`, not built from key files",
    );
    let w = STRUCTURES.iter().map(|s| s.name.len()).chain([LB.0.len()]).max().unwrap_or(10) + 2;
    let pad = " ".repeat(w);
    for s in STRUCTURES {
        let aliases: Vec<&str> = STRUCTURE_ALIASES.iter().filter(|(_, c)| *c == s.name).map(|(a, _)| *a).collect();
        if aliases.is_empty() {
            println!("{:<w$}{}", s.name, s.summary);
        } else {
            println!("{:<w$}{} (alias: {})", s.name, s.summary, aliases.join(", "));
        }
        if s.options.is_empty() {
            println!("{pad}(no options)");
        }
        for (n, h) in s.options {
            println!("{pad}--opt {n}=…  {h}");
        }
    }
    println!("{:<w$}{}", LB.0, LB.1);
}

/// `keyplane bench`.
fn bench(a: &BenchArgs) -> Result<u8, CliError> {
    if let (Some(dir), true) = (&a.report, a.plot_only) {
        crate::report::replot(dir)?;
        return Ok(0);
    }
    if let Some(dir) = &a.report {
        let only: Option<Vec<String>> = a.only.as_ref().map(|s| s.split(',').map(str::to_string).collect());
        crate::report::run(dir, &a.scale, only.as_deref())?;
        return Ok(0);
    }
    let Some(b) = &a.bench else {
        return Err(CliError::usage("bench needs a benchmark name or --report DIR (see `keyplane bench --help`)"));
    };
    let recs = keyplane_perf::run(b).map_err(|e| CliError::failed(&e.to_string()))?;
    keyplane_perf::emit(&recs, b.common().json);
    Ok(0)
}

/// `keyplane demo`: the README's main job.
fn demo(a: &DemoArgs) -> Result<u8, CliError> {
    let n = count(&a.keys, "--keys")?;
    if n == 0 {
        return Err(CliError::usage("--keys must be at least 1"));
    }
    let (dir, temp) = match &a.dir {
        Some(d) => (std::path::PathBuf::from(d), false),
        None => (std::env::temp_dir().join(format!("keyplane-demo-{}", std::process::id())), true),
    };
    std::fs::create_dir_all(&dir).map_err(|e| CliError::io(&dir.display().to_string(), e))?;
    let p = |f: &str| dir.join(f).display().to_string();
    let res = demo_in(a, n, &p);
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    res
}

fn demo_in(a: &DemoArgs, n: usize, p: &dyn Fn(&str) -> String) -> Result<u8, CliError> {
    let bits = a.value_bits;
    let vm = keyplane::mask(bits);
    println!("keyplane demo: {n} generated keys, {bits}-bit values, structure {}; files in {}", a.structure, p(""));
    let hexfmt = FormatArgs { format: "tsv".into(), key_format: None, header: false, key_width: None, value_bytes: 8 };
    // 1. build (generated keys, dumped as a TSV that the later steps read back).
    println!(
        "$ keyplane build -s {} -l {bits} --generate {n} --dump-keys keys.tsv --out table.kpl --control table.kpc",
        a.structure
    );
    let b = build(&BuildArgs {
        structure: a.structure.clone(),
        value_bits: bits,
        opts: Vec::new(),
        input: None,
        generate: Some(n.to_string()),
        gen_key_type: "u64".into(),
        dump_keys: Some(p("keys.tsv")),
        fmt: hexfmt.clone(),
        seed: None,
        out: p("table.kpl"),
        control: Some(p("table.kpc")),
    })?;
    // Expected state, from the dumped file.
    let mut expect: Vec<(Vec<u8>, u64)> =
        input::read_items(&p("keys.tsv"), &hexfmt.resolve(Some(KeyFormat::Hex))?, bits)?;
    // 2. query every key.
    println!("$ keyplane query table.kpl --keys keys.tsv --key-format hex");
    let t = Instant::now();
    let wrong = verify(&p("table.kpl"), &p("keys.tsv"), &hexfmt, |i| Some(expect[i].1))?;
    let q_s = t.elapsed().as_secs_f64();
    println!(
        "  {n} keys looked up in {q_s:.2} s ({:.0} ns/key including file parsing), {wrong} wrong",
        q_s * 1e9 / n as f64
    );
    let expect_rate = crate::approx::expected(&a.structure, &load_lookup(&p("table.kpl"))?);
    crate::approx::judge(expect_rate.as_ref(), &a.structure, wrong, n, "after build")?;
    // 3. update: change 10% of the values, remove 5%, insert 10% new keys.
    let upd = (n / 10).max(1);
    let mut ops = String::new();
    for (i, (k, v)) in expect.iter_mut().enumerate().take(upd) {
        *v = (*v + 1) & vm;
        ops.push_str(&format!("set\t{}\t{v}\n", hex(k)));
        let _ = i;
    }
    let removed = (n / 20).min(n - upd);
    for (k, _) in &expect[upd..upd + removed] {
        ops.push_str(&format!("del\t{}\n", hex(k)));
    }
    let fresh = gen_keys(KeyType::U64, upd, 9);
    let fresh_vals = gen_values(upd, bits, 11);
    let first_new = expect.len();
    for (k, v) in fresh.iter().zip(fresh_vals) {
        ops.push_str(&format!("set\t{}\t{v}\n", hex(k)));
        expect.push((k.to_vec(), v));
    }
    std::fs::write(p("ops.tsv"), &ops).map_err(|e| CliError::io(&p("ops.tsv"), e))?;
    println!("$ keyplane update --control table.kpc --ops ops.tsv --key-format hex --deltas changes.kpd");
    let t = Instant::now();
    let u = update(&UpdateArgs {
        control: p("table.kpc"),
        ops: Some(p("ops.tsv")),
        sets: Vec::new(),
        dels: Vec::new(),
        fmt: hexfmt.clone(),
        deltas: p("changes.kpd"),
    })?;
    let u_s = t.elapsed().as_secs_f64();
    println!(
        "  {} operations → {} deltas, {} bytes ({:.1} bytes/delta) in {u_s:.2} s",
        2 * upd + removed,
        u.deltas,
        u.bytes,
        u.bytes as f64 / u.deltas.max(1) as f64
    );
    // 4. apply to the blob.
    println!("$ keyplane apply table.kpl changes.kpd");
    let t = Instant::now();
    let applied = apply(&ApplyArgs { blob: p("table.kpl"), deltas: vec![p("changes.kpd")], out: None })?;
    println!("  {applied} deltas applied in {:.3} s", t.elapsed().as_secs_f64());
    // 5. query again: changed, kept and new keys.
    let mut all = String::new();
    for (k, v) in &expect {
        all.push_str(&format!("{}\t{v}\n", hex(k)));
    }
    std::fs::write(p("all.tsv"), &all).map_err(|e| CliError::io(&p("all.tsv"), e))?;
    println!("$ keyplane query table.kpl --keys all.tsv --key-format hex");
    let removed_range = upd..upd + removed;
    let wrong = verify(&p("table.kpl"), &p("all.tsv"), &hexfmt, |i| {
        if removed_range.contains(&i) { None } else { Some(expect[i].1) }
    })?;
    println!(
        "  {} keys checked ({} changed, {} new; {removed} removed keys skipped), {wrong} wrong",
        expect.len() - removed,
        upd,
        expect.len() - first_new
    );
    let expect_rate = crate::approx::expected(&a.structure, &load_lookup(&p("table.kpl"))?);
    crate::approx::judge(expect_rate.as_ref(), &a.structure, wrong, expect.len() - removed, "after apply")?;
    println!("$ keyplane inspect table.kpl");
    inspect(&InspectArgs { files: vec![p("table.kpl")] })?;
    println!(
        "demo OK: {} keys built in {:.2} s, lookup form {} bytes = {:.2} bits/key (blob {} bytes); every key checked",
        b.n,
        b.build_s,
        b.memory,
        b.memory as f64 * 8.0 / b.n as f64,
        b.blob_bytes
    );
    let _ = u.n;
    Ok(0)
}

/// Queries every key of `keys` through the CLI's query path and counts the
/// answers that differ from `want(i)` (`None` = skip the key).
fn verify(blob: &str, keys: &str, fmt: &FormatArgs, want: impl Fn(usize) -> Option<u64>) -> Result<usize, CliError> {
    let table = load_lookup(blob)?;
    let mut i = 0usize;
    let mut wrong = 0usize;
    let _ = query_each(&table, keys, &fmt.resolve(table.key_format())?, |_, v| {
        if let Some(w) = want(i) {
            wrong += (v != Some(w)) as usize;
        }
        i += 1;
        Ok(())
    })?;
    Ok(wrong)
}
