//! Output files written whole or not at all.
//!
//! Every file rt2 writes goes through [`write_atomic`]: the bytes go to a temporary file in
//! the destination's directory, which is renamed over the destination only once complete.
//! A failure at any point leaves no partial file behind, and an existing file untouched.
//! Files named after model tensors or ops get safe, distinct names from
//! [`safe_file_names`].

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use anyhow::Context;

/// Writes `bytes` to `path` atomically; `-` writes to standard output.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(bytes)
            .and_then(|_| out.flush())
            .context("writing to standard output");
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".rt2-")
        .tempfile_in(dir)
        .with_context(|| {
            format!(
                "writing {}: creating a temporary file in {}",
                path.display(),
                dir.display()
            )
        })?;
    tmp.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    // A temporary file is private (0600); the result gets an ordinary file's mode. No
    // fsync: the promise is "whole or not at all" against a failing rt2, and flushing a
    // 100 MB model to disk costs more than the lowering that made it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Writes to `path` if given, else to standard output.
pub fn write_or_print(path: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic(path.unwrap_or(Path::new("-")), bytes)
}

/// Distinct file names for `names`: characters other than ASCII letters, digits, `.`,
/// `-` and `_` become `_`, as does a leading `.`; an empty name becomes `<empty>_K`, and
/// a name already taken gets `_K` appended (K the name's position).
pub fn safe_file_names<'a>(names: impl Iterator<Item = &'a str>, empty: &str) -> Vec<String> {
    let mut taken = HashSet::new();
    names
        .enumerate()
        .map(|(k, name)| {
            let mut s: String = name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            if s.starts_with('.') {
                s.replace_range(..1, "_");
            }
            if s.is_empty() {
                s = format!("{empty}_{k}");
            }
            if !taken.insert(s.clone()) {
                s = format!("{s}_{k}");
                taken.insert(s.clone());
            }
            s
        })
        .collect()
}
