//! What tasks and crews return: [`TaskOutput`], [`CrewOutput`] and [`OutputFormat`], with
//! CrewAI's field names and its Python-flavoured renderings (`CrewOutput::json()` spaces JSON
//! the way Python's `json.dumps` does, so `{"score": 4}` comes out byte for byte the same).

use std::fmt;

use crewai_llm::{Message, Usage};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a task's result is shaped (CrewAI's `OutputFormat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// Free text.
    #[default]
    Raw,
    /// A JSON object matching the task's `output_json` schema.
    Json,
    /// A typed value matching the task's `output_pydantic` schema (or `Task::output::<T>()`).
    Pydantic,
}

/// Reading an output in a shape it does not have.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(
        "task '{task}' has no JSON output: its output format is {format:?}; set `output_json` on the task to get one"
    )]
    NotJson { task: String, format: OutputFormat },
    #[error(
        "No JSON output found in the final task. Please make sure to set the output_json property in the final task in your crew."
    )]
    NoJsonInFinalTask,
    #[error("the output has no structured value (neither output_json nor output_pydantic was set)")]
    NoStructuredValue,
    #[error("the structured output does not match the requested type")]
    WrongType(#[source] serde_json::Error),
    #[error("key '{0}' is not in the structured output")]
    MissingKey(String),
}

/// The result of one task (CrewAI's `TaskOutput`).
///
/// ```
/// use crewai_core::output::{OutputFormat, TaskOutput};
/// let out = TaskOutput::new("Write a haiku about the sea and its long patient waves", "A haiku", "Waves", "Poet");
/// assert_eq!(out.summary.as_deref(), Some("Write a haiku about the sea and its long patient..."));
/// assert_eq!(out.output_format, OutputFormat::Raw);
/// assert_eq!(out.to_string(), "Waves");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskOutput {
    pub description: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub expected_output: String,
    /// The first ten words of the description followed by "...".
    #[serde(default)]
    pub summary: Option<String>,
    pub raw: String,
    /// The typed value (CrewAI's Pydantic model instance), as JSON.
    #[serde(default)]
    pub pydantic: Option<Value>,
    /// The JSON object of an `output_json` task.
    #[serde(default)]
    pub json_dict: Option<Value>,
    /// The role of the agent that produced it.
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub output_format: OutputFormat,
    /// The conversation that produced it.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// How a consensual crew (`process: consensual`) decided this answer: the rounds, the
    /// votes and the reason. `None` for the other processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consensus: Option<crate::consensus::ConsensusRecord>,
}

/// CrewAI's summary: the first ten words of the description, then "...".
pub fn summarize_description(description: &str) -> String {
    let words: Vec<&str> = description.split_whitespace().take(10).collect();
    format!("{}...", words.join(" "))
}

impl TaskOutput {
    /// A raw (text) output.
    pub fn new(
        description: impl Into<String>,
        expected_output: impl Into<String>,
        raw: impl Into<String>,
        agent_role: impl Into<String>,
    ) -> Self {
        let description = description.into();
        TaskOutput {
            summary: Some(summarize_description(&description)),
            description,
            expected_output: expected_output.into(),
            raw: raw.into(),
            agent: agent_role.into(),
            ..Default::default()
        }
    }

    /// The stand-in for a skipped conditional task: empty raw, the agent's role.
    pub fn skipped(
        description: impl Into<String>,
        expected_output: impl Into<String>,
        name: Option<String>,
        agent_role: impl Into<String>,
    ) -> Self {
        let mut out = TaskOutput::new(description, expected_output, String::new(), agent_role);
        out.name = name;
        out
    }

    /// Stores a structured value where `format` keeps it: `json_dict` for JSON output, `pydantic`
    /// for typed output (a raw output keeps none).
    pub fn set_structured(&mut self, format: OutputFormat, value: Value) {
        match format {
            OutputFormat::Json => self.json_dict = Some(value),
            OutputFormat::Pydantic => self.pydantic = Some(value),
            OutputFormat::Raw => {}
        }
    }

    /// The structured value, if any: the typed value first, then the JSON object.
    pub fn structured(&self) -> Option<&Value> {
        self.pydantic.as_ref().or(self.json_dict.as_ref())
    }

