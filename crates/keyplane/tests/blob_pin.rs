//! Blob and delta bytes are pinned: tables built from a fixed seed and table
//! id, then updated, must export the same lookup blob and emit the same
//! deltas as the files in `tests/data/pinned/` (written before the
//! structures moved onto the generic engine), byte for byte; the pinned
//! blobs load and re-serialise to the same bytes, and the pinned deltas
//! apply to them. `KEYPLANE_PIN_WRITE=1` rewrites the files (only after a
//! deliberate format change).

use keyplane::describe::{Configure, Opts};
use keyplane::{LookupTable, TableId, Wire};
use std::path::PathBuf;

fn path(name: &str, what: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/pinned").join(format!("{name}.{what}.bin"))
}

fn key(i: u64, names: bool) -> Vec<u8> {
    if names { format!("/org/pin/{}/{}", i % 5, i).into_bytes() } else { format!("key-{i}").into_bytes() }
}

fn pin(name: &str, what: &str, bytes: &[u8]) {
    let p = path(name, what);
    if std::env::var_os("KEYPLANE_PIN_WRITE").is_some() {
        std::fs::write(&p, bytes).unwrap();
    }
    let want = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(want == bytes, "{name} {what}: {} bytes now, {} pinned; the wire format changed", bytes.len(), want.len());
}

fn check<C: Configure>(names: bool, vbits: u32)
where
    C::Delta: Wire,
{
    check_with::<C>(C::NAME, names, vbits, "seed=7");
}

/// [`check`] with structure options `opts`, pinned under `name`.
fn check_with<C: Configure>(name: &str, names: bool, vbits: u32, opts: &str)
where
    C::Delta: Wire,
{
    let items: Vec<(Vec<u8>, u64)> = (0..200).map(|i| (key(i, names), (i * 3) % (1 << vbits))).collect();
    let mut ctl = C::build_with(items, vbits, &Opts::parse(opts).unwrap()).unwrap();
    ctl.set_table_id(TableId::from_seed(7));
    let blob = ctl.export().to_bytes();
    pin(name, "lookup", &blob);
    // Deltas: inserts, a value change and removes, one file (length-prefixed).
    let mut deltas = Vec::new();
    let mut all = Vec::new();
    for i in 200..240 {
        deltas.push(ctl.insert(&key(i, names), i % (1 << vbits)).unwrap().to_bytes());
    }
    deltas.push(ctl.insert(&key(3, names), 1).unwrap().to_bytes());
    for i in 0..20 {
        if let Some(d) = ctl.remove(&key(i * 7, names)).unwrap() {
            deltas.push(d.to_bytes());
        }
    }
    for d in &deltas {
        all.extend_from_slice(&(d.len() as u64).to_le_bytes());
        all.extend_from_slice(d);
    }
    pin(name, "deltas", &all);
    let after = ctl.export().to_bytes();
    pin(name, "after", &after);
    // The pinned bytes load, re-serialise identically, and the pinned
    // deltas bring the pinned blob to the pinned final state.
    let t = C::Lookup::from_bytes(&std::fs::read(path(name, "lookup")).unwrap()).unwrap();
    assert_eq!(t.to_bytes(), blob, "{name}: pinned blob re-serialises differently");
    for d in &deltas {
        t.apply(&C::Delta::from_bytes(d).unwrap()).unwrap();
    }
    assert_eq!(t.to_bytes(), after, "{name}: pinned deltas give another final blob");
}

#[test]
fn bfw_bytes_are_pinned() {
    check::<keyplane::bfw::Control>(false, 4);
}

#[test]
fn cfw_bytes_are_pinned() {
    check::<keyplane::cfw::Control>(false, 8);
}

/// The XXH3 tables every build made before `othello::KeyHash` existed
/// (now `hash=xxh3`): their pinned bytes are unchanged.
#[test]
fn othello_bytes_are_pinned() {
    check_with::<keyplane::othello::Control>("othello", false, 8, "seed=7,hash=xxh3");
}

