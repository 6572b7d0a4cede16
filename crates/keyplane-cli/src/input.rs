//! Reading keys, values and update operations from text and binary files.
//! Every error names the file and the line (text) or byte offset (binary).

use crate::{CliError, Progress};
use keyplane_any::{KeyFormat, parse_key, parse_u64};
use std::io::{BufRead, BufReader, Read};

/// Field separator of a text file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sep {
    /// Decide from the first data line: tab, else comma, else whitespace.
    Auto,
    /// `,`
    Comma,
    /// `\t`
    Tab,
    /// Runs of spaces or tabs.
    Space,
}

impl Sep {
    /// Parses `--format`.
    pub fn from_format(f: &str) -> Option<Self> {
        Some(match f {
            "auto" => Sep::Auto,
            "csv" => Sep::Comma,
            "tsv" => Sep::Tab,
            "ws" | "space" => Sep::Space,
            _ => return None,
        })
    }
    fn resolve(self, line: &str) -> Sep {
        match self {
            Sep::Auto if line.contains('\t') => Sep::Tab,
            Sep::Auto if line.contains(',') => Sep::Comma,
            Sep::Auto => Sep::Space,
            s => s,
        }
    }
    fn split(self, line: &str) -> Vec<&str> {
        match self {
            Sep::Comma => line.split(',').map(str::trim).collect(),
            Sep::Tab => line.split('\t').collect(),
            Sep::Space | Sep::Auto => line.split_whitespace().collect(),
        }
    }
}

/// How to read an input file.
#[derive(Debug, Clone)]
pub struct Format {
    /// Text separator (text files).
    pub sep: Sep,
    /// Key encoding (text files).
    pub key: KeyFormat,
    /// Skip the first non-comment line.
    pub header: bool,
    /// Binary records: key width in bytes (`None` = text file).
    pub key_width: Option<usize>,
    /// Binary records: value bytes after each key (0..=8, little-endian).
    pub value_bytes: usize,
}

/// A bad line or record: exit code (3 = does not parse, 7 = the value does
/// not fit the table) and message.
#[derive(Debug)]
pub struct LineErr(pub u8, pub String);

impl From<String> for LineErr {
    fn from(m: String) -> Self {
        LineErr(3, m)
    }
}

impl LineErr {
    fn at_line(self, path: &str, line: usize) -> CliError {
        let mut e = CliError::input(path, line, &self.1);
        e.code = self.0;
        e
    }
    fn at_offset(self, path: &str, off: u64) -> CliError {
        let mut e = CliError::input_at(path, off, &self.1);
        e.code = self.0;
        e
    }
}

/// Opens a file (`-` = stdin) for buffered reading.
pub fn open(path: &str) -> Result<Box<dyn BufRead>, CliError> {
    if path == "-" {
        return Ok(Box::new(BufReader::new(std::io::stdin())));
    }
    let f = std::fs::File::open(path).map_err(|e| CliError::io(path, e))?;
    Ok(Box::new(BufReader::with_capacity(1 << 20, f)))
}

fn file_len(path: &str) -> Option<u64> {
    if path == "-" { None } else { std::fs::metadata(path).ok().map(|m| m.len()) }
}

/// Reads text lines, skipping blank lines and `#` comments, calling
/// `f(line_number, fields, raw_line)`.
fn for_each_line(
    path: &str,
    fmt: &Format,
    what: &str,
    mut f: impl FnMut(usize, &[&str], &str) -> Result<(), LineErr>,
) -> Result<(), CliError> {
    let mut rd = open(path)?;
    let pb = Progress::bytes(what, file_len(path));
    let mut sep = fmt.sep;
    let mut first = true;
    let mut skip_header = fmt.header;
    let mut line = String::new();
    let mut lineno = 0usize;
    loop {
        line.clear();
        let n = rd.read_line(&mut line).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidData {
                CliError::input(path, lineno + 1, "not valid UTF-8 (use --key-width for binary key files)")
            } else {
                CliError::io(path, e)
            }
        })?;
        if n == 0 {
            break;
        }
        lineno += 1;
        pb.inc(n as u64);
        if lineno == 1 && line.starts_with('\u{feff}') {
            line.drain(..'\u{feff}'.len_utf8());
            crate::warn::warn(&format!(
                "{}: starts with a UTF-8 byte-order mark; it was stripped",
                crate::shown(path)
            ))?;
        }
        let l = line.trim_end_matches(['\n', '\r']);
        if l.trim().is_empty() || l.trim_start().starts_with('#') {
            continue;
        }
        if skip_header {
            skip_header = false;
            continue;
        }
        if first {
            sep = sep.resolve(l);
            first = false;
        }
        let fields = sep.split(l);
        f(lineno, &fields, l).map_err(|m| m.at_line(path, lineno))?;
    }
    pb.finish();
    Ok(())
}

