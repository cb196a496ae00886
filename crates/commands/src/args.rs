//! One argument schema per command: it parses command text (`runs list --status all`), parses
//! a JSON object (structured surfaces), renders usage, and renders a JSON Schema (MCP tools).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// How an argument is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// In order, by position. `rest` takes every remaining word.
    Positional { rest: bool },
    /// `--name` alone.
    Flag,
    /// `--name VALUE` or `--name=VALUE`.
    Value,
}

/// What a value must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {
    Text,
    /// An integer in `[min, max]`.
    Int {
        min: i64,
        max: i64,
    },
    /// One of these words.
    Choice(&'static [&'static str]),
}

#[derive(Debug, Clone)]
pub struct ArgSpec {
    pub name: &'static str,
    pub kind: ArgKind,
    pub ty: ArgType,
    pub value_name: &'static str,
    pub help: &'static str,
    pub required: bool,
    /// Arguments sharing a group exclude each other (`--channel C | --user | --org`).
    pub group: Option<&'static str>,
}

impl ArgSpec {
    pub fn positional(name: &'static str, value_name: &'static str, help: &'static str) -> Self {
        ArgSpec {
            name,
            kind: ArgKind::Positional { rest: false },
            ty: ArgType::Text,
            value_name,
            help,
            required: true,
            group: None,
        }
    }

    pub fn rest(name: &'static str, value_name: &'static str, help: &'static str) -> Self {
        ArgSpec {
            kind: ArgKind::Positional { rest: true },
            ..Self::positional(name, value_name, help)
        }
    }

    pub fn flag(name: &'static str, help: &'static str) -> Self {
        ArgSpec {
            name,
            kind: ArgKind::Flag,
            ty: ArgType::Text,
            value_name: "",
            help,
            required: false,
            group: None,
        }
    }

    pub fn value(name: &'static str, value_name: &'static str, help: &'static str) -> Self {
        ArgSpec {
            name,
            kind: ArgKind::Value,
            ty: ArgType::Text,
            value_name,
            help,
            required: false,
            group: None,
        }
    }

    pub fn int(mut self, min: i64, max: i64) -> Self {
        self.ty = ArgType::Int { min, max };
        self
    }

    pub fn choices(mut self, words: &'static [&'static str]) -> Self {
        self.ty = ArgType::Choice(words);
        self
    }

    pub fn in_group(mut self, group: &'static str) -> Self {
        self.group = Some(group);
        self
    }

    fn shown(&self) -> String {
        let value = match self.ty {
            ArgType::Choice(words) => words.join("|"),
            _ => self.value_name.to_owned(),
        };
        match self.kind {
            ArgKind::Positional { rest: false } => format!("<{}>", self.value_name),
            ArgKind::Positional { rest: true } => format!("<{}…>", self.value_name),
            ArgKind::Flag => format!("--{}", self.name),
            ArgKind::Value => format!("--{} {value}", self.name),
        }
    }
}

/// A parsed argument value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgValue {
    Text(String),
    Int(i64),
    Flag,
}

/// Parsed arguments, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args(BTreeMap<&'static str, ArgValue>);

impl Args {
    pub fn text(&self, name: &str) -> Option<&str> {
        match self.0.get(name) {
            Some(ArgValue::Text(s)) => Some(s),
            _ => None,
        }
    }

    pub fn int(&self, name: &str) -> Option<i64> {
        match self.0.get(name) {
            Some(ArgValue::Int(i)) => Some(*i),
            _ => None,
        }
    }

    pub fn flag(&self, name: &str) -> bool {
        matches!(self.0.get(name), Some(ArgValue::Flag))
    }
}

