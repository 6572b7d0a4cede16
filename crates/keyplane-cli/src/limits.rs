//! Sizes checked before they are allocated: counts from the command line
//! (decimal `20M` = 20,000,000, binary `20Mi`) and the memory a build would
//! need against what this process may use (`MemAvailable` in /proc/meminfo
//! and the cgroup's memory limit), refused with exit 7 instead of an abort.

use crate::CliError;

/// Parses a count flag (`1000`, `64K`, `1M`, `20Mi`, `1e6`).
pub fn count(s: &str, flag: &str) -> Result<usize, CliError> {
    let n = keyplane_keygen::parse_num(s).ok_or_else(|| {
        CliError::usage(&format!(
            "{flag} {}: not a count (examples: 1000, 64K = 64,000, 1M = 1,000,000, 1Mi = 1,048,576, 1e6; at most 2^64 - 1)",
            crate::warn::clip(&format!("{s:?}"))
        ))
    })?;
    usize::try_from(n).map_err(|_| CliError::usage(&format!("{flag} {s}: too large for this machine")))
}

/// Bytes a build of `n` keys of `key_len` bytes needs at its peak: the
/// generated or parsed items, the control form and the exported lookup form.
/// Measured: `--generate 20M` (8-byte keys) peaks at 3.2 GB, ~160 bytes/key.
pub fn build_bytes(n: usize, key_len: usize) -> u128 {
    n as u128 * (128 + 4 * key_len as u128)
}

/// Bytes this process may still allocate: the smaller of `MemAvailable`
/// and the cgroup limit minus its usage (`None` when neither is readable).
pub fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines().find(|l| l.starts_with("MemAvailable:")).and_then(|l| {
            l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).map(|kb| kb.saturating_mul(1024))
        })
    });
    [meminfo, cgroup_room()].into_iter().flatten().min()
}

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The room left under this process's cgroup memory limit (v2, else v1).
fn cgroup_room() -> Option<u64> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in cg.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(ctrl), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let dir = if id == "0" && ctrl.is_empty() {
            format!("/sys/fs/cgroup{path}")
        } else if ctrl.split(',').any(|c| c == "memory") {
            format!("/sys/fs/cgroup/memory{path}")
        } else {
            continue;
        };
        let (max, cur) = if id == "0" {
            (read_u64(&format!("{dir}/memory.max")), read_u64(&format!("{dir}/memory.current")))
        } else {
            (read_u64(&format!("{dir}/memory.limit_in_bytes")), read_u64(&format!("{dir}/memory.usage_in_bytes")))
        };
        if let Some(max) = max {
            return Some(max.saturating_sub(cur.unwrap_or(0)));
        }
    }
    None
}

/// Fails with exit 7 when `need` bytes exceed what is available.
pub fn check_memory(need: u128, what: &str) -> Result<(), CliError> {
    let Some(avail) = available_bytes() else { return Ok(()) };
    if need > avail as u128 {
        return Err(CliError {
            code: 7,
            msg: format!(
                "{what} needs about {} of memory, but only {} is available (MemAvailable / cgroup limit); use fewer keys or a bigger machine",
                gb(need),
                gb(avail as u128)
            ),
        });
    }
    Ok(())
}

fn gb(b: u128) -> String {
    format!("{:.1} GB", b as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_decimal_binary_and_checked() {
        assert_eq!(count("20M", "--n").unwrap(), 20_000_000);
        assert_eq!(count("20Mi", "--n").unwrap(), 20 << 20);
        assert_eq!(count("64k", "--n").unwrap(), 64_000);
        assert_eq!(count("1.5K", "--n").unwrap(), 1500);
        assert_eq!(count("1e6", "--n").unwrap(), 1_000_000);
        assert_eq!(count("7", "--n").unwrap(), 7);
        for bad in ["99999999999999999999", "20000000T", "-1", "1.5", "x", "", "M", "1e30", "NaN", "inf"] {
            assert_eq!(count(bad, "--n").unwrap_err().code, 2, "{bad}");
        }
    }

    #[test]
    fn memory_is_known_and_a_huge_build_is_refused() {
        let avail = available_bytes().expect("/proc/meminfo is readable on Linux");
        assert!(avail > 0);
        assert_eq!(check_memory(build_bytes(1 << 40, 8), "a build").unwrap_err().code, 7);
        assert!(check_memory(build_bytes(1000, 8), "a build").is_ok());
    }
}
