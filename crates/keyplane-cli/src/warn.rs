//! Warnings about questionable input: printed on stderr as
//! `keyplane: warning: ...`, counted, and fatal (exit 3) only with `--strict`.
//! Also [`clip`], which shortens quoted keys in messages to 80 bytes.

use crate::CliError;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static STRICT: AtomicBool = AtomicBool::new(false);
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Longest part of a quoted key or value a message repeats.
pub const QUOTE_MAX: usize = 80;

/// Makes warnings fatal (`--strict`).
pub fn set_strict(on: bool) {
    STRICT.store(on, Ordering::Relaxed);
}

/// Whether `--strict` is on.
pub fn strict() -> bool {
    STRICT.load(Ordering::Relaxed)
}

/// Warnings printed so far.
pub fn count() -> usize {
    COUNT.load(Ordering::Relaxed)
}

/// Prints a warning; with `--strict` returns it as an error (exit 3) instead.
pub fn warn(msg: &str) -> Result<(), CliError> {
    if strict() {
        return Err(CliError { code: 3, msg: format!("{} (a warning, fatal with --strict)", clip(msg)) });
    }
    COUNT.fetch_add(1, Ordering::Relaxed);
    eprintln!("keyplane: warning: {}", clip(msg));
    Ok(())
}

/// Reports the lines `query` skipped (up to five, then the count) and fails
/// with exit 3 when there were any.
pub fn bad_lines(bad: &crate::input::BadLines) -> Result<(), CliError> {
    if bad.count == 0 {
        return Ok(());
    }
    for l in &bad.first {
        eprintln!("keyplane: {}", clip(l));
    }
    Err(CliError {
        code: 3,
        msg: format!(
            "{} line(s) with a key that does not parse were skipped (every other key was answered; --strict stops at the first)",
            bad.count
        ),
    })
}

/// Shortens every double-quoted run longer than [`QUOTE_MAX`] bytes to its
/// first 80 bytes (on a character boundary) followed by `…" (N bytes)`, and
/// any message longer than 1,000 bytes, so a huge key never floods stderr.
pub fn clip(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len().min(1200));
    let mut rest = msg;
    while let Some(start) = rest.find('"') {
        out.push_str(&rest[..=start]);
        rest = &rest[start + 1..];
        // The closing quote: the next `"` not preceded by a backslash.
        let mut end = None;
        let b = rest.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => {
                    end = Some(i);
                    break;
                }
                _ => i += 1,
            }
        }
        let end = end.unwrap_or(rest.len());
        let quoted = &rest[..end];
        if quoted.len() > QUOTE_MAX {
            let mut cut = QUOTE_MAX;
            while !quoted.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push_str(&quoted[..cut]);
            out.push_str(&format!("…\" ({} bytes)", quoted.len()));
            rest = rest.get(end + 1..).unwrap_or("");
        } else {
            out.push_str(quoted);
            if end < rest.len() {
                out.push('"');
            }
            rest = rest.get(end + 1..).unwrap_or("");
        }
    }
    out.push_str(rest);
    if out.len() > 1000 {
        let mut cut = 1000;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_shortens_long_quotes_only() {
        assert_eq!(clip(r#"key "abc" is bad"#), r#"key "abc" is bad"#);
        let long = "x".repeat(100_000);
        let m = clip(&format!("f:3: bad key \"{long}\": too long"));
        assert!(m.len() < 200, "{m}");
        assert!(m.starts_with(&format!("f:3: bad key \"{}…\" (100000 bytes)", "x".repeat(80))), "{m}");
        assert!(m.ends_with(": too long"), "{m}");
        // Multi-byte characters are cut on a boundary.
        let m = clip(&format!("\"{}\"", "é".repeat(100)));
        assert!(m.contains("(200 bytes)"), "{m}");
        // An unquoted flood is capped too.
        assert!(clip(&"y".repeat(5000)).len() <= 1004);
    }
}
