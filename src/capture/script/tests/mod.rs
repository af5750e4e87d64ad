//! Tests of capture-script parsing: a script with every call and kernel parsed into its
//! typed form, defaults and positions ([`call_table`] has the call table against the spec,
//! [`faults`] every kind of fault), and property tests that no text makes the parser
//! panic.

use proptest::prelude::*;

use crate::capture::device_kernels::DeviceKernel;
use crate::capture::error::AclError;
use crate::capture::types::{BufDtype, CaptureMode, CaptureStatus, CondKind, Scalar};

use super::ast::{BufferDecl, Call, DeviceSettings, Script, Step};
use super::calls::CALLS;
use super::device_kernels::DEVICE_KERNELS;
use super::error::{Lines, position};
use super::parse::parse;

mod call_table;
mod faults;

/// Every call and kernel, with defaults left out where the format has them.
const FULL: &str = r#"version = 1
name = "every-call"

[device]
sq_depth = 4
max_while_iterations = 100

[buffers]
x = { dtype = "int64", len = 4 }
y = { dtype = "int64", init = [1, 2, 3, 4] }
f = { dtype = "float32", len = 2, init = [1, 2.5] }
[buffers.c]
dtype = "int32"
init = [0]

[[step]]
call = "capture_begin"
stream = "s0"
mode = "global"

[[step]]
call = "launch"
stream = "s0"
kernel = "fill"
dst = "x"
value = 7

[[step]]
call = "launch"
stream = "s0"
kernel = "copy"
dst = "x"
src = "y"

[[step]]
call = "launch"
stream = "s0"
kernel = "add"
dst = "x"
a = "x"
b = "y"

[[step]]
call = "launch"
stream = "s0"
kernel = "add_scalar"
dst = "f"
src = "f"
value = 1

[[step]]
call = "launch"
stream = "s0"
kernel = "mul_scalar"
dst = "f"
src = "f"
value = 0.5

[[step]]
call = "launch"
stream = "s0"
kernel = "increment"
dst = "x"

[[step]]
call = "launch"
stream = "s0"
kernel = "increment"
dst = "f"
index = 1
by = -2

[[step]]
call = "event_record"
event = "e0"
stream = "s0"

[[step]]
call = "event_wait"
thread = "t1"
event = "e0"
stream = "s1"

[[step]]
call = "task_group_begin"
stream = "s0"

[[step]]
call = "task_group_end"
stream = "s0"
group = "g"

[[step]]
call = "capture_get_info"
stream = "s0"
expect_status = "active"
model = "m0"

[[step]]
call = "cond_handle_create"
model = "m0"
handle = "h"
default = 1
assign_default = true

[[step]]
call = "launch"
stream = "s0"
kernel = "set_cond"
handle = "h"
src = "c"

[[step]]
call = "launch"
stream = "s0"
kernel = "set_cond_lt"
handle = "h"
src = "x"
index = 3
limit = 10

[[step]]
call = "add_cond_task"
stream = "s0"
handle = "h"
type = "while"
models = ["body"]

[[step]]
call = "capture_to_model_begin"
stream = "s2"
model = "body"
mode = "relaxed"

[[step]]
call = "capture_end"
stream = "s2"

[[step]]
call = "capture_end"
stream = "s0"
model = "m0"

[[step]]
call = "thread_exchange_mode"
mode = "thread_local"
expect_previous = "global"

[[step]]
call = "stream_add_to_model"
stream = "s3"
model = "m0"
expect_error = "ACL_ERROR_RT_PARAM_INVALID"

[[step]]
call = "memcpy"
dst = "x"
src = "y"

[[step]]
call = "memset"
dst = "f"
value = 3

[[step]]
call = "synchronize"
stream = "s0"

[[step]]
call = "task_update_begin"
stream = "s0"
group = "g"

[[step]]
call = "task_update_end"
stream = "s0"

[[step]]
call = "model_update"
model = "m0"

[[step]]
call = "task_disable"
model = "m0"
task = 2

