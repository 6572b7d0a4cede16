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
    /// The separator of a file whose first data line is `line`: tab, else
    /// comma (not for 5-tuple keys, whose commas belong to the key), else
    /// whitespace.
    fn resolve(self, line: &str, key: KeyFormat) -> Sep {
        match self {
            Sep::Auto if line.contains('\t') => Sep::Tab,
            Sep::Auto if line.contains(',') && key != KeyFormat::FiveTuple => Sep::Comma,
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

/// Whether keys of this format may contain spaces (text and names); keys of
/// the other formats never do, so a space always separates fields there.
pub fn spaced(key: KeyFormat) -> bool {
    matches!(key, KeyFormat::Text | KeyFormat::Name)
}

/// One data line of a text file.
pub struct Line<'a> {
    /// Line number (1-based).
    pub no: usize,
    /// The line without its end-of-line characters.
    pub text: &'a str,
    /// Its separator (resolved from the file's first data line).
    pub sep: Sep,
    /// The separator was detected (`--format auto`), not given.
    pub auto: bool,
}

impl Line<'_> {
    fn fields(&self) -> Vec<&str> {
        self.sep.split(self.text)
    }
}

/// Splits a `KEY<sep>VALUE` text (a build line, or the rest of a `set` line)
/// into key and value. Whitespace-separated: the value is the last field and
/// the key everything before the last run of whitespace, so text and name
/// keys may contain spaces (`my key 5` → `my key`, 5); for the other key
/// formats a key with a space is an extra field.
fn split_kv(text: &str, sep: Sep, key: KeyFormat) -> Result<(&str, &str), LineErr> {
    let fields_err = |n: usize| LineErr::from(format!("expected KEY<sep>VALUE, found {n} field(s)"));
    match sep {
        Sep::Tab | Sep::Comma => match sep.split(text)[..] {
            [k, v] => Ok((k, v)),
            ref f => Err(fields_err(f.len())),
        },
        Sep::Space | Sep::Auto => {
            let t = text.trim();
            let Some((k, v)) = t.rsplit_once(char::is_whitespace) else {
                return Err(fields_err(usize::from(!t.is_empty())));
            };
            let k = k.trim_end();
            if !spaced(key) && k.contains(char::is_whitespace) {
                return Err(fields_err(t.split_whitespace().count()));
            }
            Ok((k, v))
        }
    }
}

/// Keys read whole although they contain spaces: reported once per file as
/// a warning (the first one immediately with `--strict`).
#[derive(Default)]
struct SpacedKeys {
    count: usize,
    first: Option<(usize, String)>,
}

impl SpacedKeys {
    /// Records `key` (already split) if it holds whitespace and the
    /// separator was detected rather than given.
    fn note(&mut self, line: &Line<'_>, key: &str, how: &str) -> Result<(), LineErr> {
        if !line.auto || line.sep != Sep::Space || !key.contains(char::is_whitespace) {
            return Ok(());
        }
        self.count += 1;
        if self.first.is_none() {
            self.first = Some((line.no, key.to_string()));
            if crate::warn::strict() {
                crate::warn::warn(&format!("key {key:?} contains spaces: {how}"))
                    .map_err(|e| LineErr(e.code, e.msg))?;
            }
        }
        Ok(())
    }
    fn report(&self, path: &str, how: &str) -> Result<(), CliError> {
        let Some((no, key)) = &self.first else { return Ok(()) };
        crate::warn::warn(&format!(
            "{}: {} key(s) contain spaces (first at line {no}: {key:?}): {how}",
            crate::shown(path),
            self.count
        ))
    }
}

/// How a whitespace-separated `KEY VALUE` line was read (the warning text).
const KV_SPACES: &str = "each line was split at its last run of whitespace into KEY and VALUE \
     (use tabs, or --format ws to say the file is split by spaces)";
/// How a whitespace-separated operation was read (the warning text).
const OPS_SPACES: &str = "the key of `set KEY VALUE` is everything between `set` and the last run of whitespace, \
     of `del KEY` the rest of the line (use tabs, or --format ws to say the file is split by spaces)";
/// How a whitespace query line was read (the warning text).
const QUERY_SPACES: &str = "a query line without tabs is one key, so each was looked up whole \
     (--format ws reads KEY VALUE lines split by spaces; --format tsv reads whole lines without this warning)";

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

