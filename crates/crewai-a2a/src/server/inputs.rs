//! A message's parts as a crew's inputs.

use serde_json::{Map, Value};

use crate::types::{Message, Part};

/// The crew's `{placeholders}` and the defaults it has for some of them.
#[derive(Debug, Clone, Default)]
pub struct InputSpec {
    /// Every placeholder of the crew's agents and tasks.
    pub names: Vec<String>,
    /// Values the project gives (`crew.yaml`'s `inputs`); a message overrides them.
    pub defaults: Map<String, Value>,
}

impl InputSpec {
    /// The inputs a message gives: each data part's object, then the text for the crew's only
    /// placeholder (or, for several, a text that is a JSON object), over the defaults. A
    /// placeholder left without a value is an error naming it. A crew without placeholders
    /// runs as it is (the message stays in the task's history).
    pub fn inputs_from(&self, message: &Message) -> Result<Map<String, Value>, String> {
        let mut given = Map::new();
        let mut texts = Vec::new();
        for part in &message.parts {
            match part {
                Part::Data { data, .. } => given.extend(data.clone()),
                Part::Text { text, .. } => texts.push(text.as_str()),
                Part::File { .. } => {
                    return Err(
                        "file parts are not crew inputs; send text, or a data part with the inputs"
                            .into(),
                    );
                }
            }
        }
        let text = texts.join("\n");
        let text = text.trim();
        if !text.is_empty() {
            match self.names.as_slice() {
                [only] if !given.contains_key(only) => {
                    given.insert(only.clone(), Value::String(text.to_string()));
                }
                [_, _, ..] => {
                    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) {
                        for (name, value) in object {
                            given.entry(name).or_insert(value);
                        }
                    }
                }
                _ => {}
            }
        }
        let mut inputs = self.defaults.clone();
        inputs.extend(given);
        let missing: Vec<&str> = self
            .names
            .iter()
            .filter(|name| !inputs.contains_key(name.as_str()))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            return Ok(inputs);
        }
        let listed = missing
            .iter()
            .map(|name| format!("'{name}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let example = missing
            .iter()
            .map(|name| format!("\"{name}\": \"...\""))
            .collect::<Vec<_>>()
            .join(", ");
        Err(format!(
            "missing crew input {listed} (the crew's {{placeholders}}: {}); send them in a data part: {{{example}}}",
            self.names.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Role;
    use serde_json::json;

    fn spec(names: &[&str], defaults: Value) -> InputSpec {
        InputSpec {
            names: names.iter().map(|n| n.to_string()).collect(),
            defaults: defaults.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn the_text_fills_the_only_placeholder() {
        let message = Message::new_text(Role::User, "  rust  ");
        let inputs = spec(&["topic"], json!({})).inputs_from(&message).unwrap();
        assert_eq!(Value::Object(inputs), json!({"topic": "rust"}));
    }

    #[test]
    fn a_data_part_fills_several_and_a_missing_one_is_named() {
        let mut message = Message::new_text(Role::User, "ignored for two placeholders");
        message.parts.push(Part::Data {
            data: json!({"topic": "AI"}).as_object().cloned().unwrap(),
            metadata: None,
        });
        let error = spec(&["topic", "year"], json!({}))
            .inputs_from(&message)
            .unwrap_err();
        assert!(error.contains("missing crew input 'year'"), "{error}");
        let inputs = spec(&["topic", "year"], json!({"year": 2025}))
            .inputs_from(&message)
            .unwrap();
        assert_eq!(Value::Object(inputs), json!({"year": 2025, "topic": "AI"}));
        let json_text = Message::new_text(Role::User, r#"{"topic": "x", "year": "1"}"#);
        assert!(
            spec(&["topic", "year"], json!({}))
                .inputs_from(&json_text)
                .is_ok()
        );
    }
}
