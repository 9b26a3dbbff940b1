//! The diff report: for each request we sent, where its body differs from the body CrewAI sent
//! for the recorded interaction that answered it (the first differing message, tool schema or
//! request field). This is what to read first when a case fails.

use std::fmt::Write as _;

use crewai_testkit::replay::{Interaction, ReceivedRequest};

use crate::structure::{Comparison, Difference};
use serde_json::{Map, Value};

/// One message of a provider request, reduced to what matters for a comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageView {
    pub role: String,
    pub text: String,
}

/// The keys that hold the conversation or the tools, in any of the provider APIs; every other
/// top-level key is compared as a plain field.
const STRUCTURAL_KEYS: &[&str] = &[
    "messages",
    "system",
    "input",
    "instructions",
    "contents",
    "systemInstruction",
    "system_instruction",
    "tools",
];

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().map(part_text).collect::<Vec<_>>().join(""),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// One content part/block as text (text parts verbatim; tool calls and results rendered).
fn part_text(part: &Value) -> String {
    if let Some(text) = part.get("text").and_then(Value::as_str) {
        return text.to_string();
    }
    match part.get("type").and_then(Value::as_str) {
        Some("tool_use") => format!(
            "[tool_use {} {}]",
            str_field(part, "name"),
            part.get("input").cloned().unwrap_or(Value::Null)
        ),
        Some("tool_result") => format!(
            "[tool_result {}]",
            content_text(part.get("content").unwrap_or(&Value::Null))
        ),
        _ => {
            if let Some(call) = part.get("functionCall") {
                format!(
                    "[functionCall {} {}]",
                    str_field(call, "name"),
                    call.get("args").cloned().unwrap_or(Value::Null)
                )
            } else if let Some(response) = part.get("functionResponse") {
                format!(
                    "[functionResponse {} {}]",
                    str_field(response, "name"),
                    response.get("response").cloned().unwrap_or(Value::Null)
                )
            } else {
                part.to_string()
            }
        }
    }
}

fn str_field<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// An OpenAI-style message (chat completions or a Responses input item) as a view.
fn message_view(message: &Value) -> MessageView {
    let mut text = content_text(message.get("content").unwrap_or(&Value::Null));
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for call in calls {
            let function = call.get("function").unwrap_or(call);
            let _ = write!(
                text,
                "[tool_call {} {}]",
                str_field(function, "name"),
                str_field(function, "arguments")
            );
        }
    }
    if let Some(id) = message.get("tool_call_id").and_then(Value::as_str) {
        text = format!("[for {id}] {text}");
    }
    let role = match message.get("type").and_then(Value::as_str) {
        Some("function_call") => {
            text = format!(
                "[function_call {} {}]",
                str_field(message, "name"),
                str_field(message, "arguments")
            );
            "assistant".to_string()
        }
        Some("function_call_output") => {
            text = format!("[function_call_output] {}", str_field(message, "output"));
            "tool".to_string()
        }
        _ => str_field(message, "role").to_string(),
    };
    MessageView { role, text }
}

/// The conversation of a request body, whichever provider API it speaks.
pub fn messages(body: &Value) -> Vec<MessageView> {
    let mut out = Vec::new();
    for key in [
        "system",
        "instructions",
        "systemInstruction",
        "system_instruction",
    ] {
        match body.get(key) {
            Some(Value::String(s)) => out.push(MessageView {
                role: "system".into(),
                text: s.clone(),
            }),
            Some(Value::Array(parts)) => out.push(MessageView {
                role: "system".into(),
                text: parts.iter().map(part_text).collect(),
            }),
            Some(Value::Object(o)) => out.push(MessageView {
                role: "system".into(),
                text: o
                    .get("parts")
                    .and_then(Value::as_array)
                    .map(|p| p.iter().map(part_text).collect())
                    .unwrap_or_default(),
            }),
            _ => {}
        }
    }
    if let Some(list) = body.get("messages").and_then(Value::as_array) {
        out.extend(list.iter().map(message_view));
    }
    match body.get("input") {
        Some(Value::String(s)) => out.push(MessageView {
            role: "user".into(),
            text: s.clone(),
        }),
        Some(Value::Array(items)) => out.extend(items.iter().map(message_view)),
        _ => {}
    }
    if let Some(contents) = body.get("contents").and_then(Value::as_array) {
        for content in contents {
            let text = content
                .get("parts")
                .and_then(Value::as_array)
                .map(|p| p.iter().map(part_text).collect())
                .unwrap_or_default();
            out.push(MessageView {
                role: str_field(content, "role").to_string(),
                text,
            });
        }
    }
    out
}

