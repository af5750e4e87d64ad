//! The call table against the spec: every call capture-script.md lists is in the table,
//! its entry reads it into the call of its name, and a script making every call runs.

use crate::capture::script::calls::CALLS;
use crate::capture::script::parse::parse;
use crate::capture::{report, runner};

/// The calls of capture-script.md's table of calls, in its order.
const SPEC_CALLS: &[&str] = &[
    "capture_begin",
    "capture_end",
    "capture_get_info",
    "capture_to_model_begin",
    "thread_exchange_mode",
    "stream_add_to_model",
    "launch",
    "memcpy",
    "memset",
    "synchronize",
    "event_record",
    "event_wait",
    "task_group_begin",
    "task_group_end",
    "task_update_begin",
    "task_update_end",
    "model_update",
    "cond_handle_create",
    "add_cond_task",
    "execute",
    "model_destroy",
    "expect",
];

/// A script that makes every call of the call table, each succeeding, in an order where
/// each call finds what it names bound.
const EVERY_CALL: &str = r#"version = 1
name = "every-call-runs"

[buffers]
x = { dtype = "int64", len = 2 }
y = { dtype = "int64", init = [5, 6] }
c = { dtype = "int32", init = [1] }

[[step]]
call = "capture_begin"
stream = "s0"
mode = "global"

[[step]]
call = "capture_get_info"
stream = "s0"
expect_status = "active"
model = "m"

[[step]]
call = "task_group_begin"
stream = "s0"

[[step]]
call = "launch"
stream = "s0"
kernel = "add_scalar"
dst = "x"
src = "x"
value = 1

[[step]]
call = "task_group_end"
stream = "s0"
group = "g"

[[step]]
call = "event_record"
event = "fork"
stream = "s0"

[[step]]
call = "event_wait"
event = "fork"
stream = "s1"

[[step]]
call = "launch"
stream = "s1"
kernel = "increment"
dst = "x"
index = 1

[[step]]
call = "event_record"
event = "join"
stream = "s1"

[[step]]
call = "event_wait"
event = "join"
stream = "s0"

[[step]]
call = "cond_handle_create"
model = "m"
handle = "h"

[[step]]
call = "launch"
stream = "s0"
kernel = "set_cond"
handle = "h"
src = "c"

[[step]]
call = "add_cond_task"
stream = "s0"
handle = "h"
type = "if"
models = ["then"]

[[step]]
call = "capture_to_model_begin"
stream = "s2"
model = "then"
mode = "global"

[[step]]
call = "launch"
stream = "s2"
kernel = "increment"
dst = "x"

[[step]]
call = "capture_end"
stream = "s2"

[[step]]
call = "stream_add_to_model"
stream = "s3"
model = "m"

[[step]]
call = "capture_end"
stream = "s0"
model = "m"

[[step]]
call = "thread_exchange_mode"
mode = "global"
expect_previous = "global"

[[step]]
call = "memset"
dst = "x"
value = 10

[[step]]
call = "memcpy"
dst = "y"
src = "x"

[[step]]
call = "task_update_begin"
stream = "u"
group = "g"

[[step]]
call = "launch"
stream = "u"
kernel = "add_scalar"
dst = "x"
src = "x"
value = 2

[[step]]
call = "task_update_end"
stream = "u"

[[step]]
call = "task_disable"
model = "m"
stream = 1
task = 1

[[step]]
call = "task_set_params"
model = "m"
task = 0
kernel = "add_scalar"
dst = "x"
src = "x"
value = 3

[[step]]
call = "model_update"
model = "m"

[[step]]
call = "execute"
model = "m"
stream = "run"
times = 2

[[step]]
call = "synchronize"
stream = "run"

[[step]]
call = "expect"
buffer = "x"
equals = [18, 16]

[[step]]
call = "expect"
buffer = "y"
equals = [10, 10]

[[step]]
call = "model_destroy"
model = "m"
"#;

#[test]
fn every_call_of_the_spec_is_in_the_table_and_runs() {
    // Beside a checkout the spec itself is at hand; its table is the list above.
    let spec =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/specs/capture-script.md");
    if let Ok(text) = std::fs::read_to_string(&spec) {
        let listed: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("## Calls"))
            .take_while(|l| !l.starts_with("## Kernels"))
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        assert_eq!(listed, SPEC_CALLS, "the calls of {}", spec.display());
    }
    let table: Vec<&str> = CALLS.iter().map(|c| c.name).collect();
    for call in SPEC_CALLS {
        assert!(table.contains(call), "{call} is not in the call table");
    }
    // Each step's entry of the table reads it into the call of the same name.
    let script = parse(EVERY_CALL).unwrap();
    let written: Vec<&str> = EVERY_CALL
        .lines()
        .filter_map(|l| l.strip_prefix("call = \""))
        .map(|l| l.trim_end_matches('"'))
        .collect();
    let parsed: Vec<&str> = script.steps.iter().map(|s| s.call.name()).collect();
    assert_eq!(parsed, written);
    for call in &table {
        assert!(parsed.contains(call), "{call} is not made by EVERY_CALL");
    }
    // And every one of them runs as written.
    let (report, _) = runner::run(&script).unwrap();
    assert!(report.passed(), "{}", report::to_text(&report));
    let ran: Vec<&str> = report.steps.iter().map(|s| s.call).collect();
    assert_eq!(ran, parsed);
}
