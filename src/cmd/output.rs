//! Output files written whole or not at all.
//!
//! Every file rt2 writes goes through [`write_atomic`]: the bytes go to a temporary file in
//! the destination's directory, which is renamed over the destination only once complete.
//! A failure at any point leaves no partial file behind, and an existing file untouched.

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
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Writes to `path` if given, else to standard output.
pub fn write_or_print(path: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic(path.unwrap_or(Path::new("-")), bytes)
}
