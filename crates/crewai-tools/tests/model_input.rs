//! Whatever a model sends as arguments, preparing them never panics.

use crewai_tools::{prepare_arguments, repair_json};
use proptest::prelude::*;
use serde_json::json;

fn schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": ["integer", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["query"]
    })
}

proptest! {
    // A fixed seed keeps the run deterministic; no regression files are written.
    #![proptest_config(ProptestConfig {
        cases: 512,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn repair_never_panics(text in any::<String>()) {
        let _ = repair_json(&text);
    }

    #[test]
    fn json_like_text_never_panics(text in r#"[{}\[\],:'"` a-zA-Z0-9_\n.-]{0,80}"#) {
        let _ = repair_json(&text);
        let _ = prepare_arguments(&schema(), &json!(text));
    }

    #[test]
    fn repaired_objects_validate_or_explain(query in any::<String>(), limit in any::<i64>()) {
        let raw = json!({"query": query, "limit": limit.to_string()});
        let prepared = prepare_arguments(&schema(), &raw).unwrap();
        prop_assert_eq!(&prepared["limit"], &json!(limit));
    }
}