/// A tool offered in a request: name, description, argument schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolView {
    pub name: String,
    pub description: String,
    /// The whole definition (for a field-level comparison).
    pub definition: Value,
}

/// The tools of a request body, whichever provider API it speaks.
pub fn tools(body: &Value) -> Vec<ToolView> {
    let mut out = Vec::new();
    for tool in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(declarations) = tool.get("functionDeclarations").and_then(Value::as_array) {
            out.extend(declarations.iter().map(|d| ToolView {
                name: str_field(d, "name").into(),
                description: str_field(d, "description").into(),
                definition: d.clone(),
            }));
            continue;
        }
        let function = tool.get("function").unwrap_or(tool);
        out.push(ToolView {
            name: str_field(function, "name").into(),
            description: str_field(function, "description").into(),
            definition: tool.clone(),
        });
    }
    out
}

/// Renders text on one line (newlines as ⏎) for side-by-side reading.
fn flat(text: &str) -> String {
    text.replace('\n', "⏎")
}

/// Where two texts first differ, with context on both sides: (char index, sent window, recorded window).
pub fn text_difference(sent: &str, recorded: &str) -> Option<(usize, String, String)> {
    if sent == recorded {
        return None;
    }
    let a: Vec<char> = sent.chars().collect();
    let b: Vec<char> = recorded.chars().collect();
    let at = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    const BEFORE: usize = 50;
    const AFTER: usize = 80;
    let window = |chars: &[char]| {
        let start = at.saturating_sub(BEFORE);
        let end = (at + AFTER).min(chars.len());
        let mut s = String::new();
        if start > 0 {
            s.push('…');
        }
        s.extend(&chars[start..at]);
        s.push('⟦');
        s.extend(&chars[at..end]);
        s.push('⟧');
        if end < chars.len() {
            s.push('…');
        }
        flat(&s)
    };
    Some((at, window(&a), window(&b)))
}

/// The first path where two JSON values differ: (path, sent, recorded), absent values as `absent`.
pub fn json_difference(
    path: &str,
    sent: Option<&Value>,
    recorded: Option<&Value>,
) -> Option<(String, String, String)> {
    let show = |v: Option<&Value>| match v {
        None => "absent".to_string(),
        Some(v) => {
            let s = v.to_string();
            if s.chars().count() > 160 {
                format!("{}…", s.chars().take(160).collect::<String>())
            } else {
                s
            }
        }
    };
    match (sent, recorded) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().collect();
            keys.extend(b.keys().filter(|k| !a.contains_key(*k)));
            keys.into_iter()
                .find_map(|k| json_difference(&format!("{path}.{k}"), a.get(k), b.get(k)))
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => (0..a.len().max(b.len()))
            .find_map(|i| json_difference(&format!("{path}[{i}]"), a.get(i), b.get(i))),
        (a, b)
            if a.is_some()
                && b.is_some()
                && crate::expect::json_eq(a.unwrap_or(&Value::Null), b.unwrap_or(&Value::Null)) =>
        {
            None
        }
        (None, None) => None,
        (a, b) => Some((path.trim_start_matches('.').to_string(), show(a), show(b))),
    }
}

