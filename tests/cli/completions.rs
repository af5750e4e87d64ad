//! CLI tests for `rt2 completions` and `rt2 man`: the scripts and pages come from the same
//! definitions as `--help` (every subcommand and flag appears), `--out-dir` writes one
//! whole page per command, and an unknown shell or subcommand is a one-line error, exit 2.

use crate::util::Scratch;

/// rt2's subcommands, as `--help` lists them.
const SUBCOMMANDS: &[&str] = &[
    "compile",
    "inspect",
    "lower",
    "dump",
    "run",
    "compare",
    "capture",
    "replay",
    "completions",
    "man",
];

/// The pages `rt2 man --out-dir` writes, sorted.
fn page_files() -> Vec<String> {
    let mut v: Vec<String> = SUBCOMMANDS.iter().map(|s| format!("rt2-{s}.1")).collect();
    v.push("rt2.1".to_string());
    v.sort();
    v
}

#[test]
fn bash_completes_every_subcommand_and_their_flags() {
    let s = Scratch::new();
    let r = s.rt2(&["completions", "bash"]).ok();
    let script = r.stdout();
    assert!(script.starts_with("_rt2() {"), "{script}");
    for sub in SUBCOMMANDS {
        assert!(
            script.contains(&format!("rt2,{sub})"))
                && script.contains(&format!("rt2__subcmd__{sub})")),
            "no case for {sub}"
        );
    }
    r.stdout_has(&[
        "complete -F _rt2",
        "--executor",
        "--iterations",
        "--input-shape",
        "--out-dir",
        // The values of `--executor` and of the shell argument are offered too.
        "seq topo topo-prio topo-mt",
        "bash elvish fish powershell zsh",
    ]);
}

#[test]
fn zsh_fish_powershell_and_elvish_get_their_own_forms() {
    let s = Scratch::new();
    let zsh = s.rt2(&["completions", "zsh"]).ok().stdout();
    assert!(zsh.starts_with("#compdef rt2\n"), "{zsh}");
    assert!(
        zsh.contains("'--executor=[") && zsh.contains("_rt2 \"$@\""),
        "{zsh}"
    );

    let fish = s.rt2(&["completions", "fish"]).ok().stdout();
    let completes: Vec<&str> = fish
        .lines()
        .filter(|l| l.starts_with("complete "))
        .collect();
    assert!(completes.len() > 50, "{fish}");
    assert!(
        completes.iter().all(|l| l.starts_with("complete -c rt2 ")),
        "{fish}"
    );
    assert!(
        fish.contains("__fish_rt2_using_subcommand run") && fish.contains("-l executor"),
        "{fish}"
    );

    s.rt2(&["completions", "powershell"]).ok().stdout_has(&[
        "Register-ArgumentCompleter -Native -CommandName 'rt2'",
        "'rt2;run'",
        "'--executor'",
    ]);
    s.rt2(&["completions", "elvish"]).ok().stdout_has(&[
        "set edit:completion:arg-completer[rt2] = {|@words|",
        "&'rt2;run'=",
        "--executor",
    ]);
}

#[test]
fn an_unknown_shell_is_a_one_line_usage_error() {
    let s = Scratch::new();
    s.rt2(&["completions", "tcsh"])
        .fails(2, &["unknown shell \"tcsh\"", "bash, elvish, fish"]);
    // Shell names are matched as written, like every other value rt2 takes.
    s.rt2(&["completions", "Bash"]).fails(2, &["\"Bash\""]);
    let r = s.rt2(&["completions"]);
    assert_eq!(r.code(), 2, "a missing shell is bad usage: {}", r.stderr());
    assert!(r.stdout().is_empty());
}

