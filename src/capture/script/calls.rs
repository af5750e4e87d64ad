//! The calls of the script format, one entry each in [`CALLS`]: the call's name, its own
//! fields, and the function that reads a step's fields into a typed [`Call`]. The table is
//! the one definition of the calls: the parser finds a step's call, its allowed fields and
//! its reader here, and nowhere else.
//!
//! A reader checks the fields in the order the entry lists them, so the first fault found
//! is the one reported; names a call binds are bound after its own uses are checked.

use toml::de::DeValue;

use crate::capture::device_kernels::DeviceKernel;
use crate::capture::types::{CaptureMode, CaptureStatus, CondKind};

use super::args::{COND_KINDS, Checker, MODES, STATUSES, fitted};
use super::ast::Call;
use super::device_kernels::DeviceKernelSpec;
use super::error::{ScriptError, shown};
use super::fields::Fields;

/// Reads a step's fields into its call. The kernel is the step's entry in the kernel table
/// when the call has a `kernel` field.
pub(super) type ReadCall =
    fn(&mut Checker<'_>, &Fields<'_, '_>, Option<&DeviceKernelSpec>) -> Result<Call, ScriptError>;

/// One call of the script format.
pub(super) struct CallSpec {
    /// The call's name in scripts (`"capture_begin"`, ...).
    pub(super) name: &'static str,
    /// Its own fields, in the order they are checked and listed in messages.
    pub(super) fields: &'static [&'static str],
    pub(super) read: ReadCall,
}

const fn call(name: &'static str, fields: &'static [&'static str], read: ReadCall) -> CallSpec {
    CallSpec { name, fields, read }
}

/// Every call, in the order messages list them.
pub(super) const CALLS: &[CallSpec] = &[
    call("capture_begin", &["stream", "mode"], capture_begin),
    call("capture_end", &["stream", "model"], capture_end),
    call(
        "capture_get_info",
        &["stream", "expect_status", "model"],
        capture_get_info,
    ),
    call(
        "capture_to_model_begin",
        &["stream", "model", "mode"],
        capture_to_model_begin,
    ),
    call(
        "thread_exchange_mode",
        &["mode", "expect_previous"],
        thread_exchange_mode,
    ),
    call(
        "stream_add_to_model",
        &["stream", "model"],
        stream_add_to_model,
    ),
    call("launch", &["stream", "kernel"], launch),
    call("memcpy", &["dst", "src"], memcpy),
    call("memset", &["dst", "value"], memset),
    call("synchronize", &["stream"], synchronize),
    call("event_record", &["event", "stream"], event_record),
    call("event_wait", &["event", "stream"], event_wait),
    call("task_group_begin", &["stream"], task_group_begin),
    call("task_group_end", &["stream", "group"], task_group_end),
    call("task_update_begin", &["stream", "group"], task_update_begin),
    call("task_update_end", &["stream"], task_update_end),
    call("model_update", &["model"], model_update),
    call("task_disable", &["model", "stream", "task"], task_disable),
    call(
        "task_set_params",
        &["model", "stream", "task", "kernel"],
        task_set_params,
    ),
    call(
        "cond_handle_create",
        &["model", "handle", "default", "assign_default"],
        cond_handle_create,
    ),
    call(
        "add_cond_task",
        &["stream", "handle", "type", "models"],
        add_cond_task,
    ),
    call("execute", &["model", "stream", "times"], execute),
    call("model_destroy", &["model"], model_destroy),
    call("expect", &["buffer", "equals"], expect),
];

fn stream(f: &Fields<'_, '_>) -> Result<String, ScriptError> {
    f.name("stream").map(|(n, _)| n)
}

fn mode(f: &Fields<'_, '_>, key: &str) -> Result<CaptureMode, ScriptError> {
    f.required_choice(key, CaptureMode::from_name, MODES)
}

/// The kernel of a `launch` or `task_set_params` step, read by its entry of the kernel
/// table.
fn kernel_of(
    c: &Checker<'_>,
    f: &Fields<'_, '_>,
    kernel: Option<&DeviceKernelSpec>,
) -> Result<DeviceKernel, ScriptError> {
    match kernel {
        Some(k) => (k.read)(c, f),
        None => Err(f.missing("kernel")),
    }
}

fn capture_begin(
    _: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::CaptureBegin {
        stream: stream(f)?,
        mode: mode(f, "mode")?,
    })
}

fn capture_end(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    let stream = stream(f)?;
    let model = f.opt_name("model")?.map(|(n, _)| n);
    if let Some(m) = &model {
        c.models.insert(m.clone());
    }
    Ok(Call::CaptureEnd { stream, model })
}

fn capture_get_info(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    let stream = stream(f)?;
    let expect_status = f.choice("expect_status", CaptureStatus::from_name, STATUSES)?;
    let model = f.opt_name("model")?.map(|(n, _)| n);
    if let Some(m) = &model {
        c.models.insert(m.clone());
    }
    Ok(Call::CaptureGetInfo {
        stream,
        expect_status,
        model,
    })
}

fn capture_to_model_begin(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::CaptureToModelBegin {
        stream: stream(f)?,
        model: c.bound_model(f)?,
        mode: mode(f, "mode")?,
    })
}

fn thread_exchange_mode(
    _: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::ThreadExchangeMode {
        mode: mode(f, "mode")?,
        expect_previous: f.choice("expect_previous", CaptureMode::from_name, MODES)?,
    })
}

