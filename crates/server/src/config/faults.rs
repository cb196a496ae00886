//! A config file's faults: each one ([`LoadError`]: file, line, column, key, and a message
//! that says the fix), all of them together ([`ConfigFaults`]), and how a section is read so
//! that one bad key does not hide the next ([`read_section`]).

use serde::Serialize;
use serde::de::{DeserializeOwned, IntoDeserializer};
use toml::Spanned;
use toml::de::DeValue;

use super::Text;

/// One fault: where it is and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{}", self.line())]
pub struct LoadError {
    /// The config file, or `(embedded default)`.
    pub file: String,
    /// 1-based; absent when the fault has no one place (a file that cannot be read).
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// The dotted key at fault, when there is one (`server.listen`).
    pub key: Option<String>,
    /// What is wrong and the fix.
    pub message: String,
}

impl LoadError {
    pub(super) fn new(
        file: impl std::fmt::Display,
        position: Option<(usize, usize)>,
        key: Option<String>,
        message: impl Into<String>,
    ) -> Self {
        LoadError {
            file: file.to_string(),
            line: position.map(|(l, _)| l),
            column: position.map(|(_, c)| c),
            key,
            message: message.into(),
        }
    }

    /// `file:line:col: key: message`, as every fault is printed.
    fn line(&self) -> String {
        let position = match (self.line, self.column) {
            (Some(l), Some(c)) => format!(":{l}:{c}"),
            _ => String::new(),
        };
        let key = self
            .key
            .as_ref()
            .map(|k| format!("{k}: "))
            .unwrap_or_default();
        format!("{}{position}: {key}{}", self.file, self.message)
    }
}

/// Every fault of a config file, in the order they appear in it. A load fails with all of
/// them, so one edit can fix them all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ConfigFaults(pub Vec<LoadError>);

impl std::fmt::Display for ConfigFaults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for ConfigFaults {}

impl From<LoadError> for ConfigFaults {
    fn from(e: LoadError) -> Self {
        ConfigFaults(vec![e])
    }
}

impl ConfigFaults {
    pub fn first(&self) -> Option<&LoadError> {
        self.0.first()
    }
}

/// The faults found so far while a file is read.
#[derive(Debug, Default)]
pub(super) struct Faults(Vec<LoadError>);

impl Faults {
    pub(super) fn push(&mut self, e: LoadError) {
        if !self.0.contains(&e) {
            self.0.push(e);
        }
    }

    /// The value, or `None` with its fault kept.
    pub(super) fn take<T>(&mut self, r: Result<T, LoadError>) -> Option<T> {
        r.map_err(|e| self.push(e)).ok()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// All of them, in file order (those without a place last).
    pub(super) fn into_faults(self) -> ConfigFaults {
        let mut list = self.0;
        list.sort_by_key(|e| (e.line.is_none(), e.line, e.column));
        ConfigFaults(list)
    }
}

/// Reads one top-level section as `T`. On a fault the key at fault is taken out and the
/// section read again, so every bad key of it is reported, not only the first. What is left is
/// returned with the dotted paths of what was taken out ([`Damaged`]): a section's own checks
/// skip what a taken-out key would have changed, so they never report a fault that is only the
/// echo of another (a default put in for a misspelt value). A field reported missing only
/// because its bad value was taken out is not reported again.
pub(super) fn read_section<T: DeserializeOwned>(
    t: &Text<'_>,
    value: &Spanned<DeValue<'_>>,
    faults: &mut Faults,
    damaged: &mut Damaged,
) -> Option<T> {
    let mut value = value.clone();
    value.get_mut().make_owned();
    loop {
        let e = match T::deserialize(value.clone().into_deserializer()) {
            Ok(v) => return Some(v),
            Err(e) => e,
        };
        let echo = match (missing_field(e.message()), e.span()) {
            (Some(field), Some(span)) => damaged.holds_field_of(t, span.start, field),
            _ => false,
        };
        if !echo {
            faults.push(t.de(&e));
        }
        match e.span().and_then(|s| take_out(&mut value, s.start)) {
            Some(at) => damaged.insert(t, at),
            None => return None,
        }
    }
}

/// The dotted paths (`agents.a.backend`, `schedules[0].cron`) of keys taken out of the file's
/// sections because their values were at fault.
#[derive(Debug, Default)]
pub(super) struct Damaged(std::collections::BTreeSet<String>);

impl Damaged {
    /// Records the key (or array element) whose name or value starts at `offset`.
    fn insert(&mut self, t: &Text<'_>, offset: usize) {
        if let Some(path) = super::position::path_at(t.text, offset) {
            self.0.insert(path);
        }
    }

    /// Whether `field` of the table at `offset` was taken out.
    fn holds_field_of(&self, t: &Text<'_>, offset: usize, field: &str) -> bool {
        let table = super::position::path_at(t.text, offset).unwrap_or_default();
        self.0.iter().any(|p| {
            p.rsplit_once('.').is_some_and(|(parent, name)| {
                name == field && (table.starts_with(parent) || parent.starts_with(&table))
            })
        })
    }

    /// Whether anything at or under `path` (a section, `agents.a`) was taken out.
    pub(super) fn under(&self, path: &str) -> bool {
        self.0.iter().any(|p| {
            p == path
                || p.strip_prefix(path)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
    }
}

/// The field serde's "missing field `x`" names.
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// Takes out the deepest key (or array element) whose key or value holds `offset`; where the
/// taken-out key (or element) starts. Every table is searched, not only those whose span
/// holds the offset: a `[a.b]` table's span is its header, not the keys under it.
fn take_out(value: &mut Spanned<DeValue<'_>>, offset: usize) -> Option<usize> {
    let holds = |span: std::ops::Range<usize>| {
        span.start <= offset && offset < span.end.max(span.start + 1)
    };
    match value.get_mut() {
        DeValue::Table(table) => {
            let keys: Vec<_> = table.keys().cloned().collect();
            for key in &keys {
                if let Some(deeper) = table.get_mut(key).and_then(|v| take_out(v, offset)) {
                    return Some(deeper);
                }
            }
            let key = keys
                .into_iter()
                .find(|k| holds(k.span()) || table.get(k).is_some_and(|v| holds(v.span())))?;
            table.remove(&key);
            Some(key.span().start)
        }
        DeValue::Array(items) => {
            for item in items.iter_mut() {
                if let Some(deeper) = take_out(item, offset) {
                    return Some(deeper);
                }
            }
            let i = items.iter().position(|v| holds(v.span()))?;
            let at = items.get(i).map(|v| v.span().start)?;
            let mut rest = toml::de::DeArray::new();
            for (j, v) in items.iter().enumerate() {
                if j != i {
                    rest.push(v.clone());
                }
            }
            *items = rest;
            Some(at)
        }
        _ => None,
    }
}