fn parse_value(s: &str, value_bits: u32) -> Result<u64, LineErr> {
    let v = parse_u64(s).ok_or_else(|| format!("value {s:?} is not an unsigned integer"))?;
    too_wide(v, value_bits)?;
    Ok(v)
}

/// A value wider than the table's values: the table refuses it (exit 7).
fn too_wide(v: u64, value_bits: u32) -> Result<(), LineErr> {
    if value_bits < 64 && v >> value_bits != 0 {
        return Err(LineErr(
            7,
            format!("value {v} does not fit in {value_bits} value bits (widen -l or mask the value)"),
        ));
    }
    Ok(())
}

/// Binary records: calls `f(offset, key, value)` per record.
fn for_each_record(
    path: &str,
    width: usize,
    value_bytes: usize,
    what: &str,
    mut f: impl FnMut(u64, &[u8], u64) -> Result<(), LineErr>,
) -> Result<(), CliError> {
    if value_bytes > 8 {
        return Err(CliError::usage("--value-bytes must be between 0 and 8"));
    }
    if width == 0 {
        return Err(CliError::usage("--key-width must be at least 1"));
    }
    let rec = width + value_bytes;
    let mut rd = open(path)?;
    let pb = Progress::bytes(what, file_len(path));
    let mut buf = vec![0u8; rec];
    let mut off = 0u64;
    loop {
        let mut got = 0;
        while got < rec {
            let n = rd.read(&mut buf[got..]).map_err(|e| CliError::io(path, e))?;
            if n == 0 {
                break;
            }
            got += n;
        }
        if got == 0 {
            break;
        }
        if got < rec {
            return Err(CliError::input_at(
                path,
                off,
                &format!(
                    "truncated record: {got} of {rec} bytes (records are {width} key + {value_bytes} value bytes)"
                ),
            ));
        }
        let mut vb = [0u8; 8];
        vb[..value_bytes].copy_from_slice(&buf[width..]);
        f(off, &buf[..width], u64::from_le_bytes(vb)).map_err(|m| m.at_offset(path, off))?;
        off += rec as u64;
        pb.inc(rec as u64);
    }
    pb.finish();
    Ok(())
}

/// Reads `(key, value)` pairs for `build`.
pub fn read_items(path: &str, fmt: &Format, value_bits: u32) -> Result<Vec<(Vec<u8>, u64)>, CliError> {
    read_items_at(path, fmt, value_bits, &mut Vec::new())
}

/// [`read_items`], also recording where each item came from (the line of a
/// text file, the byte offset of a binary record) in `at`.
pub fn read_items_at(
    path: &str,
    fmt: &Format,
    value_bits: u32,
    at: &mut Vec<u64>,
) -> Result<Vec<(Vec<u8>, u64)>, CliError> {
    let mut items = Vec::new();
    if let Some(w) = fmt.key_width {
        if fmt.value_bytes == 0 {
            return Err(CliError::usage("build from a binary file needs --value-bytes 1..8"));
        }
        for_each_record(path, w, fmt.value_bytes, "reading keys", |off, k, v| {
            too_wide(v, value_bits)?;
            items.push((k.to_vec(), v));
            at.push(off);
            Ok(())
        })?;
    } else {
        for_each_line(path, fmt, "reading keys", |line, fields, _| {
            if fields.len() != 2 {
                return Err(format!("expected KEY<sep>VALUE, found {} field(s)", fields.len()).into());
            }
            let k = parse_key(fmt.key, fields[0])?;
            let v = parse_value(fields[1], value_bits)?;
            items.push((k, v));
            at.push(line as u64);
            Ok(())
        })?;
    }
    Ok(items)
}