/// A `KeyHash::Mum8` table (the default since it exists) of 8-byte keys,
/// with keys of other lengths (XXH3 in such a table) among them, pinned
/// under `othello-mum8`: blob, deltas (slot patches and, through growth,
/// rebuilds) and final blob byte for byte.
#[test]
fn othello_mum8_bytes_are_pinned() {
    use keyplane::ControlTable;
    use keyplane::othello::{Control, KeyHash, Options};
    let name = "othello-mum8";
    let k = |i: u64| if i % 10 == 9 { key(i, false) } else { (0x0a00_0000 + i).to_le_bytes().to_vec() };
    let items: Vec<(Vec<u8>, u64)> = (0..200).map(|i| (k(i), (i * 7) % 256)).collect();
    let opts = Options { seed: 7, ..Options::default() };
    assert_eq!(opts.hash, KeyHash::Mum8, "the default key hash");
    let mut ctl = Control::from_items_with(items, 8, opts).unwrap();
    ctl.set_table_id(TableId::from_seed(7));
    let blob = ctl.export().to_bytes();
    pin(name, "lookup", &blob);
    let mut deltas = Vec::new();
    for i in 200..500 {
        deltas.push(ctl.insert(&k(i), i % 256).unwrap().to_bytes());
    }
    for i in 0..30 {
        if let Some(d) = ctl.remove(&k(i * 11)).unwrap() {
            deltas.push(d.to_bytes());
        }
    }
    check_sequence(name, &blob, &deltas, &ctl.export().to_bytes(), |b| {
        let t = keyplane::othello::Lookup::from_bytes(b)?;
        assert_eq!(t.key_hash(), KeyHash::Mum8);
        Ok(Box::new(move |d: Option<&[u8]>| match d {
            Some(d) => {
                let dd = keyplane::othello::Delta::from_bytes(d)?;
                assert_eq!(dd.to_bytes(), d, "othello delta re-encodes differently");
                t.apply(&dd).map(|_| Vec::new())
            }
            None => Ok(t.to_bytes()),
        }))
    });
}

/// Othello with fingerprints and the emptiness bit (wider slots), pinned
/// under `othello-filtered`: blob, deltas and final blob byte for byte.
#[test]
fn othello_filtered_bytes_are_pinned() {
    use keyplane::ControlTable;
    use keyplane::othello::{Control, KeyHash, Options};
    let name = "othello-filtered";
    let items: Vec<(Vec<u8>, u64)> = (0..200).map(|i| (key(i, false), (i * 5) % 64)).collect();
    let mut ctl =
        Control::from_items_with(items, 6, Options { seed: 7, hash: KeyHash::Xxh3, ..Options::filtered(8) }).unwrap();
    ctl.set_table_id(TableId::from_seed(7));
    let blob = ctl.export().to_bytes();
    pin(name, "lookup", &blob);
    let mut deltas = Vec::new();
    // Enough inserts to grow the arrays: rebuild deltas as well as slot patches.
    for i in 200..500 {
        deltas.push(ctl.insert(&key(i, false), i % 64).unwrap().to_bytes());
    }
    for i in 0..30 {
        if let Some(d) = ctl.remove(&key(i * 11, false)).unwrap() {
            deltas.push(d.to_bytes());
        }
    }
    check_sequence(name, &blob, &deltas, &ctl.export().to_bytes(), |b| {
        let t = keyplane::othello::Lookup::from_bytes(b)?;
        Ok(Box::new(move |d: Option<&[u8]>| match d {
            Some(d) => {
                let dd = keyplane::othello::Delta::from_bytes(d)?;
                assert_eq!(dd.to_bytes(), d, "othello delta re-encodes differently");
                t.apply(&dd).map(|_| Vec::new())
            }
            None => Ok(t.to_bytes()),
        }))
    });
}

/// A loaded lookup form: applies a delta (`Some`) or serialises the table (`None`).
type Handle = Box<dyn Fn(Option<&[u8]>) -> keyplane::Result<Vec<u8>>>;

