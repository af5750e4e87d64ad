//! Tidy checks on the source tree: every Rust file opens with a `//!` doc saying what it
//! owns; modules use only what ARCHITECTURE.md's dependency table allows them to, down to
//! the items `lower` may take from `ops` and `exec`; inside each module the files form
//! layers (no file imports, directly or through others, a file that imports it); no
//! source file or function outgrows what a reader can hold; and the files kept twice
//! because the table keeps their modules apart stay the same.
//!
//! The checks read source text, not the compiler's name resolution: `use` trees are
//! expanded, `crate::`, `super::`, `self::` and child-module paths resolved to the file
//! that defines the module, and an item named through a `mod.rs` that only declares and
//! re-exports is followed to the file it is re-exported from. Test code (`#[cfg(test)]`
//! modules, inline or in their own file) is left out: a test may use whatever it tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("reading a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

#[test]
fn every_file_opens_with_a_module_doc() {
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches", "examples"] {
        rust_files(&root().join(dir), &mut files);
    }
    let missing: Vec<String> = files
        .iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).expect("reading a source file");
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            !first.starts_with("//!")
        })
        .map(|p| rel(p))
        .collect();
    assert!(
        missing.is_empty(),
        "files without a //! module doc: {missing:#?}"
    );
}

// ---- reading the tree

/// One source file of `src/` as the checks see it.
struct Source {
    path: PathBuf,
    /// Its module path: `src/exec/runtime/plan.rs` is `[exec, runtime, plan]`.
    module: Vec<String>,
    /// The text with comments, string literals and test modules blanked out.
    code: String,
    /// Child modules it declares, with whether the declaration is `#[cfg(test)]`.
    children: Vec<(String, bool)>,
}

/// Every file of `src/` but the binary's `main.rs`, by module path, with test-only files
/// (declared under `#[cfg(test)]`) left out.
fn sources() -> BTreeMap<Vec<String>, Source> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut all = BTreeMap::new();
    for path in files {
        let relative = path.strip_prefix(root().join("src")).unwrap().to_path_buf();
        if relative == Path::new("main.rs") {
            continue;
        }
        let mut module: Vec<String> = relative
            .with_extension("")
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        if module.last().is_some_and(|m| m == "mod" || m == "lib") {
            module.pop();
        }
        let text = std::fs::read_to_string(&path).expect("reading a source file");
        let code = strip(&text);
        let children = declared_modules(&code);
        let code = blank_test_modules(&code);
        all.insert(
            module.clone(),
            Source {
                path,
                module,
                code,
                children,
            },
        );
    }
    // Files declared as test modules are test code.
    let mut test_files = Vec::new();
    for s in all.values() {
        for (child, test) in &s.children {
            if *test {
                let mut m = s.module.clone();
                m.push(child.clone());
                test_files.push(m);
            }
        }
    }
    // A test module's own children are test code too.
    test_files.sort();
    all.retain(|m, _| !test_files.iter().any(|t| m.starts_with(t)));
    all
}

/// The text with every comment and string or char literal replaced by spaces (line
/// breaks kept, so line numbers still count).
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out.push(b' ');
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        out.extend_from_slice(b"  ");
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        out.extend_from_slice(b"  ");
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        blank(&mut out, b[i]);
                        i += 1;
                    }
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                // A raw string: r"..." or r#"..."#.
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    out.push(b[i]);
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                let end = b[j + 1..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |p| j + 1 + p + close.len());
                for &c in &b[i..end] {
                    blank(&mut out, c);
                }
                i = end;
            }
            b'"' => {
                out.push(b' ');
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        blank(&mut out, b[i]);
                        i += 1;
                    }
                    if i < b.len() {
                        blank(&mut out, b[i]);
                        i += 1;
                    }
                }
                out.push(b' ');
                i += 1;
            }
            b'\'' => {
                // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
                let lit = if b.get(i + 1) == Some(&b'\\') {
                    b[i + 2..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map(|p| i + 3 + p)
                } else if b.get(i + 2) == Some(&b'\'') {
                    Some(i + 3)
                } else {
                    None
                };
                match lit {
                    Some(end) => {
                        out.extend(std::iter::repeat_n(b' ', end - i));
                        i = end;
                    }
                    None => {
                        out.push(b'\'');
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).expect("only ASCII was replaced")
}

/// `mod name;` declarations (not inline modules), with whether `#[cfg(test)]` guards them.
fn declared_modules(code: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let lines: Vec<&str> = code.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        if let Some(name) = t.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
            let test = lines[..i]
                .iter()
                .rev()
                .map(|l| l.trim())
                .take_while(|l| l.starts_with("#["))
                .any(|l| l.contains("cfg(test)"));
            out.push((name.trim().to_string(), test));
        }
    }
    out
}

