//! `{placeholder}` interpolation of kickoff inputs into agents' and tasks' text, with CrewAI's
//! rules: a placeholder is `{` + a name of letters, digits, `_` and `-` (not starting with a
//! digit or `-`) + `}`; other braces (JSON examples in a prompt) are left alone; values are
//! rendered the way Python's `str()` renders them.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::output::python_number;

/// Kickoff inputs: placeholder name → value. Empty means "interpolate nothing".
pub type Inputs = BTreeMap<String, Value>;

static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)] // a constant pattern, checked by the unit tests
    Regex::new(r"\{([A-Za-z_][A-Za-z0-9_\-]*)\}").expect("placeholder pattern is valid")
});

/// Where a placeholder was used: which agent or task, and which of its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// `agent 'Researcher'` or `task 'research'`.
    pub owner: String,
    /// `role`, `goal`, `backstory`, `description`, `expected_output`, `output_file`.
    pub field: &'static str,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.owner, self.field)
    }
}

/// Fills the fields of one agent or task, naming it (`agent 'Researcher'`) in the errors.
pub(crate) struct Filler<'a> {
    inputs: &'a Inputs,
    owner: String,
}

impl<'a> Filler<'a> {
    pub(crate) fn new(inputs: &'a Inputs, owner: String) -> Self {
        Filler { inputs, owner }
    }

    /// `text`, the owner's `field`, with the inputs interpolated.
    pub(crate) fn field(
        &self,
        text: &str,
        field: &'static str,
    ) -> Result<String, InterpolationError> {
        let at = Location {
            owner: self.owner.clone(),
            field,
        };
        interpolate(text, self.inputs, &at)
    }
}

/// The input under which a chat passes its conversation to the crew (CrewAI's name).
pub const CHAT_MESSAGES_INPUT: &str = "crew_chat_messages";

/// The conversation in `inputs`' [`CHAT_MESSAGES_INPUT`] as `(role, text)` turns: a list of
/// `{"role", "content"}` objects, or that list as a JSON string (CrewAI passes it so). Any other
/// value is one turn of its own text, so what was given always reaches the tasks.
pub(crate) fn chat_turns(inputs: &Inputs) -> Option<Vec<(String, String)>> {
    let value = inputs.get(CHAT_MESSAGES_INPUT)?;
    let parsed;
    let list = match value {
        Value::Array(list) => list,
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(list)) => {
                parsed = list;
                &parsed
            }
            _ => return Some(vec![("conversation".into(), text.clone())]),
        },
        other => return Some(vec![("conversation".into(), other.to_string())]),
    };
    let turns = list
        .iter()
        .map(|turn| {
            let role = turn
                .get("role")
                .and_then(Value::as_str)
                .unwrap_or("message");
            let text = match turn.get("content") {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => turn.to_string(),
            };
            (role.to_string(), text)
        })
        .collect();
    Some(turns)
}

/// A placeholder that the inputs do not provide.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "placeholder {{{placeholder}}} in {location} has no value in the kickoff inputs (given: {given}); add `{placeholder}` to the inputs"
)]
pub struct InterpolationError {
    pub placeholder: String,
    pub location: Location,
    /// The input names that were given, comma-separated.
    pub given: String,
}

/// The placeholder names used in `text`, in order of first use.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for capture in PLACEHOLDER.captures_iter(text) {
        let name = capture[1].to_string();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Replaces every `{name}` in `text` with its input rendered like Python's `str()`.
