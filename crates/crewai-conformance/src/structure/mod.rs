//! The structural check: every request our engine sends is compared with the recorded request
//! that answered it (the interaction the replay server played for it: the same position among
//! the requests to that method and path), and any structural difference fails the case with a
//! [`Difference`] naming the request, its path and the field.
//!
//! Message *text* is never compared: our prompts are in our own words, and a case's `expect` says
//! which text matters. Each body is read into a provider-neutral [`Shape`] by its wire format
//! ([`WireFormat`]: OpenAI chat and Azure, OpenAI Responses, Anthropic, Gemini) and compared
//! field by field:
//!
//! - **`model`**: equal (absent on both sides for Gemini and Azure, whose URL names the model).
//! - **tools offered**: the same set of names, order irrelevant, names taken as CrewAI
//!   sanitizes them ([`schema::tool_key`]: case and spaces do not count, since CrewAI's own
//!   sanitizing changed between the versions that recorded the cassettes). Tools count whichever
//!   way they are offered: natively (the API's tool field) or listed in the prompt (`Tool Name:`
//!   lines of a ReAct prompt).
//! - **each tool's definition** (both native): the parameters' JSON schema compared by meaning
//!   ([`schema::canonical`]: key order and `required` order irrelevant, numbers by value, an
//!   `anyOf` of bare types the same as a type list), and `strict` (absent is false). The tool's
//!   own description and the schema's `title` / `description` keywords are compared for the
//!   case's test tools (their text comes from case.yaml, so it must arrive unchanged); for tools
//!   the engine makes (delegation tools, CrewAI's internal ones) that wording is ours and is left
//!   out, the rest of the schema still counts.
//! - **`tool_choice`**: normalised (`auto` / `none` / `required` / `function:<name>`; absent is the
//!   API default: `auto` with tools, `none` without).
//! - **`response_format`**: type, `strict` and the JSON schema by meaning. The schema's name and
//!   its annotations are compared when the schema is the case's (its title is the title of an
//!   `output_json`, `output_pydantic` or `response_format` schema of case.yaml); for a schema the
//!   engine makes (the guardrail verdict) they are ours and are left out.
//! - **`stream`** (absent is false) and **`stream_options`**: equal.
//! - **stop sequences** (`stop`, `stop_sequences`, `stopSequences`): the same set; absent is the
//!   empty list. In the OpenAI chat format the ReAct marker `"\nObservation:"` is left out on both
//!   sides: CrewAI's native OpenAI client and ours never send it and cut it from the reply on the
//!   client instead, while LiteLLM-era recordings carry it in `stop`.
//! - **the sequence of message roles**: equal, a top-level system prompt counting as a leading
//!   `system` message (Anthropic `system`, Gemini `systemInstruction`, Responses `instructions`).
//! - **tool calls and the references to them**: each message carries the same tool calls (by
//!   name), and every tool result (a tool message's `tool_call_id`, a `tool_result` block, a
//!   `function_call_output`, a Gemini `functionResponse`) answers the same call (the same call
//!   position of the same earlier message) as the recorded one does. A result of ours whose id no
//!   earlier message's calls carry fails on its own.
//!
//! ## Older recordings
//!
//! The cassettes were recorded by many CrewAI versions, and a case targets today's (its notes
//! say where a recording is older). [`era`] reads such a recording as today's CrewAI would have
//! sent it, only on evidence in the recording itself (or a conflict between it and case.yaml),
//! never by a case's name, and every adjustment is a note in the diff report (`--notes` prints
//! them for passing cases too):
//!
//! - a model case.yaml does not configure, where ours is one it does: recorded under another
//!   configuration (an older default model, a test whose model changed since);
//! - a tool without `strict` (before CrewAI's strict tool schemas), when ours are strict:
//!   compared in strict form ([`era::strict_form`]: objects closed, all properties required);
//! - tools listed in a ReAct prompt where we offer them natively (today's CrewAI does too): the
//!   names are compared, the tool choice counts as `auto`; the other way round fails;
//! - no `response_format`, but the case's schema (by its title) spelled out in the prompt text,
//!   where we ask natively;
//! - a system message after the first: older CrewAI kept its executor's messages across runs
//!   and retries, so the recording is compared from its last system message;
//! - an assistant message carrying only the first of the tool calls ours carries (the same
//!   ids, from the same replayed reply): older CrewAI answered one call per reply; the two
//!   conversations are compared up to that message;
//! - with an agent guardrail, a recording that starts the kickoff over where ours appends the
//!   failure and runs again (the README's catalog says the failure is appended): compared up to
//!   the retry turns, which must be (assistant, user) pairs;
//! - `stream_options` absent where ours asks for `include_usage`: ours asks on purpose (a
//!   stream's token usage is exact); CrewAI's native client does not ask.
//!
//! A recording is **not compared** at all when it belongs to another conversation: it is a
//! request for another case agent (whose backstory its prompt carries; the replay answers by
//! path, so an agent may be answered with another's recording), it starts fresh where ours sends
//! tool results back (no run starts over after running a tool), its reply asked for tools and
//! the next recording on its path starts the same conversation over instead of answering them
//! (a CrewAI that did not run native tool calls), or it continues a conversation found to be
//! another run's. These are notes, not failures.
//!
//! [`compare`] gives the [`Comparison`]; [`crate::runner`] turns each difference into a failure
//! and [`crate::diff::report`] lists differences and notes under the request they belong to.

