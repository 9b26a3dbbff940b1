//! What current CrewAI would have sent for a recorded request.
//!
//! The shared cassettes were recorded over many CrewAI versions, and the replay matches on the
//! path only, so a case pinned to today's CrewAI may be answered by a recording an older CrewAI
//! made (the case notes say where). Where the recorded request itself shows it is from an older
//! generation, [`modernize`] rewrites the recorded [`Shape`] into the form today's CrewAI sends,
//! and says so in a [`Note`]. Every rule needs evidence *in the recording* (or a conflict between
//! the recording and case.yaml); none looks at a case's name, and none changes what we sent
//! except where the two conversations stop being comparable, which the note says.

use serde_json::{Map, Value};

use super::Provenance;
use super::shape::{Protocol, Shape, WireFormat};

/// One adjustment [`modernize`] made, for the diff report.
pub type Note = String;

/// How comparable a recorded request is to ours.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Compare `sent` with `recorded` (both possibly adjusted).
    Compare {
        sent: Box<Shape>,
        recorded: Box<Shape>,
    },
    /// The recording is of a different conversation: nothing of it describes our request.
    Unrelated(Note),
}

/// `schema` as CrewAI sends a strict tool schema: the root's `title` and `description` dropped,
/// every object schema closed (`additionalProperties: false`) with all its properties required.
/// Written here, not taken from the engine, so the engine's own version is what gets checked.
pub fn strict_form(schema: &Value) -> Value {
    fn close(value: &mut Value) {
        let Value::Object(object) = value else {
            return;
        };
        for (key, child) in object.iter_mut() {
            match key.as_str() {
                "properties" | "$defs" | "definitions" | "patternProperties" => {
                    if let Value::Object(members) = child {
                        members.values_mut().for_each(close);
                    }
                }
                "items" | "additionalProperties" | "not" | "if" | "then" | "else" => close(child),
                "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                    if let Value::Array(list) = child {
                        list.iter_mut().for_each(close);
                    }
                }
                _ => {}
            }
        }
        let is_object = match object.get("type") {
            Some(Value::String(kind)) => kind == "object",
            Some(Value::Array(kinds)) => kinds.iter().any(|k| k == "object"),
            _ => object.contains_key("properties"),
        };
        if is_object {
            let names: Vec<Value> = object
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().map(Value::String).collect())
                .unwrap_or_default();
            object.insert("additionalProperties".into(), Value::Bool(false));
            object.insert("required".into(), Value::Array(names));
        }
    }
    let mut schema = match schema {
        Value::Object(_) => schema.clone(),
        _ => Value::Object(Map::new()),
    };
    if let Value::Object(root) = &mut schema {
        root.remove("title");
        root.remove("description");
        root.entry("type").or_insert_with(|| "object".into());
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    close(&mut schema);
    schema
}

fn texts(shape: &Shape) -> impl Iterator<Item = &str> {
    shape
        .messages
        .iter()
        .filter(|m| m.role != "assistant")
        .map(|m| m.text.as_str())
}

/// The last system message after the leading one, if any.
fn later_system(shape: &Shape) -> Option<usize> {
    shape
        .messages
        .iter()
        .enumerate()
        .skip(1)
        .rev()
        .find(|(_, m)| m.role == "system")
        .map(|(i, _)| i)
}

