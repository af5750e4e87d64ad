//! Reading input files: the file name goes into every error, once, and every read is
//! bounded: by the file's size where it has one, and where it has none by
//! [`MAX_STREAM_BYTES`] (a pipe, a FIFO, a socket) or [`MAX_DEVICE_BYTES`] (a character
//! device such as a terminal or `/dev/zero`), so no input makes rt2 read until memory
//! runs out.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};

use crate::exec::{ExecuteGraph, exeg, view};
use crate::om::file::{self, ModelFile, ReadOptions};
use crate::om::graph::{AttrValue, ComputeGraph};

/// The most bytes read from a pipe, a FIFO or a socket, which have no size: 2 GiB,
/// protobuf's limit on one message, which every model file but an OM's weights keeps to.
/// A regular file is bounded by its own size instead, whatever that is.
pub const MAX_STREAM_BYTES: u64 = 2 << 30;

/// The most bytes read from a character or block device (a terminal, `/dev/zero`): 64
/// MiB. No model comes from one; the bound only makes reading one end soon.
pub const MAX_DEVICE_BYTES: u64 = 64 << 20;

/// Reads the whole file, bounded (see the module doc). The bytes are set aside once, at
/// the file's size or the bound, and asked of the allocator first (a file larger than
/// the host can hold is an error, not an abort); the OS backs only the pages read into,
/// so a small pipe costs what it carries. A file past its bound is an error.
pub fn read_bytes(path: &Path) -> anyhow::Result<Vec<u8>> {
    read_bounded(path, MAX_STREAM_BYTES, MAX_DEVICE_BYTES)
}

fn read_bounded(path: &Path, stream_cap: u64, device_cap: u64) -> anyhow::Result<Vec<u8>> {
    use std::os::unix::fs::FileTypeExt;
    let at = || format!("{}: cannot read", path.display());
    let file = std::fs::File::open(path).with_context(at)?;
    let meta = file.metadata().with_context(at)?;
    let kind = meta.file_type();
    if kind.is_dir() {
        bail!("{}: cannot read: it is a directory", path.display());
    }
    let (cap, what) = if kind.is_file() {
        (meta.len(), "")
    } else if kind.is_char_device() || kind.is_block_device() {
        (device_cap, "a device")
    } else {
        (stream_cap, "a pipe or a socket")
    };
    let mut bytes = Vec::new();
    usize::try_from(cap)
        .ok()
        .and_then(|n| bytes.try_reserve_exact(n.saturating_add(1)).ok())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{}: cannot read: {cap} bytes, more than the host's memory can hold",
                path.display()
            )
        })?;
    // One byte past the bound tells a file that has more (or grew while being read).
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(at)?;
    if bytes.len() as u64 > cap {
        if what.is_empty() {
            bail!(
                "{}: cannot read: the file grew past its size of {cap} bytes while being read",
                path.display()
            );
        }
        bail!(
            "{}: cannot read: more than {cap} bytes from a file without a size ({what}); \
             rt2 reads at most that much from one",
            path.display()
        );
    }
    Ok(bytes)
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

/// Ends a command's use of a model without freeing its graph. The process exits right
/// after a command, and freeing a large graph allocation by allocation costs a third as
/// long as reading it; the OS takes the memory back wholesale instead. The constants'
/// bytes and an OM's partitions are let go here, though: a few large buffers, cheap to
/// free, and the weights lowering replaced (packed or widened for their kernels) and an
/// OM's WEIGHTS_DATA would otherwise stay resident beside what replaced them while the
/// command runs the model.
pub fn release(mut file: ModelFile) {
    file.om = None;
    fn let_go(g: &mut ComputeGraph) {
        for node in &mut g.nodes {
            for v in node.attrs.values_mut() {
                if let AttrValue::Tensor(t) = v {
                    t.data = bytes::Bytes::new();
                }
            }
            node.subgraphs.iter_mut().for_each(let_go);
        }
    }
    for m in &mut file.models {
        let_go(&mut m.model.root);
        m.model.detached.iter_mut().for_each(let_go);
    }
    std::mem::forget(file);
}