///
/// Empty `inputs` leave the text unchanged (CrewAI does not interpolate without inputs). A
/// placeholder missing from non-empty inputs is an error naming it and `location`.
///
/// ```
/// use crewai_core::interpolate::{interpolate, Inputs, Location};
/// let mut inputs = Inputs::new();
/// inputs.insert("topic-name".into(), "AI".into());
/// inputs.insert("n".into(), serde_json::json!(3));
/// let at = Location { owner: "task 'research'".into(), field: "description" };
/// let text = interpolate("{n} facts on {topic-name}, as {\"json\": true}", &inputs, &at).unwrap();
/// assert_eq!(text, "3 facts on AI, as {\"json\": true}");
/// assert!(interpolate("{missing}", &inputs, &at).unwrap_err().to_string().contains("task 'research' description"));
/// ```
pub fn interpolate(
    text: &str,
    inputs: &Inputs,
    location: &Location,
) -> Result<String, InterpolationError> {
    if inputs.is_empty() || !text.contains('{') {
        return Ok(text.to_string());
    }
    if let Some(missing) = placeholders(text)
        .into_iter()
        .find(|name| !inputs.contains_key(name))
    {
        return Err(InterpolationError {
            placeholder: missing,
            location: location.clone(),
            given: inputs.keys().cloned().collect::<Vec<_>>().join(", "),
        });
    }
    // One pass, so a value that itself contains `{x}` is never interpolated again.
    Ok(PLACEHOLDER
        .replace_all(text, |caps: &regex::Captures<'_>| {
            inputs.get(&caps[1]).map(python_str).unwrap_or_default()
        })
        .into_owned())
}

/// Interpolation that tells CrewAI's two "no values" cases apart: `None` (a kickoff without
/// inputs) leaves the text as written; `Some` map, even an empty one, must provide every
/// placeholder, so an empty map fails on the first placeholder, as CrewAI's `interpolate_only`
/// does. Braces that are not a placeholder are left alone in both cases.
///
/// ```
/// use crewai_core::interpolate::{interpolate_given, Inputs, Location};
/// let at = Location { owner: "task 'research'".into(), field: "description" };
/// assert_eq!(interpolate_given("{topic} {\"k\": 1}", None, &at).unwrap(), "{topic} {\"k\": 1}");
/// let empty = Inputs::new();
/// assert_eq!(interpolate_given("{topic}", Some(&empty), &at).unwrap_err().placeholder, "topic");
/// assert_eq!(interpolate_given("(}}) {\"k\": 1}", Some(&empty), &at).unwrap(), "(}}) {\"k\": 1}");
/// ```
pub fn interpolate_given(
    text: &str,
    inputs: Option<&Inputs>,
    location: &Location,
) -> Result<String, InterpolationError> {
    match inputs {
        None => Ok(text.to_string()),
        Some(inputs) if inputs.is_empty() => match placeholders(text).into_iter().next() {
            Some(first) => Err(InterpolationError {
                placeholder: first,
                location: location.clone(),
                given: "none".to_string(),
            }),
            None => Ok(text.to_string()),
        },
        Some(inputs) => interpolate(text, inputs, location),
    }
}

/// A JSON value rendered the way Python's `str()` renders the equivalent Python value:
/// strings bare, `True`/`False`/`None`, lists and dicts as their `repr`.
///
/// ```
/// use crewai_core::interpolate::python_str;
/// use serde_json::json;
/// assert_eq!(python_str(&json!("AI")), "AI");
/// assert_eq!(python_str(&json!(true)), "True");
/// assert_eq!(python_str(&json!({"a": [1, "b", null]})), "{'a': [1, 'b', None]}");
/// ```
pub fn python_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => python_repr(other),
    }
}

