//! Structured output: the schema a task asks for, checking a reply against it, repairing
//! almost-JSON, and the extra "convert this text" LLM call CrewAI's `Converter` makes when an agent
//! answered in prose (an agent that used tools cannot be held to a response format).

use std::fmt;
use std::sync::Arc;

use crewai_llm::{Llm, LlmError, LlmRequest, Message, ResponseFormat, Usage};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::output::OutputFormat;
use crate::prompts::crew as prompts;

type TypeCheck = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// The structured output a task asks for: a JSON schema, and whether the result is CrewAI's
/// `json_dict` (`output_json`) or its typed `pydantic` value (`output_pydantic` / `Task::output::<T>()`).
#[derive(Clone)]
pub struct OutputSchema {
    name: String,
    schema: Value,
    format: OutputFormat,
    type_check: Option<TypeCheck>,
}

impl fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputSchema")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("schema", &self.schema)
            .finish()
    }
}

/// Why a reply could not become the structured output.
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    /// The schema does not compile (the source is the JSON-schema validator's error).
    #[error("the output schema is not a valid JSON schema")]
    InvalidSchema(#[source] crate::error::BoxedCause),
    #[error(
        "the answer does not match the output schema '{schema}' after {attempts} conversion attempt(s): {reason}"
    )]
    Unconvertible {
        schema: String,
        attempts: u32,
        reason: String,
    },
    #[error("the conversion call failed")]
    Llm(#[from] LlmError),
}

impl OutputSchema {
    /// CrewAI's `output_json`: the result is a JSON object kept in `json_dict`.
    pub fn json(schema: Value) -> Self {
        Self::from_schema(schema, OutputFormat::Json)
    }

    /// CrewAI's `output_pydantic`: the result is a typed value kept in `pydantic`.
    pub fn pydantic(schema: Value) -> Self {
        Self::from_schema(schema, OutputFormat::Pydantic)
    }

    /// The schema of a Rust type; a result must also deserialise into `T`.
    pub fn of<T: JsonSchema + DeserializeOwned + 'static>() -> Self {
        let mut schema = schemars::schema_for!(T).to_value();
        if let Value::Object(map) = &mut schema {
            map.remove("$schema");
        }
        let mut out = Self::from_schema(schema, OutputFormat::Pydantic);
        out.type_check = Some(Arc::new(|value: &Value| {
            serde_json::from_value::<T>(value.clone())
                .map(|_| ())
                .map_err(|e| e.to_string())
        }));
        out
    }

    fn from_schema(schema: Value, format: OutputFormat) -> Self {
        let title = schema
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("output");
        let name: String = title
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        OutputSchema {
            name: if name.is_empty() {
                "output".into()
            } else {
                name
            },
            schema,
            format,
            type_check: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn schema(&self) -> &Value {
        &self.schema
    }
    pub fn format(&self) -> OutputFormat {
        self.format
    }

    /// The schema as indented JSON, for prompts.
    pub fn pretty(&self) -> String {
        serde_json::to_string_pretty(&self.schema).unwrap_or_else(|_| self.schema.to_string())
    }

    /// The provider request for native structured output (OpenAI strict rules applied).
    pub fn response_format(&self) -> ResponseFormat {
        let mut schema = self.schema.clone();
        make_strict(&mut schema);
        ResponseFormat {
            name: self.name.clone(),
            schema,
            strict: true,
        }
    }

    /// Checks that the schema itself compiles.
    pub fn check_schema(&self) -> Result<(), ConversionError> {
        jsonschema::validator_for(&self.schema)
            .map(|_| ())
            .map_err(|e| ConversionError::InvalidSchema(Box::new(e)))
    }

    /// Validates a value against the schema (and the Rust type, for `OutputSchema::of`).
    pub fn validate(&self, value: &Value) -> Result<(), String> {
        let validator =
            jsonschema::validator_for(&self.schema).map_err(|e| format!("invalid schema: {e}"))?;
        let problems: Vec<String> = validator
            .iter_errors(value)
            .map(|e| format!("{} at '{}'", e, e.instance_path()))
            .collect();
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        match &self.type_check {
            Some(check) => check(value),
            None => Ok(()),
        }
    }

    /// Parses a reply that was asked for in this schema: only surrounding whitespace and a code
    /// fence are tolerated, as a provider's structured mode returns bare JSON.
    pub fn parse_exact(&self, text: &str) -> Result<Value, String> {
        let value: Value = serde_json::from_str(strip_code_fence(text))
            .map_err(|e| format!("not valid JSON: {e}"))?;
        self.validate(&value)?;
        Ok(value)
    }

    /// Parses a prose reply: the JSON is looked for inside it and light damage (code fences, text
    /// around the object, trailing commas) is repaired.
    pub fn parse_lenient(&self, text: &str) -> Result<Value, String> {
        if let Ok(value) = self.parse_exact(text) {
            return Ok(value);
        }
        let candidate = extract_json_block(text)
            .ok_or_else(|| "no JSON object found in the answer".to_string())?;
        let value: Value = serde_json::from_str(candidate)
            .or_else(|_| serde_json::from_str(&remove_trailing_commas(candidate)))
            .map_err(|e| format!("not valid JSON: {e}"))?;
        self.validate(&value)?;
        Ok(value)
    }

    /// The conversion call: asks `llm` to rewrite `text` as JSON in this schema, up to `attempts`
    /// times, telling it what was wrong after each failed try. Returns the value and the calls' usage.
    pub async fn convert_with_llm(
        &self,
        llm: &dyn Llm,
        text: &str,
        attempts: u32,
    ) -> Result<(Value, Usage), ConversionError> {
        let attempts = attempts.max(1);
        let mut usage = Usage::default();
        let mut messages = vec![
            Message::system(prompts::converter_system(&self.pretty())),
            Message::user(text),
        ];
        let mut reason = String::new();
        for _ in 0..attempts {
            let mut request = LlmRequest::new(messages.clone());
            if llm.capabilities().structured_output {
                request = request.with_response_format(self.response_format());
            }
            let response = llm.call(request).await?;
            usage.add(&response.usage);
            let reply = response.content.clone().unwrap_or_default();
            match self.parse_lenient(&reply) {
                Ok(value) => return Ok((value, usage)),
                Err(why) => {
                    messages.push(Message::assistant(reply));
                    messages.push(Message::user(prompts::converter_retry(&why)));
                    reason = why;
                }
            }
        }
        Err(ConversionError::Unconvertible {
            schema: self.name.clone(),
            attempts,
            reason,
        })
    }
}

fn strip_code_fence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let body = rest.split_once('\n').map(|(_, body)| body).unwrap_or(rest);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

/// Where a JSON text read one character at a time is: inside a string literal or not.
#[derive(Default)]
struct JsonStrings {
    in_string: bool,
    escaped: bool,
}

impl JsonStrings {
    /// Reads `c`; true when it belongs to a string literal (its quotes included).
    fn inside(&mut self, c: char) -> bool {
        if self.in_string {
            match c {
                _ if self.escaped => self.escaped = false,
                '\\' => self.escaped = true,
                '"' => self.in_string = false,
                _ => {}
            }
            true
        } else {
            self.in_string = c == '"';
            self.in_string
        }
    }
}

/// The first balanced `{...}` (or `[...]`) in `text`, respecting strings.
fn extract_json_block(text: &str) -> Option<&str> {
    let start = text.find(['{', '['])?;
    let (open, close) = if text[start..].starts_with('{') {
        ('{', '}')
    } else {
        ('[', ']')
    };
    let mut depth = 0usize;
    let mut strings = JsonStrings::default();
    for (offset, c) in text[start..].char_indices() {
        if strings.inside(c) {
            continue;
        }
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return Some(&text[start..start + offset + c.len_utf8()]);
            }
        }
    }
    None
}

