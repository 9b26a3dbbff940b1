//! The ReAct text format parser, with CrewAI's rules:
//!
//! 1. the reply is cut at the first `\nObservation:` (the model must not write observations);
//! 2. when `Final Answer:` appears the reply is final, even if an action appears too, and the answer
//!    is the text after the *last* `Final Answer:` (a dangling closing code fence is dropped);
//! 3. otherwise `Action: <tool>` followed by `Action Input: <json>` is a tool call (the tool name loses
//!    `*` markup and surrounding space, the input loses surrounding spaces and quotes; the JSON itself
//!    is repaired later, against the tool's schema);
//! 4. anything else is taken whole as the final answer: a reply that cannot be parsed never loops.

use std::sync::LazyLock;

use regex::Regex;

/// The stop word of the ReAct loop: the model stops where the tool result would go.
pub const OBSERVATION_STOP: &str = "\nObservation:";

const FINAL_ANSWER: &str = "Final Answer:";

static ACTION: LazyLock<Regex> = LazyLock::new(|| {
    // The same shape as CrewAI's: optional digits after the keywords, the input runs to the end.
    Regex::new(r"(?s)Action\s*\d*\s*:\s*(.*?)\s*Action\s*\d*\s*Input\s*\d*\s*:\s*(.*)")
        .unwrap_or_else(|e| unreachable!("static regex: {e}"))
});

/// What a ReAct reply asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReactStep {
    /// Run a tool; `tool_input` is the raw argument text.
    Action {
        thought: String,
        tool: String,
        tool_input: String,
        text: String,
    },
    /// The reply is the final answer.
    Finish {
        thought: String,
        output: String,
        text: String,
    },
}

/// Cuts a reply at the first `\nObservation:`.
pub fn cut_at_observation(text: &str) -> &str {
    match text.find(OBSERVATION_STOP) {
        Some(index) => &text[..index],
        None => text,
    }
}

/// Parses one ReAct reply (see the module docs for the rules).
pub fn parse(reply: &str) -> ReactStep {
    let text = cut_at_observation(reply).to_string();
    let thought = extract_thought(&text);
    if let Some(index) = text.rfind(FINAL_ANSWER) {
        let output = drop_dangling_fence(text[index + FINAL_ANSWER.len()..].trim());
        return ReactStep::Finish {
            thought,
            output,
            text,
        };
    }
    if let Some(captures) = ACTION.captures(&text) {
        let tool = captures
            .get(1)
            .map(|m| m.as_str())
            .unwrap_or_default()
            .replace('*', "")
            .trim()
            .to_string();
        let tool_input = captures
            .get(2)
            .map(|m| m.as_str())
            .unwrap_or_default()
            .trim()
            .trim_matches(' ')
            .trim_matches('"')
            .trim()
            .to_string();
        if !tool.is_empty() {
            return ReactStep::Action {
                thought,
                tool,
                tool_input,
                text,
            };
        }
    }
    ReactStep::Finish {
        thought: String::new(),
        output: text.trim().to_string(),
        text,
    }
}

/// The reasoning before the first action (or before the final answer), without backticks.
fn extract_thought(text: &str) -> String {
    let end = text
        .find("\nAction")
        .or_else(|| text.find("\nFinal Answer"))
        .unwrap_or(0);
    let thought = text[..end].replace('`', "");
    let thought = thought.trim();
    thought
        .strip_prefix("Thought:")
        .unwrap_or(thought)
        .trim()
        .to_string()
}

