//! Comparing JSON schemas by meaning: key order never matters, `required` is a set, numbers
//! compare by value, and annotation keywords (`title`, `description`) can be left out where their
//! wording is ours.

use serde_json::{Map, Value};

/// Which annotation keywords a comparison ignores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wording {
    /// Every keyword counts: the schema came from the case (a test tool, an `output_json`).
    Compared,
    /// `title` and `description` are left out everywhere in the schema: the engine wrote them
    /// (delegation tools, the guardrail verdict), so their wording is ours.
    Ours,
}

/// Keywords whose value is a map of name → subschema.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is one subschema (or a boolean).
const SCHEMA_VALUES: &[&str] = &[
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "propertyNames",
    "contains",
    "not",
    "if",
    "then",
    "else",
];
/// Keywords whose value is a list of subschemas.
const SCHEMA_LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
const ANNOTATIONS: &[&str] = &["title", "description"];

/// `schema` in a canonical form: annotations dropped when `wording` says so, `required` and a
/// `type` list sorted. Values that are data (`enum`, `const`, `default`, `examples`) are kept
/// as they are, so a property *named* `title` or `description` is never taken for a keyword.
pub fn canonical(schema: &Value, wording: Wording) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        if wording == Wording::Ours && ANNOTATIONS.contains(&key.as_str()) {
            continue;
        }
        let value = if SCHEMA_MAPS.contains(&key.as_str()) {
            match value {
                Value::Object(members) => Value::Object(
                    members
                        .iter()
                        .map(|(name, sub)| (name.clone(), canonical(sub, wording)))
                        .collect(),
                ),
                other => other.clone(),
            }
        } else if SCHEMA_VALUES.contains(&key.as_str()) {
            match value {
                Value::Array(list) => {
                    Value::Array(list.iter().map(|s| canonical(s, wording)).collect())
                }
                other => canonical(other, wording),
            }
        } else if SCHEMA_LISTS.contains(&key.as_str()) {
            match value {
                Value::Array(list) => {
                    Value::Array(list.iter().map(|s| canonical(s, wording)).collect())
                }
                other => other.clone(),
            }
        } else if key == "required" || (key == "type" && value.is_array()) {
            sorted(value)
        } else {
            value.clone()
        };
        out.insert(key.clone(), value);
    }
    type_union(&mut out);
    Value::Object(out)
}

/// `anyOf` of bare types (`[{"type": "string"}, {"type": "null"}]`, pydantic's `str | None`)
/// means the same as a type list (`["null", "string"]`): both become the sorted list.
fn type_union(schema: &mut Map<String, Value>) {
    if schema.contains_key("type") {
        return;
    }
    let Some(Value::Array(branches)) = schema.get("anyOf") else {
        return;
    };
    let mut kinds: Vec<Value> = Vec::new();
    for branch in branches {
        match branch.as_object() {
            Some(only) if only.len() == 1 => match only.get("type") {
                Some(Value::String(kind)) => kinds.push(Value::String(kind.clone())),
                Some(Value::Array(list)) => kinds.extend(list.iter().cloned()),
                _ => return,
            },
            _ => return,
        }
    }
    kinds.sort_by_key(|v| v.to_string());
    kinds.dedup();
    schema.remove("anyOf");
    schema.insert("type".into(), Value::Array(kinds));
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Array(items) => {
            let mut items = items.clone();
            items.sort_by_key(|v| v.to_string());
            Value::Array(items)
        }
        other => other.clone(),
    }
}

/// A tool name as CrewAI sanitizes it: lower case, every run of characters other than letters,
/// digits, `_` and `-` one `_`, no `_` at the ends. CrewAI's sanitizing changed between the
/// versions that recorded the cassettes (`Delegate_work_to_coworker`, `Delegate work to
/// coworker` in a ReAct listing, `delegate_work_to_coworker` today), so names are compared in
/// this form.
pub fn tool_key(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_matches('_').to_string()
}

/// The first place two canonical schemas differ: (JSON path, ours, recorded); None when equal.
pub fn difference(sent: &Value, recorded: &Value) -> Option<(String, String, String)> {
    crate::diff::json_difference("", Some(sent), Some(recorded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn order_and_required_order_do_not_matter() {
        let a = json!({"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}});
        let b = json!({"properties": {"b": {"type": "string"}, "a": {"type": "integer"}}, "required": ["b", "a"], "type": "object"});
        assert_eq!(
            difference(
                &canonical(&a, Wording::Compared),
                &canonical(&b, Wording::Compared)
            ),
            None
        );
        let c = json!({"properties": {"b": {"type": "string"}, "a": {"type": "number"}}, "required": ["b", "a"], "type": "object"});
        let (path, ours, theirs) = difference(
            &canonical(&a, Wording::Compared),
            &canonical(&c, Wording::Compared),
        )
        .unwrap();
        assert_eq!(
            (path.as_str(), ours.as_str(), theirs.as_str()),
            ("properties.a.type", "\"integer\"", "\"number\"")
        );
    }

    #[test]
    fn our_wording_is_left_out_but_a_property_named_description_is_not() {
        let ours = json!({"title": "Mine", "properties": {"description": {"type": "string", "description": "my words"}}, "required": ["description"]});
        let recorded = json!({"title": "Theirs", "properties": {"description": {"type": "string", "description": "their words", "title": "Description"}}, "required": ["description"]});
        assert_eq!(
            difference(
                &canonical(&ours, Wording::Ours),
                &canonical(&recorded, Wording::Ours)
            ),
            None
        );
        assert!(
            difference(
                &canonical(&ours, Wording::Compared),
                &canonical(&recorded, Wording::Compared)
            )
            .is_some()
        );
        let renamed =
            json!({"properties": {"summary": {"type": "string"}}, "required": ["summary"]});
        assert!(
            difference(
                &canonical(&ours, Wording::Ours),
                &canonical(&renamed, Wording::Ours)
            )
            .is_some()
        );
        let nested = json!({"$defs": {"E": {"title": "E", "properties": {"x": {"title": "X", "type": "string"}}}}, "anyOf": [{"title": "t", "type": "null"}, {"$ref": "#/$defs/E"}]});
        assert_eq!(
            canonical(&nested, Wording::Ours),
            json!({"$defs": {"E": {"properties": {"x": {"type": "string"}}}}, "anyOf": [{"type": "null"}, {"$ref": "#/$defs/E"}]})
        );
    }

    #[test]
    fn a_union_of_bare_types_is_a_type_list() {
        let pydantic = json!({"anyOf": [{"type": "string"}, {"type": "null"}], "title": "F"});
        let list = json!({"type": ["null", "string"], "title": "F"});
        assert_eq!(
            canonical(&pydantic, Wording::Compared),
            canonical(&list, Wording::Compared)
        );
        let rich = json!({"anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}]});
        assert_eq!(
            canonical(&rich, Wording::Compared),
            rich,
            "a branch with more than a type stays"
        );
    }

    #[test]
    fn tool_names_as_crewai_sanitizes_them() {
        assert_eq!(
            tool_key("Delegate work to coworker"),
            "delegate_work_to_coworker"
        );
        assert_eq!(
            tool_key("Delegate_work_to_coworker"),
            "delegate_work_to_coworker"
        );
        assert_eq!(tool_key("  get-final answer! "), "get-final_answer");
        assert_ne!(tool_key("multiplier"), tool_key("multiply"));
    }
}