/// How one sent body differs from the recorded one; an empty list when they match.
pub fn body_differences(sent: &Value, recorded: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let ours = messages(sent);
    let theirs = messages(recorded);
    if ours.len() != theirs.len() {
        out.push(format!(
            "{} messages sent, {} recorded",
            ours.len(),
            theirs.len()
        ));
    }
    for i in 0..ours.len().max(theirs.len()) {
        match (ours.get(i), theirs.get(i)) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(a), Some(b)) => {
                if a.role != b.role {
                    out.push(format!(
                        "message {i}: role {} sent, {} recorded",
                        a.role, b.role
                    ));
                }
                if let Some((at, x, y)) = text_difference(&a.text, &b.text) {
                    out.push(format!("message {i} ({}) differs at char {at}:\n      sent:     {x}\n      recorded: {y}", b.role));
                }
            }
            (Some(a), None) => out.push(format!(
                "message {i} ({}) sent, not recorded: {}",
                a.role,
                crate::expect::excerpt(&a.text, 200)
            )),
            (None, Some(b)) => out.push(format!(
                "message {i} ({}) recorded, not sent: {}",
                b.role,
                crate::expect::excerpt(&b.text, 200)
            )),
            (None, None) => {}
        }
        // Only the first differing message: later ones usually differ because of it.
        break;
    }
    let our_tools = tools(sent);
    let their_tools = tools(recorded);
    let names = |t: &[ToolView]| t.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    if names(&our_tools) != names(&their_tools) {
        out.push(format!(
            "tools: sent {:?}, recorded {:?}",
            names(&our_tools),
            names(&their_tools)
        ));
    }
    for (a, b) in our_tools.iter().zip(&their_tools) {
        if a.name != b.name {
            continue;
        }
        if let Some((at, x, y)) = text_difference(&a.description, &b.description) {
            out.push(format!("tool `{}` description differs at char {at}:\n      sent:     {x}\n      recorded: {y}", a.name));
        } else if let Some((path, x, y)) =
            json_difference("", Some(&a.definition), Some(&b.definition))
        {
            out.push(format!(
                "tool `{}` schema differs at {path}: sent {x}, recorded {y}",
                a.name
            ));
        }
    }
    let empty = Map::new();
    let sent_fields = sent.as_object().unwrap_or(&empty);
    let recorded_fields = recorded.as_object().unwrap_or(&empty);
    let mut keys: Vec<&String> = sent_fields
        .keys()
        .chain(recorded_fields.keys())
        .filter(|k| !STRUCTURAL_KEYS.contains(&k.as_str()))
        .collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        if let Some((path, x, y)) =
            json_difference(key, sent_fields.get(key), recorded_fields.get(key))
        {
            out.push(format!("field `{path}`: sent {x}, recorded {y}"));
        }
    }
    out
}

