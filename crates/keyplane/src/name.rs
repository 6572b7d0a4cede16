//! Hierarchical names as byte strings (name-based forwarding, Yuan–Crowley–Song
//! "Enhancing Scalable Name-Based Forwarding", §2–§3).
//!
//! A name is stored in its canonical encoding from [`crate::key::name_key`]:
//! every component is preceded by `/`, root first, so `www.example.com` and
//! `/com/example/www` both become the bytes `/com/example/www`. Because the
//! encoding is a plain byte string, any keyplane structure can take a name as
//! a key; the helpers here parse, iterate components and enumerate prefixes
//! without allocating per component.
//!
//! Two name sources ship with the library:
//!
//! * [`generate`]: a deterministic generator of hierarchical names with a
//!   skewed top-level distribution (a few popular TLD-like first components,
//!   a long tail of second-level labels), for synthetic workloads of any size;
//! * [`load_domain_list`]: a loader for real domain lists in the format of the
//!   Mozilla Public Suffix List (`public_suffix_list.dat`: one rule per line,
//!   `//` comments, `*.` wildcards and `!` exceptions), reversing each domain
//!   into components. A sample cut from the list ships in the repository
//!   (`crates/keyplane/data/psl_sample.dat`, MPL-2.0); the full list comes with
//!   the `publicsuffixlist` Python package (`pip install publicsuffixlist`;
//!   `keyplane-bench fpt` finds it; see `docs/structures/fpt.md`).

use crate::key::name_key;

/// Parses a name and rejects empty names and empty components in the `/`
/// form (`/a//b`). Domain names may end in a single dot (`example.com.`).
pub(crate) fn parse(name: &str) -> Option<Vec<u8>> {
    let t = name.trim();
    if t.is_empty() {
        return None;
    }
    if t.contains('/') {
        let body = t.strip_prefix('/')?;
        let body = body.strip_suffix('/').unwrap_or(body);
        if body.is_empty() || body.split('/').any(|c| c.is_empty()) {
            return None;
        }
    } else {
        let body = t.strip_suffix('.').unwrap_or(t);
        if body.is_empty() || body.split('.').any(|c| c.is_empty()) {
            return None;
        }
    }
    name_key(t)
}

/// Components of an encoded name, root first (`/com/example` → `com`, `example`).
pub fn components(encoded: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
    encoded.split(|&b| b == b'/').skip(1)
}

/// Proper and improper prefixes of an encoded name, shortest first
/// (`/com/example/www` → `/com`, `/com/example`, `/com/example/www`): the
/// candidates of a longest-name-prefix match.
pub fn prefixes(encoded: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
    let ends = encoded
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, b)| **b == b'/')
        .map(|(i, _)| i)
        .chain(std::iter::once(encoded.len()));
    ends.filter(move |_| !encoded.is_empty()).map(move |e| &encoded[..e])
}

/// Parses a list in the Public Suffix List format: one domain per line,
/// `//` comments and blank lines skipped, wildcard (`*.`) and exception (`!`)
/// markers stripped, leading/trailing white space ignored, each domain
/// reversed into its canonical encoding. Internationalised (UTF-8) labels are
/// kept as UTF-8 bytes. Duplicates are removed; order of first appearance is
/// kept.
pub fn load_domain_list(text: &str) -> Vec<Vec<u8>> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.split_whitespace().next().unwrap_or("");
        if l.is_empty() || l.starts_with("//") {
            continue;
        }
        let l = l.trim_start_matches('!').trim_start_matches("*.");
        if l.is_empty() || l.contains('/') {
            continue;
        }
        if let Some(k) = parse(l)
            && seen.insert(k.clone())
        {
            out.push(k);
        }
    }
    out
}

const TLDS: [&str; 16] =
    ["com", "net", "org", "de", "uk", "cn", "ru", "jp", "br", "fr", "io", "edu", "info", "it", "nl", "au"];
const SYL: [&str; 32] = [
    "ka", "ro", "mi", "net", "web", "shop", "tech", "data", "cloud", "news", "blog", "go", "app", "home", "play",
    "star", "lab", "soft", "info", "max", "pro", "box", "hub", "zen", "ax", "el", "on", "ly", "fy", "ia", "ex", "um",
];

/// The `i`-th generated hierarchical name with `extra` components below the
/// second level (0 gives `/tld/label`, like a registered domain). Names are
/// distinct for distinct `i` (the second-level label embeds `i`), components
/// are lower-case ASCII, the average length with `extra = 0` is about 17
/// bytes. The top level is Zipf-like over 16 TLDs (`com` ≈ 40 %).
pub fn generate(i: u64, extra: usize, seed: u64) -> Vec<u8> {
    let mut h = crate::hash::mix64(i ^ seed.rotate_left(21));
    let mut out = Vec::with_capacity(24 + 8 * extra);
    // Zipf-ish: com 40 %, then geometric over the rest.
    let r = h & 0xffff;
    let t = if r < 26_214 { 0 } else { 1 + ((h >> 16) % 100).min(99) as usize * (TLDS.len() - 1) / 100 };
    out.push(b'/');
    out.extend_from_slice(TLDS[t].as_bytes());
    out.push(b'/');
    h = crate::hash::mix64(h);
    let syl = 1 + (h % 3) as usize;
    for s in 0..syl {
        out.extend_from_slice(SYL[((h >> (8 + 5 * s)) & 31) as usize].as_bytes());
    }
    // `-` and base-36 of i keep names distinct (labels have no `-`).
    out.push(b'-');
    let mut x = i;
    loop {
        let d = (x % 36) as u8;
        out.push(if d < 10 { b'0' + d } else { b'a' + d - 10 });
        x /= 36;
        if x == 0 {
            break;
        }
    }
    for e in 0..extra {
        h = crate::hash::mix64(h ^ e as u64);
        out.push(b'/');
        let syl = 1 + (h % 2) as usize;
        for s in 0..syl {
            out.extend_from_slice(SYL[((h >> (8 + 5 * s)) & 31) as usize].as_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_components_prefixes() {
        let n = parse("www.Example.com.").unwrap();
        assert_eq!(n, b"/com/example/www");
        assert_eq!(parse("/com/example/www").unwrap(), n);
        assert_eq!(components(&n).collect::<Vec<_>>(), vec![&b"com"[..], b"example", b"www"]);
        assert_eq!(components(&n).count(), 3);
        assert_eq!(prefixes(&n).collect::<Vec<_>>(), vec![&b"/com"[..], b"/com/example", b"/com/example/www"]);
        assert_eq!(prefixes(b"").count(), 0);
        assert!(parse("").is_none());
        assert!(parse("a..b").is_none());
        assert!(parse("/a//b").is_none());
        assert!(parse(".").is_none());
        assert!(parse(&"x".repeat(300)).is_none());
    }

    #[test]
    fn domain_list_loader() {
        let text = "// comment\n\ncom\n*.ck\n!www.ck\nco.uk\nco.uk\n  net  \n// ===END===\n";
        let l = load_domain_list(text);
        let s: Vec<String> = l.iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect();
        assert_eq!(s, vec!["/com", "/ck", "/ck/www", "/uk/co", "/net"]);
    }

    #[test]
    fn generated_names_are_distinct_and_hierarchical() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..50_000 {
            let n = generate(i, (i % 3) as usize, 7);
            assert!(n.starts_with(b"/"));
            assert_eq!(components(&n).count(), 2 + (i % 3) as usize);
            assert!(seen.insert(n));
        }
    }
}