/// Pins the pinned files `name.{lookup,deltas,after}.bin` to `blob`,
/// `deltas` and `after`, then checks that the pinned blob loads and
/// re-serialises identically, every pinned delta decodes and re-encodes
/// identically and applies, and the result is the pinned final blob.
/// `open` loads a blob and returns a handle that applies a delta (`Some`)
/// or serialises the table (`None`).
fn check_sequence(
    name: &str,
    blob: &[u8],
    deltas: &[Vec<u8>],
    after: &[u8],
    open: impl Fn(&[u8]) -> keyplane::Result<Handle>,
) {
    let mut all = Vec::new();
    for d in deltas {
        all.extend_from_slice(&(d.len() as u64).to_le_bytes());
        all.extend_from_slice(d);
    }
    pin(name, "lookup", blob);
    pin(name, "deltas", &all);
    pin(name, "after", after);
    let pinned = std::fs::read(path(name, "lookup")).unwrap();
    let t = open(&pinned).unwrap();
    assert_eq!(t(None).unwrap(), pinned, "{name}: pinned blob re-serialises differently");
    let all = std::fs::read(path(name, "deltas")).unwrap();
    let mut rest = &all[..];
    while !rest.is_empty() {
        let n = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
        t(Some(&rest[8..8 + n])).unwrap();
        rest = &rest[8 + n..];
    }
    assert_eq!(
        t(None).unwrap(),
        std::fs::read(path(name, "after")).unwrap(),
        "{name}: pinned deltas give another final blob"
    );
}

/// LPM: its per-length Othello indexes draw random seeds, so a fresh build
/// differs from run to run; the pinned files (written once) must load,
/// re-serialise, decode and re-encode byte for byte, and the pinned deltas
/// (new lengths, index patches and rebuilds, slots, masks, short runs,
/// removals, both families) must bring the pinned blob to the pinned final
/// blob.
#[test]
fn lpm_bytes_are_pinned() {
    use keyplane::ControlTable;
    use keyplane::lpm::{Control, Delta, Lookup, Prefix};
    let name = "lpm";
    let open = |b: &[u8]| -> keyplane::Result<Handle> {
        let t = Lookup::from_bytes(b)?;
        Ok(Box::new(move |d: Option<&[u8]>| match d {
            Some(d) => {
                let dd = Delta::from_bytes(d)?;
                assert_eq!(dd.to_bytes(), d, "lpm delta re-encodes differently");
                t.apply(&dd).map(|_| Vec::new())
            }
            None => Ok(t.to_bytes()),
        }))
    };
    if std::env::var_os("KEYPLANE_PIN_WRITE").is_none() {
        let read = |what| std::fs::read(path(name, what)).unwrap();
        let (blob, after) = (read("lookup"), read("after"));
        let all = read("deltas");
        let mut deltas = Vec::new();
        let mut rest = &all[..];
        while !rest.is_empty() {
            let n = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
            deltas.push(rest[8..8 + n].to_vec());
            rest = &rest[8 + n..];
        }
        return check_sequence(name, &blob, &deltas, &after, open);
    }
    let p = |s: &str| s.parse::<Prefix>().unwrap();
    let mut items = vec![(p("0.0.0.0/0"), 1u64), (p("10.0.0.0/8"), 2), (p("2001:db8::/32"), 3)];
    for i in 0..120u32 {
        items.push((p(&format!("10.{}.{}.0/24", i % 7, i)), (i % 200) as u64));
        items.push((p(&format!("10.{}.{}.{}/30", i % 3, i, (i * 4) % 256)), (i % 100) as u64));
        items.push((p(&format!("2001:db8:{:x}::/48", i)), (i % 50) as u64));
    }
    let mut ctl = Control::from_prefixes(items, 8).unwrap();
    ctl.set_table_id(TableId::from_seed(7));
    let blob = ctl.export().to_bytes();
    let mut deltas = Vec::new();
    let mut push = |d: Delta| deltas.push(d.to_bytes());
    for i in 0..200u32 {
        push(ctl.insert_prefix(p(&format!("10.{}.{}.128/25", i % 5, i)), (i % 200) as u64).unwrap());
        push(ctl.insert_prefix(p(&format!("2001:db8:{:x}:{:x}::/64", i, i)), (i % 90) as u64).unwrap());
    }
    push(ctl.insert_prefix(p("172.16.0.0/12"), 9).unwrap());
    push(ctl.insert_prefix(p("10.3.3.0/24"), 7).unwrap());
    push(ctl.insert_prefix(p("192.0.2.1/32"), 4).unwrap());
    for i in 0..60u32 {
        if let Some(d) = ctl.remove_prefix(p(&format!("10.{}.{}.0/24", i % 7, i))).unwrap() {
            push(d);
        }
    }
    push(ctl.remove_prefix(p("192.0.2.1/32")).unwrap().unwrap());
    check_sequence(name, &blob, &deltas, &ctl.export().to_bytes(), open);
}

