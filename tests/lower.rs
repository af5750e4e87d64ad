//! Lowering golden files: each `tests/lower/<case>.ge.txt` (a GE text dump) lowers to
//! `<case>.exeg.txt` and, with the multi-thread passes, to `<case>.mt.exeg.txt` (the
//! `.exeg` text form); a case that must not lower has `<case>.err.txt` with the error
//! instead. `RT2_BLESS=1 cargo test --test lower` rewrites the expected files from what
//! rt2 produces now; review the diff before committing it.
//!
//! Every lowered graph also passes the loader's checks, survives the binary and text
//! round trips unchanged, and lowers to the same bytes twice. Static memory planning's
//! tests are a module here (`tests/lower/static_memory.rs`).

use std::path::{Path, PathBuf};

/// Static memory planning (`--static-memory`), a lowering pass whose tests run models: a
/// module of this test binary rather than a binary of its own (each costs CI a link).
#[path = "lower/static_memory.rs"]
mod static_memory;

/// A model's weights held once from import to execution.
#[path = "lower/shared_weights.rs"]
mod shared_weights;

use rt2::exec::{check::check, exeg, view};
use rt2::lower::{LowerOptions, lower};
use rt2::om::file::{ReadOptions, read};

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lower");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/lower exists")
        .map(|e| e.expect("readable dir").path())
        .filter(|p| p.to_string_lossy().ends_with(".ge.txt"))
        .collect();
    v.sort();
    assert!(
        v.len() >= 10,
        "lowering cases missing from {}",
        dir.display()
    );
    v
}

fn blessing() -> bool {
    std::env::var_os("RT2_BLESS").is_some_and(|v| v == "1")
}

/// Compares `got` with the file at `path`, or writes it when blessing. Returns a message
/// for a mismatch instead of panicking, so one run reports every case.
fn compare(path: &Path, got: &str) -> Option<String> {
    if blessing() {
        std::fs::write(path, got).expect("write golden file");
        return None;
    }
    let want = match std::fs::read_to_string(path) {
        Ok(w) => w,
        Err(e) => return Some(format!("{}: {e} (bless with RT2_BLESS=1)", path.display())),
    };
    if want == got {
        return None;
    }
    let line = want
        .lines()
        .zip(got.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| want.lines().count().min(got.lines().count()));
    Some(format!(
        "{}: differs from line {}: want {:?}, got {:?}",
        path.display(),
        line + 1,
        want.lines().nth(line).unwrap_or("<end>"),
        got.lines().nth(line).unwrap_or("<end>")
    ))
}

#[test]
fn golden_files() {
    let mut failures = Vec::new();
    for case in cases() {
        let stem = case
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".ge.txt"))
            .expect("case name")
            .to_string();
        let dir = case.parent().expect("in a dir");
        let bytes = std::fs::read(&case).expect("read case");
        let file = read(&bytes, &ReadOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", case.display()));
        let model = &file.models[0].model;
        let err_path = dir.join(format!("{stem}.err.txt"));
        for (suffix, multi_thread) in [("", false), (".mt", true)] {
            let opts = LowerOptions {
                multi_thread,
                ..LowerOptions::default()
            };
            match lower(model, &opts) {
                Err(e) => {
                    if multi_thread {
                        continue;
                    }
                    failures.extend(compare(&err_path, &format!("{e}\n")));
                }
                Ok(eg) => {
                    let problems = check(&eg);
                    assert!(problems.is_empty(), "{stem}{suffix}: {problems:?}");
                    let text = view::to_text(&eg);
                    assert_eq!(
                        view::from_text(&text).unwrap(),
                        eg,
                        "{stem}: text round trip"
                    );
                    let bin = exeg::encode(&eg);
                    assert_eq!(exeg::decode(&bin).unwrap(), eg, "{stem}: binary round trip");
                    let again = lower(model, &opts).expect("lowers again");
                    assert_eq!(
                        exeg::encode(&again),
                        bin,
                        "{stem}{suffix}: not deterministic"
                    );
                    assert_eq!(eg.multi_thread, multi_thread);
                    failures.extend(compare(
                        &dir.join(format!("{stem}{suffix}.exeg.txt")),
                        &text,
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
