//! `query --lpm` for the name table FHT: component-wise longest prefix over
//! exact lookups. FPT is refused: its lookup form is speculative (it answers
//! every name, stored or not), so the longest "found" prefix would always be
//! the whole name. `/com/example/www/x` tries `/com/example/www/x`,
//! then `/com/example/www`, `/com/example`, `/com` and answers with the
//! first stored one. Keys are names in the `--key-format name` encoding.

use crate::CliError;
use keyplane_any::{AnyLookup, AnyReader};

/// Structures `--lpm` applies to (names with `/`-separated components).
pub const NAME_STRUCTURES: &[&str] = &["fht"];

/// Refuses `--lpm` on tables that are not name tables (exit 2).
pub fn check(table: &AnyLookup, blob: &str) -> Result<(), CliError> {
    if NAME_STRUCTURES.contains(&table.name()) {
        return Ok(());
    }
    Err(CliError::usage(&format!(
        "{blob}: --lpm needs a name table that tells stored names from others ({}; build with -s fht --key-format name) or an IP prefix table (build -s lpm), this is {}{}",
        NAME_STRUCTURES.join(", "),
        table.name(),
        if table.name() == "fpt" {
            " (speculative: it answers every name, so no prefix can be told apart)"
        } else {
            ""
        }
    )))
}

/// The value of the longest stored prefix of `key` (whole components).
pub fn get(reader: &AnyReader<'_>, key: &[u8]) -> Option<u64> {
    let ends: Vec<usize> = keyplane::name::prefixes(key).map(<[u8]>::len).collect();
    ends.iter().rev().find_map(|&e| reader.get(&key[..e]))
}

#[cfg(test)]
mod tests {
    use keyplane_any::{AnyControl, Opts};

    #[test]
    fn longest_stored_prefix_wins() {
        let n = |s: &str| keyplane::key::name_key(s).unwrap();
        let items = [(n("/com"), 1u64), (n("/com/example/www"), 3), (n("/org/x"), 4)];
        let ctl = AnyControl::build("fht", items.iter().map(|(k, v)| (k, *v)), 8, &Opts::default()).unwrap();
        let t = ctl.export();
        let r = t.reader();
        assert_eq!(super::get(&r, &n("/com/example/www/x/y")), Some(3));
        assert_eq!(super::get(&r, &n("/com/example/www")), Some(3));
        assert_eq!(super::get(&r, &n("/com/example/mail")), Some(1));
        assert_eq!(super::get(&r, &n("/org/x/y")), Some(4));
        assert_eq!(super::get(&r, &n("/net/y")), None);
    }
}