#[test]
fn man_prints_rt2s_page_and_each_subcommands() {
    let s = Scratch::new();
    let version = env!("CARGO_PKG_VERSION");
    let top = s.rt2(&["man"]).ok().stdout();
    assert!(
        top.contains(&format!("\n.TH rt2 1  \"rt2 {version}\"")),
        "{top}"
    );
    assert!(top.contains("\n.SH SUBCOMMANDS\n"), "{top}");
    for sub in SUBCOMMANDS {
        assert!(
            top.contains(&format!("\nrt2\\-{sub}(1)\n")),
            "no {sub} in\n{top}"
        );
    }
    let run = s.rt2(&["man", "run"]).ok().stdout();
    assert!(
        run.contains(&format!("\n.TH rt2-run 1  \"rt2 {version}\"")),
        "{run}"
    );
    assert!(
        run.contains("\n\\fBrt2 run\\fR ["),
        "the synopsis is `rt2 run`:\n{run}"
    );
    // The flags of `rt2 run --help`, with their values, defaults and help text.
    assert!(
        run.contains(
            "\n\\fB\\-\\-executor\\fR \\fI<EXECUTOR>\\fR [default: topo]\nThe executor type"
        ),
        "{run}"
    );
    assert!(run.contains("\n\\fB\\-\\-iterations\\fR"), "{run}");
    assert!(!run.contains(".SH SUBCOMMANDS"), "{run}");
    let man = s.rt2(&["man", "man"]).ok().stdout();
    assert!(man.contains("\\fB\\-\\-out\\-dir\\fR"), "{man}");
}

#[test]
fn man_out_dir_writes_one_whole_page_per_command() {
    let s = Scratch::new();
    s.rt2(&["man", "--out-dir", "pages/man1"]).ok();
    let pages = s.path("pages/man1");
    let mut written: Vec<String> = std::fs::read_dir(&pages)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, page_files(), "one page per command, nothing else");
    // Each file is exactly the page `rt2 man [SUBCOMMAND]` prints.
    assert_eq!(
        std::fs::read(pages.join("rt2.1")).unwrap(),
        s.rt2(&["man"]).ok().out.stdout
    );
    for sub in SUBCOMMANDS {
        let file = std::fs::read(pages.join(format!("rt2-{sub}.1"))).unwrap();
        assert_eq!(file, s.rt2(&["man", sub]).ok().out.stdout, "rt2-{sub}.1");
    }
    // With a subcommand, only its page.
    s.rt2(&["man", "lower", "--out-dir", "one"]).ok();
    assert_eq!(
        std::fs::read(s.path("one/rt2-lower.1")).unwrap(),
        s.rt2(&["man", "lower"]).ok().out.stdout
    );
    assert_eq!(std::fs::read_dir(s.path("one")).unwrap().count(), 1);
}

#[test]
fn a_failed_out_dir_leaves_no_partial_page() {
    let s = Scratch::new();
    // A directory where a page should go: that page cannot be written.
    std::fs::create_dir_all(s.path("man1/rt2-run.1")).unwrap();
    s.rt2(&["man", "--out-dir", "man1"])
        .fails(2, &["man1/rt2-run.1"]);
    for entry in std::fs::read_dir(s.path("man1")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(
            !name.starts_with(".rt2-"),
            "a temporary file was left: {name}"
        );
        if name == "rt2-run.1" {
            assert!(entry.file_type().unwrap().is_dir());
            continue;
        }
        // Whatever was written is a whole page.
        let sub = name.strip_suffix(".1").unwrap();
        let args: Vec<&str> = match sub.strip_prefix("rt2-") {
            Some(sub) => vec!["man", sub],
            None => vec!["man"],
        };
        assert_eq!(
            std::fs::read(entry.path()).unwrap(),
            s.rt2(&args).ok().out.stdout,
            "{name}"
        );
    }
    // A file where the directory should be.
    s.write("flat", b"not a directory");
    s.rt2(&["man", "--out-dir", "flat"])
        .fails(2, &["--out-dir flat", "cannot create"]);
    assert_eq!(s.read("flat"), b"not a directory");
}

#[test]
fn an_unknown_subcommand_is_a_one_line_usage_error() {
    let s = Scratch::new();
    let r = s.rt2(&["man", "frobnicate"]).fails(
        2,
        &["unknown subcommand \"frobnicate\"", "compile", "replay"],
    );
    assert!(r.stdout().is_empty());
    // `help` is clap's built-in subcommand, not one with a page.
    s.rt2(&["man", "help"]).fails(2, &["\"help\""]);
    s.rt2(&["man", "frobnicate", "--out-dir", "pages"])
        .fails(2, &["frobnicate"]);
    assert!(
        !s.exists("pages"),
        "nothing is written for an unknown subcommand"
    );
}
