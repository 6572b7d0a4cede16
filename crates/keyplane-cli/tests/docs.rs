//! The documented commands run as written, so they cannot drift.
//!
//! * Every shell block (```` ```sh ````, `bash`, `shell`, `console`) in the
//!   [`CHECKED`] files (README.md, docs/guide.md, docs/frontends.md) must
//!   be marked on the line before its fence, either
//!   `<!-- runnable ... -->` or `<!-- not-run: REASON -->`. An unmarked
//!   block fails the test.
//! * Runnable blocks (also in any other docs/*.md) run with `sh -e`, the
//!   blocks of one file in order in one fresh temporary directory (so a
//!   later block can use the files of an earlier one), with the built
//!   `keyplane` first on PATH. One rewrite is applied before running:
//!   `cargo run --release -p keyplane-cli --` becomes `keyplane` (the same
//!   command without the release build).
//! * `not-run` blocks are the documented exemptions: commands that need
//!   network interfaces and root, run until stopped, download packages or
//!   run for many minutes. The test prints them with their reasons and
//!   checks their number against [`EXEMPT`], so a new exemption is a
//!   visible change here.
//! * Inline code spans in the [`CHECKED`] files that are commands
//!   (starting with `keyplane `, `cargo `, `pip `, `pytest `, `maturin `,
//!   `python3 ` or `./`) must occur in a marked block, unless they are
//!   syntax with placeholders (`...`, `FILE`, `BLOB`, ...).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Files in which every shell block must be marked.
const CHECKED: &[&str] = &["README.md", "docs/guide.md", "docs/frontends.md"];

/// How many `not-run` blocks the [`CHECKED`] files hold (see the list the test prints).
const EXEMPT: usize = 8;

const SHELL: &[&str] = &["sh", "bash", "shell", "console"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[derive(Debug)]
enum Mark {
    Runnable,
    NotRun(String),
    Unmarked,
}

#[derive(Debug)]
struct Block {
    file: String,
    line: usize,
    text: String,
    mark: Mark,
}

/// Every shell block of `file` (relative to the repository root).
fn shell_blocks(file: &str) -> Vec<Block> {
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        if let Some(lang) = t.strip_prefix("```") {
            let end = (i + 1..lines.len()).find(|&j| lines[j].trim() == "```").unwrap_or(lines.len());
            if SHELL.contains(&lang.trim()) {
                let prev = if i > 0 { lines[i - 1].trim() } else { "" };
                let mark = if prev.starts_with("<!-- runnable") {
                    Mark::Runnable
                } else if let Some(r) = prev.strip_prefix("<!-- not-run:") {
                    Mark::NotRun(r.trim_end_matches("-->").trim().to_string())
                } else {
                    Mark::Unmarked
                };
                out.push(Block { file: file.to_string(), line: i + 2, text: lines[i + 1..end].join("\n"), mark });
            }
            i = end;
        }
        i += 1;
    }
    out
}

/// The documentation files: README.md and docs/*.md.
fn doc_files() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    docs.sort();
    let mut files = vec!["README.md".to_string()];
    files.extend(docs);
    files
}

/// Inline code spans of `text` (outside fenced blocks; a span may wrap
/// lines) that are commands to run, with whitespace runs collapsed.
fn inline_commands(text: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut in_fence = false;
    for l in text.lines() {
        if l.trim_start().starts_with("```") {
            in_fence = !in_fence;
            prose.push('\n');
            continue;
        }
        if !in_fence {
            prose.push_str(l);
            prose.push('\n');
        }
    }
    let mut out = Vec::new();
    for span in prose.split('`').skip(1).step_by(2) {
        let span = squash(span);
        let is_cmd = ["keyplane ", "cargo ", "pip ", "pytest ", "maturin ", "python3 ", "./"]
            .iter()
            .any(|w| span.starts_with(w));
        let placeholder = span.contains("...")
            || span.contains('…')
            || span
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(|w| w.len() >= 3 && w.chars().all(|c| c.is_ascii_uppercase() || c == '_'));
        if is_cmd && !placeholder {
            out.push(span);
        }
    }
    out
}

/// `s` with every run of whitespace replaced by one space.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn every_shell_block_is_marked_and_every_inline_command_is_in_one() {
    let mut unmarked = Vec::new();
    let mut exempt = Vec::new();
    let mut marked_text = String::new();
    for f in CHECKED {
        for b in shell_blocks(f) {
            match &b.mark {
                Mark::Unmarked => unmarked.push(format!("{}:{}", b.file, b.line)),
                Mark::NotRun(r) => {
                    assert!(!r.is_empty(), "{}:{}: a not-run block needs a reason", b.file, b.line);
                    exempt.push(format!("{}:{}: {r}", b.file, b.line));
                }
                Mark::Runnable => {}
            }
            marked_text.push_str(&squash(&b.text));
            marked_text.push('\n');
        }
    }
    assert!(
        unmarked.is_empty(),
        "shell blocks without `<!-- runnable -->` or `<!-- not-run: REASON -->` on the line before: {unmarked:?}"
    );
    eprintln!("documented exemptions (not run here):");
    for e in &exempt {
        eprintln!("  {e}");
    }
    assert_eq!(exempt.len(), EXEMPT, "the number of not-run blocks changed: {exempt:#?}");
    let mut loose = Vec::new();
    for f in CHECKED {
        let text = std::fs::read_to_string(root().join(f)).unwrap();
        for c in inline_commands(&text) {
            if !marked_text.contains(&c) {
                loose.push(format!("{f}: `{c}`"));
            }
        }
    }
    assert!(loose.is_empty(), "inline commands that no marked shell block contains (put them in a block): {loose:#?}");
}

#[test]
fn runnable_doc_blocks_run_as_written() {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_keyplane")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut ran = 0;
    for (n, f) in doc_files().iter().enumerate() {
        let blocks: Vec<Block> = shell_blocks(f).into_iter().filter(|b| matches!(b.mark, Mark::Runnable)).collect();
        if blocks.is_empty() {
            continue;
        }
        let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("docs-{n}"));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for b in blocks {
            let script = b.text.replace("cargo run --release -p keyplane-cli --", "keyplane");
            let t = std::time::Instant::now();
            let o = Command::new("sh").arg("-ec").arg(&script).current_dir(&d).env("PATH", &path).output().unwrap();
            eprintln!("{}:{}: {:.1} s", b.file, b.line, t.elapsed().as_secs_f64());
            assert!(
                o.status.success(),
                "{}:{}: block failed ({:?})\n{}\nstdout: {}\nstderr: {}",
                b.file,
                b.line,
                o.status.code(),
                b.text,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            ran += 1;
        }
    }
    assert!(ran >= 4, "only {ran} runnable blocks found");
}