/// Why arguments do not parse. Rendered with the command's usage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error("unknown option `{0}`")]
    UnknownOption(String),
    #[error("`--{0}` needs a value")]
    MissingValue(String),
    #[error("`--{0}` takes no value")]
    UnexpectedValue(String),
    #[error("missing <{0}>")]
    MissingRequired(String),
    #[error("unexpected `{0}`")]
    Unexpected(String),
    #[error("`--{0}` is given twice")]
    Twice(String),
    #[error("`{name}`: `{value}` is not one of {choices}")]
    NotAChoice {
        name: String,
        value: String,
        choices: String,
    },
    #[error("`{name}`: `{value}` is not a whole number from {min} to {max}")]
    NotAnInt {
        name: String,
        value: String,
        min: i64,
        max: i64,
    },
    #[error("`--{0}` and `--{1}` exclude each other")]
    Exclusive(String, String),
    #[error("`{0}` must be a {1}")]
    WrongJsonType(String, &'static str),
    #[error("command text contains control characters")]
    ControlCharacters,
    #[error("an unclosed quote")]
    UnclosedQuote,
}

#[derive(Debug, Clone, Default)]
pub struct ArgsSchema {
    pub args: Vec<ArgSpec>,
}

/// Control characters other than newline and tab (ANSI escapes, NUL, bidi controls are C0/C1
/// or format characters): refused in command text.
pub fn has_control(text: &str) -> bool {
    text.chars().any(|c| {
        (c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    })
}

/// Splits command text into words: whitespace separates, quotes group, no control characters.
///
/// A `"` opens a quote anywhere. An apostrophe opens a quote only at the start of a word, and
/// inside a `'`-quote closes it only where a word may end (before whitespace, a quote or the
/// end), so `don't` and `'don't stop'` are words as a person wrote them.
pub fn words(text: &str) -> Result<Vec<String>, ArgError> {
    if has_control(text) {
        return Err(ArgError::ControlCharacters);
    }
    let chars: Vec<char> = text.chars().collect();
    let ends_word = |i: usize| {
        chars
            .get(i + 1)
            .is_none_or(|c| c.is_whitespace() || matches!(c, '\'' | '"'))
    };
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    for (i, &c) in chars.iter().enumerate() {
        match (quote, c) {
            (Some('"'), '"') => quote = None,
            (Some('\''), '\'') if ends_word(i) => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"') => {
                quote = Some('"');
                in_word = true;
            }
            (None, '\'') if !in_word => {
                quote = Some('\'');
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(ArgError::UnclosedQuote);
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

impl ArgsSchema {
    pub fn new(args: Vec<ArgSpec>) -> Self {
        ArgsSchema { args }
    }

    /// The arguments, in order (for a shell's completions).
    pub fn specs(&self) -> &[ArgSpec] {
        &self.args
    }

    fn check_value(spec: &ArgSpec, value: String) -> Result<ArgValue, ArgError> {
        match spec.ty {
            ArgType::Text => Ok(ArgValue::Text(value)),
            ArgType::Choice(words) if words.contains(&value.as_str()) => Ok(ArgValue::Text(value)),
            ArgType::Choice(words) => Err(ArgError::NotAChoice {
                name: spec.name.into(),
                value,
                choices: words.join(", "),
            }),
            ArgType::Int { min, max } => match value.parse::<i64>() {
                Ok(i) if (min..=max).contains(&i) => Ok(ArgValue::Int(i)),
                _ => Err(ArgError::NotAnInt {
                    name: spec.name.into(),
                    value,
                    min,
                    max,
                }),
            },
        }
    }

    fn insert(&self, args: &mut Args, spec: &ArgSpec, value: ArgValue) -> Result<(), ArgError> {
        if args.0.contains_key(spec.name) {
            return Err(ArgError::Twice(spec.name.into()));
        }
        if let Some(group) = spec.group {
            let other = self.args.iter().find(|o| {
                o.group == Some(group) && o.name != spec.name && args.0.contains_key(o.name)
            });
            if let Some(other) = other {
                return Err(ArgError::Exclusive(other.name.into(), spec.name.into()));
            }
        }
        args.0.insert(spec.name, value);
        Ok(())
    }

    fn finish(&self, args: Args) -> Result<Args, ArgError> {
        for spec in &self.args {
            if spec.required && !args.0.contains_key(spec.name) {
                return Err(ArgError::MissingRequired(spec.value_name.into()));
            }
        }
        Ok(args)
    }

    /// Parses the words after the command's own words.
    pub fn parse_words(&self, words: &[String]) -> Result<Args, ArgError> {
        let mut args = Args::default();
        let mut positionals = self
            .args
            .iter()
            .filter(|a| matches!(a.kind, ArgKind::Positional { .. }));
        let mut i = 0;
        while let Some(word) = words.get(i) {
            i += 1;
            if let Some(option) = word.strip_prefix("--") {
                let (name, inline) = match option.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_owned())),
                    None => (option, None),
                };
                let spec = self
                    .args
                    .iter()
                    .find(|a| a.name == name && !matches!(a.kind, ArgKind::Positional { .. }))
                    .ok_or_else(|| ArgError::UnknownOption(word.clone()))?;
                let value = match (spec.kind, inline) {
                    (ArgKind::Flag, None) => ArgValue::Flag,
                    (ArgKind::Flag, Some(_)) => return Err(ArgError::UnexpectedValue(name.into())),
                    (_, Some(v)) => Self::check_value(spec, v)?,
                    (_, None) => {
                        let v = words
                            .get(i)
                            .filter(|v| !v.starts_with("--"))
                            .ok_or_else(|| ArgError::MissingValue(name.into()))?;
                        i += 1;
                        Self::check_value(spec, v.clone())?
                    }
                };
                self.insert(&mut args, spec, value)?;
            } else {
                let spec = positionals
                    .next()
                    .ok_or_else(|| ArgError::Unexpected(word.clone()))?;
                let value = if matches!(spec.kind, ArgKind::Positional { rest: true }) {
                    let rest: Vec<&str> = std::iter::once(word.as_str())
                        .chain(words.iter().skip(i).map(String::as_str))
                        .collect();
                    i = words.len();
                    rest.join(" ")
                } else {
                    word.clone()
                };
                let value = Self::check_value(spec, value)?;
                self.insert(&mut args, spec, value)?;
            }
        }
        self.finish(args)
    }

    /// A query string's `name=value` pairs (already percent-decoded) as the JSON object
    /// [`ArgsSchema::parse_json`] takes: a flag's value is `true`/`false` (or empty, for
    /// `?all`), anything else is text. Unknown names and repeated names are errors.
    pub fn object_from_query(
        &self,
        pairs: &[(String, String)],
    ) -> Result<Map<String, Value>, ArgError> {
        let mut object = Map::new();
        for (name, value) in pairs {
            let spec = self
                .args
                .iter()
                .find(|a| a.name == name)
                .ok_or_else(|| ArgError::UnknownOption(name.clone()))?;
            let json = match spec.kind {
                ArgKind::Flag => match value.as_str() {
                    "" | "true" | "1" => Value::Bool(true),
                    "false" | "0" => Value::Bool(false),
                    _ => return Err(ArgError::WrongJsonType(name.clone(), "boolean")),
                },
                _ => Value::String(value.clone()),
            };
            if object.insert(name.clone(), json).is_some() {
                return Err(ArgError::Twice(name.clone()));
            }
        }
        Ok(object)
    }

    /// Parses a JSON object keyed by argument name.
    pub fn parse_json(&self, object: &Map<String, Value>) -> Result<Args, ArgError> {
        let mut args = Args::default();
        for (key, value) in object {
            let spec = self
                .args
                .iter()
                .find(|a| a.name == key)
                .ok_or_else(|| ArgError::UnknownOption(key.clone()))?;
            let parsed = match (spec.kind, spec.ty, value) {
                (ArgKind::Flag, _, Value::Bool(false)) => continue,
                (ArgKind::Flag, _, Value::Bool(true)) => ArgValue::Flag,
                (ArgKind::Flag, _, _) => {
                    return Err(ArgError::WrongJsonType(key.clone(), "boolean"));
                }
                (_, ArgType::Int { .. }, Value::Number(n)) => {
                    Self::check_value(spec, n.to_string())?
                }
                (_, ArgType::Int { .. }, Value::String(s)) => Self::check_value(spec, s.clone())?,
                (_, ArgType::Int { .. }, _) => {
                    return Err(ArgError::WrongJsonType(key.clone(), "number"));
                }
                (_, _, Value::String(s)) => Self::check_value(spec, s.clone())?,
                (_, _, _) => return Err(ArgError::WrongJsonType(key.clone(), "string")),
            };
            self.insert(&mut args, spec, parsed)?;
        }
        self.finish(args)
    }

    /// `runs list [--status live|finished|all] [--limit N]`, then one line per argument.
    pub fn usage(&self, command_words: &str) -> String {
        let mut line = format!("usage: {command_words}");
        for a in &self.args {
            let shown = a.shown();
            line.push(' ');
            line.push_str(&if a.required {
                shown
            } else {
                format!("[{shown}]")
            });
        }
        let width = self
            .args
            .iter()
            .map(|a| a.shown().chars().count())
            .max()
            .unwrap_or(0);
        for a in &self.args {
            line.push_str(&format!("\n  {:<width$}  {}", a.shown(), a.help));
        }
        line
    }

    /// The JSON Schema of the JSON form (for MCP tools).
    pub fn json_schema(&self) -> Value {
        let mut properties = Map::new();
        for a in &self.args {
            let mut p = match (a.kind, a.ty) {
                (ArgKind::Flag, _) => json!({"type": "boolean"}),
                (_, ArgType::Int { min, max }) => {
                    json!({"type": "integer", "minimum": min, "maximum": max})
                }
                (_, ArgType::Choice(words)) => json!({"type": "string", "enum": words}),
                (_, ArgType::Text) => json!({"type": "string"}),
            };
            if let Some(obj) = p.as_object_mut() {
                obj.insert("description".into(), Value::String(a.help.into()));
            }
            properties.insert(a.name.into(), p);
        }
        let required: Vec<&str> = self
            .args
            .iter()
            .filter(|a| a.required)
            .map(|a| a.name)
            .collect();
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> ArgsSchema {
        ArgsSchema::new(vec![
            ArgSpec::positional("key", "key", "the key"),
            ArgSpec::value("status", "STATUS", "which runs").choices(&["live", "finished", "all"]),
            ArgSpec::value("limit", "N", "how many").int(1, 100),
            ArgSpec::value("channel", "C", "a channel").in_group("tier"),
            ArgSpec::flag("org", "the org").in_group("tier"),
        ])
    }

    fn w(s: &str) -> Vec<String> {
        words(s).unwrap()
    }

    #[test]
    fn query_pairs_become_the_json_object_of_the_same_arguments() {
        let p = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect()
        };
        let obj = schema()
            .object_from_query(&p(&[("key", "k"), ("limit", "5"), ("org", "")]))
            .unwrap();
        let a = schema().parse_json(&obj).unwrap();
        assert_eq!(
            (a.text("key"), a.int("limit"), a.flag("org")),
            (Some("k"), Some(5), true)
        );
        for (pairs, want) in [
            (
                p(&[("bogus", "1")]),
                ArgError::UnknownOption("bogus".into()),
            ),
            (
                p(&[("org", "yes")]),
                ArgError::WrongJsonType("org".into(), "boolean"),
            ),
            (
                p(&[("key", "a"), ("key", "b")]),
                ArgError::Twice("key".into()),
            ),
        ] {
            assert_eq!(schema().object_from_query(&pairs).unwrap_err(), want);
        }
        let off = schema()
            .object_from_query(&p(&[("key", "k"), ("org", "false")]))
            .unwrap();
        assert!(!schema().parse_json(&off).unwrap().flag("org"));
    }

    #[test]
    fn text_parses_options_flags_and_positionals() {
        let a = schema()
            .parse_words(&w("k --status all --limit=20 --org"))
            .unwrap();
        assert_eq!(a.text("key"), Some("k"));
        assert_eq!(a.text("status"), Some("all"));
        assert_eq!(a.int("limit"), Some(20));
        assert!(a.flag("org"));
    }

    #[test]
    fn bad_text_is_a_clear_error() {
        let cases: &[(&str, ArgError)] = &[
            ("", ArgError::MissingRequired("key".into())),
            ("k --bogus", ArgError::UnknownOption("--bogus".into())),
            ("k --status", ArgError::MissingValue("status".into())),
            (
                "k --status some",
                ArgError::NotAChoice {
                    name: "status".into(),
                    value: "some".into(),
                    choices: "live, finished, all".into(),
                },
            ),
            (
                "k --limit 0",
                ArgError::NotAnInt {
                    name: "limit".into(),
                    value: "0".into(),
                    min: 1,
                    max: 100,
                },
            ),
            (
                "k --limit x",
                ArgError::NotAnInt {
                    name: "limit".into(),
                    value: "x".into(),
                    min: 1,
                    max: 100,
                },
            ),
            ("k extra", ArgError::Unexpected("extra".into())),
            ("k --org --org", ArgError::Twice("org".into())),
            ("k --org=yes", ArgError::UnexpectedValue("org".into())),
            (
                "k --channel slack:C1 --org",
                ArgError::Exclusive("channel".into(), "org".into()),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(
                schema().parse_words(&w(text)).unwrap_err(),
                *want,
                "{text:?}"
            );
        }
        assert_eq!(
            words("a \u{1b}[31m").unwrap_err(),
            ArgError::ControlCharacters
        );
        assert_eq!(words("a \"b").unwrap_err(), ArgError::UnclosedQuote);
        assert_eq!(
            words("set greeting \"hello world\" ''").unwrap(),
            vec!["set", "greeting", "hello world", ""]
        );
    }

    #[test]
    fn an_apostrophe_inside_a_word_is_a_letter() {
        for (text, want) in [
            (
                "friction propose don't retry",
                vec!["friction", "propose", "don't", "retry"],
            ),
            ("it's", vec!["it's"]),
            ("'don't stop' now", vec!["don't stop", "now"]),
            ("say \"it's\"", vec!["say", "it's"]),
            ("rock'n'roll 'a b'", vec!["rock'n'roll", "a b"]),
            ("don'", vec!["don'"]),
            ("''", vec![""]),
        ] {
            assert_eq!(words(text).unwrap(), want, "{text}");
        }
        for text in ["'abc", "say 'it", "\"don't"] {
            assert_eq!(words(text).unwrap_err(), ArgError::UnclosedQuote, "{text}");
        }
    }

    #[test]
    fn json_parses_by_name_and_checks_types() {
        let obj = json!({"key": "k", "limit": 5, "org": true});
        let a = schema().parse_json(obj.as_object().unwrap()).unwrap();
        assert_eq!(
            (a.text("key"), a.int("limit"), a.flag("org")),
            (Some("k"), Some(5), true)
        );
        for (bad, want) in [
            (
                json!({"key": 1}),
                ArgError::WrongJsonType("key".into(), "string"),
            ),
            (
                json!({"key": "k", "org": "yes"}),
                ArgError::WrongJsonType("org".into(), "boolean"),
            ),
            (
                json!({"key": "k", "nope": 1}),
                ArgError::UnknownOption("nope".into()),
            ),
            (
                json!({"key": "k", "limit": 500}),
                ArgError::NotAnInt {
                    name: "limit".into(),
                    value: "500".into(),
                    min: 1,
                    max: 100,
                },
            ),
        ] {
            assert_eq!(
                schema().parse_json(bad.as_object().unwrap()).unwrap_err(),
                want
            );
        }
    }

    #[test]
    fn usage_and_json_schema_come_from_the_same_specs() {
        let u = schema().usage("config get");
        assert!(u.starts_with("usage: config get <key> [--status live|finished|all] [--limit N] [--channel C] [--org]"), "{u}");
        let s = schema().json_schema();
        assert_eq!(s["required"], json!(["key"]));
        assert_eq!(
            s["properties"]["status"]["enum"],
            json!(["live", "finished", "all"])
        );
        assert_eq!(s["properties"]["org"]["type"], "boolean");
    }
}
