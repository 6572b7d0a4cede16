//! Refusing an output path that names one of a command's inputs (the same
//! file under another spelling, a symlink or a hard link included), and
//! choosing a fresh numbered name for a delta stream that would otherwise
//! overwrite deltas not yet applied.

use crate::CliError;
use std::path::{Path, PathBuf};

/// The identity of a path: (device, inode) when it exists, else its
/// canonical parent joined with the file name.
#[derive(Debug, PartialEq, Eq)]
enum Id {
    Inode(u64, u64),
    Path(PathBuf),
}

fn id(path: &str) -> Option<Id> {
    use std::os::unix::fs::MetadataExt;
    if path == "-" {
        return None;
    }
    let p = Path::new(path);
    if let Ok(m) = std::fs::metadata(p) {
        return Some(Id::Inode(m.dev(), m.ino()));
    }
    let name = p.file_name()?;
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let parent = std::fs::canonicalize(&parent).unwrap_or(parent);
    Some(Id::Path(parent.join(name)))
}

/// Fails with a usage error (exit 2) when an output names the same file as
/// an input or as another output. Each entry is `(flag, path)`.
pub fn refuse_same(inputs: &[(&str, &str)], outputs: &[(&str, &str)]) -> Result<(), CliError> {
    let ins: Vec<_> = inputs.iter().map(|(f, p)| (f, p, id(p))).collect();
    let outs: Vec<_> = outputs.iter().map(|(f, p)| (f, p, id(p))).collect();
    for (i, (of, op, oid)) in outs.iter().enumerate() {
        let Some(oid) = oid else { continue };
        for (inf, ip, iid) in &ins {
            if iid.as_ref() == Some(oid) {
                return Err(CliError::usage(&format!(
                    "{of} {op} is the same file as {inf} {ip}: writing it would destroy the input; choose another output path"
                )));
            }
        }
        for (f2, p2, id2) in &outs[..i] {
            if id2.as_ref() == Some(oid) {
                return Err(CliError::usage(&format!(
                    "{of} {op} and {f2} {p2} are the same file; give each output its own path"
                )));
            }
        }
    }
    Ok(())
}

/// The path `update` writes its deltas to: `path` itself when no file is
/// there, otherwise the first free `STEM.N.EXT` (N = 2, 3, ...), so deltas
/// that may not have been applied yet are never overwritten.
pub fn fresh_delta_path(path: &str) -> String {
    if std::fs::symlink_metadata(path).is_err() {
        return path.to_string();
    }
    let p = Path::new(path);
    let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = p.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
    (2u64..)
        .map(|n| {
            let f = format!("{stem}.{n}{ext}");
            dir.map(|d| d.join(&f).display().to_string()).unwrap_or(f)
        })
        .find(|c| std::fs::symlink_metadata(c).is_err())
        .unwrap_or_else(|| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_file_under_other_spellings_is_refused() {
        let d = std::env::temp_dir().join(format!("kp-paths-{}", std::process::id()));
        std::fs::create_dir_all(d.join("sub")).unwrap();
        let a = d.join("a.kpc");
        std::fs::write(&a, b"x").unwrap();
        let a_s = a.display().to_string();
        let other = d.join("sub/../a.kpc").display().to_string();
        let e = refuse_same(&[("--control", &a_s)], &[("--out", &other)]).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(e.msg.contains("same file"), "{}", e.msg);
        std::fs::hard_link(&a, d.join("b.kpc")).unwrap();
        let b = d.join("b.kpc").display().to_string();
        assert!(refuse_same(&[("--control", &a_s)], &[("--out", &b)]).is_err());
        // Two outputs that do not exist yet but name the same file.
        let n1 = d.join("new.kpl").display().to_string();
        let n2 = d.join("sub/../new.kpl").display().to_string();
        assert!(refuse_same(&[], &[("--out", &n1), ("--control", &n2)]).is_err());
        assert!(refuse_same(&[("--control", &a_s)], &[("--out", &n1)]).is_ok());
        // Numbered delta names.
        let dk = d.join("d.kpd").display().to_string();
        assert_eq!(fresh_delta_path(&dk), dk);
        std::fs::write(&dk, b"").unwrap();
        assert_eq!(fresh_delta_path(&dk), d.join("d.2.kpd").display().to_string());
        std::fs::write(d.join("d.2.kpd"), b"").unwrap();
        assert_eq!(fresh_delta_path(&dk), d.join("d.3.kpd").display().to_string());
        let _ = std::fs::remove_dir_all(&d);
    }
}
