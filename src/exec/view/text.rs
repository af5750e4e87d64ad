//! The text form of an ExecuteGraph: the protobuf text format of the `.exeg` file message,
//! which reads back exactly.

use prost::Message;
use prost_reflect::text_format::FormatOptions;
use prost_reflect::{DynamicMessage, MessageDescriptor};

use crate::exec::exeg::{ExegError, from_file, to_file};
use crate::exec::graph::ExecuteGraph;
use crate::proto::exeg as pb;

/// The descriptor of `rt2.exeg.ExecuteGraphFile`. build.rs compiles proto/exeg.proto into
/// the same descriptor set as the generated code, so the lookup depends on the build, never
/// on input.
fn file_descriptor() -> MessageDescriptor {
    crate::proto::descriptor_pool()
        .get_message_by_name("rt2.exeg.ExecuteGraphFile")
        .expect("build.rs puts exeg.proto in the descriptor set")
}

/// The protobuf text format of the `.exeg` file message, pretty-printed with fields in
/// schema order; [`from_text`] reads it back to an equal graph.
pub fn to_text(eg: &ExecuteGraph) -> String {
    let file = to_file(eg);
    let mut dm = DynamicMessage::new(file_descriptor());
    // Re-decoding our own encoding cannot fail: the descriptor is the schema prost-build
    // generated `file` from.
    if dm.merge(file.encode_to_vec().as_slice()).is_err() {
        debug_assert!(false, "descriptor and generated type disagree");
        return String::new();
    }
    let opts = FormatOptions::new()
        .pretty(true)
        .print_message_fields_in_index_order(true);
    let mut text = dm.to_text_format_with_options(&opts);
    text.push('\n');
    text
}

/// Reads the text form back, runs the same conversion and checks as [`crate::exec::decode`]
/// does. Syntax errors carry the 1-based line and column.
pub fn from_text(text: &str) -> Result<ExecuteGraph, ExegError> {
    // prost-reflect's text parser recurses once per nesting level without a limit; bound it
    // first so that no input can overflow the stack. The binary decoder's own limit (100
    // messages) rejects anything deeper than a real graph needs anyway.
    if let Some(offset) = too_deep(text, MAX_TEXT_DEPTH) {
        let (line, column) = line_column(text, offset);
        return Err(ExegError::TooDeep {
            line,
            column,
            limit: MAX_TEXT_DEPTH,
        });
    }
    let dm = DynamicMessage::parse_text_format(file_descriptor(), text).map_err(|source| {
        let (line, column) = error_position(text, &source);
        ExegError::Text {
            line,
            column,
            source,
        }
    })?;
    let file = dm
        .transcode_to::<pb::ExecuteGraphFile>()
        .map_err(|source| ExegError::Malformed { source })?;
    from_file(file)
}

/// Brackets (`{`, `<`, `[`) the text form may nest.
const MAX_TEXT_DEPTH: usize = 400;

/// Byte offset of the first bracket nested deeper than `limit`, skipping string literals
/// and `#` comments.
fn too_deep(text: &str, limit: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'<' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b'}' | b'>' | b']' => depth = depth.saturating_sub(1),
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q && bytes[i] != b'\n' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Line and column (1-based, columns in characters) of a text-format parse error: the
/// start of its first labelled span (prost-reflect reports spans as a miette diagnostic),
/// or the end of the text for "end of input" errors, which have none.
fn error_position(text: &str, err: &prost_reflect::text_format::ParseError) -> (usize, usize) {
    use miette::Diagnostic;
    let offset = err
        .labels()
        .and_then(|mut l| l.next())
        .map(|l| l.offset())
        .unwrap_or(text.len());
    line_column(text, offset)
}

/// 1-based line and character column of byte `offset` in `text` (clamped to the text).
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::testdata::sample;
    use proptest::prelude::*;

    #[test]
    fn text_round_trips_exactly() {
        let eg = sample();
        let text = to_text(&eg);
        assert!(
            text.starts_with("magic: \"rt2.exeg\"\nformat_version: 3\n"),
            "{text}"
        );
        assert!(text.contains("class: KERNEL_CLASS_LAUNCH"));
        assert_eq!(from_text(&text).unwrap(), eg);
        assert_eq!(to_text(&eg), text);
        assert_eq!(to_text(&from_text(&text).unwrap()), text);
        let empty = ExecuteGraph::default();
        assert_eq!(from_text(&to_text(&empty)).unwrap(), empty);
    }

    #[test]
    fn text_may_omit_the_end_marker() {
        let text = "magic: \"rt2.exeg\"\nformat_version: 2\nname: \"m\"\n";
        assert_eq!(from_text(text).unwrap().name, "m");
    }

    #[test]
    fn text_syntax_errors_give_line_and_column() {
        let text = "magic: \"rt2.exeg\"\nformat_version: 2\nmain {\n  nodes { nme: \"x\" }\n}\n";
        let err = from_text(text).unwrap_err();
        assert!(
            matches!(
                err,
                ExegError::Text {
                    line: 4,
                    column: 11,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "text form line 4, column 11: field 'nme' not found for message 'rt2.exeg.Node'"
        );
        let err = from_text("magic: \"rt2.exeg\"\nmain {\n").unwrap_err();
        assert!(
            matches!(
                err,
                ExegError::Text {
                    line: 3,
                    column: 1,
                    ..
                }
            ),
            "{err:?}"
        );
        let err = from_text("magic: \"rt2.é\" format_version: x").unwrap_err();
        assert!(
            matches!(
                err,
                ExegError::Text {
                    line: 1,
                    column: 32,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn text_runs_the_checks() {
        let mut eg = sample();
        eg.main.nodes[4].kernel = "Bogus".into();
        let err = from_text(&to_text(&eg)).unwrap_err();
        assert!(matches!(&err, ExegError::Invalid { problems } if problems.len() == 1));
        let err = from_text("format_version: 2").unwrap_err();
        assert!(matches!(err, ExegError::BadMagic { .. }));
        let err = from_text("magic: \"rt2.exeg\"").unwrap_err();
        assert!(matches!(err, ExegError::UnsupportedVersion { found: 0 }));
    }

    #[test]
    fn deep_text_is_refused_before_parsing() {
        let mut text = String::from("magic: \"rt2.exeg\" format_version: 2 main {");
        for _ in 0..10_000 {
            text.push_str(" nodes { subgraphs {");
        }
        let err = from_text(&text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "text form line 1, column 4042: nesting deeper than 400 levels"
        );
        // Brackets inside strings and comments do not count.
        let quiet = format!(
            "magic: \"rt2.exeg{}\" # {}\nformat_version: 2",
            "{".repeat(500),
            "[".repeat(500)
        );
        assert!(matches!(from_text(&quiet), Err(ExegError::BadMagic { .. })));
    }

    #[test]
    fn line_column_counts_characters() {
        assert_eq!(line_column("ab\ncé d", 0), (1, 1));
        assert_eq!(line_column("ab\ncé d", 3), (2, 1));
        assert_eq!(line_column("ab\ncé d", 6), (2, 3));
        assert_eq!(line_column("ab\ncé d", 5), (2, 2)); // inside é: its start
        assert_eq!(line_column("ab", 99), (1, 3));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_text_never_panics(s in "\\PC{0,200}") {
            let _ = from_text(&s);
        }

        #[test]
        fn mutated_text_never_panics(at in any::<prop::sample::Index>(), c in any::<char>()) {
            let mut text: Vec<char> = to_text(&sample()).chars().collect();
            let i = at.index(text.len());
            text[i] = c;
            let _ = from_text(&text.into_iter().collect::<String>());
        }
    }
}
