//! The structural comparison on hand-made OpenAI chat bodies: each compared field fails when it
//! differs, and each rule for older recordings applies only on its evidence.

use std::path::Path;

use serde_json::{Value, json};

use super::era::{self, Lineage, Verdict, reply_calls_tools, strict_form};
use super::*;

fn case(yaml: &str) -> Case {
    Case::parse(yaml, Path::new("case.yaml")).unwrap()
}

/// A case with one test tool `multiplier` and one output schema `ScoreOutput`.
fn provenance() -> Provenance {
    Provenance::of(&case(
        "name: t\nllm: {model: gpt-4o}\ntools:\n  multiplier:\n    description: Multiplies.\n    args: {a: integer}\n    behaviour: {kind: multiply}\nagents:\n  scorer: {role: Scorer, goal: Score, backstory: You score titles for a living.}\ntasks:\n  - {name: t, description: d, expected_output: e, agent: scorer, output_json: {title: ScoreOutput, type: object, properties: {score: {type: integer}}}}\n",
    ))
}

fn tool(name: &str, description: &str, parameters: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description, "strict": true, "parameters": parameters}})
}

fn multiplier() -> Value {
    tool(
        "multiplier",
        "Multiplies.",
        json!({"properties": {"a": {"title": "A", "type": "integer"}}, "required": ["a"], "type": "object", "additionalProperties": false}),
    )
}

fn body(extra: Value) -> Value {
    let mut base = json!({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "You are Scorer. You score titles for a living."},
        {"role": "user", "content": "Current Task: score"}
    ]});
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        base.extend(extra.clone());
    }
    base
}

fn fields(sent: &Value, recorded: &Value) -> Vec<String> {
    let (a, b) = (
        Shape::of(WireFormat::Chat, sent),
        Shape::of(WireFormat::Chat, recorded),
    );
    match era::modernize(WireFormat::Chat, &provenance(), &a, &b).0 {
        Verdict::Compare { sent, recorded } => {
            compare_shapes(WireFormat::Chat, &provenance(), &sent, &recorded)
                .into_iter()
                .map(|(field, detail)| format!("{field}: {detail}"))
                .collect()
        }
        Verdict::Unrelated(note) => vec![note],
    }
}

#[test]
fn identical_bodies_and_key_order_pass() {
    let a = body(json!({"tools": [multiplier()], "tool_choice": "auto"}));
    assert!(fields(&a, &a).is_empty());
    let reordered: Value = serde_json::from_str(&a.to_string().replace(
        "\"title\":\"A\",\"type\":\"integer\"",
        "\"type\":\"integer\",\"title\":\"A\"",
    ))
    .unwrap();
    assert!(fields(&reordered, &a).is_empty());
    // Absent tool_choice with tools is the API default, auto.
    let implicit = body(json!({"tools": [multiplier()]}));
    assert!(fields(&implicit, &a).is_empty());
}

#[test]
fn model_tools_and_choice_differences_fail() {
    let recorded = body(json!({"tools": [multiplier()], "tool_choice": "auto"}));
    let other_model = body(json!({"model": "gpt-4o-mini", "tools": [multiplier()]}));
    assert_eq!(
        fields(&other_model, &recorded),
        ["model: sent Some(\"gpt-4o-mini\"), recorded Some(\"gpt-4o\")"]
    );
    let no_tools = body(json!({}));
    let diffs = fields(&no_tools, &recorded);
    assert!(
        diffs[0].starts_with("tools: sent [], recorded [\"multiplier\"]"),
        "{diffs:?}"
    );
    assert!(
        diffs.contains(&"tool_choice: sent none, recorded auto".to_string()),
        "{diffs:?}"
    );
    let forced = body(
        json!({"tools": [multiplier()], "tool_choice": {"type": "function", "function": {"name": "multiplier"}}}),
    );
    assert_eq!(
        fields(&forced, &recorded),
        ["tool_choice: sent function:multiplier, recorded auto"]
    );
}