    /// The structured value deserialised into `T`.
    ///
    /// ```
    /// # use crewai_core::output::TaskOutput;
    /// #[derive(serde::Deserialize)]
    /// struct Score { score: u8 }
    /// let mut out = TaskOutput::new("Score it", "A score", "{\"score\":4}", "Scorer");
    /// out.pydantic = Some(serde_json::json!({"score": 4}));
    /// assert_eq!(out.typed::<Score>().unwrap().score, 4);
    /// ```
    pub fn typed<T: DeserializeOwned>(&self) -> Result<T, OutputError> {
        let value = self.structured().ok_or(OutputError::NoStructuredValue)?;
        serde_json::from_value(value.clone()).map_err(OutputError::WrongType)
    }

    /// The JSON object as Python's `json.dumps` writes it; only for `output_json` tasks, as CrewAI.
    pub fn json(&self) -> Result<String, OutputError> {
        match (&self.output_format, &self.json_dict) {
            (OutputFormat::Json, Some(value)) => Ok(python_json_dumps(value)),
            _ => Err(OutputError::NotJson {
                task: self
                    .name
                    .clone()
                    .unwrap_or_else(|| self.description.clone()),
                format: self.output_format,
            }),
        }
    }

    /// CrewAI's `to_dict()`: the JSON object, or else the typed value; empty when neither.
    pub fn to_dict(&self) -> serde_json::Map<String, Value> {
        to_dict(&self.json_dict, &self.pydantic)
    }
}

fn to_dict(json_dict: &Option<Value>, pydantic: &Option<Value>) -> serde_json::Map<String, Value> {
    match json_dict.as_ref().or(pydantic.as_ref()) {
        Some(Value::Object(map)) => map.clone(),
        _ => serde_json::Map::new(),
    }
}

/// CrewAI's `str(TaskOutput)`: the typed value, else the JSON object, else the raw text.
impl fmt::Display for TaskOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.structured() {
            Some(value) => f.write_str(&python_json_dumps(value)),
            None => f.write_str(&self.raw),
        }
    }
}

/// The result of a crew kickoff (CrewAI's `CrewOutput`).
///
/// ```
/// use crewai_core::output::{CrewOutput, TaskOutput};
/// let mut last = TaskOutput::new("Score", "A score", "{\"score\":4}", "Scorer");
/// last.output_format = crewai_core::output::OutputFormat::Json;
/// last.json_dict = Some(serde_json::json!({"score": 4}));
/// let out = CrewOutput::from_tasks(vec![last], Default::default());
/// assert_eq!(out.json().unwrap(), r#"{"score": 4}"#);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CrewOutput {
    pub raw: String,
    #[serde(default)]
    pub pydantic: Option<Value>,
    #[serde(default)]
    pub json_dict: Option<Value>,
    pub tasks_output: Vec<TaskOutput>,
    pub token_usage: Usage,
    /// The id the run is journaled under (`Crew::resume` and `Crew::fork` take it).
    #[serde(default)]
    pub run_id: Option<String>,
}

impl CrewOutput {
    /// Builds the crew's output from its task outputs: the final output is the last one whose raw
    /// text is not empty (a skipped conditional task leaves an empty one behind).
    pub fn from_tasks(tasks_output: Vec<TaskOutput>, token_usage: Usage) -> Self {
        let last = tasks_output
            .iter()
            .rev()
            .find(|t| !t.raw.is_empty())
            .or(tasks_output.last());
        let (raw, pydantic, json_dict) = match last {
            Some(t) => (t.raw.clone(), t.pydantic.clone(), t.json_dict.clone()),
            None => (String::new(), None, None),
        };
        CrewOutput {
            raw,
            pydantic,
            json_dict,
            tasks_output,
            token_usage,
            run_id: None,
        }
    }

    /// The final task's JSON object as Python's `json.dumps` writes it (`{"score": 4}`).
    pub fn json(&self) -> Result<String, OutputError> {
        let final_is_json = self
            .tasks_output
            .iter()
            .rev()
            .find(|t| !t.raw.is_empty())
            .or(self.tasks_output.last())
            .map(|t| t.output_format == OutputFormat::Json)
            .unwrap_or(false);
        match (&self.json_dict, final_is_json) {
            (Some(value), true) => Ok(python_json_dumps(value)),
            _ => Err(OutputError::NoJsonInFinalTask),
        }
    }

    /// CrewAI's `to_dict()`: the JSON object, or else the typed value; empty when neither.
    pub fn to_dict(&self) -> serde_json::Map<String, Value> {
        to_dict(&self.json_dict, &self.pydantic)
    }

    /// CrewAI's `crew_output["key"]`: a field of the typed value or of the JSON object.
    pub fn get(&self, key: &str) -> Result<&Value, OutputError> {
        self.pydantic
            .as_ref()
            .and_then(|v| v.get(key))
            .or_else(|| self.json_dict.as_ref().and_then(|v| v.get(key)))
            .ok_or_else(|| OutputError::MissingKey(key.to_string()))
    }