#[test]
fn partial_cuckoo_bytes_are_pinned() {
    check::<keyplane::cuckoo::partial::Control>(false, 8);
}

#[test]
fn fht_bytes_are_pinned() {
    check::<keyplane::fht::Control>(true, 8);
}

#[test]
fn fpt_bytes_are_pinned() {
    check::<keyplane::fpt::Control>(true, 8);
}

#[test]
fn ludo_bytes_are_pinned() {
    check::<keyplane::ludo::Control>(false, 8);
}

#[test]
fn ludo_fingerprint_bytes_are_pinned() {
    check_with::<keyplane::ludo::Control>("ludo-fp8", false, 8, "seed=7,fingerprint_bits=8");
}

#[test]
fn setsep_bytes_are_pinned() {
    check::<keyplane::setsep::Control>(false, 8);
}

/// Two index bits (three hash functions per value bit) leave most groups
/// unsolved: fallback groups in the blob and fallback lists in the deltas.
#[test]
fn setsep_fallback_bytes_are_pinned() {
    check_with::<keyplane::setsep::Control>("setsep-fallback", false, 8, "seed=7,index_bits=2,array_bits=2");
    let t = keyplane::setsep::Lookup::from_bytes(&std::fs::read(path("setsep-fallback", "lookup")).unwrap()).unwrap();
    let (groups, keys) = t.fallback_size();
    assert!(groups > 0 && keys > 0, "the pinned blob has no fallback groups ({groups}, {keys})");
}

#[test]
fn cuckoo_bytes_are_pinned() {
    check::<keyplane::cuckoo::Control>(false, 8);
}