#[test]
fn a_case_tool_keeps_its_wording_an_engine_tool_does_not() {
    let recorded = body(json!({"tools": [multiplier()]}));
    let reworded = body(
        json!({"tools": [tool("multiplier", "Multiplies two numbers.", json!({"properties": {"a": {"title": "A", "type": "integer"}}, "required": ["a"], "type": "object", "additionalProperties": false}))]}),
    );
    let diffs = fields(&reworded, &recorded);
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(
        diffs[0].starts_with("tools.multiplier.description: differs at char 10"),
        "{diffs:?}"
    );
    let retyped = body(
        json!({"tools": [tool("multiplier", "Multiplies.", json!({"properties": {"a": {"title": "A", "type": "number"}}, "required": ["a"], "type": "object", "additionalProperties": false}))]}),
    );
    assert_eq!(
        fields(&retyped, &recorded),
        ["tools.multiplier.parameters.properties.a.type: sent \"number\", recorded \"integer\""]
    );

    // Delegation tools are the engine's: their descriptions and titles are our words.
    let delegate = |description: &str, title: &str| {
        tool(
            "delegate_work_to_coworker",
            description,
            json!({"properties": {"task": {"description": description, "title": title, "type": "string"}}, "required": ["task"], "type": "object", "additionalProperties": false}),
        )
    };
    let ours = body(json!({"tools": [delegate("Hand a task to a coworker.", "Task")]}));
    let theirs = body(json!({"tools": [delegate("Delegate a specific task.", "The task")]}));
    assert!(fields(&ours, &theirs).is_empty());
    // ...but not the schema's shape.
    let untyped = body(
        json!({"tools": [tool("delegate_work_to_coworker", "d", json!({"properties": {"task": {"type": "integer"}}, "required": ["task"], "type": "object", "additionalProperties": false}))]}),
    );
    assert_eq!(
        fields(&untyped, &theirs),
        [
            "tools.delegate_work_to_coworker.parameters.properties.task.type: sent \"integer\", recorded \"string\""
        ]
    );
}

#[test]
fn response_format_stream_and_stop() {
    let format = |name: &str, title: &str| json!({"type": "json_schema", "json_schema": {"name": name, "strict": true, "schema": {"title": title, "type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}}});
    let recorded = body(json!({"response_format": format("ScoreOutput", "ScoreOutput")}));
    assert_eq!(
        fields(
            &body(json!({"response_format": format("Score", "ScoreOutput")})),
            &recorded
        ),
        ["response_format.name: sent Some(\"Score\"), recorded Some(\"ScoreOutput\")"]
    );
    assert_eq!(
        fields(&body(json!({})), &recorded),
        ["response_format: sent absent, recorded json_schema"]
    );
    // The engine's own schema (not one of the case's): its name and titles are our words.
    let verdict =
        body(json!({"response_format": format("LLMGuardrailResult", "LLMGuardrailResult")}));
    assert!(
        fields(
            &body(json!({"response_format": format("GuardrailVerdict", "Verdict")})),
            &verdict
        )
        .is_empty()
    );

    let streamed = body(json!({"stream": true, "stream_options": {"include_usage": true}}));
    assert_eq!(
        fields(&body(json!({})), &streamed),
        [
            "stream: sent false, recorded true",
            "stream_options: sent absent, recorded {\"include_usage\":true}"
        ]
    );
    // Ours asks a stream for its usage on purpose; a recording that did not is otherwise alike.
    assert!(fields(&streamed, &body(json!({"stream": true}))).is_empty());
    assert_eq!(
        fields(&body(json!({"stream": true})), &streamed),
        ["stream_options: sent absent, recorded {\"include_usage\":true}"]
    );

    // An empty stop list is no stop list; the ReAct marker is cut on the client in this format.
    assert!(fields(&body(json!({})), &body(json!({"stop": []}))).is_empty());
    assert!(fields(&body(json!({})), &body(json!({"stop": ["\nObservation:"]}))).is_empty());
    assert_eq!(
        fields(&body(json!({})), &body(json!({"stop": ["END"]}))),
        ["stop: sent {}, recorded {\"END\"}"]
    );
}

fn conversation(messages: Value) -> Value {
    body(json!({"tools": [multiplier()], "messages": messages}))
}

#[test]
fn roles_calls_and_references() {
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "multiplier", "arguments": "{}"}});
    let recorded = conversation(json!([
        {"role": "system", "content": "You are Scorer. You score titles for a living."},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": null, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "user", "content": "next?"}
    ]));
    assert!(fields(&recorded, &recorded).is_empty());

    let swapped = conversation(json!([
        {"role": "system", "content": "You are Scorer. You score titles for a living."},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": null, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "user", "content": "next?"}
    ]));
    assert_eq!(
        fields(&swapped, &recorded),
        [
            "messages[3].tool_call_id: sent answers [call 1 of message 2], recorded answers [call 0 of message 2]",
            "messages[4].tool_call_id: sent answers [call 0 of message 2], recorded answers [call 1 of message 2]"
        ]
    );

    let without_turn = conversation(json!([
        {"role": "system", "content": "You are Scorer. You score titles for a living."},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": null, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"}
    ]));
    assert_eq!(
        fields(&without_turn, &recorded),
        [
            "messages.roles: sent [\"system\", \"user\", \"assistant\", \"tool\", \"tool\"], recorded [\"system\", \"user\", \"assistant\", \"tool\", \"tool\", \"user\"] (first difference at message 5: sent nothing, recorded user)"
        ]
    );

    let dangling = conversation(json!([
        {"role": "system", "content": "You are Scorer. You score titles for a living."},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": null, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "zzz", "content": "2"},
        {"role": "user", "content": "next?"}
    ]));
    assert_eq!(
        fields(&dangling, &recorded),
        [
            "messages[4].tool_call_id: sent a tool answering id \"zzz\", which no earlier message's tool calls carry"
        ]
    );
}