pub mod era;
pub mod schema;
pub mod shape;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crewai_testkit::replay::{Interaction, ReceivedRequest};
use serde_json::Value;

use crate::case::Case;
pub use schema::{Wording, canonical, tool_key};
pub use shape::{FormatShape, MessageShape, Protocol, Shape, ToolShape, WireFormat};

/// The stop word CrewAI's ReAct loop asks for, which chat-format clients cut on the client.
const REACT_STOP: &str = "\nObservation:";

/// One structural difference between a request we sent and the recorded one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Our request's arrival number (1-based, as the replay server counts).
    pub request: usize,
    pub method: String,
    pub path: String,
    /// The cassette position of the recorded interaction that answered it.
    pub interaction: usize,
    /// The field, e.g. `tool_choice`, `tools.multiplier.parameters.properties.a.type`,
    /// `messages[3].tool_call_id`.
    pub field: String,
    /// `sent X, recorded Y` and whatever else explains it.
    pub detail: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request {} {} {} (recorded interaction {}): {}: {}",
            self.request, self.method, self.path, self.interaction, self.field, self.detail
        )
    }
}

/// What the case says about a request: which parts are its own (as opposed to the engine's
/// wording), which models it configures, which agents it has.
#[derive(Debug, Clone, Default)]
pub struct Provenance {
    /// The case's test tools, by [`tool_key`].
    case_tools: BTreeSet<String>,
    /// The titles of the case's schemas (`output_json`, `output_pydantic`, `response_format`).
    pub(crate) case_schemas: BTreeSet<String>,
    /// Every model the case configures, CrewAI's default included where something names none.
    pub(crate) models: Vec<String>,
    /// Each agent's name and backstory (how a prompt shows whose it is).
    pub(crate) agents: Vec<(String, String)>,
    /// Some agent has a guardrail of its own (checked on Agent.kickoff's output).
    pub(crate) agent_guardrail: bool,
}