[[step]]
call = "task_set_params"
model = "m0"
stream = 1
task = 0
kernel = "increment"
dst = "x"
by = 5

[[step]]
call = "execute"
model = "m0"
stream = "s1"
times = 3

[[step]]
call = "execute"
model = "body"
stream = "s1"

[[step]]
call = "expect"
buffer = "f"
equals = [1, 2.5]

[[step]]
call = "model_destroy"
model = "m0"
"#;

/// The 1-based lines of the `[[step]]` headers of a text, found independently of the
/// parser.
fn step_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim() == "[[step]]")
        .map(|(i, _)| i + 1)
        .collect()
}

fn s(v: &str) -> String {
    v.to_owned()
}

/// The first error of a script: line, column and message.
fn err(text: &str) -> (usize, usize, String) {
    match parse(text) {
        Ok(script) => panic!("expected an error, parsed {script:?}"),
        Err(e) => (e.line, e.column, e.message),
    }
}

/// Five lines of head, so a case's own text starts on line 6.
const HEAD: &str = "version = 1\n\
                    [buffers]\n\
                    x = { dtype = \"int64\", len = 4 }\n\
                    y = { dtype = \"int32\", len = 4 }\n\
                    f = { dtype = \"float32\", len = 2 }\n";

/// Each case: the script text, the line and column of the error, a phrase of its message.
fn check(cases: &[(&str, usize, usize, &str)]) {
    for (text, line, column, phrase) in cases {
        let (l, c, m) = err(text);
        assert!(
            (l, c) == (*line, *column) && m.contains(phrase),
            "for\n{text}\nexpected {line}:{column} `{phrase}`, got {l}:{c} `{m}`"
        );
    }
}

/// Like [`check`], with [`HEAD`] before each text.
fn check_steps(cases: &[(&str, usize, usize, &str)]) {
    for (text, line, column, phrase) in cases {
        let full = format!("{HEAD}{text}");
        check(&[(&full, *line, *column, phrase)]);
    }
}