fn remove_trailing_commas(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut strings = JsonStrings::default();
    for (i, &c) in chars.iter().enumerate() {
        let trailing_comma = !strings.inside(c)
            && c == ','
            && chars[i + 1..]
                .iter()
                .find(|n| !n.is_whitespace())
                .is_some_and(|n| *n == '}' || *n == ']');
        if !trailing_comma {
            out.push(c);
        }
    }
    out
}

/// OpenAI's strict mode: every object closes its properties and requires all of them.
fn make_strict(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let is_object = map.get("type").and_then(Value::as_str) == Some("object")
                || map.contains_key("properties");
            if is_object {
                if let Some(Value::Object(props)) = map.get("properties") {
                    let names: Vec<Value> = props.keys().cloned().map(Value::String).collect();
                    map.insert("required".into(), Value::Array(names));
                }
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            for (key, child) in map.iter_mut() {
                if key != "required"
                    && key != "enum"
                    && key != "const"
                    && key != "default"
                    && key != "examples"
                {
                    make_strict(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(make_strict),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn score() -> OutputSchema {
        OutputSchema::json(
            json!({"title": "ScoreOutput", "type": "object", "properties": {"score": {"title": "Score", "type": "integer"}}, "required": ["score"]}),
        )
    }

    #[test]
    fn exact_parse_rejects_prose_and_accepts_fences() {
        let s = score();
        assert_eq!(
            s.parse_exact("```json\n{\"score\": 4}\n```").unwrap(),
            json!({"score": 4})
        );
        assert!(
            s.parse_exact("Thought: done\nFinal Answer: {\"score\": 4}")
                .is_err()
        );
        assert!(
            s.parse_exact("{\"score\": \"high\"}")
                .unwrap_err()
                .contains("score")
        );
    }

    #[test]
    fn lenient_parse_repairs() {
        let s = score();
        assert_eq!(
            s.parse_lenient("Here it is: {\"score\": 4,} thanks")
                .unwrap(),
            json!({"score": 4})
        );
        assert_eq!(
            s.parse_lenient("{\"note\": \"a } in a string\", \"score\": 2}")
                .unwrap()["score"],
            json!(2)
        );
        assert!(s.parse_lenient("no json here").is_err());
    }

    #[test]
    fn response_format_is_strict() {
        let s = OutputSchema::json(
            json!({"title": "A B", "type": "object", "properties": {"x": {"type": "object", "properties": {"y": {"type": "string"}}}}}),
        );
        let rf = s.response_format();
        assert_eq!(rf.name, "A_B");
        assert_eq!(rf.schema["additionalProperties"], json!(false));
        assert_eq!(rf.schema["required"], json!(["x"]));
        assert_eq!(rf.schema["properties"]["x"]["required"], json!(["y"]));
    }

    #[test]
    fn typed_schema_checks_the_rust_type() {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Small {
            n: u8,
        }
        let s = OutputSchema::of::<Small>();
        assert!(s.parse_exact("{\"n\": 3}").is_ok());
        assert!(s.parse_exact("{\"n\": 300}").is_err());
        assert_eq!(s.format(), OutputFormat::Pydantic);
    }
}
