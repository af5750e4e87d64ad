//! Output files written whole or not at all.
//!
//! Every file rt2 writes goes through [`write_atomic`]. A regular file (or a name that
//! does not exist yet) is replaced atomically: the bytes go to a temporary file in the
//! destination's directory, which is renamed over the destination only once complete, so
//! a failure at any point leaves no partial file behind and an existing file untouched.
//! A symbolic link is followed first and its final target replaced that way, so the link
//! stays a link. A file that is neither (a FIFO, a character or block device such as
//! `/dev/null` or `/dev/full`, a socket) cannot be replaced without destroying it, so it is
//! written in place: a reader of the FIFO gets the bytes, `/dev/null` stays a device, and
//! `/dev/full` is a one-line "No space left on device" error. `-`, `/dev/stdout` and its
//! aliases write to standard output itself (and `/dev/stderr` to standard error), whatever
//! that is: when it is a file the shell opened, replacing that file would lose it.
//! Files named after model tensors or ops get safe, distinct names from
//! [`safe_file_names`].

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The most symbolic links followed to reach a destination: Linux's own limit
/// (`MAXSYMLINKS`), past which `open` fails with `ELOOP`.
const MAX_LINKS: usize = 40;

/// Where [`write_atomic`] puts a destination's bytes.
#[derive(Debug, PartialEq, Eq)]
enum Destination {
    Stdout,
    Stderr,
    /// A FIFO, a device or a socket: opened and written in place.
    Special(PathBuf),
    /// A regular file, existing or not, after following symbolic links: replaced by rename.
    Regular(PathBuf),
}

/// What writing to `path` means (see the module doc).
fn destination(path: &Path) -> anyhow::Result<Destination> {
    let name = path.as_os_str();
    if name == "-"
        || ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"]
            .map(Path::new)
            .contains(&path)
    {
        return Ok(Destination::Stdout);
    }
    if ["/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"]
        .map(Path::new)
        .contains(&path)
    {
        return Ok(Destination::Stderr);
    }
    let mut at = path.to_path_buf();
    for _ in 0..=MAX_LINKS {
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Destination::Regular(at));
            }
            Err(e) => {
                return Err(e).with_context(|| format!("writing {}", path.display()));
            }
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = std::fs::read_link(&at).with_context(|| {
                format!("writing {}: reading link {}", path.display(), at.display())
            })?;
            // A relative target is relative to the link's own directory.
            at = match at.parent() {
                Some(dir) if target.is_relative() => dir.join(target),
                _ => target,
            };
            continue;
        }
        if kind.is_dir() {
            bail!("writing {}: it is a directory", path.display());
        }
        return Ok(if kind.is_file() {
            Destination::Regular(at)
        } else {
            Destination::Special(at)
        });
    }
    bail!(
        "writing {}: more than {MAX_LINKS} symbolic links to follow",
        path.display()
    )
}

/// Writes `bytes` to `path`: atomically for a regular file (through symbolic links), in
/// place for a FIFO or a device, to standard output for `-` or `/dev/stdout` (see the
/// module doc).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic_parts(path, &[bytes])
}

/// [`write_atomic`] of the concatenation of `parts`, written one after the other rather
/// than copied into one buffer first.
pub fn write_atomic_parts(path: &Path, parts: &[impl AsRef<[u8]>]) -> anyhow::Result<()> {
    let write_all = |w: &mut dyn Write| -> std::io::Result<()> {
        for p in parts {
            w.write_all(p.as_ref())?;
        }
        w.flush()
    };
    match destination(path)? {
        Destination::Stdout => {
            write_all(&mut std::io::stdout().lock()).context("writing to standard output")
        }
        Destination::Stderr => {
            write_all(&mut std::io::stderr().lock()).context("writing to standard error")
        }
        Destination::Special(at) => {
            let at_ = || format!("writing {}", path.display());
            // No truncation and no creation: a device or a FIFO has neither.
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&at)
                .with_context(at_)?;
            write_all(&mut f).with_context(at_)
        }
        Destination::Regular(at) => replace(path, &at, &write_all),
    }
}

/// Replaces the regular file `at` (what `path` names, links followed) with `bytes`: a
/// temporary file in its directory, renamed over it once complete. An existing file keeps
/// its permissions; a new one gets an ordinary file's (0644).
fn replace(
    path: &Path,
    at: &Path,
    write_all: &dyn Fn(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let dir = match at.parent() {
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
    write_all(&mut tmp).with_context(|| format!("writing {}", path.display()))?;
    // A temporary file is private (0600); the result gets the mode of the file it
    // replaces, or an ordinary file's. No fsync: the promise is "whole or not at all"
    // against a failing rt2, and flushing a 100 MB model to disk costs more than the
    // lowering that made it.
    let existing = std::fs::metadata(at).ok().map(|m| m.permissions());
    #[cfg(unix)]
    let permissions = existing.or_else(|| {
        use std::os::unix::fs::PermissionsExt;
        Some(std::fs::Permissions::from_mode(0o644))
    });
    #[cfg(not(unix))]
    let permissions = existing;
    if let Some(p) = permissions {
        tmp.as_file()
            .set_permissions(p)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    tmp.persist(at)
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