/// The case agents a request speaks for: those whose backstory its prompt carries.
fn speakers(provenance: &Provenance, shape: &Shape) -> Vec<String> {
    let prompt: Vec<&str> = texts(shape).collect();
    provenance
        .agents
        .iter()
        .filter(|(_, backstory)| prompt.iter().any(|t| t.contains(backstory.as_str())))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Applies the rules of the [module docs](super) that let an older recording stand for today's
/// request.
pub fn modernize(
    format: WireFormat,
    provenance: &Provenance,
    sent: &Shape,
    recorded: &Shape,
) -> (Verdict, Vec<Note>) {
    let mut notes = Vec::new();
    let (ours, theirs) = (speakers(provenance, sent), speakers(provenance, recorded));
    if ours != theirs {
        return (
            Verdict::Unrelated(format!(
                "not compared: the recording is a request for {}, ours is for {} (the replay answers by path, so a recording made for another agent answered this one)",
                describe(&theirs),
                describe(&ours)
            )),
            notes,
        );
    }
    let mut sent = sent.clone();
    let mut recorded = recorded.clone();

    if recorded.model != sent.model {
        let configured = |m: &Option<String>| {
            m.as_deref()
                .is_some_and(|m| provenance.models.iter().any(|c| c == m))
        };
        if configured(&sent.model) && !configured(&recorded.model) {
            notes.push(format!(
                "model: the recording used {:?}, which case.yaml does not configure (it was recorded under another configuration); {:?} is the configured one",
                recorded.model, sent.model
            ));
            recorded.model = sent.model.clone();
        }
    }

    // Gemini has no strict flag; elsewhere a recorded tool without one predates strict schemas.
    let we_are_strict = !sent.tools.is_empty() && sent.tools.iter().all(|t| t.strict == Some(true));
    if format != WireFormat::Gemini && we_are_strict {
        let mut loosened = Vec::new();
        for tool in recorded.tools.iter_mut() {
            if tool.strict.is_none()
                && let Some(parameters) = &tool.parameters
            {
                tool.parameters = Some(strict_form(parameters));
                tool.strict = Some(true);
                loosened.push(tool.name.clone());
            }
        }
        if !loosened.is_empty() {
            notes.push(format!(
                "tools {loosened:?}: recorded before CrewAI sent strict tool schemas; compared in strict form"
            ));
        }
    }

    if recorded.protocol == Protocol::Text && sent.protocol == Protocol::Native {
        notes.push(
            "tools: the recording lists them in a ReAct prompt (older CrewAI); current CrewAI offers them natively, as we do; its tool choice counts as auto".into(),
        );
        recorded.tool_choice = "auto".into();
    }

    if sent.stream
        && recorded.stream
        && recorded.stream_options.is_none()
        && sent.stream_options == Some(serde_json::json!({"include_usage": true}))
    {
        notes.push(
            "stream_options: we ask a stream for its usage on purpose (token counts are exact); CrewAI's native client does not".into(),
        );
        recorded.stream_options = sent.stream_options.clone();
    }

    if sent.response_format.is_some()
        && recorded.response_format.is_none()
        && let Some(format) = &sent.response_format
        && let Some(title) = format
            .schema
            .as_ref()
            .and_then(|s| s.get("title"))
            .and_then(Value::as_str)
        && provenance.case_schemas.contains(title)
    {
        let inline = format!("\"title\": \"{title}\"");
        if texts(&recorded).any(|t| t.contains(&inline)) {
            notes.push(format!(
                "response_format: the recording asks for {title} in its prompt text only (older CrewAI); current CrewAI asks natively, as we do"
            ));
            recorded.response_format = sent.response_format.clone();
        }
    }

    // The README's catalog: an agent guardrail's failure is appended as a user message and the
    // agent runs again. Older CrewAI started the kickoff over instead.
    let roles = |s: &Shape| {
        s.messages
            .iter()
            .map(|m| m.role.clone())
            .collect::<Vec<_>>()
    };
    let (our_roles, their_roles) = (roles(&sent), roles(&recorded));
    if provenance.agent_guardrail
        && !their_roles.iter().any(|r| r == "assistant")
        && our_roles.len() > their_roles.len()
        && our_roles.starts_with(&their_roles)
        && our_roles[their_roles.len()..]
            .chunks(2)
            .all(|pair| pair == ["assistant", "user"])
    {
        notes.push(format!(
            "messages: the recording starts the kickoff over after a guardrail failure (older CrewAI); today the failure is appended as a user message ({} retry turn(s) here); compared up to the retry",
            (our_roles.len() - their_roles.len()) / 2
        ));
        sent.messages.truncate(their_roles.len());
    }

    if let Some(at) = later_system(&recorded)
        && later_system(&sent).is_none()
    {
        notes.push(format!(
            "messages: the recording repeats earlier runs' messages before a system message at {at} (older CrewAI kept its executor's messages across runs and retries); compared from there"
        ));
        recorded.messages.drain(..at);
    }

    // Older CrewAI answered only the first tool call of a reply: the recorded assistant message
    // carries a prefix of the calls ours carries (the same ids, from the same replayed reply).
    for (i, (mine, theirs)) in sent.messages.iter().zip(&recorded.messages).enumerate() {
        let ids = |m: &super::shape::MessageShape| {
            m.calls.iter().map(|c| c.id.clone()).collect::<Vec<_>>()
        };
        let (a, b) = (ids(mine), ids(theirs));
        if !b.is_empty() && b.len() < a.len() && a.starts_with(&b) {
            notes.push(format!(
                "messages: at message {i} the recording answers only the first {} of the reply's {} tool calls (older CrewAI); the conversations differ from there, compared up to it",
                b.len(),
                a.len()
            ));
            let keep = i + 1;
            recorded.messages.truncate(keep);
            sent.messages.truncate(keep);
            if let Some(last) = recorded.messages.last_mut() {
                last.calls = sent.messages[i].calls.clone();
            }
            break;
        }
    }
    (
        Verdict::Compare {
            sent: Box::new(sent),
            recorded: Box::new(recorded),
        },
        notes,
    )
}

fn describe(agents: &[String]) -> String {
    if agents.is_empty() {
        "no case agent".to_string()
    } else {
        format!("agent {}", agents.join(", "))
    }
}

/// True when `later`'s conversation begins with all of `earlier`'s messages (same roles, same
/// text: both are CrewAI's, so their text may be compared with each other).
fn extends(later: &Shape, earlier: &Shape) -> bool {
    later.messages.len() >= earlier.messages.len()
        && later
            .messages
            .iter()
            .zip(&earlier.messages)
            .all(|(a, b)| a.role == b.role && a.text == b.text)
}

/// True when a recorded reply (JSON, or server-sent events of JSON) asks for tool calls, in any
/// of the wire formats: `tool_calls`, a `tool_use` block, a `function_call` item, a Gemini
/// `functionCall` part.
pub fn reply_calls_tools(body: &str) -> bool {
    fn asks(value: &Value) -> bool {
        match value {
            Value::Object(map) => {
                map.get("tool_calls")
                    .and_then(Value::as_array)
                    .is_some_and(|calls| !calls.is_empty())
                    || map.contains_key("functionCall")
                    || matches!(
                        map.get("type").and_then(Value::as_str),
                        Some("tool_use" | "function_call")
                    )
                    || map.values().any(asks)
            }
            Value::Array(items) => items.iter().any(asks),
            _ => false,
        }
    }
    match serde_json::from_str::<Value>(body) {
        Ok(value) => asks(&value),
        Err(_) => body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .any(|value| asks(&value)),
    }
}

/// Recorded conversations that are not the one we are in, found so far (per method and path).
#[derive(Debug, Default)]
pub struct Lineage {
    foreign: Vec<(String, Shape)>,
}

impl Lineage {
    /// Why the recorded request answering ours is another run's, if it is:
    ///
    /// - it continues a recorded conversation already found to be another run's;
    /// - its reply asked for tool calls, and the next recording on its path starts the same
    ///   conversation over instead of answering them (a CrewAI that did not run native tool
    ///   calls discarded them and tried again);
    /// - ours has sent tool results back, and the recording is a fresh conversation (no
    ///   assistant message): no CrewAI run starts over after running a tool, so the
    ///   recording is of another run.
    pub fn judge(
        &mut self,
        key: &str,
        sent: &Shape,
        recorded: &Shape,
        next_on_path: Option<&Shape>,
        reply_called_tools: bool,
    ) -> Option<Note> {
        if self
            .foreign
            .iter()
            .any(|(k, f)| k == key && extends(recorded, f))
        {
            return Some(
                "not compared: the recording continues a recorded conversation of another run (see the earlier request)".into(),
            );
        }
        let fresh = |s: &Shape| s.messages.iter().all(|m| m.role != "assistant");
        if reply_called_tools
            && let Some(next) = next_on_path
            && fresh(next)
            && extends(next, recorded)
        {
            self.foreign.push((key.to_string(), recorded.clone()));
            return Some(
                "not compared: the recording's reply asked for tools and the next recording starts the same conversation over instead of answering them (recorded by a CrewAI that did not run native tool calls)".into(),
            );
        }
        // A real round trip: a result answering a call an earlier message of ours carried.
        let round_trip = sent.messages.iter().enumerate().any(|(i, m)| {
            m.answers.iter().any(|id| {
                sent.messages[..i]
                    .iter()
                    .any(|earlier| earlier.calls.iter().any(|c| &c.id == id))
            })
        });
        if fresh(recorded) && round_trip {
            self.foreign.push((key.to_string(), recorded.clone()));
            return Some(
                "not compared: ours sends tool results back, the recording starts a fresh conversation: it is another run's request".into(),
            );
        }
        None
    }
}