/// Reads text lines, skipping blank lines and `#` comments, calling `f`
/// with each data line.
fn for_each_line(
    path: &str,
    fmt: &Format,
    what: &str,
    mut f: impl FnMut(&Line<'_>) -> Result<(), LineErr>,
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
            sep = sep.resolve(l, fmt.key);
            first = false;
        }
        let line = Line { no: lineno, text: l, sep, auto: fmt.sep == Sep::Auto };
        f(&line).map_err(|m| m.at_line(path, lineno))?;
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

/// Widest binary key record `--key-width` accepts (64 KiB, the longest key
/// any structure takes).
pub const MAX_KEY_WIDTH: usize = 1 << 16;

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
    if !(1..=MAX_KEY_WIDTH).contains(&width) {
        return Err(CliError::usage(&format!("--key-width {width}: must be between 1 and {MAX_KEY_WIDTH} bytes")));
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
        let mut spaces = SpacedKeys::default();
        for_each_line(path, fmt, "reading keys", |line| {
            let (k, v) = split_kv(line.text, line.sep, fmt.key)?;
            spaces.note(line, k, KV_SPACES)?;
            let k = parse_key(fmt.key, k)?;
            let v = parse_value(v, value_bits)?;
            items.push((k, v));
            at.push(line.no as u64);
            Ok(())
        })?;
        spaces.report(path, KV_SPACES)?;
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
        let mut spaces = SpacedKeys::default();
        for_each_line(path, fmt, "querying", |line| {
            let field = query_key(line, fmt.key);
            spaces.note(line, field, QUERY_SPACES)?;
            let k = match parse_key(fmt.key, field) {
                Ok(k) => k,
                Err(m) if !strict => {
                    bad.count += 1;
                    if bad.first.len() < 5 {
                        bad.first.push(format!("{}:{}: {m}", crate::shown(path), line.no));
                    }
                    return Ok(());
                }
                Err(m) => return Err(m.into()),
            };
            f(field, &k).map_err(|e| {
                let m = e.msg.clone();
                err = Some(e);
                LineErr(e_code(&err), m)
            })
        })
        .map_err(|e| err.take().unwrap_or(e))?;
        spaces.report(path, QUERY_SPACES)?;
    }
    Ok(bad)
}

/// The key of a query line: the first field of a tab- or comma-separated
/// line; of a whitespace-separated one, the first field for key formats
/// without spaces, and for text and name keys the whole line (detected
/// separator: a query line is one key) or everything before the last run of
/// whitespace (`--format ws`: `KEY VALUE` lines).
fn query_key<'a>(line: &Line<'a>, key: KeyFormat) -> &'a str {
    let t = line.text;
    match line.sep {
        Sep::Tab | Sep::Comma => line.sep.split(t).into_iter().next().unwrap_or(""),
        Sep::Space | Sep::Auto if !spaced(key) => t.split_whitespace().next().unwrap_or(""),
        _ if line.auto => t.trim(),
        _ => match t.trim().rsplit_once(char::is_whitespace) {
            Some((k, _)) => k.trim_end(),
            None => t.trim(),
        },
    }
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
    let mut spaces = SpacedKeys::default();
    for_each_line(path, &fmt, "reading operations", |line| {
        let bad = || LineErr::from("expected `set KEY VALUE` or `del KEY`".to_string());
        let (op, rest) = match line.sep {
            Sep::Space | Sep::Auto => line.text.trim().split_once(char::is_whitespace).ok_or_else(bad)?,
            s => line.text.split_once(if s == Sep::Tab { '\t' } else { ',' }).ok_or_else(bad)?,
        };
        let op = op.trim();
        match op {
            "set" | "insert" => {
                let (k, v) = split_kv(rest.trim_start_matches([' ', '\t']), line.sep, fmt.key).map_err(|_| bad())?;
                spaces.note(line, k, OPS_SPACES)?;
                ops.push(Op::Set(parse_key(fmt.key, k)?, parse_value(v, value_bits)?));
            }
            "del" | "remove" => {
                let k = match line.sep {
                    Sep::Space | Sep::Auto => rest.trim(),
                    _ => match line.fields()[1..] {
                        [k] => k,
                        _ => return Err(bad()),
                    },
                };
                if line.sep == Sep::Space && !spaced(fmt.key) && k.contains(char::is_whitespace) {
                    return Err(bad());
                }
                spaces.note(line, k, OPS_SPACES)?;
                ops.push(Op::Del(parse_key(fmt.key, k)?));
            }
            _ => return Err(bad()),
        }
        Ok(())
    })?;
    spaces.report(path, OPS_SPACES)?;
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
