//! Parsing a capture script (../shared/specs/capture-script.md) and its static checks:
//! the walk of the TOML document, from the version to the last step.
//!
//! [`parse`] turns the TOML text of a script into a [`Script`]: device settings, buffer
//! declarations with their initial contents, and typed steps with every default filled in.
//! Everything that can be decided without running the script is checked here, and the first
//! fault found is returned with its 1-based line and column: TOML syntax, the version,
//! unknown keys at every level, missing fields and wrong types, unknown spellings of calls,
//! kernels and enums, buffers (declared, of matching dtype and length, indices in range,
//! values that fit), and names of models, condition handles and task groups, which an
//! earlier step must bind.
//!
//! Deliberately absent: anything that depends on the device's state while the script runs
//! (capture status, thread identity, the size rules of cond tasks, whether a model was
//! destroyed). Those are runtime outcomes that scripts test through `expect_error`, so
//! refusing them here would make such scripts impossible to write. No IO either: the caller
//! reads the file and adds its name to errors.

use toml::de::{DeTable, DeValue};

use crate::capture::error::AclError;
use crate::capture::types::{BufDtype, Scalar};

use super::args::{Checker, DTYPES, fitted};
use super::ast::{BufferDecl, DeviceSettings, Script, Step};
use super::calls::CALLS;
use super::device_kernels::DEVICE_KERNELS;
use super::error::{ScriptError, error_at, shown, type_phrase};
use super::fields::{Fields, Value, int_value};

/// Parses and statically checks a capture script (see the module doc for what is checked).
pub fn parse(text: &str) -> Result<Script, ScriptError> {
    let root = DeTable::parse(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        error_at(text, at, format!("invalid TOML: {}", e.message()))
    })?;
    Checker::new(text).script(root.get_ref())
}

/// The largest buffer a script may declare, and the most elements all its buffers may hold
/// together: a `len` is a number in a text file, and it must not make the parser (or the
/// runner after it) allocate without bound.
const MAX_BUFFER_LEN: usize = 1 << 20;
const MAX_TOTAL_LEN: usize = 1 << 22;

const TOP_KEYS: &[&str] = &["version", "name", "device", "buffers", "step"];
const DEVICE_KEYS: &[&str] = &["sq_depth", "max_while_iterations"];
const BUFFER_KEYS: &[&str] = &["dtype", "len", "init", "uninit"];
const STEP_KEYS: &[&str] = &["call", "thread", "expect_error"];

