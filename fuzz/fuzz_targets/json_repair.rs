//! JSON repair and argument preparation read the almost-JSON a model wrote as tool input: they
//! must never panic, and JSON that is already valid must come back as it was.
#![no_main]

use std::sync::LazyLock;

use crewai_tools::{prepare_arguments, repair_json};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// Schemas of the shapes tools declare: one string argument, several typed ones, nesting.
static SCHEMAS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    vec![
        json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "number"},
                "flag": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["a"]
        }),
        json!({
            "type": "object",
            "properties": {
                "item": {"$ref": "#/$defs/Item"},
                "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]}
            },
            "$defs": {"Item": {"type": "object", "properties": {"name": {"type": "string"}}}}
        }),
        json!({"type": "object", "properties": {}}),
    ]
});

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let repaired = repair_json(text);
    if let Ok(valid) = serde_json::from_str::<Value>(text.trim()) {
        assert_eq!(
            repaired.as_ref(),
            Some(&valid),
            "valid JSON must be kept as it is"
        );
    }
    let schema = &SCHEMAS[usize::from(selector) % SCHEMAS.len()];
    let _ = prepare_arguments(schema, &Value::String(text.to_string()));
    if let Some(value) = repaired {
        let _ = prepare_arguments(schema, &value);
    }
});