impl Provenance {
    pub fn of(case: &Case) -> Provenance {
        let title = |schema: &Value| {
            schema
                .get("title")
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let model_of = |fields: Option<&serde_json::Map<String, Value>>| {
            fields
                .and_then(|f| f.get("model"))
                .and_then(Value::as_str)
                // `openai/gpt-4o` is sent as `gpt-4o`.
                .map(|m| m.rsplit('/').next().unwrap_or(m).to_string())
        };
        let mut models: Vec<String> = Vec::new();
        let default =
            model_of(case.llm.as_ref()).unwrap_or_else(|| crewai_llm::DEFAULT_MODEL.to_string());
        models.push(default);
        for agent in case.agents.iter().map(|(_, a)| a) {
            models.extend(model_of(agent.llm.as_ref()));
            models.extend(model_of(agent.function_calling_llm.as_ref()));
        }
        let crews = case.crew.iter().chain(
            case.flow
                .iter()
                .flat_map(|f| f.methods.iter().filter_map(|m| m.crew.as_ref())),
        );
        for crew in crews {
            models.extend(model_of(crew.manager_llm.as_ref()));
            models.extend(model_of(crew.function_calling_llm.as_ref()));
        }
        Provenance {
            case_tools: case.tools.keys().map(|name| tool_key(name)).collect(),
            case_schemas: case
                .tasks
                .iter()
                .flat_map(|t| [t.output_json.as_ref(), t.output_pydantic.as_ref()])
                .chain([case.response_format.as_ref()])
                .flatten()
                .filter_map(title)
                .collect(),
            models,
            agents: case
                .agents
                .iter()
                .filter(|(_, a)| !a.backstory.trim().is_empty())
                .map(|(name, a)| (name.clone(), a.backstory.trim().to_string()))
                .collect(),
            agent_guardrail: case.agents.iter().any(|(_, a)| a.guardrail.is_some()),
        }
    }

    fn tool_wording(&self, name: &str) -> Wording {
        if self.case_tools.contains(&tool_key(name)) {
            Wording::Compared
        } else {
            Wording::Ours
        }
    }

    fn format_wording(&self, recorded: &FormatShape) -> Wording {
        let title = recorded
            .schema
            .as_ref()
            .and_then(|s| s.get("title"))
            .and_then(Value::as_str);
        let named = [recorded.name.as_deref(), title]
            .into_iter()
            .flatten()
            .any(|n| self.case_schemas.contains(n));
        if named {
            Wording::Compared
        } else {
            Wording::Ours
        }
    }
}

fn show<T: fmt::Debug>(value: &T) -> String {
    format!("{value:?}")
}

fn json_text(value: Option<&Value>) -> String {
    value.map_or_else(|| "absent".to_string(), Value::to_string)
}

/// A tool result's reference: the call it answers, as (message index, call index).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reference {
    Call {
        message: usize,
        call: usize,
    },
    /// No earlier message carries a call with this id.
    Dangling(String),
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reference::Call { message, call } => write!(f, "call {call} of message {message}"),
            Reference::Dangling(id) => write!(f, "unknown id {id:?}"),
        }
    }
}

/// For each message, the calls its tool results answer (the latest earlier carrier of the id).
fn references(messages: &[MessageShape]) -> Vec<Vec<Reference>> {
    messages
        .iter()
        .enumerate()
        .map(|(at, message)| {
            message
                .answers
                .iter()
                .map(|id| {
                    messages[..at]
                        .iter()
                        .enumerate()
                        .rev()
                        .find_map(|(m, earlier)| {
                            earlier
                                .calls
                                .iter()
                                .position(|c| &c.id == id)
                                .map(|call| Reference::Call { message: m, call })
                        })
                        .unwrap_or_else(|| Reference::Dangling(id.clone()))
                })
                .collect()
        })
        .collect()
}

/// The tool choice with a forced tool's name in sanitized form.
fn choice_key(choice: &str) -> String {
    match choice.strip_prefix("function:") {
        Some(name) => format!("function:{}", tool_key(name)),
        None => choice.to_string(),
    }
}

fn stop_set(format: WireFormat, stop: &[String]) -> BTreeSet<String> {
    stop.iter()
        .filter(|s| !(format == WireFormat::Chat && s.as_str() == REACT_STOP))
        .cloned()
        .collect()
}