/// The offset of the `}` that closes the `{` at `open` (the code's comments and literals
/// already blanked, so every brace left is a real one).
fn closing_brace(code: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, c) in code[open..].bytes().enumerate() {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(open + k);
                }
            }
            _ => {}
        }
    }
    None
}

/// The code with every inline `#[cfg(test)] mod name { ... }` blanked out.
fn blank_test_modules(code: &str) -> String {
    let mut out = code.as_bytes().to_vec();
    let mut from = 0;
    while let Some(p) = code[from..].find("#[cfg(test)]") {
        let at = from + p;
        from = at + 1;
        let rest = &code[at + "#[cfg(test)]".len()..];
        let head = rest.trim_start();
        let head = head
            .strip_prefix("pub(crate) ")
            .or_else(|| head.strip_prefix("pub "))
            .unwrap_or(head);
        if !head.starts_with("mod ") {
            continue;
        }
        let Some(open) = code[at..].find(['{', ';']).map(|o| at + o) else {
            continue;
        };
        if code.as_bytes()[open] == b';' {
            continue;
        }
        let end = closing_brace(code, open).map_or(code.len(), |c| c + 1);
        for c in &mut out[at..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    String::from_utf8(out).expect("only ASCII was replaced")
}

/// Every path the code names: `use` trees expanded (`a::{b, c::d}` is `a::b` and
/// `a::c::d`, `self` inside braces the prefix itself), and every other `x::y::z` in code.
fn paths(code: &str) -> Vec<Vec<String>> {
    located_paths(code).into_iter().map(|(_, p)| p).collect()
}

/// [`paths`], each with the byte offset it starts at.
fn located_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let at_word = i == 0 || !ident(b[i - 1]);
        if at_word && code[i..].starts_with("use ") {
            let end = code[i..].find(';').map_or(code.len(), |e| i + e);
            let mut expanded = Vec::new();
            expand_use(&code[i + 4..end], &mut Vec::new(), &mut expanded);
            out.extend(expanded.into_iter().map(|p| (i, p)));
            i = end;
            continue;
        }
        if at_word && ident(b[i]) {
            // A path of at least two segments outside a use tree.
            let mut segs = Vec::new();
            let mut j = i;
            loop {
                let s = j;
                while j < b.len() && ident(b[j]) {
                    j += 1;
                }
                segs.push(code[s..j].to_string());
                if code[j..].starts_with("::") && b.get(j + 2).is_some_and(|&c| ident(c)) {
                    j += 2;
                } else {
                    break;
                }
            }
            if segs.len() > 1 {
                out.push((i, segs));
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

fn expand_use(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim().trim_start_matches("::");
    if let Some(brace) = tree.find('{') {
        let head: Vec<String> = tree[..brace]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let inner = &tree[brace + 1..tree.rfind('}').unwrap_or(tree.len())];
        let n = prefix.len();
        prefix.extend(head);
        let mut depth = 0;
        let mut start = 0;
        for (k, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_use(&inner[start..k], prefix, out);
                    start = k + 1;
                }
                _ => {}
            }
        }
        expand_use(&inner[start..], prefix, out);
        prefix.truncate(n);
    } else {
        let tree = tree.split(" as ").next().unwrap_or("").trim();
        if tree.is_empty() {
            return;
        }
        let mut p = prefix.clone();
        for seg in tree.split("::").map(str::trim) {
            if seg != "self" {
                p.push(seg.to_string());
            }
        }
        out.push(p);
    }
}

/// The inline modules (`mod name { ... }`) of the code: (name, body start, body end).
fn inline_modules(code: &str) -> Vec<(String, usize, usize)> {
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = code[from..].find("mod ") {
        let at = from + p;
        from = at + 4;
        if at > 0 && ident(b[at - 1]) {
            continue;
        }
        let name: String = code[at + 4..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = at + 4 + name.len();
        if name.is_empty() || !code[after..].trim_start().starts_with('{') {
            continue;
        }
        let open = after + code[after..].find('{').unwrap_or(0);
        let end = closing_brace(code, open).unwrap_or(code.len());
        out.push((name, open, end));
    }
    out
}

/// The inline modules enclosing byte `at`, outermost first.
fn enclosing(inline: &[(String, usize, usize)], at: usize) -> Vec<String> {
    inline
        .iter()
        .filter(|(_, open, end)| *open < at && at < *end)
        .map(|(name, _, _)| name.clone())
        .collect()
}

/// A path as seen from `from` made absolute (`crate` first), or `None` for a path that
/// does not lead into rt2 (std, a dependency, a local item).
fn absolute(
    path: &[String],
    from: &Source,
    all: &BTreeMap<Vec<String>, Source>,
) -> Option<Vec<String>> {
    absolute_in(path, from, &[], all)
}

/// [`absolute`] for a path written inside the inline modules `inline` of `from`: their
/// `self` and `super` are relative to the inline module, not the file.
fn absolute_in(
    path: &[String],
    from: &Source,
    inline: &[String],
    all: &BTreeMap<Vec<String>, Source>,
) -> Option<Vec<String>> {
    let mut here = from.module.clone();
    here.extend(inline.iter().cloned());
    let mut rest = path;
    match rest.first()?.as_str() {
        "crate" => here.clear(),
        "self" => {}
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                here.pop()?;
                rest = &rest[1..];
            }
            here.extend(rest.iter().cloned());
            return Some(here);
        }
        first => {
            // A child module's path, relative to this file's module.
            if !inline.is_empty() {
                return None;
            }
            let mut child = from.module.clone();
            child.push(first.to_string());
            if !all.contains_key(&child) {
                return None;
            }
            here.extend(rest.iter().cloned());
            return Some(here);
        }
    }
    rest = &rest[1..];
    here.extend(rest.iter().cloned());
    Some(here)
}

/// Whether a file only declares modules and re-exports (a `mod.rs` that is only a table
/// of contents). Imports through it are followed to where the item comes from.
fn declares_only(s: &Source) -> bool {
    let mut statements = s.code.split(';').map(str::trim).filter(|t| !t.is_empty());
    statements.all(|t| {
        let t = t
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with("#!") && !l.starts_with("#["))
            .collect::<Vec<_>>()
            .join(" ");
        let t = t.trim();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        t.is_empty() || t.starts_with("mod ") || t.starts_with("use ")
    })
}

