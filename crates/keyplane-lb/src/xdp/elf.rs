//! Just enough ELF64 (little endian) to load the LB's XDP object: the
//! program section's instructions, the `maps` section's definitions (one
//! `struct kp_map` = type, key size, value size, max entries, flags per
//! symbol) and the program's relocations, which may only name maps
//! (`R_BPF_64_64` on a `ld_imm64`). Every offset is checked: a bad object is
//! an error, never a panic.

use crate::error::{Error, Result};

/// One map definition of the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapDef {
    /// Symbol name.
    pub name: String,
    /// `BPF_MAP_TYPE_*`.
    pub ty: u32,
    /// Key bytes.
    pub key: u32,
    /// Value bytes.
    pub value: u32,
    /// Entries (the loader may raise it).
    pub entries: u32,
    /// `BPF_F_*` flags.
    pub flags: u32,
}

/// The program of an object and the maps its instructions name.
#[derive(Debug, Clone)]
pub struct Object {
    /// Instructions (8 bytes each, little endian).
    pub insns: Vec<u64>,
    /// Map definitions.
    pub maps: Vec<MapDef>,
    /// (instruction index, index in `maps`): `ld_imm64` instructions to point at a map.
    pub relocs: Vec<(usize, usize)>,
}

fn bad(what: &str) -> Error {
    Error::Setup(format!("the XDP object is malformed: {what} (rebuild keyplane-lb)"))
}

fn u16_at(b: &[u8], o: usize) -> Result<u16> {
    b.get(o..o + 2).map(|s| u16::from_le_bytes([s[0], s[1]])).ok_or_else(|| bad("truncated"))
}
fn u32_at(b: &[u8], o: usize) -> Result<u32> {
    b.get(o..o + 4).map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes"))).ok_or_else(|| bad("truncated"))
}
fn u64_at(b: &[u8], o: usize) -> Result<u64> {
    b.get(o..o + 8).map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes"))).ok_or_else(|| bad("truncated"))
}

struct Section {
    name: u32,
    ty: u32,
    off: usize,
    size: usize,
    link: u32,
    info: u32,
}

fn cstr(b: &[u8], o: usize) -> Result<&str> {
    let s = b.get(o..).ok_or_else(|| bad("string offset"))?;
    let end = s.iter().position(|&c| c == 0).ok_or_else(|| bad("unterminated string"))?;
    std::str::from_utf8(&s[..end]).map_err(|_| bad("string not UTF-8"))
}

