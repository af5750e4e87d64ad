//! The state of the checks as they walk a script ([`Checker`]: the declared buffers and
//! the names bound so far) and the readers of arguments that need it: buffers (declared,
//! of one dtype and length), indices in range, scalars fitted to a buffer, and names of
//! models and condition handles an earlier step bound.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use crate::capture::types::{BufDtype, Scalar};

use super::error::{Lines, ScriptError, error_at, shown};
use super::fields::{Fields, Value};

/// The spellings of the enums a script names.
pub(super) const MODES: &[&str] = &["global", "thread_local", "relaxed"];
pub(super) const STATUSES: &[&str] = &["none", "active", "invalidated"];
pub(super) const COND_KINDS: &[&str] = &["if", "while", "switch"];
pub(super) const DTYPES: &[&str] = &["int32", "int64", "float32"];

/// A buffer named by a step, with what the checks need to know of it.
pub(super) struct BufRef {
    pub(super) name: String,
    pub(super) dtype: BufDtype,
    pub(super) len: usize,
    /// The field that named it, for messages.
    pub(super) key: &'static str,
    pub(super) span: Range<usize>,
}

/// The state of the checks as they walk the script in file order: the declared buffers and
/// the names bound so far.
pub(super) struct Checker<'t> {
    pub(super) text: &'t str,
    /// The text's line starts, for the line of each step and buffer.
    pub(super) lines: Lines,
    pub(super) buffers: HashMap<String, (BufDtype, usize)>,
    pub(super) models: HashSet<String>,
    pub(super) handles: HashSet<String>,
    pub(super) groups: HashSet<String>,
}

impl<'t> Checker<'t> {
    pub(super) fn new(text: &'t str) -> Self {
        Checker {
            text,
            lines: Lines::new(text),
            buffers: HashMap::new(),
            models: HashSet::new(),
            handles: HashSet::new(),
            groups: HashSet::new(),
        }
    }

    pub(super) fn err(&self, offset: usize, message: String) -> ScriptError {
        error_at(self.text, offset, message)
    }

    /// A declared buffer named by field `key`.
    pub(super) fn buffer(
        &self,
        f: &Fields<'_, '_>,
        key: &'static str,
    ) -> Result<BufRef, ScriptError> {
        let (name, span) = f.name(key)?;
        let Some(&(dtype, len)) = self.buffers.get(&name) else {
            return Err(self.err(
                span.start,
                format!(
                    "unknown buffer `{}` in `{key}`: it is not declared in [buffers]",
                    shown(&name)
                ),
            ));
        };
        Ok(BufRef {
            name,
            dtype,
            len,
            key,
            span,
        })
    }

    /// Refuses `b` unless it has `a`'s dtype and length.
    pub(super) fn same_shape(&self, what: &str, a: &BufRef, b: &BufRef) -> Result<(), ScriptError> {
        if a.dtype == b.dtype && a.len == b.len {
            return Ok(());
        }
        Err(self.err(
            b.span.start,
            format!(
                "`{what}` needs buffers of one dtype and length: `{}` is `{}` ({}, {}), `{}` is \
                 `{}` ({}, {})",
                b.key,
                shown(&b.name),
                b.dtype,
                b.len,
                a.key,
                shown(&a.name),
                a.dtype,
                a.len
            ),
        ))
    }

    /// The `index` field (default 0), in range for `buf`.
    pub(super) fn index(&self, f: &Fields<'_, '_>, buf: &BufRef) -> Result<usize, ScriptError> {
        match f.int::<usize>("index", 0)? {
            None => Ok(0),
            Some((i, _)) if i < buf.len => Ok(i),
            Some((i, span)) => Err(self.err(
                span.start,
                format!(
                    "`index` {i} is out of range for buffer `{}` of length {}",
                    shown(&buf.name),
                    buf.len
                ),
            )),
        }
    }

    /// A scalar field fitted to `buf`'s dtype; required unless it has a default.
    pub(super) fn scalar_for(
        &self,
        f: &Fields<'_, '_>,
        key: &str,
        buf: &BufRef,
        default: Option<Scalar>,
    ) -> Result<Scalar, ScriptError> {
        match (f.get(key), default) {
            (Some(v), _) => fitted(f, &format!("`{key}`"), v, &buf.name, buf.dtype),
            (None, Some(d)) => d
                .fit(buf.dtype)
                .map_err(|m| self.err(f.at, format!("default `{key}`: {m}"))),
            (None, None) => Err(f.missing(key)),
        }
    }

    /// The `model` field, which an earlier step must have bound.
    pub(super) fn bound_model(&self, f: &Fields<'_, '_>) -> Result<String, ScriptError> {
        let (model, span) = f.name("model")?;
        if self.models.contains(&model) {
            return Ok(model);
        }
        Err(self.err(
            span.start,
            format!(
                "unknown model `{}`: no earlier step binds it (`model` of capture_end or \
                 capture_get_info, `models` of add_cond_task)",
                shown(&model)
            ),
        ))
    }

    /// The `handle` field, which an earlier cond_handle_create must have bound.
    pub(super) fn bound_handle(&self, f: &Fields<'_, '_>) -> Result<String, ScriptError> {
        let (handle, span) = f.name("handle")?;
        if self.handles.contains(&handle) {
            return Ok(handle);
        }
        Err(self.err(
            span.start,
            format!(
                "unknown condition handle `{}`: no earlier cond_handle_create binds it",
                shown(&handle)
            ),
        ))
    }
}

/// A scalar value as an element of buffer `buffer` of type `dtype`.
pub(super) fn fitted(
    f: &Fields<'_, '_>,
    label: &str,
    v: &Value<'_>,
    buffer: &str,
    dtype: BufDtype,
) -> Result<Scalar, ScriptError> {
    f.scalar_of(label, v)?.fit(dtype).map_err(|m| {
        f.err(
            v.span().start,
            format!("{label} for buffer `{}`: {m}", shown(buffer)),
        )
    })
}