/// The file a path (absolute, `crate` dropped) is defined in: the longest prefix that
/// is a file, followed through declare-only modules' re-exports.
fn defining_file(
    path: &[String],
    all: &BTreeMap<Vec<String>, Source>,
    depth: usize,
) -> Option<Vec<String>> {
    let n = (1..=path.len())
        .rev()
        .find(|&n| all.contains_key(&path[..n]))?;
    let file = &all[&path[..n]];
    if depth < 8 && n < path.len() && declares_only(file) {
        let item = &path[n];
        for re in paths(&file.code) {
            let Some(last) = re.last() else { continue };
            if last == item
                && let Some(target) = absolute(&re, file, all)
                && target.len() > n
                && target[..n] == path[..n]
            {
                let mut full = target;
                full.extend(path[n + 1..].iter().cloned());
                return defining_file(&full, all, depth + 1);
            }
        }
    }
    Some(path[..n].to_vec())
}

/// Each file's imports of other rt2 files, as module paths.
fn imports(all: &BTreeMap<Vec<String>, Source>) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut edges = BTreeMap::new();
    for (m, s) in all {
        let mut to = BTreeSet::new();
        let inline = inline_modules(&s.code);
        for (at, p) in located_paths(&s.code) {
            let Some(abs) = absolute_in(&p, s, &enclosing(&inline, at), all) else {
                continue;
            };
            let Some(file) = defining_file(&abs, all, 0) else {
                continue;
            };
            // A file reaching into a module it declares is the parent's business: the
            // child is below it. An import of an ancestor's table of contents says nothing.
            if &file != m && !(m.starts_with(&file) && declares_only(&all[&file])) {
                to.insert(file);
            }
        }
        edges.insert(m.clone(), to);
    }
    edges
}