/// Parses `bytes` and returns the program in section `prog`.
pub fn parse(bytes: &[u8], prog: &str) -> Result<Object> {
    if bytes.get(..4) != Some(b"\x7fELF") || bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Err(bad("not a little-endian ELF64 file"));
    }
    let shoff = u64_at(bytes, 0x28)? as usize;
    let shentsize = u16_at(bytes, 0x3a)? as usize;
    let shnum = u16_at(bytes, 0x3c)? as usize;
    let shstrndx = u16_at(bytes, 0x3e)? as usize;
    if shentsize < 64 {
        return Err(bad("section header size"));
    }
    let mut secs = Vec::with_capacity(shnum);
    for i in 0..shnum {
        let o = shoff.checked_add(i * shentsize).ok_or_else(|| bad("section table offset"))?;
        let s = Section {
            name: u32_at(bytes, o)?,
            ty: u32_at(bytes, o + 4)?,
            off: u64_at(bytes, o + 24)? as usize,
            size: u64_at(bytes, o + 32)? as usize,
            link: u32_at(bytes, o + 40)?,
            info: u32_at(bytes, o + 44)?,
        };
        if s.ty != 8 && s.off.checked_add(s.size).is_none_or(|e| e > bytes.len()) {
            return Err(bad("section outside the file"));
        }
        secs.push(s);
    }
    let data = |s: &Section| &bytes[s.off..s.off + if s.ty == 8 { 0 } else { s.size }];
    let shstr = data(secs.get(shstrndx).ok_or_else(|| bad("section name table"))?);
    let name = |s: &Section| cstr(shstr, s.name as usize);
    let find = |n: &str| secs.iter().position(|s| name(s).is_ok_and(|x| x == n));
    let pi = find(prog).ok_or_else(|| bad(&format!("no section {prog}")))?;
    let mi = find("maps");
    let code = data(&secs[pi]);
    if code.len() % 8 != 0 || code.is_empty() {
        return Err(bad("program size"));
    }
    let insns: Vec<u64> = code.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
    // Symbols.
    let st = secs.iter().find(|s| s.ty == 2).ok_or_else(|| bad("no symbol table"))?;
    let strtab = data(secs.get(st.link as usize).ok_or_else(|| bad("symbol string table"))?);
    let syms = data(st);
    let nsym = syms.len() / 24;
    let mut maps = Vec::new();
    let mut sym_map = vec![None; nsym];
    if let Some(mi) = mi {
        let md = data(&secs[mi]);
        for (k, slot) in sym_map.iter_mut().enumerate() {
            let o = k * 24;
            if u16_at(syms, o + 6)? as usize != mi {
                continue;
            }
            let name = cstr(strtab, u32_at(syms, o)? as usize)?.to_string();
            let v = u64_at(syms, o + 8)? as usize;
            let d = md.get(v..v + 20).ok_or_else(|| bad("map definition outside the maps section"))?;
            let f = |i: usize| u32::from_le_bytes(d[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
            *slot = Some(maps.len());
            maps.push(MapDef { name, ty: f(0), key: f(1), value: f(2), entries: f(3), flags: f(4) });
        }
    }
    // Relocations of the program section.
    let mut relocs = Vec::new();
    for s in secs.iter().filter(|s| s.ty == 9 && s.info as usize == pi) {
        for r in data(s).chunks_exact(16) {
            let off = u64::from_le_bytes(r[..8].try_into().expect("8 bytes")) as usize;
            let info = u64::from_le_bytes(r[8..].try_into().expect("8 bytes"));
            let (sym, ty) = ((info >> 32) as usize, info as u32);
            if ty != 1 {
                return Err(bad(&format!("relocation type {ty} (only map references are supported)")));
            }
            let m = sym_map.get(sym).copied().flatten().ok_or_else(|| bad("relocation against a non-map symbol"))?;
            if off % 8 != 0 || off / 8 + 1 >= insns.len() || insns[off / 8] & 0xff != 0x18 {
                return Err(bad("relocation not on a ld_imm64"));
            }
            relocs.push((off / 8, m));
        }
    }
    Ok(Object { insns, maps, relocs })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded object parses (its maps and relocations are the ones the
    /// loader expects), and no truncation or byte change of it panics.
    #[test]
    fn object_parses_and_bad_bytes_are_errors_not_panics() {
        let Ok(obj) = crate::xdp::object() else {
            eprintln!("skipping: built without clang");
            return;
        };
        let o = parse(obj, "xdp").expect("the built object");
        let names: Vec<&str> = o.maps.iter().map(|m| m.name.as_str()).collect();
        for n in ["kp_ctl", "kp_vipmap", "kp_vips", "kp_heap", "kp_bk", "kp_stats", "kp_cnt", "kp_reports", "kp_epoch"]
        {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        assert!(!o.relocs.is_empty() && o.relocs.iter().all(|&(i, m)| i + 1 < o.insns.len() && m < o.maps.len()));
        assert!(parse(obj, "nosuch").is_err());
        let step = (obj.len() / 2000).max(1);
        for n in (0..obj.len()).step_by(step) {
            let _ = parse(&obj[..n], "xdp");
        }
        let mut x = 0x1234_5678_9abc_def1u64;
        for _ in 0..3000 {
            let mut b = obj.to_vec();
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x as usize) % b.len();
                b[i] = (x >> 40) as u8;
            }
            let _ = parse(&b, "xdp");
        }
    }
}
