//! Tool and response schemas rewritten into the OpenAPI subset Gemini accepts.
//!
//! A JSON schema is free-form JSON, so this works on `serde_json::Value`: `$ref`s are inlined,
//! keywords Gemini rejects are dropped, and `null` unions become `nullable`.

use serde_json::{Map, Value, json};

/// A JSON schema rewritten into the OpenAPI subset Gemini accepts.
///
/// ```
/// use crewai_llm::gemini::clean_schema;
/// use serde_json::json;
/// let schema = json!({
///     "$schema": "https://json-schema.org/draft/2020-12/schema",
///     "title": "Args", "type": "object", "additionalProperties": false,
///     "properties": {"city": {"type": ["string", "null"], "title": "City", "default": null}},
///     "required": ["city"]
/// });
/// assert_eq!(clean_schema(&schema), json!({
///     "type": "object",
///     "properties": {"city": {"type": "string", "nullable": true}},
///     "required": ["city"]
/// }));
/// ```
pub fn clean_schema(schema: &Value) -> Value {
    let definitions = ["$defs", "definitions"]
        .iter()
        .filter_map(|key| schema.get(*key))
        .filter_map(Value::as_object)
        .fold(Map::new(), |mut all, defs| {
            all.extend(defs.iter().map(|(k, v)| (k.clone(), v.clone())));
            all
        });
    clean_node(schema, &definitions, 0)
}

/// How deep `$ref`s are followed; recursive schemas end in a plain object there.
const MAX_SCHEMA_DEPTH: usize = 24;