#[test]
fn older_recordings_are_read_as_todays_crewai_sends_them() {
    // Before strict schemas: compared in strict form, so a real schema change still shows.
    let loose = json!({"type": "function", "function": {"name": "multiplier", "description": "Multiplies.", "parameters": {"properties": {"a": {"title": "A", "type": "integer"}}, "required": ["a"], "type": "object"}}});
    let ours = body(json!({"tools": [multiplier()]}));
    assert!(fields(&ours, &body(json!({"tools": [loose.clone()]}))).is_empty());
    let mut loose_number = loose;
    loose_number["function"]["parameters"]["properties"]["a"]["type"] = json!("number");
    assert_eq!(
        fields(&ours, &body(json!({"tools": [loose_number]}))),
        ["tools.multiplier.parameters.properties.a.type: sent \"integer\", recorded \"number\""]
    );
    assert_eq!(
        strict_form(
            &json!({"title": "S", "type": "object", "properties": {"x": {"type": "object", "properties": {"y": {"type": "string"}}}}})
        ),
        json!({"type": "object", "additionalProperties": false, "required": ["x"], "properties": {"x": {"type": "object", "additionalProperties": false, "required": ["y"], "properties": {"y": {"type": "string"}}}}})
    );

    // A model the case does not configure was recorded under another configuration; one it
    // does configure must match.
    assert!(fields(&body(json!({})), &body(json!({"model": "gpt-3.5-turbo"}))).is_empty());
    let mut unconfigured = body(json!({}));
    unconfigured["model"] = json!("gpt-3.5-turbo");
    assert_eq!(
        fields(&unconfigured, &body(json!({}))),
        ["model: sent Some(\"gpt-3.5-turbo\"), recorded Some(\"gpt-4o\")"]
    );

    // Tools listed in a ReAct prompt count by name; choice auto.
    let react = json!({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "You are Scorer. You score titles for a living.\nTool Name: multiplier(a: int)\nTool Description: Multiplies."},
        {"role": "user", "content": "u"}]});
    assert!(fields(&ours, &react).is_empty());
    assert!(
        fields(&body(json!({})), &react)[0]
            .starts_with("tools: sent [], recorded [\"multiplier\"]")
    );
    // ...but we must not fall back to text where CrewAI offered them natively.
    assert!(fields(&react, &ours).contains(
        &"tools: sent listed in the prompt text (ReAct), recorded as native tools".to_string()
    ));

    // The format asked in the prompt's text (older CrewAI) stands for today's native request.
    let native = body(
        json!({"response_format": {"type": "json_schema", "json_schema": {"name": "ScoreOutput", "strict": true, "schema": {"title": "ScoreOutput", "type": "object"}}}}),
    );
    let in_text = json!({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "You are Scorer. You score titles for a living."},
        {"role": "user", "content": "Format your answer as {\n  \"title\": \"ScoreOutput\"\n}"}]});
    assert!(fields(&native, &in_text).is_empty());
    assert_eq!(
        fields(&native, &body(json!({}))),
        ["response_format: sent json_schema, recorded absent"]
    );

    // Earlier runs' messages kept before a new system message: compared from there.
    let accumulated = json!({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "You are Scorer. You score titles for a living."}, {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a"},
        {"role": "system", "content": "You are Scorer. You score titles for a living."}, {"role": "user", "content": "u again"}]});
    assert!(fields(&body(json!({})), &accumulated).is_empty());
}

#[test]
fn only_the_first_tool_call_answered_is_compared_up_to_that_message() {
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "multiplier", "arguments": "{}"}});
    let head = |calls: Value| {
        vec![
            json!({"role": "system", "content": "You are Scorer. You score titles for a living."}),
            json!({"role": "user", "content": "u"}),
            json!({"role": "assistant", "content": null, "tool_calls": calls}),
        ]
    };
    let mut ours = head(json!([call("a"), call("b")]));
    ours.extend([
        json!({"role": "tool", "tool_call_id": "a", "content": "1"}),
        json!({"role": "tool", "tool_call_id": "b", "content": "2"}),
    ]);
    let mut theirs = head(json!([call("a")]));
    theirs.extend([
        json!({"role": "tool", "tool_call_id": "a", "content": "1"}),
        json!({"role": "user", "content": "next?"}),
    ]);
    assert!(fields(&conversation(json!(ours)), &conversation(json!(theirs))).is_empty());
    // Different ids are different calls, not a prefix.
    let mut other = head(json!([call("z")]));
    other.push(json!({"role": "tool", "tool_call_id": "z", "content": "1"}));
    assert!(!fields(&conversation(json!(ours)), &conversation(json!(other))).is_empty());
}