/// The whole report: every request we sent against the interaction that answered it, its
/// structural differences ([`crate::structure`], the ones that fail a case) first, then where
/// its text and fields differ.
pub fn report(
    received: &[ReceivedRequest],
    recorded: &[Interaction],
    structural: &Comparison,
) -> String {
    let mut out = String::new();
    if received.is_empty() {
        let _ = writeln!(out, "  no request was sent ({} recorded)", recorded.len());
        return out;
    }
    for request in received {
        let header = format!(
            "  request {} {} {}",
            request.number, request.method, request.path
        );
        let Some(index) = request.answered_by else {
            let _ = writeln!(
                out,
                "{header}: nothing left to play for this path (CrewAI sent no such request)"
            );
            if let Some(body) = &request.body {
                let ours = messages(body);
                if let Some(last) = ours.last() {
                    let _ = writeln!(
                        out,
                        "      last message sent ({}): {}",
                        last.role,
                        crate::expect::excerpt(&last.text, 300)
                    );
                }
            }
            continue;
        };
        let Some(interaction) = recorded.get(index) else {
            continue;
        };
        let header = format!(
            "{header} vs recorded interaction {}",
            interaction.cassette_index
        );
        let (Some(sent), Some(theirs)) = (request.body.as_ref(), interaction.request_body()) else {
            let _ = writeln!(out, "{header}: a body is not JSON, not compared");
            continue;
        };
        let mine: Vec<&Difference> = structural
            .differences
            .iter()
            .filter(|d| d.request == request.number)
            .collect();
        let notes: Vec<&str> = structural
            .notes
            .iter()
            .filter(|n| n.request == request.number)
            .map(|n| n.note.as_str())
            .collect();
        let differences = body_differences(sent, &theirs);
        if differences.is_empty() && mine.is_empty() && notes.is_empty() {
            let _ = writeln!(out, "{header}: same messages, tools and fields");
        } else {
            let _ = writeln!(out, "{header}:");
            for note in notes {
                let _ = writeln!(out, "    · {note}");
            }
            for d in mine {
                let _ = writeln!(out, "    ✗ structure: {}: {}", d.field, d.detail);
            }
            for d in differences {
                let _ = writeln!(out, "    - {d}");
            }
        }
    }
    let answered: Vec<usize> = received.iter().filter_map(|r| r.answered_by).collect();
    let unplayed = (0..recorded.len())
        .filter(|i| !answered.contains(i))
        .count();
    if unplayed > 0 {
        let _ = writeln!(out, "  {unplayed} recorded interaction(s) not played");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_the_first_differing_message() {
        let sent = json!({"model": "gpt-4o", "messages": [
            {"role": "system", "content": "You are X."},
            {"role": "user", "content": "Current Task: add\nThought:"}
        ]});
        let recorded = json!({"model": "gpt-4o", "messages": [
            {"role": "system", "content": "You are X."},
            {"role": "user", "content": "Current Task: add\n\nThought:"}
        ]});
        let diffs = body_differences(&sent, &recorded);
        assert_eq!(diffs.len(), 1, "{diffs:?}");
        assert!(
            diffs[0].starts_with("message 1 (user) differs at char 18"),
            "{}",
            diffs[0]
        );
        assert!(
            diffs[0].contains("add⏎⟦Thought:⟧") && diffs[0].contains("add⏎⟦⏎Thought:⟧"),
            "{}",
            diffs[0]
        );
        assert!(body_differences(&sent, &sent).is_empty());
    }

    #[test]
    fn reports_tool_schema_and_fields() {
        let tool = |title: &str| json!({"type": "function", "function": {"name": "m", "description": "d", "parameters": {"properties": {"a": {"title": title}}}}});
        let sent = json!({"messages": [], "tools": [tool("A")], "temperature": 0.7});
        let recorded = json!({"messages": [], "tools": [tool("B")], "stop": ["\nObservation:"]});
        let diffs = body_differences(&sent, &recorded);
        assert_eq!(diffs.len(), 3, "{diffs:?}");
        assert!(diffs[0].contains("tool `m` schema differs at function.parameters.properties.a.title: sent \"A\", recorded \"B\""), "{diffs:?}");
        assert!(diffs[1].contains("field `stop`: sent absent"), "{diffs:?}");
        assert!(
            diffs[2].contains("field `temperature`: sent 0.7, recorded absent"),
            "{diffs:?}"
        );
    }

    #[test]
    fn renders_tool_calls_and_other_apis() {
        let body = json!({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "m", "arguments": "{}"}}]},
                                       {"role": "tool", "tool_call_id": "c", "content": "42"}]});
        let views = messages(&body);
        assert_eq!(views[0].text, "[tool_call m {}]");
        assert_eq!(views[1].text, "[for c] 42");
        let anthropic = json!({"system": "S", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "tools": [{"name": "t", "description": "d", "input_schema": {}}]});
        assert_eq!(
            messages(&anthropic),
            vec![
                MessageView {
                    role: "system".into(),
                    text: "S".into()
                },
                MessageView {
                    role: "user".into(),
                    text: "hi".into()
                }
            ]
        );
        assert_eq!(tools(&anthropic)[0].name, "t");
    }
}
