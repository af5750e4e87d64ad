//! Every kind of fault a script can have, each case with the line, column and a phrase
//! of its message: TOML syntax, the version, unknown keys, missing fields, wrong types,
//! unknown spellings, buffers, name binding, integer ranges and the shapes of steps.

use crate::capture::error::AclError;
use crate::capture::script::parse::parse;

use super::{HEAD, check, check_steps};

#[test]
fn bad_toml() {
    check(&[
        ("version = 1\nx = = 2\n", 2, 5, "invalid TOML"),
        ("version = 1\nversion = 1\n", 2, 1, "duplicate key"),
        (
            "version = 1\n[[step]]\ncall = \"a\n",
            3,
            10,
            "invalid basic string",
        ),
    ]);
}

#[test]
fn version() {
    check(&[
        ("", 1, 1, "missing `version`"),
        ("name = \"a\"\n", 1, 1, "missing `version`"),
        ("version = 2\n", 1, 11, "unsupported `version` 2"),
        (
            "version = \"1\"\n",
            1,
            11,
            "must be the integer 1, not a string",
        ),
        (
            "version = 1.0\n",
            1,
            11,
            "must be the integer 1, not a float",
        ),
    ]);
}

#[test]
fn unknown_keys() {
    check(&[
        (
            "version = 1\nnmae = \"a\"\n",
            2,
            1,
            "unknown field `nmae` in the script",
        ),
        (
            "version = 1\n[device]\nsq_depth = 4\nsq = 2\n",
            4,
            1,
            "unknown field `sq` in [device]",
        ),
        (
            "version = 1\n[buffers]\nx = { dtype = \"int32\", len = 1, size = 4 }\n",
            3,
            33,
            "unknown field `size` in buffer `x`",
        ),
    ]);
    check_steps(&[
        (
            "[[step]]\ncall = \"capture_begin\"\nstream = \"s\"\nmode = \"global\"\nmodel = \"m\"\n",
            10,
            1,
            "unknown field `model` in a `capture_begin` step",
        ),
        (
            "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"fill\"\ndst = \"x\"\nvalue = 1\nsrc = \"x\"\n",
            12,
            1,
            "expected one of: call, thread, expect_error, stream, kernel, dst, value",
        ),
        (
            "[[step]]\ncall = \"synchronize\"\nstream = \"s\"\n[step.extra]\n",
            9,
            7,
            "unknown field `extra`",
        ),
    ]);
}

#[test]
fn missing_fields() {
    check(&[(
        "version = 1\n[buffers]\nx = { len = 4 }\n",
        3,
        1,
        "missing field `dtype` in buffer `x`",
    )]);
    check_steps(&[
        (
            "[[step]]\nstream = \"s\"\n",
            6,
            1,
            "missing field `call` in a step",
        ),
        (
            "[[step]]\ncall = \"capture_begin\"\nstream = \"s\"\n",
            6,
            1,
            "missing field `mode` in a `capture_begin` step",
        ),
        (
            "[[step]]\ncall = \"launch\"\nstream = \"s\"\n",
            6,
            1,
            "missing field `kernel`",
        ),
        (
            "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"fill\"\ndst = \"x\"\n",
            6,
            1,
            "missing field `value`",
        ),
        (
            "[[step]]\ncall = \"expect\"\nbuffer = \"x\"\n",
            6,
            1,
            "missing field `equals`",
        ),
    ]);
}

