//! The inputs of `rt2 run`: from files (`--input`, `.npy` or an ONNX TensorProto), from an
//! ONNX backend-test data set (`--check DIR`, which also holds the expected outputs), or
//! from the seeded generator of [`random`] with shapes from the model and `--shape`. Every
//! input is read and checked against the model's dtype and shape before anything runs,
//! so a bad input is an exit-2 error naming it.
//!
//! Weights a model was written without (a GE dump's Consts without stored values, see
//! `exec::ModelIo::weight`) are inputs too: given with `--input`, or filled by
//! `--weights zeros|random`; a run missing any of them names them all and stops, since
//! a model computing on weights nobody chose would give outputs that mean nothing.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};

use crate::cmd::{input, npy, random};
use crate::exec::ModelIo;
use crate::ops::{DType, HostTensor};

/// Where an input came from.
#[derive(Debug, Clone)]
pub enum Source {
    File(PathBuf),
    Random,
    /// A weight filled with zeros (`--weights zeros`).
    Zeros,
}

impl Source {
    pub fn describe(&self, seed: u64) -> String {
        match self {
            Source::File(p) => p.display().to_string(),
            Source::Random => format!("random (seed {seed})"),
            Source::Zeros => "zeros".into(),
        }
    }
}

/// The flags that choose a model's inputs: files, the shapes of random ones, their seed,
/// and the weights a model was written without (`rt2 run`, `rt2 compare`).
#[derive(Debug, Clone, clap::Args)]
pub struct FeedArgs {
    /// An input from a file: `.npy`, or an ONNX TensorProto (`.pb`), recognised by content.
    /// Inputs not given are random (see --seed).
    #[arg(long = "input", value_name = "NAME=PATH")]
    pub inputs: Vec<String>,
    /// The shape of a random input, for the dims the model leaves unknown.
    #[arg(long = "shape", value_name = "NAME=D0,D1,...")]
    pub shapes: Vec<String>,
    /// Seed of the random inputs: SplitMix64, floats uniform in [-1, 1), integers in
    /// [0, 10), bools 0 or 1; one stream per input position.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Fill the weights the model was written without (a GE dump's Consts without stored
    /// values, which `rt2 lower` keeps as weights the caller supplies), those not given
    /// with --input: zeros, or random as random inputs are (seeded by --seed, one stream
    /// per input position). Without it, a model missing weights names them and stops.
    #[arg(long, value_enum, value_name = "zeros|random")]
    pub weights: Option<WeightFill>,
}

/// How `--weights` fills the weights not given with `--input`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WeightFill {
    /// Every element zero.
    Zeros,
    /// Seeded by `--seed` as random inputs are, one stream per input position.
    Random,
}