/// How `sent` differs from `recorded` in structure: (field, detail) pairs, empty when alike.
pub fn compare_shapes(
    format: WireFormat,
    provenance: &Provenance,
    sent: &Shape,
    recorded: &Shape,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut differ = |field: &str, detail: String| out.push((field.to_string(), detail));

    if sent.model != recorded.model {
        differ(
            "model",
            format!(
                "sent {}, recorded {}",
                show(&sent.model),
                show(&recorded.model)
            ),
        );
    }

    // Tools: the set, the protocol, then each definition both sides offer natively.
    let keys = |tools: &[ToolShape]| -> BTreeMap<String, ToolShape> {
        tools
            .iter()
            .map(|t| (tool_key(&t.name), t.clone()))
            .collect()
    };
    let (ours, theirs) = (keys(&sent.tools), keys(&recorded.tools));
    if ours.keys().ne(theirs.keys()) {
        let missing: Vec<&String> = theirs.keys().filter(|k| !ours.contains_key(*k)).collect();
        let extra: Vec<&String> = ours.keys().filter(|k| !theirs.contains_key(*k)).collect();
        differ(
            "tools",
            format!(
                "sent {:?}, recorded {:?} (not sent: {missing:?}; not recorded: {extra:?})",
                sent.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
                recorded.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            ),
        );
    }
    if sent.protocol == Protocol::Text && recorded.protocol == Protocol::Native {
        differ(
            "tools",
            "sent listed in the prompt text (ReAct), recorded as native tools".into(),
        );
    }
    for (key, our_tool) in &ours {
        let Some(their_tool) = theirs.get(key) else {
            continue;
        };
        if our_tool.parameters.is_none() || their_tool.parameters.is_none() {
            // A text listing has no schema to compare.
            continue;
        }
        let name = &their_tool.name;
        let wording = provenance.tool_wording(name);
        if wording == Wording::Compared
            && our_tool.description.as_deref().map(str::trim)
                != their_tool.description.as_deref().map(str::trim)
        {
            let (at, a, b) = crate::diff::text_difference(
                our_tool.description.as_deref().unwrap_or(""),
                their_tool.description.as_deref().unwrap_or(""),
            )
            .unwrap_or_default();
            differ(
                &format!("tools.{name}.description"),
                format!("differs at char {at}: sent {a}, recorded {b}"),
            );
        }
        let empty = Value::Object(Default::default());
        let a = canonical(our_tool.parameters.as_ref().unwrap_or(&empty), wording);
        let b = canonical(their_tool.parameters.as_ref().unwrap_or(&empty), wording);
        if let Some((path, x, y)) = schema::difference(&a, &b) {
            let field = if path.is_empty() {
                format!("tools.{name}.parameters")
            } else {
                format!("tools.{name}.parameters.{path}")
            };
            differ(&field, format!("sent {x}, recorded {y}"));
        }
        if our_tool.strict.unwrap_or(false) != their_tool.strict.unwrap_or(false) {
            differ(
                &format!("tools.{name}.strict"),
                format!(
                    "sent {}, recorded {}",
                    show(&our_tool.strict),
                    show(&their_tool.strict)
                ),
            );
        }
    }

    let their_choice = recorded.tool_choice.clone();
    if choice_key(&sent.tool_choice) != choice_key(&their_choice) {
        differ(
            "tool_choice",
            format!("sent {}, recorded {their_choice}", sent.tool_choice),
        );
    }

    match (&sent.response_format, &recorded.response_format) {
        (Some(a), Some(b)) => {
            let wording = provenance.format_wording(b);
            if a.kind != b.kind {
                differ(
                    "response_format.type",
                    format!("sent {}, recorded {}", a.kind, b.kind),
                );
            }
            if wording == Wording::Compared && a.name != b.name {
                differ(
                    "response_format.name",
                    format!("sent {}, recorded {}", show(&a.name), show(&b.name)),
                );
            }
            if a.strict.unwrap_or(false) != b.strict.unwrap_or(false) {
                differ(
                    "response_format.strict",
                    format!("sent {}, recorded {}", show(&a.strict), show(&b.strict)),
                );
            }
            let (x, y) = (
                a.schema.as_ref().map(|s| canonical(s, wording)),
                b.schema.as_ref().map(|s| canonical(s, wording)),
            );
            if let Some((path, x, y)) = crate::diff::json_difference("", x.as_ref(), y.as_ref()) {
                let field = if path.is_empty() {
                    "response_format.schema".to_string()
                } else {
                    format!("response_format.schema.{path}")
                };
                differ(&field, format!("sent {x}, recorded {y}"));
            }
        }
        (a, b) => {
            if a.is_some() || b.is_some() {
                differ(
                    "response_format",
                    format!(
                        "sent {}, recorded {}",
                        a.as_ref().map_or("absent", |f| f.kind.as_str()),
                        b.as_ref().map_or("absent", |f| f.kind.as_str())
                    ),
                );
            }
        }
    }

    if sent.stream != recorded.stream {
        differ(
            "stream",
            format!("sent {}, recorded {}", sent.stream, recorded.stream),
        );
    }
    if !crate::expect::json_eq(
        sent.stream_options.as_ref().unwrap_or(&Value::Null),
        recorded.stream_options.as_ref().unwrap_or(&Value::Null),
    ) {
        differ(
            "stream_options",
            format!(
                "sent {}, recorded {}",
                json_text(sent.stream_options.as_ref()),
                json_text(recorded.stream_options.as_ref())
            ),
        );
    }
    let (a, b) = (
        stop_set(format, &sent.stop),
        stop_set(format, &recorded.stop),
    );
    if a != b {
        differ("stop", format!("sent {a:?}, recorded {b:?}"));
    }

    let roles = |s: &Shape| {
        s.messages
            .iter()
            .map(|m| m.role.clone())
            .collect::<Vec<_>>()
    };
    let (our_roles, their_roles) = (roles(sent), roles(recorded));
    if our_roles != their_roles {
        let at = our_roles
            .iter()
            .zip(&their_roles)
            .take_while(|(a, b)| a == b)
            .count();
        differ(
            "messages.roles",
            format!(
                "sent {our_roles:?}, recorded {their_roles:?} (first difference at message {at}: sent {}, recorded {})",
                our_roles.get(at).map_or("nothing", String::as_str),
                their_roles.get(at).map_or("nothing", String::as_str)
            ),
        );
    }
    let (our_refs, their_refs) = (references(&sent.messages), references(&recorded.messages));
    for (i, message) in sent.messages.iter().enumerate() {
        for reference in &our_refs[i] {
            if let Reference::Dangling(id) = reference {
                differ(
                    &format!("messages[{i}].tool_call_id"),
                    format!(
                        "sent a {} answering id {id:?}, which no earlier message's tool calls carry",
                        message.role
                    ),
                );
            }
        }
        let Some(theirs) = recorded.messages.get(i) else {
            continue;
        };
        let names = |m: &MessageShape| {
            m.calls
                .iter()
                .map(|c| tool_key(&c.name))
                .collect::<Vec<_>>()
        };
        if names(message) != names(theirs) {
            differ(
                &format!("messages[{i}].tool_calls"),
                format!("sent {:?}, recorded {:?}", names(message), names(theirs)),
            );
        }
        let dangling = our_refs[i]
            .iter()
            .any(|r| matches!(r, Reference::Dangling(_)));
        if !dangling && our_refs[i] != their_refs[i] {
            let list = |refs: &[Reference]| {
                refs.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            differ(
                &format!("messages[{i}].tool_call_id"),
                format!(
                    "sent answers [{}], recorded answers [{}]",
                    list(&our_refs[i]),
                    list(&their_refs[i])
                ),
            );
        }
    }
    out
}

/// A note on one request: how its recording was read (see [`era`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestNote {
    /// Our request's arrival number.
    pub request: usize,
    pub note: String,
}

