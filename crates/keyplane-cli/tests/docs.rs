//! Every shell block marked runnable in README.md and docs/*.md (a
//! `<!-- runnable ... -->` comment on the line before the ```sh fence) runs
//! as written, with `sh -e`, in a fresh temporary directory and the built
//! `keyplane` first on PATH, so the documented commands cannot drift.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (file, first line, block text) of every runnable block.
fn blocks() -> Vec<(String, usize, String)> {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i + 1 < lines.len() {
            if lines[i].trim_start().starts_with("<!-- runnable") && lines[i + 1].trim() == "```sh" {
                let start = i + 2;
                let end = (start..lines.len()).find(|&j| lines[j].trim() == "```").expect("closed block");
                out.push((f.display().to_string(), start + 1, lines[start..end].join("\n")));
                i = end;
            }
            i += 1;
        }
    }
    out
}

#[test]
fn runnable_doc_blocks_run_as_written() {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_keyplane")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let all = blocks();
    assert!(!all.is_empty(), "no runnable blocks found");
    for (n, (file, line, block)) in all.iter().enumerate() {
        let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("docs-{n}"));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let o = Command::new("sh").arg("-ec").arg(block).current_dir(&d).env("PATH", &path).output().unwrap();
        assert!(
            o.status.success(),
            "{file}:{line}: block failed ({:?})\n{block}\nstdout: {}\nstderr: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