/// The names of model inputs or outputs, for error messages.
fn names<'a>(ios: impl IntoIterator<Item = &'a ModelIo>) -> String {
    ios.into_iter()
        .map(|io| format!("{:?}", io.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Position of the input or weight called `name`, or an error listing the model's inputs
/// and, apart, its weights.
fn find_input(ios: &[ModelIo], flag: &str, name: &str, file: &Path) -> anyhow::Result<usize> {
    ios.iter().position(|io| io.name == name).ok_or_else(|| {
        let weights = if ios.iter().any(|io| io.weight) {
            format!(
                "; its weights: {}",
                names(ios.iter().filter(|io| io.weight))
            )
        } else {
            String::new()
        };
        anyhow!(
            "{}: {flag} {name}: the model has no input {name:?}; its inputs: {}{weights}",
            file.display(),
            names(ios.iter().filter(|io| !io.weight))
        )
    })
}

pub fn shape_text(shape: &[i64]) -> String {
    if shape == [-2] {
        return "[unknown rank]".into();
    }
    let dims: Vec<String> = shape
        .iter()
        .map(|&d| if d < 0 { "?".into() } else { d.to_string() })
        .collect();
    format!("[{}]", dims.join(", "))
}

/// Why `shape` does not fit the model's `want` (`-1` unknown dims, `[-2]` unknown rank).
pub(crate) fn misfit(shape: &[i64], want: &[i64]) -> Option<String> {
    if want == [-2] {
        return None;
    }
    if shape.len() != want.len() {
        return Some(format!(
            "rank {} where the model's shape {} has rank {}",
            shape.len(),
            shape_text(want),
            want.len()
        ));
    }
    let k = shape
        .iter()
        .zip(want)
        .position(|(&d, &w)| w >= 0 && d != w)?;
    Some(format!(
        "dim {k} is {} where the model's shape {} has {}",
        shape[k],
        shape_text(want),
        want[k]
    ))
}

/// Checks a tensor read from `file` against input `io`.
fn fit(file: &Path, io: &ModelIo, t: &HostTensor) -> anyhow::Result<()> {
    let at = || format!("{}: input {:?}", file.display(), io.name);
    if Some(t.dtype) != io.dtype {
        bail!(
            "{}: element type {} where the model takes {}",
            at(),
            t.dtype,
            io.dtype
                .map_or("a type the device does not compute on", DType::name)
        );
    }
    if let Some(why) = misfit(&t.shape, &io.shape) {
        bail!("{}: shape {}: {why}", at(), shape_text(&t.shape));
    }
    Ok(())
}

/// Reads an input tensor file: `.npy`, or an ONNX TensorProto.
fn read_tensor_file(path: &Path, expect: Option<DType>) -> anyhow::Result<HostTensor> {
    let bytes = input::read_bytes(path)?;
    let at = || path.display().to_string();
    if bytes.is_empty() {
        // An empty file decodes as an ONNX TensorProto of no fields, whose data type 0
        // would be the complaint: say what is actually wrong.
        bail!(
            "{}: the file is empty: not a .npy file (no \\x93NUMPY magic) nor an ONNX \
             TensorProto",
            at()
        );
    }
    if npy::is_npy(&bytes) {
        return npy::read(&bytes, expect).with_context(at);
    }
    let t = crate::om::onnx::read_tensor(&bytes, &at())
        .map_err(|e| anyhow!("{e} (neither a .npy file nor an ONNX TensorProto)"))?;
    crate::lower::attrs::tensor(&t).ok_or_else(|| {
        anyhow!(
            "{}: ONNX tensor of element type {:?} and shape {:?}: not a tensor the device \
             computes on, or its data does not fill its shape",
            at(),
            t.desc.dtype,
            t.desc.shape
        )
    })
}

/// The inputs from `--input` (`specs`) and `--shape` (`shapes`), the rest random from
/// `seed`, and weights as `weights` fills them; `file` is the model, for error messages.
/// A weight neither given nor filled is an error naming every such weight. A generated
/// input larger than `device_bytes` (the device's memory, where it would have to fit) is
/// refused before anything is generated.
pub fn given_inputs(
    file: &Path,
    specs: &[String],
    shapes_given: &[String],
    seed: u64,
    weights: Option<WeightFill>,
    ios: &[ModelIo],
    device_bytes: u64,
) -> anyhow::Result<(Vec<HostTensor>, Vec<Source>)> {
    let mut given: Vec<Option<(PathBuf, HostTensor)>> = vec![None; ios.len()];
    for spec in specs {
        let (name, path) = spec
            .split_once('=')
            .filter(|(n, p)| !n.is_empty() && !p.is_empty())
            .ok_or_else(|| anyhow!("--input {spec:?}: expected NAME=PATH"))?;
        let k = find_input(ios, "--input", name, file)?;
        if given[k].is_some() {
            bail!("--input {name}: given twice");
        }
        let path = PathBuf::from(path);
        let t = read_tensor_file(&path, ios[k].dtype)?;
        fit(&path, &ios[k], &t)?;
        given[k] = Some((path, t));
    }
    let mut shapes: Vec<Option<Vec<i64>>> = vec![None; ios.len()];
    for spec in shapes_given {
        let (name, dims) =
            input::parse_named_shape(spec, '=').map_err(|e| anyhow!("--shape {e}"))?;
        let k = find_input(ios, "--shape", &name, file)?;
        if shapes[k].is_some() {
            bail!("--shape {name}: given twice");
        }
        if let Some(d) = dims.iter().position(|&d| d < 0) {
            bail!("--shape {spec}: dim {d} is unknown; --shape gives every dim");
        }
        if let Some(why) = misfit(&dims, &ios[k].shape) {
            bail!("{}: --shape {spec}: input {name:?}: {why}", file.display());
        }
        if let Some((path, t)) = &given[k]
            && t.shape != dims
        {
            bail!(
                "--shape {spec}: input {name:?} from {} has shape {}",
                path.display(),
                shape_text(&t.shape)
            );
        }
        shapes[k] = Some(dims);
    }
    complete(file, given, shapes, seed, weights, ios, device_bytes)
}

/// The inputs of `ios` in order: those in `given`, the others generated (random with
/// `seed`, shaped by `shapes` where the model leaves dims unknown), weights filled as
/// `weights` says; a weight neither given nor filled is an error naming every such
/// weight, a generated input past `device_bytes` an error naming it.
fn complete(
    file: &Path,
    given: Vec<Option<(PathBuf, HostTensor)>>,
    mut shapes: Vec<Option<Vec<i64>>>,
    seed: u64,
    weights: Option<WeightFill>,
    ios: &[ModelIo],
    device_bytes: u64,
) -> anyhow::Result<(Vec<HostTensor>, Vec<Source>)> {
    let missing: Vec<String> = ios
        .iter()
        .zip(&given)
        .filter(|(io, g)| io.weight && g.is_none())
        .map(|(io, _)| format!("{:?}", io.name))
        .collect();
    if weights.is_none() && !missing.is_empty() {
        bail!(
            "{}: the model was written without the values of {} weight(s): {}; give each \
             with --input NAME=PATH, or fill them with --weights zeros|random",
            file.display(),
            missing.len(),
            missing.join(", ")
        );
    }
    let mut inputs = Vec::with_capacity(ios.len());
    let mut sources = Vec::with_capacity(ios.len());
    for (k, (io, g)) in ios.iter().zip(given).enumerate() {
        if let Some((path, t)) = g {
            if t.data.len() as u64 > device_bytes {
                bail!(
                    "{}: input {:?}: {} bytes, more than the device's memory of {device_bytes} \
                     bytes (--device-memory)",
                    path.display(),
                    io.name,
                    t.data.len()
                );
            }
            inputs.push(t);
            sources.push(Source::File(path));
            continue;
        }
        let at = || format!("{}: input {:?}", file.display(), io.name);
        let Some(dtype) = io.dtype else {
            bail!("{}: an element type the device does not compute on", at());
        };
        let shape = match shapes[k].take() {
            Some(s) => s,
            None if io.shape == [-2] => bail!(
                "{}: the rank is unknown; give the shape with --shape {}=D0,D1,...",
                at(),
                io.name
            ),
            None => {
                if let Some(d) = io.shape.iter().position(|&d| d < 0) {
                    let dims: Vec<String> = (0..io.shape.len()).map(|i| format!("D{i}")).collect();
                    bail!(
                        "{}: shape {}: dim {d} is unknown; give the shape with --shape {}={}",
                        at(),
                        shape_text(&io.shape),
                        io.name,
                        dims.join(",")
                    );
                }
                io.shape.clone()
            }
        };
        let bytes = dtype.tensor_bytes(&shape);
        if let Some(b) = bytes.filter(|&b| b > device_bytes) {
            bail!(
                "{}: shape {}: {b} bytes of {dtype}, more than the device's memory of \
                 {device_bytes} bytes (--device-memory)",
                at(),
                shape_text(&shape)
            );
        }
        let zeros = io.weight && weights == Some(WeightFill::Zeros);
        let t = if zeros {
            random::zeros(dtype, &shape)
        } else {
            random::tensor(dtype, &shape, seed, k)
        }
        .map_err(|e| anyhow!("{}: shape {}: {e}", at(), shape_text(&shape)))?;
        inputs.push(t);
        sources.push(if zeros { Source::Zeros } else { Source::Random });
    }
    Ok((inputs, sources))
}

/// The `PREFIX_K.pb` files of a data set (K from 0 while they exist), one per model
/// input or output `ios` (weights are not among them).
fn data_set_files(dir: &Path, prefix: &str, ios: &[&ModelIo]) -> anyhow::Result<Vec<PathBuf>> {
    let files: Vec<PathBuf> = (0..)
        .map(|k| dir.join(format!("{prefix}_{k}.pb")))
        .take_while(|p| p.is_file())
        .collect();
    if files.len() != ios.len() {
        bail!(
            "--check {}: {} {prefix}_K.pb file(s), the model has {} {prefix}(s): {}",
            dir.display(),
            files.len(),
            ios.len(),
            names(ios.iter().copied())
        );
    }
    Ok(files)
}

/// The inputs for `ios`: the model's own inputs from an ONNX backend-test data set
/// (`input_K.pb`, K counting the model's inputs only), the weights the model was written
/// without filled as `weights` says (seeded by `seed`), as [`given_inputs`] fills them;
/// `file` is the model, `device_bytes` the device's memory, for errors.
pub fn data_set_inputs(
    dir: &Path,
    file: &Path,
    seed: u64,
    weights: Option<WeightFill>,
    ios: &[ModelIo],
    device_bytes: u64,
) -> anyhow::Result<(Vec<HostTensor>, Vec<Source>)> {
    if !dir.is_dir() {
        bail!("--check {}: not a directory", dir.display());
    }
    let own: Vec<usize> = (0..ios.len()).filter(|&k| !ios[k].weight).collect();
    let own_ios: Vec<&ModelIo> = own.iter().map(|&k| &ios[k]).collect();
    let files = data_set_files(dir, "input", &own_ios)?;
    let mut given: Vec<Option<(PathBuf, HostTensor)>> = vec![None; ios.len()];
    for (path, &k) in files.into_iter().zip(&own) {
        let t = read_tensor_file(&path, ios[k].dtype)?;
        fit(&path, &ios[k], &t)?;
        given[k] = Some((path, t));
    }
    let shapes = vec![None; ios.len()];
    complete(file, given, shapes, seed, weights, ios, device_bytes)
}

/// The expected outputs of an ONNX backend-test data set, by position.
pub fn data_set_outputs(dir: &Path, ios: &[ModelIo]) -> anyhow::Result<Vec<HostTensor>> {
    let refs: Vec<&ModelIo> = ios.iter().collect();
    data_set_files(dir, "output", &refs)?
        .iter()
        .zip(ios)
        .map(|(p, io)| read_tensor_file(p, io.dtype))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_fit_or_say_why() {
        assert_eq!(misfit(&[2, 3], &[-1, 3]), None);
        assert_eq!(misfit(&[2, 3, 4], &[-2]), None);
        assert_eq!(
            misfit(&[2, 4], &[-1, 3]).unwrap(),
            "dim 1 is 4 where the model's shape [?, 3] has 3"
        );
        assert!(misfit(&[2], &[-1, 3]).unwrap().contains("rank 1"));
    }
}
