//! The harness: run the binary, check status and output, explain failures.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A finished run of the binary.
pub struct Run {
    pub cmd: String,
    pub out: Output,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    pub fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }
    fn explain(&self) -> String {
        format!(
            "\ncommand: {}\nstatus: {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.cmd,
            self.out.status,
            self.stdout(),
            self.stderr()
        )
    }
    /// Asserts exit status 0 and returns self.
    #[track_caller]
    pub fn ok(self) -> Self {
        assert_eq!(self.code(), 0, "expected success{}", self.explain());
        self
    }
    /// Asserts the given exit status and a one-line `rt2: error:` message containing every
    /// needle, and no panic.
    #[track_caller]
    pub fn fails(self, code: i32, needles: &[&str]) -> Self {
        assert_eq!(self.code(), code, "wrong exit status{}", self.explain());
        let err = self.stderr();
        assert!(!err.contains("panicked"), "panic{}", self.explain());
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "expected one error line{}", self.explain());
        assert!(
            lines[0].starts_with("rt2: error: "),
            "error line format{}",
            self.explain()
        );
        for n in needles {
            assert!(
                lines[0].contains(n),
                "error should mention {n:?}{}",
                self.explain()
            );
        }
        self
    }
    #[track_caller]
    pub fn stdout_has(self, needles: &[&str]) -> Self {
        let out = self.stdout();
        for n in needles {
            assert!(
                out.contains(n),
                "stdout should contain {n:?}{}",
                self.explain()
            );
        }
        self
    }
    /// Parses stdout as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.out.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON: {e}{}", self.explain()))
    }
}

/// Runs `rt2 ARGS...` in `dir`.
pub fn rt2_in(dir: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_rt2"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("the rt2 binary runs");
    Run {
        cmd: format!("rt2 {}", args.join(" ")),
        out,
    }
}

/// A scratch directory with helpers to put files in it.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Scratch {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, bytes).expect("writing a scratch file");
        p
    }
    pub fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).unwrap_or_else(|e| panic!("reading {name}: {e}"))
    }
    pub fn exists(&self, name: &str) -> bool {
        self.path(name).exists()
    }
    /// Names of the files in the directory, sorted.
    pub fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.dir.path())
            .expect("listing the scratch directory")
            .map(|e| {
                e.expect("a directory entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        v.sort();
        v
    }
    pub fn rt2(&self, args: &[&str]) -> Run {
        rt2_in(self.dir.path(), args)
    }
}

/// The repository's fixtures directory.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}