// ---- the dependency table

/// (module, modules of rt2 it must not use)
const FORBIDDEN: &[(&str, &[&str])] = &[
    (
        "graphview",
        &[
            "ops", "npu", "om", "lower", "exec", "capture", "cmd", "conform", "fuzz", "proto",
        ],
    ),
    // Formats use the op library's element types; `format.rs` uses nothing, so model
    // readers may name formats.
    (
        "formats",
        &[
            "npu",
            "om",
            "lower",
            "exec",
            "capture",
            "cmd",
            "conform",
            "fuzz",
            "proto",
            "graphview",
        ],
    ),
    (
        "ops",
        &[
            "npu", "om", "lower", "exec", "capture", "cmd", "conform", "fuzz", "proto",
        ],
    ),
    (
        "npu",
        &["om", "lower", "exec", "capture", "cmd", "conform", "fuzz"],
    ),
    (
        "om",
        &[
            "ops", "lower", "exec", "capture", "npu", "cmd", "conform", "fuzz",
        ],
    ),
    (
        "exec",
        &["om", "lower", "capture", "cmd", "conform", "fuzz"],
    ),
    ("lower", &["capture", "cmd", "npu", "conform", "fuzz"]),
    (
        "capture",
        &["om", "lower", "exec", "cmd", "conform", "fuzz"],
    ),
    // The fuzz targets use everything; nothing uses them.
    ("cmd", &["fuzz"]),
    ("conform", &["fuzz"]),
];

/// What `lower` may take from `ops` and `exec`, as module paths below them: the
/// registry's items (from `ops` itself), attributes and element types; the ExecuteGraph
/// and its kernel-type table, its checker, never the runtime that runs it.
const LOWER_MAY_USE: &[&[&str]] = &[
    &["ops"],
    &["ops", "attr"],
    &["ops", "dtype"],
    &["ops", "registry"],
    &["ops", "meta"],
    &["exec"],
    &["exec", "graph"],
    &["exec", "kernel_types"],
    &["exec", "check"],
];