/// The full cuckoo map in each of its slot layouts, with the transitions its
/// deltas carry: a table built empty takes the fixed-width layout of its
/// first key (`Narrow`), grows while keys arrive (`Grow`, cuckoo moves),
/// overwrites values, shrinks after removes (`Shrink`), and leaves the
/// fixed-width layout when a key of another length arrives (`Widen`); long
/// keys go to the arena (appends, compaction).
fn check_cuckoo(name: &str, key: impl Fn(u64) -> Vec<u8>, vbits: u32, opts: keyplane::cuckoo::Options, other: &[u8]) {
    use keyplane::ControlTable;
    use keyplane::cuckoo::{Control, Delta, Lookup};
    let vm = (1u64 << vbits) - 1;
    let items: Vec<(Vec<u8>, u64)> = (0..200).map(|i| (key(i), (i * 3) & vm)).collect();
    let mut ctl = Control::from_items_with(items, vbits, opts).unwrap();
    ctl.set_table_id(TableId::from_seed(7));
    let blob = ctl.export().to_bytes();
    pin(name, "lookup", &blob);
    let mut empty = Control::with_options(vbits, opts).unwrap();
    empty.set_table_id(TableId::from_seed(8));
    let empty_blob = empty.export().to_bytes();
    let mut deltas = Vec::new();
    let mut empty_deltas = Vec::new();
    for i in 200..400 {
        deltas.push(ctl.insert(&key(i), (i * 5) & vm).unwrap().to_bytes());
    }
    for i in 0..20 {
        deltas.push(ctl.insert(&key(i * 11), (i + 1) & vm).unwrap().to_bytes());
    }
    for i in 0..350 {
        if let Some(d) = ctl.remove(&key(i)).unwrap() {
            deltas.push(d.to_bytes());
        }
    }
    let fixed = ctl.key_width().is_some();
    deltas.push(ctl.insert(other, 1).unwrap().to_bytes());
    assert!(ctl.stats().grows > 0 && ctl.stats().shrinks > 0 && ctl.stats().moves > 0, "{name}: {:?}", ctl.stats());
    assert_eq!(ctl.key_width(), None, "{name}: a key of another length leaves the fixed-width layout");
    assert_eq!(
        fixed,
        opts.keys == keyplane::cuckoo::KeyLayout::Auto && vbits <= 48,
        "{name}: layout before the odd key"
    );
    for i in 0..50 {
        empty_deltas.push(empty.insert(&key(i), i & vm).unwrap().to_bytes());
    }
    let mut all = Vec::new();
    for d in deltas.iter().chain(&empty_deltas) {
        all.extend_from_slice(&(d.len() as u64).to_le_bytes());
        all.extend_from_slice(d);
    }
    pin(name, "deltas", &all);
    let after = ctl.export().to_bytes();
    pin(name, "after", &after);
    let empty_after = empty.export().to_bytes();
    let t = Lookup::from_bytes(&std::fs::read(path(name, "lookup")).unwrap()).unwrap();
    assert_eq!(t.to_bytes(), blob, "{name}: pinned blob re-serialises differently");
    for d in &deltas {
        t.apply(&Delta::from_bytes(d).unwrap()).unwrap();
    }
    assert_eq!(t.to_bytes(), after, "{name}: pinned deltas give another final blob");
    let e = Lookup::from_bytes(&empty_blob).unwrap();
    for d in &empty_deltas {
        e.apply(&Delta::from_bytes(d).unwrap()).unwrap();
    }
    assert_eq!(e.to_bytes(), empty_after, "{name}: deltas from an empty table give another final blob");
}

fn cuckoo_opts(keys: keyplane::cuckoo::KeyLayout, values: keyplane::cuckoo::ValueLayout) -> keyplane::cuckoo::Options {
    keyplane::cuckoo::Options { seed: 7, keys, values, build_load_percent: None }
}

/// The fixed-width layouts were pinned when their bulk builds filled 97 %
/// (before the default left headroom for updates): the dense build option
/// reproduces those tables.
fn cuckoo_dense_opts() -> keyplane::cuckoo::Options {
    use keyplane::cuckoo::{KeyLayout, ValueLayout};
    keyplane::cuckoo::Options { build_load_percent: Some(97), ..cuckoo_opts(KeyLayout::Auto, ValueLayout::Auto) }
}

#[test]
fn cuckoo_packed_layout_bytes_are_pinned() {
    // 4-byte keys, 8-bit values: packed 8-slot buckets.
    let key = |i: u64| ((i + 1) as u32).wrapping_mul(0x9e37_79b9).to_le_bytes().to_vec();
    check_cuckoo("cuckoo_packed", key, 8, cuckoo_dense_opts(), b"another length");
}

#[test]
fn cuckoo_keyed_layout_bytes_are_pinned() {
    // 8-byte keys, 16-bit values: keyed buckets (keys, then values).
    let key = |i: u64| (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes().to_vec();
    check_cuckoo("cuckoo_keyed", key, 16, cuckoo_dense_opts(), b"short");
}

#[test]
fn cuckoo_wide_layout_bytes_are_pinned() {
    use keyplane::cuckoo::{KeyLayout, ValueLayout};
    // Mixed lengths, long keys in the arena.
    let key = |i: u64| {
        if i % 3 == 0 { format!("/org/pin/{}/{}", i % 5, i).into_bytes() } else { format!("k{i}").into_bytes() }
    };
    check_cuckoo("cuckoo_wide", key, 8, cuckoo_opts(KeyLayout::Wide, ValueLayout::Auto), b"x");
    check_cuckoo("cuckoo_wide_separate", key, 56, cuckoo_opts(KeyLayout::Auto, ValueLayout::Separate), b"x");
}