/// Removes a closing ``` that has no opening partner (the model closed a fence it never opened
/// inside the answer).
fn drop_dangling_fence(output: &str) -> String {
    if output.ends_with("```") && output.matches("```").count() % 2 == 1 {
        output.trim_end_matches("```").trim_end().to_string()
    } else {
        output.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finish_output(step: ReactStep) -> String {
        match step {
            ReactStep::Finish { output, .. } => output,
            other => panic!("expected a final answer, got {other:?}"),
        }
    }

    #[test]
    fn final_answer_is_the_text_after_it() {
        assert_eq!(
            finish_output(parse(
                "Thought: I now can give a great answer\nFinal Answer: hi"
            )),
            "hi"
        );
    }

    #[test]
    fn final_answer_wins_over_an_action() {
        let reply = "Thought: t\nAction: search\nAction Input: {\"q\": \"x\"}\nFinal Answer: done";
        assert_eq!(finish_output(parse(reply)), "done");
    }

    #[test]
    fn the_last_final_answer_counts() {
        assert_eq!(
            finish_output(parse(
                "Final Answer: draft\nThought: better\nFinal Answer: final"
            )),
            "final"
        );
    }

    #[test]
    fn multiline_final_answers_keep_their_lines() {
        assert_eq!(
            finish_output(parse("Final Answer: {\n  \"score\": 4\n}")),
            "{\n  \"score\": 4\n}"
        );
    }

    #[test]
    fn a_dangling_fence_is_dropped_but_a_full_block_is_kept() {
        assert_eq!(finish_output(parse("Final Answer: 42\n```")), "42");
        assert_eq!(
            finish_output(parse("Final Answer: ```json\n{}\n```")),
            "```json\n{}\n```"
        );
    }

    #[test]
    fn action_and_input_are_extracted() {
        let step = parse(
            "Thought: I should search\nAction: **search_web**\nAction Input: \"{\"query\": \"tokyo\"}\"",
        );
        assert_eq!(
            step,
            ReactStep::Action {
                thought: "I should search".into(),
                tool: "search_web".into(),
                tool_input: "{\"query\": \"tokyo\"}".into(),
                text: "Thought: I should search\nAction: **search_web**\nAction Input: \"{\"query\": \"tokyo\"}\"".into(),
            }
        );
    }

    /// The tool, input and kept text of the action `reply` parses to.
    fn action(reply: &str) -> (String, String, String) {
        match parse(reply) {
            ReactStep::Action {
                tool,
                tool_input,
                text,
                ..
            } => (tool, tool_input, text),
            other => panic!("{reply:?} should be an action: {other:?}"),
        }
    }

    #[test]
    fn numbered_keywords_are_accepted() {
        let (tool, tool_input, _) = action("Action 1: calc\nAction 1 Input: {\"a\": 1}");
        assert_eq!((tool.as_str(), tool_input.as_str()), ("calc", "{\"a\": 1}"));
    }

    #[test]
    fn the_reply_is_cut_at_the_observation() {
        // A hallucinated observation must not turn the reply final.
        let (tool, tool_input, text) = action(
            "Action: calc\nAction Input: {\"a\": 1}\nObservation: 2\nThought: done\nFinal Answer: 2",
        );
        assert_eq!((tool.as_str(), tool_input.as_str()), ("calc", "{\"a\": 1}"));
        assert!(!text.contains("Observation"));
    }

    #[test]
    fn unparseable_text_is_the_final_answer() {
        assert_eq!(
            finish_output(parse("Just the answer, no format.")),
            "Just the answer, no format."
        );
        // An action without its input cannot run, so it is an answer too (CrewAI's format_answer).
        assert_eq!(finish_output(parse("Action: search")), "Action: search");
    }

    #[test]
    fn thought_is_taken_before_the_action() {
        match parse("Thought: `check` first\nAction: a\nAction Input: {}") {
            ReactStep::Action { thought, .. } => assert_eq!(thought, "check first"),
            other => panic!("{other:?}"),
        }
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    /// Text made of the format's keywords and the characters around them, so the parser's
    /// branches are hit far more often than by arbitrary strings.
    fn react_like_text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                Just("Thought:".to_string()),
                Just("Action".to_string()),
                Just("Action:".to_string()),
                Just("Action Input:".to_string()),
                Just("Action 2 Input 3:".to_string()),
                Just("Final Answer:".to_string()),
                Just("\nObservation:".to_string()),
                Just("```".to_string()),
                Just("**".to_string()),
                "[ \n\t\"{}:,0-9a-zé]{0,6}",
                any::<String>(),
            ],
            0..24,
        )
        .prop_map(|parts| parts.concat())
    }

    /// JSON whose strings and keys hold no `:`, so they cannot spell a keyword of the format.
    fn json_value() -> impl Strategy<Value = Value> {
        let text = "[a-zA-Z0-9 _.,!?'()-]{0,12}";
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            text.prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((text, inner), 0..4)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    fn json_object() -> impl Strategy<Value = Map<String, Value>> {
        prop::collection::vec(("[a-z_]{1,8}", json_value()), 0..4)
            .prop_map(|fields| fields.into_iter().collect())
    }

    fn check_invariants(reply: &str) -> Result<(), TestCaseError> {
        let kept = cut_at_observation(reply);
        match parse(reply) {
            ReactStep::Action {
                tool,
                tool_input,
                text,
                ..
            } => {
                prop_assert_eq!(text.as_str(), kept);
                prop_assert!(!tool.is_empty());
                prop_assert!(kept.contains(tool_input.as_str()));
            }
            ReactStep::Finish { output, text, .. } => {
                prop_assert_eq!(text.as_str(), kept);
                prop_assert!(kept.contains(output.as_str()));
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(reply in any::<String>()) {
            check_invariants(&reply)?;
        }

        #[test]
        fn text_full_of_keywords_never_panics(reply in react_like_text()) {
            check_invariants(&reply)?;
        }

        #[test]
        fn a_well_formed_action_round_trips(
            thought in "[a-zA-Z0-9 ,.]{0,30}",
            tool in "[a-zA-Z_][a-zA-Z0-9_ ]{0,20}",
            input in json_object(),
            pretty in any::<bool>(),
        ) {
            prop_assume!(!tool.contains("Action"));
            let input = Value::Object(input);
            let input_text = if pretty {
                serde_json::to_string_pretty(&input)
            } else {
                serde_json::to_string(&input)
            }
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let reply = format!("Thought: {thought}\nAction: {tool}\nAction Input: {input_text}");
            match parse(&reply) {
                ReactStep::Action { thought: parsed_thought, tool: parsed_tool, tool_input, .. } => {
                    prop_assert_eq!(parsed_thought, thought.trim());
                    prop_assert_eq!(parsed_tool, tool.trim());
                    let parsed: Value = serde_json::from_str(&tool_input)
                        .map_err(|e| TestCaseError::fail(format!("{tool_input:?}: {e}")))?;
                    prop_assert_eq!(parsed, input);
                }
                other => prop_assert!(false, "expected an action, got {other:?}"),
            }
        }

        #[test]
        fn a_final_answer_is_its_body(thought in "[a-zA-Z0-9 ,.]{0,30}", body in any::<String>()) {
            prop_assume!(!body.contains(FINAL_ANSWER));
            prop_assume!(!body.contains(OBSERVATION_STOP));
            prop_assume!(!body.contains("```"));
            let reply = format!("Thought: {thought}\nFinal Answer: {body}");
            match parse(&reply) {
                ReactStep::Finish { output, .. } => prop_assert_eq!(output, body.trim()),
                other => prop_assert!(false, "expected a final answer, got {other:?}"),
            }
        }
    }
}