fn clean_node(node: &Value, definitions: &Map<String, Value>, depth: usize) -> Value {
    let Value::Object(map) = node else {
        // `true` (anything) has no OpenAPI form beyond "no constraints".
        return json!({});
    };
    if depth > MAX_SCHEMA_DEPTH {
        return json!({"type": "object"});
    }
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap_or(reference);
        let Some(Value::Object(target)) = definitions.get(name) else {
            return json!({"type": "object"});
        };
        // Keywords beside the `$ref` (a description) win over the definition's.
        let mut merged = target.clone();
        merged.extend(
            map.iter()
                .filter(|(k, _)| k.as_str() != "$ref")
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        return clean_node(&Value::Object(merged), definitions, depth + 1);
    }
    if let Some(Value::Array(all)) = map.get("allOf") {
        let mut merged: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| k.as_str() != "allOf")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for part in all {
            let cleaned = clean_node(part, definitions, depth + 1);
            if let Value::Object(fields) = cleaned {
                for (key, value) in fields {
                    merged.entry(key).or_insert(value);
                }
            }
        }
        return clean_node(&Value::Object(merged), definitions, depth + 1);
    }

    let mut out = Map::new();
    let mut nullable = map
        .get("nullable")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match map.get("type") {
        Some(Value::String(kind)) if kind == "null" => nullable = true,
        Some(Value::String(kind)) => {
            out.insert("type".into(), json!(kind));
        }
        Some(Value::Array(kinds)) => {
            let named: Vec<&str> = kinds
                .iter()
                .filter_map(Value::as_str)
                .filter(|k| *k != "null")
                .collect();
            nullable |= named.len() < kinds.len();
            match named.as_slice() {
                [] => {}
                [one] => {
                    out.insert("type".into(), json!(one));
                }
                many => {
                    let options: Vec<Value> =
                        many.iter().map(|kind| json!({"type": kind})).collect();
                    out.insert("anyOf".into(), Value::Array(options));
                }
            }
        }
        _ => {}
    }
    if let Some(options) = map
        .get("anyOf")
        .or_else(|| map.get("oneOf"))
        .and_then(Value::as_array)
    {
        let is_null = |o: &&Value| o.get("type").and_then(Value::as_str) == Some("null");
        nullable |= options.iter().any(|o| is_null(&o));
        let kept: Vec<Value> = options
            .iter()
            .filter(|o| !is_null(o))
            .map(|o| clean_node(o, definitions, depth + 1))
            .collect();
        match kept.len() {
            0 => {}
            1 => {
                if let Some(Value::Object(only)) = kept.into_iter().next() {
                    for (key, value) in only {
                        out.entry(key).or_insert(value);
                    }
                }
            }
            _ => {
                out.insert("anyOf".into(), Value::Array(kept));
            }
        }
    }
    if let Some(value) = map.get("const") {
        out.insert("enum".into(), json!([scalar_text(value)]));
        out.entry("type").or_insert(json!("string"));
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        // Gemini's enums are lists of strings.
        if values.iter().all(Value::is_string) {
            out.insert("enum".into(), Value::Array(values.clone()));
        }
    }
    if let Some(Value::Object(properties)) = map.get("properties") {
        let cleaned: Map<String, Value> = properties
            .iter()
            .map(|(k, v)| (k.clone(), clean_node(v, definitions, depth + 1)))
            .collect();
        if let Some(Value::Array(required)) = map.get("required") {
            let present: Vec<Value> = required
                .iter()
                .filter(|r| r.as_str().is_some_and(|r| cleaned.contains_key(r)))
                .cloned()
                .collect();
            if !present.is_empty() {
                out.insert("required".into(), Value::Array(present));
            }
        }
        out.insert("properties".into(), Value::Object(cleaned));
    }
    match map.get("items") {
        Some(items @ Value::Object(_)) => {
            out.insert("items".into(), clean_node(items, definitions, depth + 1));
        }
        // Tuple schemas have no OpenAPI form; the first position's schema is the closest.
        Some(Value::Array(positions)) if !positions.is_empty() => {
            out.insert(
                "items".into(),
                clean_node(&positions[0], definitions, depth + 1),
            );
        }
        _ => {}
    }
    if let Some(format) = map.get("format").and_then(Value::as_str) {
        let kind = out.get("type").and_then(Value::as_str).unwrap_or_default();
        let supported = match kind {
            "string" => matches!(format, "enum" | "date-time"),
            "number" => matches!(format, "float" | "double"),
            "integer" => matches!(format, "int32" | "int64"),
            _ => false,
        };
        if supported {
            out.insert("format".into(), json!(format));
        }
    }
    const KEPT: &[&str] = &[
        "description",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minProperties",
        "maxProperties",
        "propertyOrdering",
    ];
    for key in KEPT {
        if let Some(value) = map.get(*key) {
            out.insert((*key).to_string(), value.clone());
        }
    }
    if nullable {
        out.insert("nullable".into(), json!(true));
    }
    Value::Object(out)
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_inlined_and_unions_become_nullable() {
        let schema = json!({
            "type": "object",
            "$defs": {"Address": {"type": "object", "title": "Address", "properties": {"city": {"type": "string", "format": "uri"}}}},
            "properties": {
                "home": {"$ref": "#/$defs/Address", "description": "Where"},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                "kind": {"const": "basic"},
                "tags": {"type": "array", "items": {"type": "string"}, "examples": [["a"]]},
                "level": {"type": "integer", "enum": [1, 2]}
            },
            "required": ["home", "ghost"]
        });
        assert_eq!(
            clean_schema(&schema),
            json!({
                "type": "object",
                "required": ["home"],
                "properties": {
                    "home": {"type": "object", "properties": {"city": {"type": "string"}}, "description": "Where"},
                    "note": {"type": "string", "nullable": true},
                    "kind": {"enum": ["basic"], "type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "level": {"type": "integer"}
                }
            })
        );
    }

    #[test]
    fn recursive_refs_end_at_the_depth_limit() {
        let schema = json!({"$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}}, "$ref": "#/$defs/Node"});
        let cleaned = clean_schema(&schema);
        assert_eq!(cleaned["properties"]["child"]["type"], "object");
    }
}