#[test]
fn modules_respect_the_dependency_table() {
    let all = sources();
    let edges = imports(&all);
    let mut violations = Vec::new();
    for (from, to) in &edges {
        let Some(top) = from.first() else { continue };
        for target in to {
            let Some(other) = target.first() else {
                continue;
            };
            if other == top {
                continue;
            }
            let forbidden = FORBIDDEN
                .iter()
                .find(|(m, _)| m == top)
                .is_some_and(|(_, f)| f.contains(&other.as_str()));
            let narrow = top == "lower"
                && (other == "ops" || other == "exec")
                && !LOWER_MAY_USE.iter().any(|allowed| {
                    allowed
                        .iter()
                        .map(|s| s.to_string())
                        .eq(target.iter().cloned())
                });
            if forbidden || narrow {
                violations.push(format!(
                    "{} uses crate::{}",
                    rel(&all[from].path),
                    target.join("::")
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "dependency rule violations: {violations:#?}"
    );
}

/// The import cycles among the files of one top-level module: strongly connected
/// components of more than one file (Tarjan's algorithm).
fn cycles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        next: usize,
        out: Vec<Vec<Vec<String>>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a Vec<String>) {
            self.index.insert(v, (self.next, self.next));
            self.next += 1;
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in &self.edges[v] {
                // Layers are within a top-level module.
                if w.first() != v.first() || !self.edges.contains_key(w) {
                    continue;
                }
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.index[w].1.min(self.index[v].1);
                    self.index.get_mut(v).unwrap().1 = low;
                } else if self.on_stack.contains(w) {
                    let low = self.index[w].0.min(self.index[v].1);
                    self.index.get_mut(v).unwrap().1 = low;
                }
            }
            if self.index[v].0 == self.index[v].1 {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

/// The import cycles the tree still has, each a set of files to be broken into layers.
/// The list only shrinks: a cycle found must lie within one listed here (breaking a
/// listed cycle into smaller ones passes), and a listed cycle of which no part is left
/// must be deleted from the list.
const KNOWN_CYCLES: &[&[&str]] = &[];

#[test]
fn files_form_layers_within_each_module() {
    let all = sources();
    let edges = imports(&all);
    let found: Vec<Vec<String>> = cycles(&edges)
        .iter()
        .map(|c| c.iter().map(|m| rel(&all[m].path)).collect())
        .collect();
    let new: Vec<String> = found
        .iter()
        .filter(|c| {
            !KNOWN_CYCLES
                .iter()
                .any(|k| c.iter().all(|f| k.contains(&f.as_str())))
        })
        .map(|c| c.join(" <-> "))
        .collect();
    assert!(
        new.is_empty(),
        "files that import each other (directly or through others): {new:#?}"
    );
    let gone: Vec<&str> = KNOWN_CYCLES
        .iter()
        .filter(|k| {
            !found
                .iter()
                .any(|c| c.iter().all(|f| k.contains(&f.as_str())))
        })
        .map(|k| k[0])
        .collect();
    assert!(
        gone.is_empty(),
        "cycles broken (delete them from KNOWN_CYCLES): the ones starting at {gone:?}"
    );
}

#[test]
fn the_layer_check_finds_a_planted_cycle() {
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    let mut edges = BTreeMap::new();
    edges.insert(m("x::a"), BTreeSet::from([m("x::b")]));
    edges.insert(m("x::b"), BTreeSet::from([m("x::c"), m("y::z")]));
    edges.insert(m("x::c"), BTreeSet::from([m("x::a")]));
    edges.insert(m("x::d"), BTreeSet::from([m("x::a")]));
    edges.insert(m("y::z"), BTreeSet::from([m("x::d")]));
    assert_eq!(cycles(&edges), vec![vec![m("x::a"), m("x::b"), m("x::c")]]);
}

#[test]
fn super_in_an_inline_module_is_relative_to_it() {
    let code = strip(
        "fn a() {}\nmod x86 {\n    use super::a;\n    mod deep { use super::super::b; }\n}\nuse super::c;\n",
    );
    let inline = inline_modules(&code);
    let got: Vec<(Vec<String>, Vec<String>)> = located_paths(&code)
        .into_iter()
        .map(|(at, p)| (enclosing(&inline, at), p))
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            (s(&["x86"]), s(&["super", "a"])),
            (s(&["x86", "deep"]), s(&["super", "super", "b"])),
            (s(&[]), s(&["super", "c"])),
        ]
    );
}

#[test]
fn use_trees_expand_to_every_path() {
    let got = paths(&strip(
        "use crate::a::{b, c::{d, self}, e as f};\nfn g() { super::h::i(); \"crate::no\"; }",
    ));
    let want: Vec<Vec<String>> = [
        "crate::a::b",
        "crate::a::c::d",
        "crate::a::c",
        "crate::a::e",
        "super::h::i",
    ]
    .iter()
    .map(|p| p.split("::").map(String::from).collect())
    .collect();
    assert_eq!(got, want);
}

// ---- sizes

/// Files generated or kept as data, which the size limits do not apply to.
fn exempt_from_sizes(s: &Source) -> bool {
    s.module.first().is_some_and(|m| m == "proto")
}

/// Files still over the limit, with the most lines each may have until it is split. The
/// list only shrinks: a file under the limit must be deleted from it.
const KNOWN_LONG_FILES: &[(&str, usize)] = &[];

#[test]
fn no_source_file_over_1500_lines() {
    const LIMIT: usize = 1500;
    let all = sources();
    let mut problems = Vec::new();
    for s in all.values().filter(|s| !exempt_from_sizes(s)) {
        let n = std::fs::read_to_string(&s.path).unwrap().lines().count();
        let path = rel(&s.path);
        let ceiling = KNOWN_LONG_FILES
            .iter()
            .find(|(p, _)| *p == path)
            .map_or(LIMIT, |&(_, c)| c);
        if n > ceiling {
            problems.push(format!("{path}: {n} lines (at most {ceiling})"));
        } else if n <= LIMIT && ceiling > LIMIT {
            problems.push(format!(
                "{path}: {n} lines; delete it from KNOWN_LONG_FILES"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "source files over {LIMIT} lines: {problems:#?}"
    );
}

/// Each `fn` with a body in the code, as (name, first line, line count).
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = code[from..].find("fn ") {
        let at = from + p;
        from = at + 3;
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body opens at the first `{` outside parentheses, brackets and angle
        // brackets of the signature; a `;` first means a declaration without a body.
        let mut depth = 0i32;
        let mut open = None;
        for (i, c) in code[at..].bytes().enumerate() {
            match c {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b'{' if depth == 0 => {
                    open = Some(at + i);
                    break;
                }
                b';' if depth == 0 => break,
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let close = closing_brace(code, open).unwrap_or(code.len());
        let first = code[..at].lines().count() + 1;
        let lines = code[at..=close.min(code.len() - 1)].lines().count();
        out.push((name, first, lines));
    }
    out
}

/// Functions still over the limit: (file, function, the most lines it may have until it
/// is split). The list only shrinks.
const KNOWN_LONG_FUNCTIONS: &[(&str, &str, usize)] = &[];

#[test]
fn no_function_over_200_lines() {
    const LIMIT: usize = 200;
    let all = sources();
    let mut problems = Vec::new();
    let mut seen = Vec::new();
    for s in all.values().filter(|s| !exempt_from_sizes(s)) {
        let path = rel(&s.path);
        for (name, line, n) in functions(&s.code) {
            let known = KNOWN_LONG_FUNCTIONS
                .iter()
                .find(|(p, f, _)| *p == path && *f == name);
            let ceiling = known.map_or(LIMIT, |&(_, _, c)| c);
            if n > ceiling {
                problems.push(format!(
                    "{path}:{line}: fn {name}: {n} lines (at most {ceiling})"
                ));
            } else if n > LIMIT {
                seen.push((path.clone(), name));
            }
        }
    }
    for (p, f, _) in KNOWN_LONG_FUNCTIONS {
        if !seen.iter().any(|(sp, sf)| sp == p && sf == f) {
            problems.push(format!(
                "{p}: fn {f} is within the limit; delete it from KNOWN_LONG_FUNCTIONS"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "functions over {LIMIT} lines: {problems:#?}"
    );
}

#[test]
fn the_function_measure_counts_a_body() {
    let code = strip("fn a(x: [u8; 2]) -> u8 {\n  if x[0] > 0 { 1 } else { 2 }\n}\nfn b();\n");
    assert_eq!(functions(&code), vec![("a".to_string(), 1, 3)]);
}