fn stream_add_to_model(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::StreamAddToModel {
        stream: stream(f)?,
        model: c.bound_model(f)?,
    })
}

fn launch(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    kernel: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::Launch {
        stream: stream(f)?,
        kernel: kernel_of(c, f, kernel)?,
    })
}

fn memcpy(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    let dst = c.buffer(f, "dst")?;
    let src = c.buffer(f, "src")?;
    c.same_shape("memcpy", &dst, &src)?;
    Ok(Call::Memcpy {
        dst: dst.name,
        src: src.name,
    })
}

fn memset(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    let dst = c.buffer(f, "dst")?;
    let value = c.scalar_for(f, "value", &dst, None)?;
    Ok(Call::Memset {
        dst: dst.name,
        value,
    })
}

fn synchronize(
    _: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::Synchronize { stream: stream(f)? })
}

fn event_record(
    _: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::EventRecord {
        event: f.name("event")?.0,
        stream: stream(f)?,
    })
}

fn event_wait(
    _: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::EventWait {
        event: f.name("event")?.0,
        stream: stream(f)?,
    })
}

fn task_group_begin(
    _: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::TaskGroupBegin { stream: stream(f)? })
}

fn task_group_end(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    let stream = stream(f)?;
    let (group, _) = f.name("group")?;
    c.groups.insert(group.clone());
    Ok(Call::TaskGroupEnd { stream, group })
}

fn task_update_begin(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    let stream = stream(f)?;
    let (group, span) = f.name("group")?;
    if !c.groups.contains(&group) {
        return Err(c.err(
            span.start,
            format!(
                "unknown task group `{}`: no earlier task_group_end binds it",
                shown(&group)
            ),
        ));
    }
    Ok(Call::TaskUpdateBegin { stream, group })
}

fn task_update_end(
    _: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::TaskUpdateEnd { stream: stream(f)? })
}

fn model_update(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::ModelUpdate {
        model: c.bound_model(f)?,
    })
}

fn task_disable(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::TaskDisable {
        model: c.bound_model(f)?,
        stream: f.int("stream", 0)?.map_or(0, |(n, _)| n),
        task: f.int("task", 0)?.ok_or_else(|| f.missing("task"))?.0,
    })
}

fn task_set_params(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    kernel: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::TaskSetParams {
        model: c.bound_model(f)?,
        stream: f.int("stream", 0)?.map_or(0, |(n, _)| n),
        task: f.int("task", 0)?.ok_or_else(|| f.missing("task"))?.0,
        kernel: kernel_of(c, f, kernel)?,
    })
}

fn cond_handle_create(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    let model = c.bound_model(f)?;
    let (handle, _) = f.name("handle")?;
    let default = f.int("default", 0)?.map_or(0, |(n, _)| n);
    let assign_default = f.bool("assign_default")?.unwrap_or(false);
    c.handles.insert(handle.clone());
    Ok(Call::CondHandleCreate {
        model,
        handle,
        default,
        assign_default,
    })
}

fn add_cond_task(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    let stream = stream(f)?;
    let handle = c.bound_handle(f)?;
    let kind = f.required_choice("type", CondKind::from_name, COND_KINDS)?;
    let (items, span) = f.array("models")?.ok_or_else(|| f.missing("models"))?;
    if items.is_empty() {
        return Err(c.err(span.start, "`models` must not be empty".into()));
    }
    let mut models: Vec<String> = Vec::with_capacity(items.len());
    for item in items.iter() {
        let at = item.span().start;
        let name = match item.get_ref() {
            DeValue::String(s) if s.is_empty() => {
                return Err(c.err(at, "a name in `models` must not be empty".into()));
            }
            DeValue::String(s) => s.to_string(),
            _ => return Err(f.wrong_type("an element of `models`", item, "a string")),
        };
        if models.contains(&name) {
            return Err(c.err(at, format!("`models` names `{}` twice", shown(&name))));
        }
        models.push(name);
    }
    c.models.extend(models.iter().cloned());
    Ok(Call::AddCondTask {
        stream,
        handle,
        kind,
        models,
    })
}

fn execute(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::Execute {
        model: c.bound_model(f)?,
        stream: stream(f)?,
        times: f.int("times", 1)?.map_or(1, |(n, _)| n),
    })
}

fn model_destroy(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    Ok(Call::ModelDestroy {
        model: c.bound_model(f)?,
    })
}

fn expect(
    c: &mut Checker<'_>,
    f: &Fields<'_, '_>,
    _: Option<&DeviceKernelSpec>,
) -> Result<Call, ScriptError> {
    let buffer = c.buffer(f, "buffer")?;
    let (items, span) = f.array("equals")?.ok_or_else(|| f.missing("equals"))?;
    if items.len() != buffer.len {
        return Err(c.err(
            span.start,
            format!(
                "`equals` has {} values but buffer `{}` has length {}",
                items.len(),
                shown(&buffer.name),
                buffer.len
            ),
        ));
    }
    let mut equals = Vec::with_capacity(items.len());
    for item in items.iter() {
        equals.push(fitted(
            f,
            "an element of `equals`",
            item,
            &buffer.name,
            buffer.dtype,
        )?);
    }
    Ok(Call::Expect {
        buffer: buffer.name,
        equals,
    })
}