#[test]
fn full_script_parses_into_every_call_and_kernel() {
    let script = parse(FULL).unwrap();
    let calls = vec![
        Call::CaptureBegin {
            stream: s("s0"),
            mode: CaptureMode::Global,
        },
        Call::Launch {
            stream: s("s0"),
            kernel: DeviceKernel::Fill {
                dst: s("x"),
                value: Scalar::Int(7),
            },
        },
        Call::Launch {
            stream: s("s0"),
            kernel: DeviceKernel::Copy {
                dst: s("x"),
                src: s("y"),
            },
        },
        Call::Launch {
            stream: s("s0"),
            kernel: DeviceKernel::Add {
                dst: s("x"),
                a: s("x"),
                b: s("y"),
            },
        },
        Call::Launch {
            stream: s("s0"),
            kernel: DeviceKernel::AddScalar {
                dst: s("f"),
                src: s("f"),
                value: Scalar::Float(1.0),
            },
        },
        Call::Launch {
            stream: s("s0"),
            kernel: DeviceKernel::MulScalar {
                dst: s("f"),
                src: s("f"),
                value: Scalar::Float(0.5),
            },
        },
        Call::Launch {
            stream: s("s0"),
            kernel: DeviceKernel::Increment {
                dst: s("x"),
                index: 0,
                by: Scalar::Int(1),
            },
        },
        Call::Launch {
            stream: s("s0"),
            kernel: DeviceKernel::Increment {
                dst: s("f"),
                index: 1,
                by: Scalar::Float(-2.0),
            },
        },
        Call::EventRecord {
            event: s("e0"),
            stream: s("s0"),
        },
        Call::EventWait {
            event: s("e0"),
            stream: s("s1"),
        },
        Call::TaskGroupBegin { stream: s("s0") },
        Call::TaskGroupEnd {
            stream: s("s0"),
            group: s("g"),
        },
        Call::CaptureGetInfo {
            stream: s("s0"),
            expect_status: Some(CaptureStatus::Active),
            model: Some(s("m0")),
        },
        Call::CondHandleCreate {
            model: s("m0"),
            handle: s("h"),
            default: 1,
            assign_default: true,
        },
        Call::Launch {
            stream: s("s0"),
            kernel: DeviceKernel::SetCond {
                handle: s("h"),
                src: s("c"),
                index: 0,
            },
        },
        Call::Launch {
            stream: s("s0"),
            kernel: DeviceKernel::SetCondLt {
                handle: s("h"),
                src: s("x"),
                index: 3,
                limit: Scalar::Int(10),
            },
        },
        Call::AddCondTask {
            stream: s("s0"),
            handle: s("h"),
            kind: CondKind::While,
            models: vec![s("body")],
        },
        Call::CaptureToModelBegin {
            stream: s("s2"),
            model: s("body"),
            mode: CaptureMode::Relaxed,
        },
        Call::CaptureEnd {
            stream: s("s2"),
            model: None,
        },
        Call::CaptureEnd {
            stream: s("s0"),
            model: Some(s("m0")),
        },
        Call::ThreadExchangeMode {
            mode: CaptureMode::ThreadLocal,
            expect_previous: Some(CaptureMode::Global),
        },
        Call::StreamAddToModel {
            stream: s("s3"),
            model: s("m0"),
        },
        Call::Memcpy {
            dst: s("x"),
            src: s("y"),
        },
        Call::Memset {
            dst: s("f"),
            value: Scalar::Float(3.0),
        },
        Call::Synchronize { stream: s("s0") },
        Call::TaskUpdateBegin {
            stream: s("s0"),
            group: s("g"),
        },
        Call::TaskUpdateEnd { stream: s("s0") },
        Call::ModelUpdate { model: s("m0") },
        Call::TaskDisable {
            model: s("m0"),
            stream: 0,
            task: 2,
        },
        Call::TaskSetParams {
            model: s("m0"),
            stream: 1,
            task: 0,
            kernel: DeviceKernel::Increment {
                dst: s("x"),
                index: 0,
                by: Scalar::Int(5),
            },
        },
        Call::Execute {
            model: s("m0"),
            stream: s("s1"),
            times: 3,
        },
        Call::Execute {
            model: s("body"),
            stream: s("s1"),
            times: 1,
        },
        Call::Expect {
            buffer: s("f"),
            equals: vec![Scalar::Float(1.0), Scalar::Float(2.5)],
        },
        Call::ModelDestroy { model: s("m0") },
    ];
    let lines = step_lines(FULL);
    assert_eq!(lines.len(), calls.len());
    let steps: Vec<Step> = calls
        .into_iter()
        .zip(lines)
        .enumerate()
        .map(|(i, (call, line))| Step {
            line,
            thread: s(if i == 9 { "t1" } else { "main" }),
            expect_error: (i == 21).then_some(AclError::RtParamInvalid),
            call,
        })
        .collect();
    let expected = Script {
        name: Some(s("every-call")),
        device: DeviceSettings {
            sq_depth: 4,
            max_while_iterations: 100,
            ..DeviceSettings::default()
        },
        buffers: vec![
            BufferDecl {
                name: s("x"),
                dtype: BufDtype::Int64,
                init: vec![Scalar::Int(0); 4],
                uninit: false,
                line: 9,
            },
            BufferDecl {
                name: s("y"),
                dtype: BufDtype::Int64,
                init: [1, 2, 3, 4].map(Scalar::Int).to_vec(),
                uninit: false,
                line: 10,
            },
            BufferDecl {
                name: s("f"),
                dtype: BufDtype::Float32,
                init: vec![Scalar::Float(1.0), Scalar::Float(2.5)],
                uninit: false,
                line: 11,
            },
            BufferDecl {
                name: s("c"),
                dtype: BufDtype::Int32,
                init: vec![Scalar::Int(0)],
                uninit: false,
                line: 12,
            },
        ],
        steps,
    };
    assert_eq!(script, expected);
}