/// Reads keys for `query`: the first field of every line (so the file a
/// table was built from can be queried as is), or binary records; calls
/// `f(display, key bytes)` per key. An error from `f` is returned as is.
/// A text line whose key does not parse is skipped and counted (the first
/// few are kept for the final report) unless `--strict`, which stops there.
pub fn read_keys(
    path: &str,
    fmt: &Format,
    mut f: impl FnMut(&str, &[u8]) -> Result<(), CliError>,
) -> Result<BadLines, CliError> {
    let mut err = None;
    let mut bad = BadLines::default();
    if let Some(w) = fmt.key_width {
        for_each_record(path, w, fmt.value_bytes, "querying", |_, k, _| {
            let shown: String = k.iter().map(|b| format!("{b:02x}")).collect();
            f(&shown, k).map_err(|e| {
                let m = e.msg.clone();
                err = Some(e);
                LineErr(e_code(&err), m)
            })
        })
        .map_err(|e| err.take().unwrap_or(e))?;
    } else {
        let strict = crate::warn::strict();
        for_each_line(path, fmt, "querying", |line, fields, _| {
            let k = match parse_key(fmt.key, fields[0]) {
                Ok(k) => k,
                Err(m) if !strict => {
                    bad.count += 1;
                    if bad.first.len() < 5 {
                        bad.first.push(format!("{}:{line}: {m}", crate::shown(path)));
                    }
                    return Ok(());
                }
                Err(m) => return Err(m.into()),
            };
            f(fields[0], &k).map_err(|e| {
                let m = e.msg.clone();
                err = Some(e);
                LineErr(e_code(&err), m)
            })
        })
        .map_err(|e| err.take().unwrap_or(e))?;
    }
    Ok(bad)
}

fn e_code(e: &Option<CliError>) -> u8 {
    e.as_ref().map_or(3, |e| e.code)
}

/// Lines `query` skipped because their key did not parse.
#[derive(Debug, Default)]
pub struct BadLines {
    /// How many.
    pub count: usize,
    /// The first few, as `FILE:LINE: message`.
    pub first: Vec<String>,
}

/// One update operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Insert or change.
    Set(Vec<u8>, u64),
    /// Remove.
    Del(Vec<u8>),
}

/// Reads an operations file: `set KEY VALUE` / `del KEY` lines.
pub fn read_ops(path: &str, fmt: &Format, value_bits: u32) -> Result<Vec<Op>, CliError> {
    let mut ops = Vec::new();
    let fmt = Format { header: false, key_width: None, ..fmt.clone() };
    for_each_line(path, &fmt, "reading operations", |_, fields, _| {
        match fields {
            ["set" | "insert", k, v] => ops.push(Op::Set(parse_key(fmt.key, k)?, parse_value(v, value_bits)?)),
            ["del" | "remove", k] => ops.push(Op::Del(parse_key(fmt.key, k)?)),
            _ => return Err("expected `set KEY VALUE` or `del KEY`".to_string().into()),
        }
        Ok(())
    })?;
    Ok(ops)
}

/// Parses a `KEY=VALUE` command-line operation.
pub fn parse_set(s: &str, key: KeyFormat, value_bits: u32) -> Result<Op, CliError> {
    let (k, v) = s.rsplit_once('=').ok_or_else(|| CliError::usage(&format!("--set {s:?}: expected KEY=VALUE")))?;
    let k = parse_key(key, k).map_err(|m| CliError::usage(&format!("--set {s:?}: {m}")))?;
    let v = parse_value(v, value_bits)
        .map_err(|m| CliError { code: if m.0 == 7 { 7 } else { 2 }, msg: format!("--set {s:?}: {}", m.1) })?;
    Ok(Op::Set(k, v))
}