#[test]
fn a_guardrail_retry_is_compared_up_to_the_retry_only_with_an_agent_guardrail() {
    let retry = json!({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a"}, {"role": "user", "content": "fix it"}]});
    let fresh = json!({"model": "gpt-4o", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]});
    let shapes = (
        Shape::of(WireFormat::Chat, &retry),
        Shape::of(WireFormat::Chat, &fresh),
    );
    let guarded = Provenance::of(&case(
        "name: t\nllm: {model: gpt-4o}\nagents:\n  a: {role: R, goal: G, backstory: A careful checker., guardrail: {kind: always_pass}}\n",
    ));
    let (verdict, notes) = era::modernize(WireFormat::Chat, &guarded, &shapes.0, &shapes.1);
    let Verdict::Compare { sent, recorded } = verdict else {
        panic!("comparable")
    };
    assert!(compare_shapes(WireFormat::Chat, &guarded, &sent, &recorded).is_empty());
    assert!(notes[0].contains("guardrail failure"), "{notes:?}");
    // Without an agent guardrail the added turns are a difference.
    assert!(!fields(&retry, &fresh).is_empty());
}

#[test]
fn recordings_of_another_conversation_are_not_compared() {
    let scorer = body(json!({}));
    let other_agent = Provenance::of(&case(
        "name: t\nllm: {model: gpt-4o}\nagents:\n  scorer: {role: Scorer, goal: g, backstory: You score titles for a living.}\n  writer: {role: Writer, goal: g, backstory: You write for a living.}\n",
    ));
    let writer = json!({"model": "gpt-4o", "messages": [{"role": "system", "content": "You are Writer. You write for a living."}, {"role": "user", "content": "u"}]});
    let (verdict, _) = era::modernize(
        WireFormat::Chat,
        &other_agent,
        &Shape::of(WireFormat::Chat, &scorer),
        &Shape::of(WireFormat::Chat, &writer),
    );
    assert!(
        matches!(verdict, Verdict::Unrelated(note) if note.contains("agent writer, ours is for agent scorer"))
    );

    let call = json!({"id": "c", "type": "function", "function": {"name": "multiplier", "arguments": "{}"}});
    let continued = Shape::of(
        WireFormat::Chat,
        &conversation(json!([
        {"role": "system", "content": "s"}, {"role": "user", "content": "u"},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "1"}])),
    );
    let fresh = Shape::of(
        WireFormat::Chat,
        &conversation(
            json!([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]),
        ),
    );
    let mut lineage = Lineage::default();
    assert!(
        lineage
            .judge("POST /v1/chat/completions", &continued, &fresh, None, false)
            .is_some()
    );
    // Its continuation is another run's too; a fresh request against a fresh one is not.
    let later = Shape::of(
        WireFormat::Chat,
        &conversation(json!([
        {"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "done"}])),
    );
    assert!(
        lineage
            .judge("POST /v1/chat/completions", &fresh, &later, None, false)
            .is_some()
    );
    assert!(
        Lineage::default()
            .judge("POST /v1/chat/completions", &fresh, &fresh, None, false)
            .is_none()
    );
    // A reply asking for tools that the next recording starts over instead of answering.
    assert!(
        Lineage::default()
            .judge(
                "POST /v1/chat/completions",
                &fresh,
                &fresh,
                Some(&fresh),
                true
            )
            .is_some()
    );
    assert!(
        Lineage::default()
            .judge(
                "POST /v1/chat/completions",
                &fresh,
                &fresh,
                Some(&continued),
                true
            )
            .is_none()
    );

    assert!(reply_calls_tools(
        r#"{"choices":[{"message":{"tool_calls":[{"id":"c"}]}}]}"#
    ));
    assert!(!reply_calls_tools(
        r#"{"choices":[{"message":{"content":"hi","tool_calls":[]}}]}"#
    ));
    assert!(reply_calls_tools(
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\n\ndata: [DONE]\n"
    ));
    assert!(reply_calls_tools(
        r#"{"content":[{"type":"tool_use","id":"t"}]}"#
    ));
}