fn python_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => python_number(n),
        Value::String(s) => python_string_repr(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(python_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", python_string_repr(k), python_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn python_string_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at() -> Location {
        Location {
            owner: "agent 'Writer'".into(),
            field: "goal",
        }
    }

    #[test]
    fn hyphenated_and_repeated_names() {
        let inputs: Inputs = [("a-b".to_string(), json!("x"))].into();
        assert_eq!(
            interpolate("{a-b} and {a-b}", &inputs, &at()).unwrap(),
            "x and x"
        );
    }

    #[test]
    fn no_inputs_leaves_text_alone() {
        assert_eq!(
            interpolate("{topic}", &Inputs::new(), &at()).unwrap(),
            "{topic}"
        );
    }

    #[test]
    fn json_braces_are_not_placeholders() {
        let inputs: Inputs = [("x".to_string(), json!(1))].into();
        let text = r#"{"key": "value"} { spaced } {1abc} {x}"#;
        assert_eq!(
            interpolate(text, &inputs, &at()).unwrap(),
            r#"{"key": "value"} { spaced } {1abc} 1"#
        );
    }

    #[test]
    fn missing_placeholder_names_it_and_where() {
        let inputs: Inputs = [("x".to_string(), json!(1))].into();
        let err = interpolate("{x} {topic}", &inputs, &at()).unwrap_err();
        assert_eq!(err.placeholder, "topic");
        let text = err.to_string();
        assert!(
            text.contains("{topic}")
                && text.contains("agent 'Writer' goal")
                && text.contains("given: x"),
            "{text}"
        );
    }

    #[test]
    fn values_render_like_python_str() {
        assert_eq!(python_str(&json!(2.0)), "2.0");
        assert_eq!(python_str(&json!(false)), "False");
        assert_eq!(python_str(&json!(null)), "None");
        assert_eq!(python_str(&json!(["it's", "x"])), r#"["it's", 'x']"#);
    }

    #[test]
    fn doubled_braces_interpolate_the_inner_placeholder() {
        // CrewAI replaces `{name}` wherever it appears, so `{{name}}` keeps one brace each side.
        let inputs: Inputs = [("name".to_string(), json!("Ada"))].into();
        assert_eq!(
            interpolate("{{name}} and {name}", &inputs, &at()).unwrap(),
            "{Ada} and Ada"
        );
    }

    #[test]
    fn braces_that_are_not_placeholders_stay() {
        let inputs: Inputs = [("x".to_string(), json!("X"))].into();
        let text = "(}}) {{ }} {} {x y} {\"a\": {\"b\": [1]}} {x}";
        assert_eq!(
            interpolate(text, &inputs, &at()).unwrap(),
            "(}}) {{ }} {} {x y} {\"a\": {\"b\": [1]}} X"
        );
    }

    #[test]
    fn every_json_type_renders_like_python_str() {
        let inputs: Inputs = [
            ("int".to_string(), json!(42)),
            ("neg".to_string(), json!(-7)),
            ("float".to_string(), json!(0.1)),
            ("big".to_string(), json!(1e16)),
            ("small".to_string(), json!(1.5e-7)),
            ("yes".to_string(), json!(true)),
            ("none".to_string(), json!(null)),
            ("list".to_string(), json!(["a", 1, false, null, 2.5])),
            ("dict".to_string(), json!({"k": "v", "n": {"deep": [true]}})),
            (
                "quote".to_string(),
                json!(["it's", "say \"hi\"", "both ' \""]),
            ),
        ]
        .into();
        let text = "{int} {neg} {float} {big} {small} {yes} {none} {list} {dict} {quote}";
        assert_eq!(
            interpolate(text, &inputs, &at()).unwrap(),
            r#"42 -7 0.1 1e+16 1.5e-07 True None ['a', 1, False, None, 2.5] {'k': 'v', 'n': {'deep': [True]}} ["it's", 'say "hi"', 'both \' "']"#
        );
    }

    #[test]
    fn no_inputs_and_an_empty_map_differ() {
        let empty = Inputs::new();
        assert_eq!(
            interpolate_given("{topic}", None, &at()).unwrap(),
            "{topic}"
        );
        let err = interpolate_given("{a} then {b}", Some(&empty), &at()).unwrap_err();
        assert_eq!(err.placeholder, "a");
        assert!(err.to_string().contains("given: none"), "{err}");
        let given: Inputs = [("a".to_string(), json!(1))].into();
        assert_eq!(interpolate_given("{a}", Some(&given), &at()).unwrap(), "1");
    }

    #[test]
    fn values_are_not_reinterpolated() {
        let inputs: Inputs = [
            ("a".to_string(), json!("{b}")),
            ("b".to_string(), json!("B")),
        ]
        .into();
        assert_eq!(interpolate("{a} {b}", &inputs, &at()).unwrap(), "{b} B");
    }
}