impl Checker<'_> {
    fn script(&mut self, root: &DeTable<'_>) -> Result<Script, ScriptError> {
        let top = Fields {
            text: self.text,
            table: root,
            at: 0,
            what: "the script",
        };
        // The version comes first: a later version may have keys this reader does not know,
        // and "unsupported version" is then the message that helps.
        match top.get("version") {
            None => {
                return Err(self.err(
                    0,
                    "missing `version` (this rt2 reads capture scripts of version 1)".into(),
                ));
            }
            Some(v) => match v.get_ref() {
                DeValue::Integer(i) if int_value(i) == Some(1) => {}
                DeValue::Integer(i) => {
                    return Err(self.err(
                        v.span().start,
                        format!(
                            "unsupported `version` {}; this rt2 reads version 1",
                            shown(i.as_str())
                        ),
                    ));
                }
                _ => return Err(top.wrong_type("`version`", v, "the integer 1")),
            },
        }
        top.check_known(TOP_KEYS)?;
        let name = top.string("name")?.map(|(s, _)| s.to_owned());
        let device = match top.get("device") {
            None => DeviceSettings::default(),
            Some(v) => self.device(&top, v)?,
        };
        let buffers = match top.get("buffers") {
            None => Vec::new(),
            Some(v) => self.buffers(&top, v)?,
        };
        let mut steps = Vec::new();
        if let Some(v) = top.get("step") {
            let DeValue::Array(items) = v.get_ref() else {
                return Err(top.wrong_type("`step`", v, "an array of tables ([[step]])"));
            };
            for item in items.iter() {
                steps.push(self.step(item)?);
            }
        }
        Ok(Script {
            name,
            device,
            buffers,
            steps,
        })
    }

    fn device(&self, top: &Fields<'_, '_>, v: &Value<'_>) -> Result<DeviceSettings, ScriptError> {
        let DeValue::Table(t) = v.get_ref() else {
            return Err(top.wrong_type("`device`", v, "a table"));
        };
        let f = Fields {
            text: self.text,
            table: t,
            at: v.span().start,
            what: "[device]",
        };
        f.check_known(DEVICE_KEYS)?;
        let defaults = DeviceSettings::default();
        Ok(DeviceSettings {
            sq_depth: f.int("sq_depth", 2)?.map_or(defaults.sq_depth, |(n, _)| n),
            max_while_iterations: f
                .int("max_while_iterations", 1)?
                .map_or(defaults.max_while_iterations, |(n, _)| n),
            sanitize: defaults.sanitize,
        })
    }

    fn buffers(
        &mut self,
        top: &Fields<'_, '_>,
        v: &Value<'_>,
    ) -> Result<Vec<BufferDecl>, ScriptError> {
        let DeValue::Table(t) = v.get_ref() else {
            return Err(top.wrong_type("`buffers`", v, "a table"));
        };
        // File order, whatever order the map keeps its keys in.
        let mut entries: Vec<_> = t.iter().collect();
        entries.sort_by_key(|(k, _)| k.span().start);
        let mut decls = Vec::with_capacity(entries.len());
        let mut total = 0usize;
        for (key, value) in entries {
            let name: &str = key.get_ref();
            let at = key.span().start;
            if name.is_empty() {
                return Err(self.err(at, "a buffer name must not be empty".into()));
            }
            let what = format!("buffer `{}`", shown(name));
            let DeValue::Table(bt) = value.get_ref() else {
                return Err(self.err(
                    value.span().start,
                    format!(
                        "{what} must be a table such as {{ dtype = \"int32\", len = 4 }}, not {}",
                        type_phrase(value.get_ref())
                    ),
                ));
            };
            let f = Fields {
                text: self.text,
                table: bt,
                at,
                what: &what,
            };
            f.check_known(BUFFER_KEYS)?;
            let dtype = f.required_choice("dtype", BufDtype::from_name, DTYPES)?;
            let uninit = f.bool("uninit")?.unwrap_or(false);
            if uninit && bt.contains_key("init") {
                return Err(self.err(at, format!("{what} cannot be both `uninit` and `init`")));
            }
            let len = f.int::<usize>("len", 1)?;
            if let Some((n, span)) = &len
                && *n > MAX_BUFFER_LEN
            {
                return Err(self.err(
                    span.start,
                    format!("`len` must be at most {MAX_BUFFER_LEN}, not {n}"),
                ));
            }
            let init = match f.array("init")? {
                None => None,
                Some((items, span)) => {
                    if items.is_empty() {
                        return Err(self.err(span.start, "`init` must not be empty".into()));
                    }
                    let mut values = Vec::with_capacity(items.len());
                    for item in items.iter() {
                        values.push(fitted(&f, "an element of `init`", item, name, dtype)?);
                    }
                    Some(values)
                }
            };
            let init = match (len, init) {
                (None, None) => {
                    return Err(self.err(at, format!("{what} needs `len` or `init`")));
                }
                (Some((n, _)), None) => {
                    let zero = if dtype.is_float() {
                        Scalar::Float(0.0)
                    } else {
                        Scalar::Int(0)
                    };
                    vec![zero; n]
                }
                (Some((n, span)), Some(values)) if n != values.len() => {
                    return Err(self.err(
                        span.start,
                        format!("`len` is {n} but `init` has {} values", values.len()),
                    ));
                }
                (_, Some(values)) => values,
            };
            total = total.saturating_add(init.len());
            if total > MAX_TOTAL_LEN {
                return Err(self.err(
                    at,
                    format!("the buffers hold more than {MAX_TOTAL_LEN} elements in all"),
                ));
            }
            self.buffers.insert(name.to_owned(), (dtype, init.len()));
            decls.push(BufferDecl {
                name: name.to_owned(),
                dtype,
                init,
                uninit,
                line: self.lines.line(at),
            });
        }
        Ok(decls)
    }

    fn step(&mut self, v: &Value<'_>) -> Result<Step, ScriptError> {
        let at = v.span().start;
        let DeValue::Table(t) = v.get_ref() else {
            return Err(self.err(
                at,
                format!("a step must be a table, not {}", type_phrase(v.get_ref())),
            ));
        };
        let f = Fields {
            text: self.text,
            table: t,
            at,
            what: "a step",
        };
        let (call, call_span) = f.string("call")?.ok_or_else(|| f.missing("call"))?;
        let Some(spec) = CALLS.iter().find(|c| c.name == call) else {
            return Err(self.unknown_call(call, call_span.start));
        };
        // Once the call is known, messages name it: the step's line alone may not say.
        let what = format!("a `{call}` step");
        let mut f = f;
        f.what = &what;
        let kernel = if spec.fields.contains(&"kernel") {
            let (name, span) = f.string("kernel")?.ok_or_else(|| f.missing("kernel"))?;
            match DEVICE_KERNELS.iter().find(|k| k.name == name) {
                Some(k) => Some(k),
                None => {
                    let names: Vec<_> = DEVICE_KERNELS.iter().map(|k| k.name).collect();
                    return Err(self.err(
                        span.start,
                        format!(
                            "unknown `kernel` `{}`; expected one of: {}",
                            shown(name),
                            names.join(", ")
                        ),
                    ));
                }
            }
        } else {
            None
        };
        let mut allowed: Vec<&str> = STEP_KEYS.to_vec();
        allowed.extend_from_slice(spec.fields);
        if let Some(k) = kernel {
            allowed.extend_from_slice(k.args);
        }
        f.check_known(&allowed)?;

        let thread = f
            .opt_name("thread")?
            .map_or_else(|| "main".to_owned(), |(n, _)| n);
        let expect_error = match f.string("expect_error")? {
            None => None,
            Some((s, span)) => Some(AclError::from_name(s).ok_or_else(|| {
                self.err(
                    span.start,
                    format!(
                        "unknown error name `{}` in `expect_error`; expected an ACL error name \
                         such as ACL_ERROR_RT_STREAM_CAPTURED",
                        shown(s)
                    ),
                )
            })?),
        };
        let call = (spec.read)(self, &f, kernel)?;
        Ok(Step {
            line: self.lines.line(at),
            thread,
            expect_error,
            call,
        })
    }

    fn unknown_call(&self, call: &str, at: usize) -> ScriptError {
        let names: Vec<_> = CALLS.iter().map(|c| c.name).collect();
        self.err(
            at,
            format!(
                "unknown call `{}`; expected one of: {}",
                shown(call),
                names.join(", ")
            ),
        )
    }
}
