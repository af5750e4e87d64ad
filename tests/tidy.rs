//! Tidy checks on the source tree: every Rust file opens with a `//!` doc saying what it
//! owns, and modules only use what STYLE.md's dependency table allows them to.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("reading a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_file_opens_with_a_module_doc() {
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        rust_files(&root().join(dir), &mut files);
    }
    let missing: Vec<String> = files
        .iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).expect("reading a source file");
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            !first.starts_with("//!")
        })
        .map(|p| p.strip_prefix(root()).unwrap_or(p).display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a //! module doc: {missing:#?}"
    );
}

/// (module folder, modules of rt2 it must not use)
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("npu", &["om", "lower", "exec", "capture", "cmd"]),
    ("om", &["lower", "exec", "capture", "npu", "cmd"]),
    ("exec", &["om", "lower", "capture", "cmd"]),
    ("lower", &["capture", "cmd"]),
    ("capture", &["om", "lower", "exec", "cmd"]),
];

#[test]
fn modules_respect_the_dependency_table() {
    let mut violations = Vec::new();
    for (module, forbidden) in FORBIDDEN {
        let dir = root().join("src").join(module);
        if !dir.exists() {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).expect("reading a source file");
            for other in *forbidden {
                let needle = format!("crate::{other}::");
                let needle_braced = format!("crate::{other}}}");
                if text.contains(&needle) || text.contains(&needle_braced) {
                    violations.push(format!(
                        "{} uses crate::{other}",
                        f.strip_prefix(root()).unwrap_or(&f).display()
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "dependency rule violations: {violations:#?}"
    );
}
