//! Checks on the items a table is built from: warnings for duplicate keys
//! and empty input, and locating the line of a key the structure refused.

use crate::CliError;
use std::collections::HashMap;

/// Warns (or with `--strict` fails) about an empty input and duplicate keys
/// (the count and the first line numbers; the last value of a key wins).
/// `at[i]` is the line (text) or byte offset (binary) of item `i`.
pub fn check_items(path: &str, items: &[(Vec<u8>, u64)], at: &[u64], binary: bool) -> Result<(), CliError> {
    let shown = crate::shown(path);
    if items.is_empty() {
        crate::warn::warn(&format!("{shown}: no keys (the table will be empty)"))?;
        return Ok(());
    }
    let mut first: HashMap<&[u8], u64> = HashMap::with_capacity(items.len());
    let mut dups = 0usize;
    let mut examples = Vec::new();
    for (i, (k, _)) in items.iter().enumerate() {
        let here = at.get(i).copied().unwrap_or(i as u64 + 1);
        if let Some(prev) = first.insert(k, here) {
            first.insert(k, prev);
            dups += 1;
            if examples.len() < 5 {
                examples.push(if binary {
                    format!("offset {here} repeats {prev}")
                } else {
                    format!("line {here} repeats {prev}")
                });
            }
        }
    }
    if dups > 0 {
        crate::warn::warn(&format!(
            "{shown}: {dups} duplicate key(s), the last value of each wins ({}{})",
            examples.join(", "),
            if dups > examples.len() { ", ..." } else { "" }
        ))?;
    }
    Ok(())
}

/// Turns a construction error about one key (the structure's key-length
/// limit: "key of N bytes") into an input error naming the first line
/// holding such a key (exit 3); other errors are returned unchanged.
pub fn locate(path: &str, items: &[(Vec<u8>, u64)], at: &[u64], binary: bool, e: keyplane::Error) -> CliError {
    if let keyplane::Error::InvalidParameter(m) = &e {
        let len = m.strip_prefix("key of ").and_then(|r| r.split(' ').next()).and_then(|n| n.parse::<usize>().ok());
        if let Some(i) = len.and_then(|len| items.iter().position(|(k, _)| k.len() == len)) {
            let where_ = at.get(i).copied().unwrap_or(i as u64 + 1);
            let msg = format!("key too long for this structure: {m}");
            return if binary {
                CliError::input_at(path, where_, &msg)
            } else {
                CliError::input(path, where_ as usize, &msg)
            };
        }
    }
    CliError::lib(path, e)
}