/// Parses an `--input-shape` value, `NAME:D0,D1,...`.
pub fn parse_input_shape(s: &str) -> Result<(String, Vec<i64>), String> {
    parse_named_shape(s, ':')
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

/// Lowers model `model` of `file` (read from `path`), made whole first: a subgraph it
/// names that another model of the file is gets that model's graph
/// ([`crate::om::root_model::link`]).
pub fn lower_model(
    path: &Path,
    file: &ModelFile,
    model: usize,
    opts: &crate::lower::LowerOptions,
) -> anyhow::Result<ExecuteGraph> {
    lower_model_for(path, file, model, opts, &[])
}

/// [`lower_model`] for inputs of the given dims, by input name
/// ([`crate::lower::lower_specialized`]).
pub fn lower_model_for(
    path: &Path,
    file: &ModelFile,
    model: usize,
    opts: &crate::lower::LowerOptions,
    inputs: &[(String, Vec<i64>)],
) -> anyhow::Result<ExecuteGraph> {
    if !file.models.iter().any(|m| m.index == model) {
        let have: Vec<usize> = file.models.iter().map(|m| m.index).collect();
        anyhow::bail!(
            "{}: --model {model}: the file has models {have:?}",
            path.display()
        );
    }
    let linked = crate::om::root_model::link(&file.models, model)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    crate::lower::lower_specialized(&linked, opts, inputs).map_err(|e| {
        let msg = format!("{}: {e}", path.display());
        match e {
            crate::lower::LowerError::Unsupported(_) => {
                anyhow::Error::new(crate::cmd::status::CheckFailure(msg))
            }
            _ => anyhow::anyhow!(msg),
        }
    })
}

/// Refuses `--input-shape` entries that name no input of `eg`, which was lowered for
/// them, or that it does not have: a rank or known dim of the model's own contradicts
/// them.
fn check_input_shapes(
    path: &Path,
    eg: &ExecuteGraph,
    input_shapes: &[(String, Vec<i64>)],
) -> anyhow::Result<()> {
    for (name, dims) in input_shapes {
        let given = || {
            let d: Vec<String> = dims.iter().map(i64::to_string).collect();
            format!("--input-shape {name}:{}", d.join(","))
        };
        let Some(io) = eg.inputs.iter().find(|io| &io.name == name) else {
            let names: Vec<String> = eg
                .inputs
                .iter()
                .map(|io| format!("{:?}", io.name))
                .collect();
            anyhow::bail!(
                "{}: {}: the model has no input {name:?}; its inputs: {}",
                path.display(),
                given(),
                names.join(", ")
            );
        };
        let fits = io.shape.len() == dims.len()
            && io.shape.iter().zip(dims).all(|(&h, &d)| d < 0 || h == d);
        if !fits {
            anyhow::bail!(
                "{}: {}: the model's input {name:?} has dims {:?}",
                path.display(),
                given(),
                io.shape
            );
        }
    }
    Ok(())
}

/// The ExecuteGraph a command works on: an `.exeg`'s own (with the multi-thread passes
/// applied when `opts` asks for them and the file lacks them), or the model lowered. The
/// model file is handed back so the caller can release it when done.
pub fn execute_graph(
    path: &Path,
    model: usize,
    opts: &crate::lower::LowerOptions,
    input_shapes: &[(String, Vec<i64>)],
    progress: &crate::cmd::progress::Progress,
) -> anyhow::Result<(ExecuteGraph, Option<ModelFile>)> {
    match read_input(path, &ReadOptions::default())? {
        Input::Exeg(mut eg) => {
            if !input_shapes.is_empty() {
                anyhow::bail!(
                    "{}: --input-shape: an .exeg is lowered already; its inputs' shapes are \
                     fixed when its model is lowered",
                    path.display()
                );
            }
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
            let eg = lower_model_for(path, &file, model, opts, input_shapes)?;
            check_input_shapes(path, &eg, input_shapes)?;
            Ok((eg, Some(file)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded_by_the_size_or_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"abcdef").unwrap();
        assert_eq!(
            read_bounded(&f, 2, 2).unwrap(),
            b"abcdef",
            "a regular file's own size"
        );
        let msg = format!(
            "{:#}",
            read_bounded(Path::new("/dev/zero"), 10, 1000).unwrap_err()
        );
        assert!(
            msg.contains("/dev/zero: cannot read: more than 1000 bytes"),
            "{msg}"
        );
        assert!(msg.contains("(a device)"), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
        assert_eq!(read_bounded(Path::new("/dev/null"), 10, 1000).unwrap(), b"");
        // A pipe: its bound is the stream bound.
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let writer = {
            let fifo = fifo.clone();
            // The reader stops after the bound: a broken pipe is expected then.
            std::thread::spawn(move || drop(std::fs::write(fifo, [7u8; 100])))
        };
        let msg = format!("{:#}", read_bounded(&fifo, 10, 1000).unwrap_err());
        writer.join().unwrap();
        assert!(msg.contains("more than 10 bytes"), "{msg}");
        assert!(msg.contains("(a pipe or a socket)"), "{msg}");
        let msg = format!("{:#}", read_bounded(dir.path(), 10, 1000).unwrap_err());
        assert!(msg.contains("it is a directory"), "{msg}");
        let msg = format!("{:#}", read_bytes(&dir.path().join("none")).unwrap_err());
        assert!(msg.contains("none: cannot read: No such file"), "{msg}");
    }

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