/// The structural comparison of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Each one fails the case.
    pub differences: Vec<Difference>,
    /// How recordings were read: never a failure, always shown in the diff report.
    pub notes: Vec<RequestNote>,
}

/// Every structural difference between the requests we sent and the recorded ones that answered
/// them. Requests nothing answered are not here (they fail the case on their own), nor those
/// whose recorded body is not JSON (nothing to compare with).
pub fn compare(case: &Case, received: &[ReceivedRequest], recorded: &[Interaction]) -> Comparison {
    let format = WireFormat::of(case.provider);
    let provenance = Provenance::of(case);
    let mut out = Comparison::default();
    let mut lineage = era::Lineage::default();
    for request in received {
        let Some(interaction) = request.answered_by.and_then(|i| recorded.get(i)) else {
            continue;
        };
        let Some(theirs) = interaction.request_body() else {
            out.notes.push(RequestNote {
                request: request.number,
                note: "not compared: the recorded body is not JSON".into(),
            });
            continue;
        };
        let difference = |field: &str, detail: String| Difference {
            request: request.number,
            method: request.method.clone(),
            path: request.path.clone(),
            interaction: interaction.cassette_index,
            field: field.to_string(),
            detail,
        };
        let Some(ours) = &request.body else {
            out.differences.push(difference(
                "body",
                "sent a body that is not JSON, recorded a JSON body".into(),
            ));
            continue;
        };
        let (a, b) = (Shape::of(format, ours), Shape::of(format, &theirs));
        let answering = request.answered_by.unwrap_or_default();
        let next = recorded
            .iter()
            .skip(answering + 1)
            .find(|i| i.method == interaction.method && i.path == interaction.path)
            .and_then(Interaction::request_body)
            .map(|body| Shape::of(format, &body));
        let key = format!("{} {}", request.method, request.path);
        if let Some(note) = lineage.judge(
            &key,
            &a,
            &b,
            next.as_ref(),
            era::reply_calls_tools(&interaction.response_body),
        ) {
            out.notes.push(RequestNote {
                request: request.number,
                note,
            });
            continue;
        }
        let (verdict, notes) = era::modernize(format, &provenance, &a, &b);
        out.notes.extend(notes.into_iter().map(|note| RequestNote {
            request: request.number,
            note,
        }));
        match verdict {
            era::Verdict::Unrelated(note) => out.notes.push(RequestNote {
                request: request.number,
                note,
            }),
            era::Verdict::Compare { sent, recorded } => out.differences.extend(
                compare_shapes(format, &provenance, &sent, &recorded)
                    .into_iter()
                    .map(|(field, detail)| difference(&field, detail)),
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests;
