//! [`ScriptError`], why a script is invalid and where, and the pieces every message is
//! made of: positions as 1-based line and column, user strings shown on one line, and
//! the names of TOML value types.

use toml::de::DeValue;

/// Why a script is invalid, and where: 1-based line and column (in characters) of the
/// offending key or value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ScriptError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// The error at byte `offset` of `text`. Offsets past the end (toml reports some errors
/// at the end of input) count as columns past the last line's end.
pub(super) fn error_at(text: &str, offset: usize, message: String) -> ScriptError {
    let (line, column) = position(text, offset);
    ScriptError {
        line,
        column,
        message,
    }
}

/// 1-based line and column (in characters, as toml counts them) of a byte offset.
pub(super) fn position(text: &str, offset: usize) -> (usize, usize) {
    let mut at = offset.min(text.len());
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = text.get(..at).unwrap_or("");
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let column = before.get(line_start..).map_or(0, |s| s.chars().count())
        + offset.saturating_sub(text.len())
        + 1;
    (line, column)
}

/// Where a text's lines start, so that the line of an offset is a binary search. Every
/// step and buffer of a script records its line: counting the newlines before each one
/// from the start of the text would make parsing quadratic in the script's length.
pub(super) struct Lines {
    /// Byte offset of each line's first byte, ascending; the first is 0.
    starts: Vec<usize>,
}

impl Lines {
    pub(super) fn new(text: &str) -> Lines {
        let newlines = text.bytes().enumerate().filter(|&(_, b)| b == b'\n');
        Lines {
            starts: std::iter::once(0)
                .chain(newlines.map(|(i, _)| i + 1))
                .collect(),
        }
    }

    /// The 1-based line of byte `offset`, as [`position`] counts it (an offset past the
    /// end is on the last line).
    pub(super) fn line(&self, offset: usize) -> usize {
        // The lines starting at or before the offset: line 1's start, and one per newline
        // before the offset. (A newline is one byte and a character boundary, so an
        // offset inside a character counts the newlines before that character.)
        self.starts.partition_point(|&s| s <= offset)
    }
}

/// "a string", "an integer", ...: how a wrong value is named in messages.
pub(super) fn type_phrase(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// A user's string as shown in a message: control characters escaped, so a message stays
/// one line.
pub(super) fn shown(s: &str) -> String {
    s.escape_debug().to_string()
}
