//! Data that several crates' tests share.

use serde_json::{Value, json};

/// The trip planner's itinerary: a JSON schema with a nested array of objects, required and
/// optional properties, strings, numbers and a list of strings. Tests of structured output
/// (`output_json`, `response_format`, the local model's JSON grammar) hold replies to it.
pub fn itinerary_schema() -> Value {
    json!({
        "title": "Itinerary",
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "date": {"type": "string"},
                    "plan": {"type": "string"},
                    "weather": {"type": "string"}
                },
                "required": ["date", "plan"]
            }},
            "budget_total": {"type": "number"},
            "packing": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["city", "days", "budget_total"]
    })
}
