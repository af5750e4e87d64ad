//! Reading input files: the file name goes into every error, once.

use std::path::Path;

use anyhow::Context;

use crate::exec::{ExecuteGraph, exeg, view};
use crate::om::file::{self, ModelFile, ReadOptions};

/// Reads the whole file.
pub fn read_bytes(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))
}

/// Reads and decodes a model file of any kind.
pub fn read_model(path: &Path, opts: &ReadOptions) -> anyhow::Result<ModelFile> {
    let bytes = read_bytes(path)?;
    file::read(&bytes, opts).with_context(|| path.display().to_string())
}

/// What a command was given: a model file, or an ExecuteGraph (`.exeg`, binary or text).
pub enum Input {
    Model(ModelFile),
    Exeg(ExecuteGraph),
}

/// Reads any file rt2 takes, recognised by content.
pub fn read_input(path: &Path, opts: &ReadOptions) -> anyhow::Result<Input> {
    let bytes = read_bytes(path)?;
    let at = || path.display().to_string();
    if exeg::is_exeg(&bytes) {
        return Ok(Input::Exeg(exeg::decode(&bytes).with_context(at)?));
    }
    if is_exeg_text(&bytes) {
        let text = std::str::from_utf8(&bytes).with_context(at)?;
        return Ok(Input::Exeg(view::from_text(text).with_context(at)?));
    }
    Ok(Input::Model(file::read(&bytes, opts).with_context(at)?))
}

/// The text form of an `.exeg` starts (after comments) with its `magic` field.
fn is_exeg_text(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| l.starts_with("magic:") && l.contains(exeg::MAGIC))
}

/// Ends a command's use of a model without freeing it. The process exits right after a
/// command, and freeing a large graph allocation by allocation costs a third as long as
/// reading it; the OS takes the memory back wholesale instead.
pub fn release(file: ModelFile) {
    std::mem::forget(file);
}

/// Parses `NAME:D0,D1,...` (the form of `--input-shape`); `?` or `-1` leaves a dim unknown.
pub fn parse_named_shape(s: &str, sep: char) -> Result<(String, Vec<i64>), String> {
    let (name, dims) = s
        .rsplit_once(sep)
        .ok_or_else(|| format!("{s:?}: expected NAME{sep}D0,D1,..."))?;
    if name.is_empty() {
        return Err(format!("{s:?}: the input name is empty"));
    }
    let dims = if dims.trim().is_empty() {
        Vec::new()
    } else {
        dims.split(',')
            .map(|d| match d.trim() {
                "?" => Ok(-1),
                d => d
                    .parse::<i64>()
                    .ok()
                    .filter(|&v| v >= -1)
                    .ok_or_else(|| format!("{s:?}: {d:?} is not a dimension")),
            })
            .collect::<Result<_, _>>()?
    };
    Ok((name.to_string(), dims))
}

/// Lowers model `model` of `file` (read from `path`).
pub fn lower_model(
    path: &Path,
    file: &ModelFile,
    model: usize,
    opts: &crate::lower::LowerOptions,
) -> anyhow::Result<ExecuteGraph> {
    let Some(m) = file.models.iter().find(|m| m.index == model) else {
        let have: Vec<usize> = file.models.iter().map(|m| m.index).collect();
        anyhow::bail!(
            "{}: --model {model}: the file has models {have:?}",
            path.display()
        );
    };
    crate::lower::lower(&m.model, opts).map_err(|e| {
        let msg = format!("{}: {e}", path.display());
        match e {
            crate::lower::LowerError::Unsupported(_) => {
                anyhow::Error::new(crate::cmd::status::CheckFailure(msg))
            }
            _ => anyhow::anyhow!(msg),
        }
    })
}

/// The ExecuteGraph a command works on: an `.exeg`'s own (with the multi-thread passes
/// applied when `opts` asks for them and the file lacks them), or the model lowered. The
/// model file is handed back so the caller can release it when done.
pub fn execute_graph(
    path: &Path,
    model: usize,
    opts: &crate::lower::LowerOptions,
    progress: &crate::cmd::progress::Progress,
) -> anyhow::Result<(ExecuteGraph, Option<ModelFile>)> {
    match read_input(path, &ReadOptions::default())? {
        Input::Exeg(mut eg) => {
            if model != 0 {
                anyhow::bail!(
                    "{}: --model {model}: an .exeg holds one model",
                    path.display()
                );
            }
            if opts.static_memory {
                progress.step("static memory planning");
                crate::lower::static_memory_pass(&mut eg)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            }
            if opts.multi_thread {
                progress.step("multi-thread passes");
                crate::lower::multi_thread_passes(&mut eg)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            }
            Ok((eg, None))
        }
        Input::Model(file) => {
            progress.step("lowering");
            let eg = lower_model(path, &file, model, opts)?;
            Ok((eg, Some(file)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_shapes() {
        assert_eq!(
            parse_named_shape("x:1,3,224,224", ':').unwrap(),
            ("x".into(), vec![1, 3, 224, 224])
        );
        assert_eq!(
            parse_named_shape("a:b:2,?", ':').unwrap(),
            ("a:b".into(), vec![2, -1])
        );
        assert_eq!(parse_named_shape("s:", ':').unwrap(), ("s".into(), vec![]));
        assert!(
            parse_named_shape("x:1,z", ':')
                .unwrap_err()
                .contains("\"z\" is not a dimension")
        );
        assert!(parse_named_shape("x", ':').is_err());
        assert!(parse_named_shape(":3", ':').is_err());
    }
}
