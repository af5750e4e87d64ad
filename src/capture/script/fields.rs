//! Reading one TOML table of a script: [`Fields`], its entries with what to call the
//! table in messages, and typed reads of a field (names, integers in range, booleans,
//! numbers, arrays, spellings of an enum) that fail with the field's position.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeArray, DeInteger, DeTable, DeValue};

use crate::capture::types::Scalar;

use super::error::{ScriptError, error_at, shown, type_phrase};

/// A TOML value with its byte span in the text.
pub(super) type Value<'i> = Spanned<DeValue<'i>>;

/// A TOML integer of any radix. i128 holds every u64, so `max_while_iterations` can use
/// the whole of its range; longer literals are out of range.
pub(super) fn int_value(i: &DeInteger<'_>) -> Option<i128> {
    i128::from_str_radix(i.as_str(), i.radix()).ok()
}

/// The entries of one TOML table being read, with what to call it in messages and where to
/// report a field it lacks.
pub(super) struct Fields<'a, 'i> {
    pub(super) text: &'a str,
    pub(super) table: &'a DeTable<'i>,
    /// Byte offset for "missing field" errors: the table's header or key.
    pub(super) at: usize,
    /// "a `launch` step", "buffer `x`", ...
    pub(super) what: &'a str,
}

impl<'a, 'i> Fields<'a, 'i> {
    pub(super) fn err(&self, offset: usize, message: String) -> ScriptError {
        error_at(self.text, offset, message)
    }

    /// Refuses the first key (in file order) that is not in `allowed`.
    pub(super) fn check_known(&self, allowed: &[&str]) -> Result<(), ScriptError> {
        let unknown = self
            .table
            .iter()
            .filter(|(k, _)| !allowed.contains(&k.get_ref().as_ref()))
            .min_by_key(|(k, _)| k.span().start);
        match unknown {
            Some((k, _)) => Err(self.err(
                k.span().start,
                format!(
                    "unknown field `{}` in {}; expected one of: {}",
                    shown(k.get_ref()),
                    self.what,
                    allowed.join(", ")
                ),
            )),
            None => Ok(()),
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<&'a Value<'i>> {
        self.table.get(key)
    }

    pub(super) fn missing(&self, key: &str) -> ScriptError {
        self.err(self.at, format!("missing field `{key}` in {}", self.what))
    }

    pub(super) fn wrong_type(&self, label: &str, v: &Value<'_>, expected: &str) -> ScriptError {
        self.err(
            v.span().start,
            format!(
                "{label} must be {expected}, not {}",
                type_phrase(v.get_ref())
            ),
        )
    }

    pub(super) fn string(&self, key: &str) -> Result<Option<(&'a str, Range<usize>)>, ScriptError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                DeValue::String(s) => Ok(Some((s.as_ref(), v.span()))),
                _ => Err(self.wrong_type(&format!("`{key}`"), v, "a string")),
            },
        }
    }

    /// A name: a non-empty string.
    pub(super) fn opt_name(
        &self,
        key: &str,
    ) -> Result<Option<(String, Range<usize>)>, ScriptError> {
        match self.string(key)? {
            None => Ok(None),
            Some(("", span)) => Err(self.err(span.start, format!("`{key}` must not be empty"))),
            Some((s, span)) => Ok(Some((s.to_owned(), span))),
        }
    }

    pub(super) fn name(&self, key: &str) -> Result<(String, Range<usize>), ScriptError> {
        self.opt_name(key)?.ok_or_else(|| self.missing(key))
    }

    /// An integer field of at least `min` that fits `T`.
    pub(super) fn int<T: TryFrom<i128>>(
        &self,
        key: &str,
        min: i128,
    ) -> Result<Option<(T, Range<usize>)>, ScriptError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let DeValue::Integer(i) = v.get_ref() else {
            return Err(self.wrong_type(&format!("`{key}`"), v, "an integer"));
        };
        let at = v.span().start;
        let n = int_value(i).ok_or_else(|| self.err(at, format!("`{key}` is out of range")))?;
        if n < min {
            return Err(self.err(at, format!("`{key}` must be at least {min}, not {n}")));
        }
        let t = T::try_from(n).map_err(|_| self.err(at, format!("`{key}` is too large: {n}")))?;
        Ok(Some((t, v.span())))
    }

    pub(super) fn bool(&self, key: &str) -> Result<Option<bool>, ScriptError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                DeValue::Boolean(b) => Ok(Some(*b)),
                _ => Err(self.wrong_type(&format!("`{key}`"), v, "a boolean")),
            },
        }
    }

    /// A TOML integer (as [`Scalar::Int`]) or float (as [`Scalar::Float`]).
    pub(super) fn scalar_of(&self, label: &str, v: &Value<'_>) -> Result<Scalar, ScriptError> {
        let at = v.span().start;
        match v.get_ref() {
            DeValue::Integer(i) => int_value(i)
                .and_then(|n| i64::try_from(n).ok())
                .map(Scalar::Int)
                .ok_or_else(|| self.err(at, format!("{label} does not fit a 64-bit integer"))),
            DeValue::Float(f) => match f.as_str().parse::<f64>() {
                // Rust parses an overflowing literal as infinity; TOML means it as an error.
                Ok(x) if x.is_finite() || f.as_str().contains("inf") || x.is_nan() => {
                    Ok(Scalar::Float(x))
                }
                _ => Err(self.err(at, format!("{label} is not a representable float"))),
            },
            _ => Err(self.wrong_type(label, v, "a number")),
        }
    }

    pub(super) fn array(
        &self,
        key: &str,
    ) -> Result<Option<(&'a DeArray<'i>, Range<usize>)>, ScriptError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                DeValue::Array(a) => Ok(Some((a, v.span()))),
                _ => Err(self.wrong_type(&format!("`{key}`"), v, "an array")),
            },
        }
    }

    /// A string field spelled as one of `names`, turned into `T` by `from_name`.
    pub(super) fn choice<T>(
        &self,
        key: &str,
        from_name: fn(&str) -> Option<T>,
        names: &[&str],
    ) -> Result<Option<T>, ScriptError> {
        let Some((s, span)) = self.string(key)? else {
            return Ok(None);
        };
        from_name(s).map(Some).ok_or_else(|| {
            self.err(
                span.start,
                format!(
                    "unknown `{key}` `{}`; expected one of: {}",
                    shown(s),
                    names.join(", ")
                ),
            )
        })
    }

    pub(super) fn required_choice<T>(
        &self,
        key: &str,
        from_name: fn(&str) -> Option<T>,
        names: &[&str],
    ) -> Result<T, ScriptError> {
        self.choice(key, from_name, names)?
            .ok_or_else(|| self.missing(key))
    }
}
