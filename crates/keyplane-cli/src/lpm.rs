//! Longest-prefix-match tables on the command line (`keyplane::lpm`):
//!
//! * `keyplane build -s lpm -i ROUTES --out FIB.kpl` (or `--key-format
//!   prefix`): ROUTES lines are `PREFIX<sep>NEXT_HOP` with IPv4 / IPv6
//!   prefixes such as `10.0.0.0/8` and `fd00::/16` (a bare address is a host
//!   route), `#` comments and blank lines skipped, tab / comma / whitespace
//!   separated. `--value-bits` is the next-hop width (1..=31).
//! * `keyplane query [--lpm] FIB.kpl -k ADDRS`: one address per line (first
//!   field), answered with the next hop of the longest matching prefix
//!   (`-` when none). An LPM blob is always queried this way; `--lpm` on
//!   another kind of blob is a usage error naming the kind.
//! * `keyplane inspect FIB.kpl`: lengths per family, memory, sequence.
//!
//! The rest of the CLI goes through `keyplane-any`'s registry, whose
//! contract (a table answers `get(key)` with the value inserted for that
//! key) LPM does not share: its keys are prefixes, its lookups addresses.
//! So it is handled here, called from one line in each command.

use crate::cmd::Built;
use crate::{CliError, Progress};
use keyplane::ext::wire::{Frame, Kind};
use keyplane::lpm::{self, Prefix};
use keyplane::{ControlTable, LookupTable, ReadHandle, Wire};
use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::net::IpAddr;
use std::time::Instant;

/// Inputs of `build` that LPM uses.
pub struct BuildReq<'a> {
    /// Route file (`-` = stdin).
    pub input: Option<&'a str>,
    /// Output blob.
    pub out: &'a str,
    /// `--control` (not supported for LPM yet).
    pub control: Option<&'a str>,
    /// `--generate` (not supported for LPM).
    pub generate: Option<&'a str>,
    /// Next-hop width.
    pub value_bits: u32,
    /// First line is a header.
    pub header: bool,
}

/// True when `build` should make an LPM table.
pub fn wants(structure: &str, key_format: &str) -> bool {
    structure == "lpm" || key_format == "prefix"
}

fn split_fields(line: &str) -> Vec<&str> {
    if line.contains('\t') {
        line.split('\t').map(str::trim).collect()
    } else if line.contains(',') {
        line.split(',').map(str::trim).collect()
    } else {
        line.split_whitespace().collect()
    }
}

/// Calls `f(line_number, line)` for every non-blank, non-comment line.
fn for_each_line(
    path: &str,
    header: bool,
    mut f: impl FnMut(usize, &str) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let mut r = crate::input::open(path)?;
    let mut buf = String::new();
    let mut no = 0usize;
    let mut skip_header = header;
    loop {
        buf.clear();
        let n = r.read_line(&mut buf).map_err(|e| CliError::io(path, e))?;
        if n == 0 {
            return Ok(());
        }
        no += 1;
        let line = buf.strip_prefix('\u{feff}').filter(|_| no == 1).unwrap_or(&buf).trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if std::mem::take(&mut skip_header) {
            continue;
        }
        f(no, line)?;
    }
}

fn quote(s: &str) -> String {
    let short: String = s.chars().take(80).collect();
    format!("{short:?}")
}

/// `keyplane build` of an LPM table.
pub fn build(r: &BuildReq) -> Result<Built, CliError> {
    if r.control.is_some() {
        return Err(CliError::usage(
            "build -s lpm: --control is not supported for LPM tables yet; update them through the library \
             (keyplane::lpm::Control) or rebuild from the route file",
        ));
    }
    if r.generate.is_some() {
        return Err(CliError::usage(
            "build -s lpm needs --input ROUTES (lines PREFIX VALUE); --generate makes no prefixes",
        ));
    }
    let Some(path) = r.input else {
        return Err(CliError::usage("build -s lpm needs --input ROUTES (lines PREFIX VALUE, e.g. 10.0.0.0/8 3)"));
    };
    if !(1..=lpm::MAX_VALUE_BITS).contains(&r.value_bits) {
        return Err(CliError::usage(&format!(
            "--value-bits {}: LPM next hops are 1 to {} bits wide",
            r.value_bits,
            lpm::MAX_VALUE_BITS
        )));
    }
    let mut routes: HashMap<Prefix, (u64, usize)> = HashMap::new();
    let (mut dups, mut first_dup) = (0usize, 0usize);
    let limit = if r.value_bits >= 64 { u64::MAX } else { (1u64 << r.value_bits) - 1 };
    for_each_line(path, r.header, |no, line| {
        let f = split_fields(line);
        if f.len() != 2 {
            return Err(CliError::input(
                path,
                no,
                &format!("expected PREFIX and NEXT_HOP (e.g. 10.0.0.0/8 3), got {} field(s)", f.len()),
            ));
        }
        let p: Prefix = f[0].parse().map_err(|e: keyplane::Error| CliError::input(path, no, &e.to_string()))?;
        let v = keyplane_any::parse_u64(f[1]).ok_or_else(|| {
            CliError::input(path, no, &format!("bad next hop {}: expected an unsigned integer", quote(f[1])))
        })?;
        if v > limit {
            return Err(CliError {
                code: 7,
                msg: format!(
                    "{}:{no}: next hop {v} does not fit in {} value bits; widen --value-bits",
                    if path == "-" { "<stdin>" } else { path },
                    r.value_bits
                ),
            });
        }
        if routes.insert(p, (v, no)).is_some() {
            dups += 1;
            if first_dup == 0 {
                first_dup = no;
            }
        }
        Ok(())
    })?;
    if dups > 0 {
        eprintln!(
            "keyplane: warning: {dups} duplicate prefix line(s) (first at line {first_dup}); the last next hop wins"
        );
    }
    if routes.is_empty() {
        eprintln!("keyplane: warning: {path} holds no routes; the table answers no route for every address");
    }
    let sp = Progress::spinner(&format!("building lpm over {} prefixes", routes.len()));
    let t = Instant::now();
    let ctl = lpm::Control::from_prefixes(routes.iter().map(|(p, (v, _))| (*p, *v)), r.value_bits)
        .map_err(|e| CliError::lib(path, e))?;
    let build_s = t.elapsed().as_secs_f64();
    let table = ctl.export();
    let blob = table.to_bytes();
    sp.finish();
    write_file(r.out, &blob)?;
    let n = ctl.len();
    let memory = table.memory_bytes();
    let v4 = routes.keys().filter(|p| p.family() == lpm::Family::V4).count();
    eprintln!(
        "built lpm over {n} prefixes ({v4} IPv4, {} IPv6) in {build_s:.2} s: {memory} bytes = {:.1} bytes/prefix, blob {} \
         bytes → {}",
        n - v4,
        memory as f64 / n.max(1) as f64,
        blob.len(),
        r.out
    );
    Ok(Built { n, blob_bytes: blob.len(), memory, build_s })
}