#[test]
fn names_match_the_script_spelling() {
    let script = parse(FULL).unwrap();
    let text_calls: Vec<&str> = FULL
        .lines()
        .filter_map(|l| l.strip_prefix("call = \""))
        .map(|l| l.trim_end_matches('"'))
        .collect();
    let names: Vec<&str> = script.steps.iter().map(|s| s.call.name()).collect();
    assert_eq!(names, text_calls);
    // Every call of the format appears in FULL, so name() covers CALLS.
    for call in CALLS.iter().map(|c| c.name) {
        assert!(names.contains(&call), "{call} missing from FULL");
    }
    let kernels: Vec<&str> = script
        .steps
        .iter()
        .filter_map(|s| match &s.call {
            Call::Launch { kernel, .. } | Call::TaskSetParams { kernel, .. } => Some(kernel.name()),
            _ => None,
        })
        .collect();
    for kernel in DEVICE_KERNELS.iter().map(|k| k.name) {
        assert!(kernels.contains(&kernel), "{kernel} missing from FULL");
    }
}

#[test]
fn kernel_buffers() {
    let add = DeviceKernel::Add {
        dst: s("d"),
        a: s("a"),
        b: s("b"),
    };
    assert_eq!(add.buffers(), ["d", "a", "b"]);
    let lt = DeviceKernel::SetCondLt {
        handle: s("h"),
        src: s("x"),
        index: 0,
        limit: Scalar::Int(1),
    };
    assert_eq!(lt.buffers(), ["x"]);
}

#[test]
fn defaults() {
    let script = parse(
        "version = 1\n[buffers]\nx = { dtype = \"float32\", len = 2 }\n\
         [[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"increment\"\ndst = \"x\"\n",
    )
    .unwrap();
    assert_eq!(script.name, None);
    assert_eq!(
        script.device,
        DeviceSettings {
            sq_depth: 1024,
            max_while_iterations: 1_000_000,
            ..DeviceSettings::default()
        }
    );
    assert_eq!(script.buffers[0].init, vec![Scalar::Float(0.0); 2]);
    let step = &script.steps[0];
    assert_eq!(step.thread, "main");
    assert_eq!(step.expect_error, None);
    assert_eq!(
        step.call,
        Call::Launch {
            stream: s("s"),
            kernel: DeviceKernel::Increment {
                dst: s("x"),
                index: 0,
                by: Scalar::Float(1.0)
            }
        }
    );
}

#[test]
fn defaults_of_calls() {
    let script = parse(
        "version = 1\n\
         [[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"m\"\n\
         [[step]]\ncall = \"execute\"\nmodel = \"m\"\nstream = \"s\"\n\
         [[step]]\ncall = \"cond_handle_create\"\nmodel = \"m\"\nhandle = \"h\"\n\
         [[step]]\ncall = \"task_disable\"\nmodel = \"m\"\ntask = 0\n",
    )
    .unwrap();
    let calls: Vec<Call> = script.steps.into_iter().map(|s| s.call).collect();
    assert_eq!(
        calls[1],
        Call::Execute {
            model: s("m"),
            stream: s("s"),
            times: 1
        }
    );
    assert_eq!(
        calls[2],
        Call::CondHandleCreate {
            model: s("m"),
            handle: s("h"),
            default: 0,
            assign_default: false
        }
    );
    assert_eq!(
        calls[3],
        Call::TaskDisable {
            model: s("m"),
            stream: 0,
            task: 0
        }
    );
}

#[test]
fn no_steps_and_inline_steps() {
    let script = parse("version = 1\n").unwrap();
    assert_eq!(script.steps, vec![]);
    assert_eq!(script.buffers, vec![]);
    let script = parse(
        "version = 1\nstep = [\n  { call = \"synchronize\", stream = \"s\" },\n  \
         { call = \"synchronize\", stream = \"t\", thread = \"t1\" },\n]\n",
    )
    .unwrap();
    assert_eq!(script.steps.len(), 2);
    assert_eq!(script.steps[1].line, 4);
    assert_eq!(script.steps[1].thread, "t1");
}