#[test]
fn wrong_types() {
    check(&[
        (
            "version = 1\nname = 3\n",
            2,
            8,
            "`name` must be a string, not an integer",
        ),
        (
            "version = 1\ndevice = 3\n",
            2,
            10,
            "`device` must be a table",
        ),
        (
            "version = 1\n[device]\nsq_depth = \"big\"\n",
            3,
            12,
            "`sq_depth` must be an integer, not a string",
        ),
        (
            "version = 1\nbuffers = []\n",
            2,
            11,
            "`buffers` must be a table",
        ),
        (
            "version = 1\n[buffers]\nx = 4\n",
            3,
            5,
            "must be a table such as",
        ),
        (
            "version = 1\n[buffers]\nx = { dtype = \"int32\", init = 1 }\n",
            3,
            31,
            "`init` must be an array, not an integer",
        ),
        (
            "version = 1\n[buffers]\nx = { dtype = \"int32\", init = [\"a\"] }\n",
            3,
            32,
            "an element of `init` must be a number, not a string",
        ),
    ]);
    check_steps(&[
        ("[[step]]\ncall = 1\n", 7, 8, "`call` must be a string"),
        (
            "[[step]]\ncall = \"synchronize\"\nstream = 0\n",
            8,
            10,
            "`stream` must be a string, not an integer",
        ),
        (
            "[[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"m\"\n\
             [[step]]\ncall = \"task_disable\"\nmodel = \"m\"\nstream = \"s\"\ntask = 0\n",
            13,
            10,
            "`stream` must be an integer, not a string",
        ),
        (
            "[[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"m\"\n\
             [[step]]\ncall = \"cond_handle_create\"\nmodel = \"m\"\nhandle = \"h\"\n\
             assign_default = 1\n",
            14,
            18,
            "`assign_default` must be a boolean",
        ),
        (
            "[[step]]\ncall = \"memset\"\ndst = \"x\"\nvalue = \"1\"\n",
            9,
            9,
            "`value` must be a number, not a string",
        ),
        (
            "[[step]]\ncall = \"synchronize\"\nstream = \"s\"\nthread = 1\n",
            9,
            10,
            "`thread` must be a string",
        ),
        (
            "[[step]]\ncall = \"expect\"\nbuffer = \"f\"\nequals = [1, true]\n",
            9,
            14,
            "an element of `equals` must be a number, not a boolean",
        ),
    ]);
}

#[test]
fn unknown_spellings() {
    check(&[(
        "version = 1\n[buffers]\nx = { dtype = \"int8\", len = 1 }\n",
        3,
        15,
        "unknown `dtype` `int8`; expected one of: int32, int64, float32",
    )]);
    check_steps(&[
        (
            "[[step]]\ncall = \"capture\"\n",
            7,
            8,
            "unknown call `capture`",
        ),
        (
            "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"sub\"\n",
            9,
            10,
            "unknown `kernel` `sub`",
        ),
        (
            "[[step]]\ncall = \"capture_begin\"\nstream = \"s\"\nmode = \"local\"\n",
            9,
            8,
            "unknown `mode` `local`",
        ),
        (
            "[[step]]\ncall = \"capture_get_info\"\nstream = \"s\"\nexpect_status = \"on\"\n",
            9,
            17,
            "unknown `expect_status` `on`",
        ),
        (
            "[[step]]\ncall = \"thread_exchange_mode\"\nmode = \"relaxed\"\nexpect_previous = \"x\"\n",
            9,
            19,
            "unknown `expect_previous` `x`",
        ),
        (
            "[[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"m\"\n\
             [[step]]\ncall = \"cond_handle_create\"\nmodel = \"m\"\nhandle = \"h\"\n\
             [[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
             type = \"for\"\nmodels = [\"b\"]\n",
            18,
            8,
            "unknown `type` `for`",
        ),
        (
            "[[step]]\ncall = \"synchronize\"\nstream = \"s\"\nexpect_error = \"ACL_ERROR_NOPE\"\n",
            9,
            16,
            "unknown error name `ACL_ERROR_NOPE`",
        ),
    ]);
}

#[test]
fn buffer_declarations() {
    check(&[
        (
            "version = 1\n[buffers]\nx = { dtype = \"int32\" }\n",
            3,
            1,
            "buffer `x` needs `len` or `init`",
        ),
        (
            "version = 1\n[buffers]\nx = { dtype = \"int32\", len = 0 }\n",
            3,
            30,
            "`len` must be at least 1, not 0",
        ),
        (
            "version = 1\n[buffers]\nx = { dtype = \"int32\", init = [] }\n",
            3,
            31,
            "`init` must not be empty",
        ),
        (
            "version = 1\n[buffers]\nx = { dtype = \"int32\", len = 3, init = [1, 2] }\n",
            3,
            30,
            "`len` is 3 but `init` has 2 values",
        ),
        (
            "version = 1\n[buffers]\nx = { dtype = \"int32\", init = [1, 2147483648] }\n",
            3,
            35,
            "2147483648 does not fit int32",
        ),
        (
            "version = 1\n[buffers]\nx = { dtype = \"int64\", init = [1.5] }\n",
            3,
            32,
            "1.5 is not an integer",
        ),
        (
            "version = 1\n[buffers]\nx = { dtype = \"int64\", len = 2000000 }\n",
            3,
            30,
            "`len` must be at most",
        ),
        (
            "version = 1\n[buffers]\n\"\" = { dtype = \"int64\", len = 1 }\n",
            3,
            1,
            "a buffer name must not be empty",
        ),
        (
            "version = 1\n[buffers]\nx = { dtype = \"float32\", init = [1e400] }\n",
            3,
            34,
            "an element of `init` is not a representable float",
        ),
        (
            "version = 1\n[device]\nsq_depth = 1\n",
            3,
            12,
            "`sq_depth` must be at least 2, not 1",
        ),
        (
            "version = 1\n[device]\nmax_while_iterations = 0\n",
            3,
            24,
            "`max_while_iterations` must be at least 1, not 0",
        ),
    ]);
}