/// Writes a file atomically (temporary file + rename).
fn write_file(path: &str, bytes: &[u8]) -> Result<(), CliError> {
    let tmp = format!("{path}.tmp{}", std::process::id());
    std::fs::write(&tmp, bytes).map_err(|e| CliError::io(path, e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError::io(path, e)
    })
}

/// The kind of the object in a file (reads its 16-byte header only),
/// identified among the kinds the structures declare.
fn kind_of(path: &str) -> Result<Option<Kind>, CliError> {
    let mut f = std::fs::File::open(path).map_err(|e| CliError::io(path, e))?;
    let mut h = [0u8; 16];
    match f.read_exact(&mut h) {
        Ok(()) => {
            Ok(keyplane_any::identify(u16::from_le_bytes([h[6], h[7]]))
                .filter(|_| h[..4] == keyplane::ext::wire::MAGIC))
        }
        Err(_) => Ok(None),
    }
}

/// `keyplane query` when the blob is an LPM table (always longest-prefix).
/// `Ok(None)`: not an LPM blob — the caller goes on (there `--lpm` means
/// name LPM, `crate::name_lpm`, which refuses other kinds).
pub fn query(blob: &str, keys: &str, checked: bool, values_only: bool) -> Result<Option<u8>, CliError> {
    if kind_of(blob)? != Some(<keyplane::lpm::Lookup as keyplane::Wire>::KIND) {
        return Ok(None);
    }
    let bytes = std::fs::read(blob).map_err(|e| CliError::io(blob, e))?;
    let table = lpm::Lookup::from_bytes(&bytes).map_err(|e| CliError::lib(blob, e))?;
    let reader = table.reader();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let werr = |e: std::io::Error| CliError::io("<stdout>", e);
    let (mut absent, mut bad, mut first_bad) = (0usize, 0usize, String::new());
    let mut broken = false;
    for_each_line(keys, false, |no, line| {
        let field = split_fields(line)[0];
        let Ok(a) = field.parse::<IpAddr>() else {
            bad += 1;
            if first_bad.is_empty() {
                first_bad = format!("line {no}: bad address {}", quote(field));
            }
            return Ok(());
        };
        let k: Vec<u8> = match a {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        let v = reader.get(&k);
        absent += v.is_none() as usize;
        if broken {
            return Ok(());
        }
        let r = match (v, values_only) {
            (Some(v), true) => writeln!(out, "{v}"),
            (Some(v), false) => writeln!(out, "{field}\t{v}"),
            (None, true) => writeln!(out, "-"),
            (None, false) => writeln!(out, "{field}\t-"),
        };
        match r {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                broken = true;
                Ok(())
            }
            r => r.map_err(werr),
        }
    })?;
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(werr(e)),
        _ => {}
    }
    if bad > 0 {
        let shown = if keys == "-" { "<stdin>" } else { keys };
        return Err(CliError {
            code: 3,
            msg: format!("{shown}: {bad} line(s) skipped: not an IPv4 or IPv6 address (first: {first_bad})"),
        });
    }
    Ok(Some(if checked && absent > 0 { 1 } else { 0 }))
}

/// `keyplane inspect` of an LPM blob.
pub fn inspect(path: &str, bytes: &[u8]) -> Result<(), CliError> {
    let info = Frame::inspect(bytes).map_err(|e| CliError::lib(path, e))?;
    let t = lpm::Lookup::from_bytes(bytes).map_err(|e| CliError::lib(path, e))?;
    let lens = |f| t.lengths(f).iter().map(|l| format!("/{l}")).collect::<Vec<_>>().join(" ");
    println!("  object:           {} (format version {})", keyplane_any::label(info.kind), info.version);
    println!("  structure:        lpm (longest-prefix match, Othello-indexed verified tables per length)");
    println!("  value_bits:       {}", t.value_bits());
    println!("  seq:              {}", t.seq());
    println!("  table id:         {:#018x}", t.table_id());
    println!("  IPv4 tables:      {}", lens(lpm::Family::V4));
    println!("  IPv6 tables:      {}", lens(lpm::Family::V6));
    println!("  memory:           {} bytes (blob {} bytes)", t.memory_bytes(), bytes.len());
    println!("  absent prefixes:  never answered (every hit is verified against the stored prefix)");
    println!("  checksum:         OK ({:#018x})", info.checksum);
    Ok(())
}