#[test]
fn the_line_index_agrees_with_counting_newlines() {
    for text in ["", "\n", "a", "é = 1\nab = ü\n", "x\n\ny\nzz", "\n\nü\n"] {
        let lines = Lines::new(text);
        for offset in 0..text.len() + 3 {
            assert_eq!(
                lines.line(offset),
                position(text, offset).0,
                "{text:?} at {offset}"
            );
        }
    }
}

/// Steps record their lines through the line index; a long script keeps them right.
#[test]
fn step_lines_in_a_long_script() {
    let mut text = String::from("version = 1\n");
    for i in 0..3000 {
        text.push_str(&format!(
            "\n[[step]]\ncall = \"synchronize\"\nstream = \"s{i}\"\n"
        ));
    }
    let script = parse(&text).unwrap();
    assert_eq!(script.steps.len(), 3000);
    for (i, step) in script.steps.iter().enumerate() {
        assert_eq!(step.line, 3 + 4 * i, "step {i}");
    }
}

#[test]
fn positions_count_characters() {
    let text = "é = 1\nab = ü\n";
    assert_eq!(position(text, 0), (1, 1));
    // "é" is two bytes, one column.
    assert_eq!(position(text, 2), (1, 2));
    // Inside a character: the character's own column.
    assert_eq!(position(text, 1), (1, 1));
    assert_eq!(position(text, 7), (2, 1));
    assert_eq!(position(text, 12), (2, 6));
    // Past the end: columns go on past the last line.
    assert_eq!(position(text, text.len() + 2), (3, 3));
    check(&[(
        "version = 1\nname = \"é\"\nnmae = 1\n",
        3,
        1,
        "unknown field `nmae`",
    )]);
    check(&[("version = 1\n\"é\" = 1\n", 2, 1, "unknown field `é`")]);
}

#[test]
fn special_floats_are_values() {
    let script = parse(&format!(
        "{HEAD}[[step]]\ncall = \"memset\"\ndst = \"f\"\nvalue = -inf\n\
         [[step]]\ncall = \"memset\"\ndst = \"f\"\nvalue = 1_000\n"
    ))
    .unwrap();
    let values: Vec<Scalar> = script
        .steps
        .iter()
        .filter_map(|s| match s.call {
            Call::Memset { value, .. } => Some(value),
            _ => None,
        })
        .collect();
    assert_eq!(
        values,
        [Scalar::Float(f64::NEG_INFINITY), Scalar::Float(1000.0)]
    );
}

#[test]
fn error_display() {
    let e = parse("version = 2").unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 1, column 11: unsupported `version` 2; this rt2 reads version 1"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn never_panics_on_any_text(text in "\\PC{0,300}") {
        let _ = parse(&text);
    }

    #[test]
    fn never_panics_on_toml_like_text(
        text in "(version = 1\n)?([a-z_]{1,8} = (\"[a-z0-9]{0,4}\"|-?[0-9]{1,11}|[0-9]\\.5|\\[[0-9, ]{0,6}\\]|true)\n|\\[\\[step\\]\\]\n|\\[buffers\\]\n|\\[device\\]\n){0,20}"
    ) {
        let _ = parse(&text);
    }

    #[test]
    fn never_panics_on_byte_mutations(
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 1..8)
    ) {
        let mut bytes = FULL.as_bytes().to_vec();
        for (at, op, b) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 if i < bytes.len() => bytes[i] = b,
                1 => bytes.insert(i, b),
                _ if i < bytes.len() => {
                    bytes.remove(i);
                }
                _ => {}
            }
        }
        let _ = parse(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn never_panics_on_line_mutations(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), 0u8..3), 1..6)
    ) {
        let mut lines: Vec<&str> = FULL.lines().collect();
        for (a, b, op) in edits {
            if lines.is_empty() {
                break;
            }
            let (i, j) = (a.index(lines.len()), b.index(lines.len()));
            match op {
                0 => {
                    lines.remove(i);
                }
                1 => lines.swap(i, j),
                _ => lines.insert(i, lines[j]),
            }
        }
        let _ = parse(&lines.join("\n"));
    }
}