#[test]
fn buffer_uses() {
    check_steps(&[
        (
            "[[step]]\ncall = \"memset\"\ndst = \"z\"\nvalue = 1\n",
            8,
            7,
            "unknown buffer `z` in `dst`",
        ),
        (
            "[[step]]\ncall = \"memcpy\"\ndst = \"x\"\nsrc = \"y\"\n",
            9,
            7,
            "`memcpy` needs buffers of one dtype and length",
        ),
        (
            "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"copy\"\ndst = \"x\"\nsrc = \"f\"\n",
            11,
            7,
            "`copy` needs buffers of one dtype and length: `src` is `f` (float32, 2)",
        ),
        (
            "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"add\"\ndst = \"x\"\na = \"x\"\nb = \"y\"\n",
            12,
            5,
            "`add` needs buffers of one dtype and length",
        ),
        (
            "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"increment\"\ndst = \"x\"\nindex = 4\n",
            11,
            9,
            "`index` 4 is out of range for buffer `x` of length 4",
        ),
        (
            "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"increment\"\ndst = \"x\"\nindex = -1\n",
            11,
            9,
            "`index` must be at least 0",
        ),
        (
            "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"fill\"\ndst = \"y\"\nvalue = 1.5\n",
            11,
            9,
            "`value` for buffer `y`: 1.5 is not an integer",
        ),
        (
            "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"increment\"\ndst = \"y\"\nby = 4294967296\n",
            11,
            6,
            "`by` for buffer `y`: 4294967296 does not fit int32",
        ),
        (
            "[[step]]\ncall = \"memset\"\ndst = \"y\"\nvalue = -3000000000\n",
            9,
            9,
            "does not fit int32",
        ),
        (
            "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"mul_scalar\"\ndst = \"x\"\nsrc = \"x\"\nvalue = 0.5\n",
            12,
            9,
            "is not an integer",
        ),
        (
            "[[step]]\ncall = \"expect\"\nbuffer = \"x\"\nequals = [1, 2, 3]\n",
            9,
            10,
            "`equals` has 3 values but buffer `x` has length 4",
        ),
        (
            "[[step]]\ncall = \"expect\"\nbuffer = \"y\"\nequals = [1, 2, 3, 1e3]\n",
            9,
            20,
            "an element of `equals` for buffer `y`",
        ),
        (
            "[[step]]\ncall = \"memset\"\ndst = \"x\"\nvalue = 9223372036854775808\n",
            9,
            9,
            "`value` does not fit a 64-bit integer",
        ),
        (
            "[[step]]\ncall = \"memset\"\ndst = \"\"\nvalue = 1\n",
            8,
            7,
            "`dst` must not be empty",
        ),
    ]);
}

/// Steps that bind `m` (a model) and `h` (a handle in it), for binding cases.
const BIND: &str = "[[step]]\ncall = \"capture_get_info\"\nstream = \"s\"\nmodel = \"m\"\n\
                    [[step]]\ncall = \"cond_handle_create\"\nmodel = \"m\"\nhandle = \"h\"\n";

#[test]
fn set_cond_lt_limit_fits_src() {
    let text = format!(
        "{HEAD}{BIND}[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"set_cond_lt\"\n\
         handle = \"h\"\nsrc = \"y\"\nlimit = 2.5\n"
    );
    check(&[(
        &text,
        20,
        9,
        "`limit` for buffer `y`: 2.5 is not an integer",
    )]);
    let text = format!(
        "{HEAD}{BIND}[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"set_cond\"\n\
         handle = \"h\"\nsrc = \"f\"\nindex = 2\n"
    );
    check(&[(
        &text,
        20,
        9,
        "`index` 2 is out of range for buffer `f` of length 2",
    )]);
}

