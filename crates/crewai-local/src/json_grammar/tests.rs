//! The automaton against documents on and off a schema.

use crewai_testkit::fixtures::itinerary_schema;
use serde_json::json;

use super::*;

fn judge() -> Value {
    json!({
        "type": "object",
        "properties": {
            "valid": {"type": "boolean"},
            "feedback": {"type": ["string", "null"]}
        },
        "required": ["valid", "feedback"],
        "additionalProperties": false
    })
}

fn complete(schema: &Value, text: &str) -> bool {
    let mut grammar = JsonGrammar::new(schema);
    grammar.advance(text) && grammar.may_end()
}

#[test]
fn documents_matching_the_schema_are_accepted() {
    let schema = itinerary_schema();
    for text in [
        r#"{"city":"Kyoto","days":[],"budget_total":1200.5}"#,
        r#"{"city":"Kyoto","days":[{"date":"2026-04-01","plan":"Temples"}],"budget_total":-3e2,"packing":["hat"]}"#,
        r#"{"city":"K\"y\u00e9oto","days":[{"date":"d","plan":"p","weather":"sun"},{"date":"e","plan":"q"}],"budget_total":0}"#,
    ] {
        assert!(complete(&schema, text), "{text}");
        assert!(serde_json::from_str::<Value>(text).is_ok());
    }
    assert!(complete(&judge(), r#"{"valid":true,"feedback":null}"#));
    assert!(complete(
        &judge(),
        r#"{"valid":false,"feedback":"Add a title."}"#
    ));
}

#[test]
fn anything_off_the_schema_is_refused() {
    let schema = itinerary_schema();
    let grammar = JsonGrammar::new(&schema);
    for text in [
        "[",
        " {",
        r#"{"days""#,
        r#"{"city":1"#,
        r#"{"city":"a"}"#,
        r#"{"city":"a","budget_total""#,
        r#"{"city":"a","days":[{"plan""#,
        r#"{"city":"a","days":[],"budget_total":01"#,
        r#"{"city":"a","days":[],"budget_total":1.}"#,
        "{\"city\":\"line\nbreak",
        r#"{"city":"bad \q escape"#,
    ] {
        assert!(!grammar.accepts(text), "{text}");
    }
    assert!(!complete(&judge(), r#"{"valid":"yes","feedback":null}"#));
    assert!(!complete(&judge(), r#"{"valid":true}"#));
    // A whole document accepts nothing after it.
    assert!(!JsonGrammar::new(&judge()).accepts(r#"{"valid":true,"feedback":null} "#));
}

#[test]
fn the_completion_closes_every_open_value_with_the_required_keys() {
    let schema = itinerary_schema();
    for prefix in [
        "",
        "{",
        r#"{"ci"#,
        r#"{"city":"Kyo"#,
        r#"{"city":"Kyoto","#,
        r#"{"city":"Kyoto","days":[{"date":"2026"#,
        r#"{"city":"Kyoto","days":[{"date":"d","plan":"p"},"#,
        r#"{"city":"Kyoto","days":[],"budget_total":12"#,
        r#"{"city":"Kyoto","days":[],"budget_total":1.5e"#,
        r#"{"city":"Kyoto","days":[],"budget_total":-"#,
        r#"{"city":"a \u00"#,
        r#"{"city":"a \"#,
    ] {
        let mut grammar = JsonGrammar::new(&schema);
        assert!(grammar.advance(prefix), "{prefix}");
        let rest = grammar.completion();
        let document = format!("{prefix}{rest}");
        assert!(complete(&schema, &document), "{document}");
        let value: Value =
            serde_json::from_str(&document).unwrap_or_else(|e| panic!("{e}: {document}"));
        for key in ["city", "days", "budget_total"] {
            assert!(value.get(key).is_some(), "{document}");
        }
    }
    let mut grammar = JsonGrammar::new(&judge());
    assert!(grammar.advance(r#"{"valid":f"#));
    assert_eq!(grammar.completion(), r#"alse,"feedback":""}"#);
}

#[test]
fn enums_refs_and_integers_follow_the_schema() {
    let schema = json!({
        "$defs": {"Level": {"type": "string", "enum": ["low", "high"]}},
        "type": "object",
        "properties": {
            "level": {"allOf": [{"$ref": "#/$defs/Level"}], "description": "How much"},
            "count": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}
        },
        "required": ["level", "count", "tags"]
    });
    assert!(complete(
        &schema,
        r#"{"level":"high","count":-12,"tags":["a","b"]}"#
    ));
    let grammar = JsonGrammar::new(&schema);
    assert!(!grammar.accepts(r#"{"level":"medium""#));
    assert!(!grammar.accepts(r#"{"level":"low","count":1.5"#));
    assert!(!grammar.accepts(r#"{"level":"low","count":1,"tags":[]"#));
    assert!(!grammar.accepts(r#"{"level":"low","count":1,"tags":["a","b","#));
    let mut grammar = JsonGrammar::new(&schema);
    assert!(grammar.advance("{"));
    assert_eq!(
        grammar.completion(),
        r#""level":"low","count":0,"tags":[""]}"#
    );
}

#[test]
fn recursive_schemas_compile_once_and_still_complete() {
    let schema = json!({
        "$defs": {"Node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "left": {"$ref": "#/$defs/Node"},
                "right": {"$ref": "#/$defs/Node"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
            },
            "required": ["name", "children"]
        }},
        "$ref": "#/$defs/Node"
    });
    let mut grammar = JsonGrammar::new(&schema);
    assert!(grammar.nodes.len() < 20, "{}", grammar.nodes.len());
    let prefix = r#"{"name":"a","left":{"name":"b","children":[{"name":"c","#;
    assert!(grammar.advance(prefix));
    let document = format!("{prefix}{}", grammar.completion());
    assert!(complete(&schema, &document), "{document}");
}

#[test]
fn unknown_schemas_fall_back_to_any_json() {
    for schema in [json!({}), json!(true), json!({"type": "object"})] {
        let grammar = JsonGrammar::new(&schema);
        let document = r#"{"a":[1,-2.5e3,"x",{"b":null}],"c":true,"d":{}}"#;
        assert!(complete(&schema, document), "{schema}");
        assert!(!grammar.accepts(r#"{"a":tru "#));
        assert!(!grammar.accepts("{a"));
    }
    let mut grammar = JsonGrammar::any();
    assert!(grammar.advance(r#"{"a":[1,{"b":"#));
    let document = format!(r#"{{"a":[1,{{"b":{}"#, grammar.completion());
    assert!(
        serde_json::from_str::<Value>(&document).is_ok(),
        "{document}"
    );
}