    /// The final structured value deserialised into `T`.
    pub fn typed<T: DeserializeOwned>(&self) -> Result<T, OutputError> {
        let value = self
            .pydantic
            .as_ref()
            .or(self.json_dict.as_ref())
            .ok_or(OutputError::NoStructuredValue)?;
        serde_json::from_value(value.clone()).map_err(OutputError::WrongType)
    }
}

/// CrewAI's `str(CrewOutput)`: the typed value, else the JSON object, else the raw text.
impl fmt::Display for CrewOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pydantic.as_ref().or(self.json_dict.as_ref()) {
            Some(value) => f.write_str(&python_json_dumps(value)),
            None => f.write_str(&self.raw),
        }
    }
}

/// JSON text exactly as Python's `json.dumps(value)` writes it: `", "` and `": "` separators,
/// non-ASCII escaped as `\uXXXX`, floats as Python prints them.
pub fn python_json_dumps(value: &Value) -> String {
    let mut out = String::new();
    write_python_json(value, &mut out);
    out
}

fn write_python_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&python_number(n)),
        Value::String(s) => write_ascii_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_ascii_json_string(key, out);
                out.push_str(": ");
                write_python_json(item, out);
            }
            out.push('}');
        }
    }
}

fn write_ascii_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON number as Python prints it: integers as they are, floats by `repr(float)`.
pub(crate) fn python_number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() => python_float_repr(f),
        _ => n.to_string(),
    }
}

/// Python's `repr(float)`: the shortest round-tripping digits, fixed notation for exponents in
/// `-4..16`, otherwise `1e+16` / `1.5e-07` (non-finite values as `json.dumps` writes them:
/// `NaN`, `Infinity`).
pub fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // `{:e}` gives the shortest round-tripping mantissa, e.g. "1.5e-7".
    let sci = format!("{f:e}");
    let Some((mantissa, exponent)) = sci.split_once('e') else {
        return sci;
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = mantissa
        .strip_prefix('-')
        .map(|m| ("-", m))
        .unwrap_or(("", mantissa));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exponent) {
        let point = exponent + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            let (int, frac) = digits.split_at(point as usize);
            format!("{int}.{frac}")
        };
        format!("{sign}{body}")
    } else {
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exponent.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dumps_matches_python_spacing_and_escapes() {
        assert_eq!(python_json_dumps(&json!({"score": 4})), r#"{"score": 4}"#);
        assert_eq!(
            python_json_dumps(&json!({"a": [1, 2.5, null, true], "b": "é"})),
            r#"{"a": [1, 2.5, null, true], "b": "\u00e9"}"#
        );
        assert_eq!(python_json_dumps(&json!("😀")), r#""\ud83d\ude00""#);
    }

    #[test]
    fn floats_print_like_python_repr() {
        assert_eq!(python_float_repr(4.0), "4.0");
        assert_eq!(python_float_repr(0.1), "0.1");
        assert_eq!(python_float_repr(1e16), "1e+16");
        assert_eq!(python_float_repr(123456789012345.0), "123456789012345.0");
        assert_eq!(python_float_repr(0.0001), "0.0001");
        assert_eq!(python_float_repr(0.00001), "1e-05");
        assert_eq!(python_float_repr(-2.5e-7), "-2.5e-07");
    }

    #[test]
    fn summary_is_first_ten_words() {
        assert_eq!(summarize_description("one two"), "one two...");
        assert_eq!(
            summarize_description("a b c d e f g h i j k l"),
            "a b c d e f g h i j..."
        );
    }

    #[test]
    fn final_output_skips_empty_raw() {
        let first = TaskOutput::new("t1", "e", "Hi", "R");
        let skipped = TaskOutput::skipped("t2", "e", None, "W");
        let out = CrewOutput::from_tasks(vec![first, skipped], Usage::default());
        assert_eq!(out.raw, "Hi");
        assert_eq!(out.tasks_output.len(), 2);
        assert!(matches!(out.json(), Err(OutputError::NoJsonInFinalTask)));
    }

    #[test]
    fn task_json_only_for_json_format() {
        let mut out = TaskOutput::new("t", "e", "{}", "R");
        out.pydantic = Some(json!({"x": 1}));
        out.output_format = OutputFormat::Pydantic;
        assert!(out.json().is_err());
        assert_eq!(out.to_dict().get("x"), Some(&json!(1)));
        assert_eq!(out.to_string(), r#"{"x": 1}"#);
    }
}