#[test]
fn name_binding() {
    check_steps(&[
        (
            "[[step]]\ncall = \"execute\"\nmodel = \"m\"\nstream = \"s\"\n",
            8,
            9,
            "unknown model `m`: no earlier step binds it",
        ),
        (
            // Binding is in file order: a later capture_end does not count.
            "[[step]]\ncall = \"model_destroy\"\nmodel = \"m\"\n\
             [[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"m\"\n",
            8,
            9,
            "unknown model `m`",
        ),
        (
            "[[step]]\ncall = \"capture_to_model_begin\"\nstream = \"s\"\nmodel = \"b\"\nmode = \"global\"\n",
            9,
            9,
            "unknown model `b`",
        ),
        (
            "[[step]]\ncall = \"cond_handle_create\"\nmodel = \"m\"\nhandle = \"h\"\n",
            8,
            9,
            "unknown model `m`",
        ),
        (
            "[[step]]\ncall = \"task_update_begin\"\nstream = \"s\"\ngroup = \"g\"\n",
            9,
            9,
            "unknown task group `g`: no earlier task_group_end binds it",
        ),
        (
            "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"set_cond\"\nhandle = \"h\"\nsrc = \"x\"\n",
            10,
            10,
            "unknown condition handle `h`",
        ),
        (
            "[[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"m\"\n\
             [[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
             type = \"if\"\nmodels = [\"a\"]\n",
            13,
            10,
            "unknown condition handle `h`",
        ),
        (
            "[[step]]\ncall = \"synchronize\"\nstream = \"\"\n",
            8,
            10,
            "`stream` must not be empty",
        ),
        (
            "[[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"\"\n",
            9,
            9,
            "`model` must not be empty",
        ),
    ]);
    // Sub-models bound by add_cond_task are usable afterwards, and so is a group.
    let text = format!(
        "{HEAD}{BIND}[[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
         type = \"switch\"\nmodels = [\"b0\", \"b1\"]\n\
         [[step]]\ncall = \"capture_to_model_begin\"\nstream = \"t\"\nmodel = \"b1\"\n\
         mode = \"global\"\n\
         [[step]]\ncall = \"task_group_end\"\nstream = \"s\"\ngroup = \"g\"\n\
         [[step]]\ncall = \"task_update_begin\"\nstream = \"s\"\ngroup = \"g\"\n"
    );
    assert_eq!(parse(&text).unwrap().steps.len(), 6);
}

#[test]
fn cond_task_models() {
    check_steps(&[
        (
            &format!(
                "{BIND}[[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
                 type = \"if\"\nmodels = []\n"
            ),
            19,
            10,
            "`models` must not be empty",
        ),
        (
            &format!(
                "{BIND}[[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
                 type = \"switch\"\nmodels = [\"a\", \"b\", \"a\"]\n"
            ),
            19,
            21,
            "`models` names `a` twice",
        ),
        (
            &format!(
                "{BIND}[[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
                 type = \"switch\"\nmodels = [\"a\", 2]\n"
            ),
            19,
            16,
            "an element of `models` must be a string",
        ),
    ]);
    // Sizes are the runtime's to refuse: a WHILE with two bodies parses.
    let text = format!(
        "{HEAD}{BIND}[[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
         type = \"while\"\nmodels = [\"a\", \"b\"]\nexpect_error = \"ACL_ERROR_INVALID_PARAM\"\n"
    );
    let script = parse(&text).unwrap();
    assert_eq!(script.steps[2].expect_error, Some(AclError::InvalidParam));
}

#[test]
fn integer_ranges() {
    check_steps(&[
        (
            &format!(
                "{BIND}[[step]]\ncall = \"execute\"\nmodel = \"m\"\nstream = \"s\"\ntimes = 0\n"
            ),
            18,
            9,
            "`times` must be at least 1, not 0",
        ),
        (
            &format!(
                "{BIND}[[step]]\ncall = \"execute\"\nmodel = \"m\"\nstream = \"s\"\ntimes = 4294967296\n"
            ),
            18,
            9,
            "`times` is too large",
        ),
        (
            &format!(
                "{BIND}[[step]]\ncall = \"cond_handle_create\"\nmodel = \"m\"\nhandle = \"k\"\ndefault = -1\n"
            ),
            18,
            11,
            "`default` must be at least 0",
        ),
        (
            &format!("{BIND}[[step]]\ncall = \"task_disable\"\nmodel = \"m\"\n"),
            14,
            1,
            "missing field `task`",
        ),
    ]);
}

#[test]
fn step_shapes() {
    check(&[
        (
            "version = 1\n[step]\ncall = \"synchronize\"\n",
            2,
            1,
            "`step` must be an array of tables ([[step]]), not a table",
        ),
        (
            "version = 1\nstep = 3\n",
            2,
            8,
            "`step` must be an array of tables",
        ),
        (
            "version = 1\nstep = [1]\n",
            2,
            9,
            "a step must be a table, not an integer",
        ),
    ]);
}
