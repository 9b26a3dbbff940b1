//! Turning a run's events into spans: each started event opens a span, its completion (or
//! failure) closes it, and its parent is the span its parent event belongs to. The same assembler
//! serves live OpenTelemetry export (fed from the [`EventBus`](crewai_core::events::EventBus)) and
//! the local trace viewer (fed from a trace file), so both show the same tree.
//!
//! Events are taken in their JSON form ([`Event::to_json`](crewai_core::events::Event::to_json)),
//! which is also what trace files hold.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use crewai_llm::Usage;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

/// What a span stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanKind {
    Crew,
    Task,
    Agent,
    LlmCall,
    ToolCall,
    Delegation,
    Guardrail,
    Flow,
    Method,
}

/// One finished span.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpanRecord {
    /// The id of the event that opened it.
    pub id: Uuid,
    /// The span it belongs under.
    pub parent: Option<Uuid>,
    /// The outermost span of its tree (itself for a root): one trace per root.
    pub root: Uuid,
    pub kind: SpanKind,
    /// A short label: the crew, task or agent name, the model, the tool.
    pub label: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Why it failed, when it did (or that it never finished).
    pub error: Option<String>,
    /// The opening event.
    pub opened: Value,
    /// The closing event, when there was one.
    pub closed: Option<Value>,
}

impl SpanRecord {
    /// The LLM call's usage (with its cost), for `llm_call` spans that completed.
    pub fn usage(&self) -> Option<Usage> {
        let closed = self.closed.as_ref()?;
        serde_json::from_value(closed.get("usage")?.clone()).ok()
    }

    /// How long the span took.
    pub fn duration(&self) -> chrono::Duration {
        self.end - self.start
    }
}

struct OpenSpan {
    parent: Option<Uuid>,
    root: Uuid,
    kind: SpanKind,
    label: String,
    /// What a closing event must carry to close this span (call id, tool name and arguments).
    key: String,
    /// The parent event id the opening event had (agents and tools close under the same one).
    opened_under: Option<Uuid>,
    start: DateTime<Utc>,
    opened: Value,
}

/// Builds spans from events as they come; finished spans are returned as soon as they close.
#[derive(Default)]
pub struct SpanAssembler {
    open: BTreeMap<Uuid, OpenSpan>,
    /// Opening order, to close same-keyed spans first-in first-out.
    order: Vec<Uuid>,
    /// Which span each seen event belongs to (an opening event is its own span).
    span_of_event: BTreeMap<Uuid, Uuid>,
    /// The root of every span seen.
    roots: BTreeMap<Uuid, Uuid>,
    last_seen: Option<DateTime<Utc>>,
}

fn text(event: &Value, field: &str) -> String {
    event
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn uuid_field(event: &Value, field: &str) -> Option<Uuid> {
    event
        .get(field)
        .and_then(Value::as_str)
        .and_then(|s| Uuid::parse_str(s).ok())
}

fn timestamp(event: &Value) -> Option<DateTime<Utc>> {
    let raw = event.get("timestamp")?.as_str()?;
    DateTime::parse_from_rfc3339(raw)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// How an event relates to spans.
enum Role {
    Opens {
        kind: SpanKind,
        label: String,
        key: String,
    },
    Closes {
        kind: SpanKind,
        key: String,
        error: Option<String>,
    },
    /// Neither (a stream chunk): only remembered so its children find their span.
    Inside,
}

fn role_of(event: &Value) -> Role {
    let kind_of = |name: &str| text(event, name);
    let tool_key = || {
        format!(
            "{}\u{1f}{}",
            text(event, "tool_name"),
            event
                .get("tool_args")
                .map(Value::to_string)
                .unwrap_or_default()
        )
    };
    let error = || Some(text(event, "error"));
    match text(event, "type").as_str() {
        "crew_kickoff_started" => Role::Opens {
            kind: SpanKind::Crew,
            label: kind_of("crew_name"),
            key: String::new(),
        },
        "crew_kickoff_completed" => Role::Closes {
            kind: SpanKind::Crew,
            key: String::new(),
            error: None,
        },
        "crew_kickoff_failed" => Role::Closes {
            kind: SpanKind::Crew,
            key: String::new(),
            error: error(),
        },
        "task_started" => Role::Opens {
            kind: SpanKind::Task,
            label: task_label(event),
            key: String::new(),
        },
        "task_completed" => Role::Closes {
            kind: SpanKind::Task,
            key: String::new(),
            error: None,
        },
        "task_failed" => Role::Closes {
            kind: SpanKind::Task,
            key: String::new(),
            error: error(),
        },
        "agent_execution_started" | "lite_agent_execution_started" => Role::Opens {
            kind: SpanKind::Agent,
            label: kind_of("agent_role"),
            key: kind_of("agent_id"),
        },
        "agent_execution_completed" | "lite_agent_execution_completed" => Role::Closes {
            kind: SpanKind::Agent,
            key: kind_of("agent_id"),
            error: None,
        },
        "agent_execution_error" | "lite_agent_execution_error" => Role::Closes {
            kind: SpanKind::Agent,
            key: kind_of("agent_id"),
            error: error(),
        },
        "llm_call_started" => Role::Opens {
            kind: SpanKind::LlmCall,
            label: kind_of("model"),
            key: kind_of("call_id"),
        },
        "llm_call_completed" => Role::Closes {
            kind: SpanKind::LlmCall,
            key: kind_of("call_id"),
            error: None,
        },
        "llm_call_failed" => Role::Closes {
            kind: SpanKind::LlmCall,
            key: kind_of("call_id"),
            error: error(),
        },
        "tool_usage_started" => Role::Opens {
            kind: SpanKind::ToolCall,
            label: kind_of("tool_name"),
            key: tool_key(),
        },
        "tool_usage_finished" => Role::Closes {
            kind: SpanKind::ToolCall,
            key: tool_key(),
            error: None,
        },
        "tool_usage_error" => Role::Closes {
            kind: SpanKind::ToolCall,
            key: tool_key(),
            error: error(),
        },
        "agent_delegation_started" => Role::Opens {
            kind: SpanKind::Delegation,
            label: kind_of("to_agent"),
            key: String::new(),
        },
        "agent_delegation_completed" => Role::Closes {
            kind: SpanKind::Delegation,
            key: String::new(),
            error: None,
        },
        "llm_guardrail_started" => Role::Opens {
            kind: SpanKind::Guardrail,
            label: kind_of("guardrail"),
            key: String::new(),
        },
        "llm_guardrail_completed" => {
            let failed = event.get("success").and_then(Value::as_bool) == Some(false);
            Role::Closes {
                kind: SpanKind::Guardrail,
                key: String::new(),
                error: failed.then(|| text(event, "error")),
            }
        }
        "flow_started" => Role::Opens {
            kind: SpanKind::Flow,
            label: kind_of("flow_name"),
            key: String::new(),
        },
        "flow_finished" => Role::Closes {
            kind: SpanKind::Flow,
            key: String::new(),
            error: None,
        },
        "method_execution_started" => Role::Opens {
            kind: SpanKind::Method,
            label: kind_of("method_name"),
            key: kind_of("method_name"),
        },
        "method_execution_finished" => Role::Closes {
            kind: SpanKind::Method,
            key: kind_of("method_name"),
            error: None,
        },
        "method_execution_failed" => Role::Closes {
            kind: SpanKind::Method,
            key: kind_of("method_name"),
            error: error(),
        },
        _ => Role::Inside,
    }
}

fn task_label(event: &Value) -> String {
    match event.get("task_name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => text(event, "task_id"),
    }
}

impl SpanAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one event (in its JSON form); returns the span it closed, if any.
    pub fn push(&mut self, event: &Value) -> Option<SpanRecord> {
        let id = uuid_field(event, "event_id")?;
        let parent_event = uuid_field(event, "parent_event_id");
        let at = timestamp(event).or(self.last_seen).unwrap_or_else(Utc::now);
        self.last_seen = Some(at);
        match role_of(event) {
            Role::Opens { kind, label, key } => {
                let parent = parent_event.and_then(|p| self.span_of_event.get(&p).copied());
                let root = parent
                    .and_then(|p| self.roots.get(&p).copied())
                    .unwrap_or(id);
                self.roots.insert(id, root);
                self.open.insert(
                    id,
                    OpenSpan {
                        parent,
                        root,
                        kind,
                        label,
                        key,
                        opened_under: parent_event,
                        start: at,
                        opened: event.clone(),
                    },
                );
                self.order.push(id);
                self.span_of_event.insert(id, id);
                None
            }
            Role::Closes { kind, key, error } => {
                let span = self.find_open(kind, &key, parent_event)?;
                self.span_of_event.insert(id, span);
                self.close(span, at, error, Some(event.clone()))
            }
            Role::Inside => {
                if let Some(span) = parent_event.and_then(|p| self.span_of_event.get(&p).copied()) {
                    self.span_of_event.insert(id, span);
                }
                None
            }
        }
    }

    /// The open span a closing event closes: the span its parent event opened (crews, tasks,
    /// delegations, agent errors), else the oldest open span of the kind and key opened under
    /// the same parent (agents, tools), else the oldest of the kind and key (LLM calls by call id).
    fn find_open(&self, kind: SpanKind, key: &str, parent_event: Option<Uuid>) -> Option<Uuid> {
        let matches = |id: &Uuid| {
            self.open
                .get(id)
                .is_some_and(|s| s.kind == kind && (s.key == key || key.is_empty()))
        };
        if let Some(parent) = parent_event
            && matches(&parent)
        {
            return Some(parent);
        }
        let under_same_parent = self
            .order
            .iter()
            .find(|id| matches(id) && self.open[*id].opened_under == parent_event);
        under_same_parent
            .or_else(|| self.order.iter().find(|id| matches(id) && !key.is_empty()))
            .copied()
    }

    fn close(
        &mut self,
        span: Uuid,
        end: DateTime<Utc>,
        error: Option<String>,
        closed: Option<Value>,
    ) -> Option<SpanRecord> {
        let open = self.open.remove(&span)?;
        self.order.retain(|id| *id != span);
        Some(SpanRecord {
            id: span,
            parent: open.parent,
            root: open.root,
            kind: open.kind,
            label: open.label,
            start: open.start,
            end,
            error,
            opened: open.opened,
            closed,
        })
    }

    /// Closes every span still open (a run that was cut short), at the last event's time.
    pub fn finish(&mut self) -> Vec<SpanRecord> {
        let end = self.last_seen.unwrap_or_else(Utc::now);
        let remaining = std::mem::take(&mut self.order);
        remaining
            .into_iter()
            .rev()
            .filter_map(|id| self.close(id, end, Some("did not finish".into()), None))
            .collect()
    }
}

/// All spans of a list of events, in the order they closed, unfinished ones last.
pub fn spans_of(events: &[Value]) -> Vec<SpanRecord> {
    let mut assembler = SpanAssembler::new();
    let mut spans: Vec<SpanRecord> = events.iter().filter_map(|e| assembler.push(e)).collect();
    spans.extend(assembler.finish());
    spans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crewai_core::events::{EventBus, EventKind, EventRecorder};

    #[test]
    fn nests_crew_task_agent_and_calls() {
        let bus = EventBus::new();
        let recorder = EventRecorder::attach(&bus);
        let crew = bus.emit(
            None,
            EventKind::CrewKickoffStarted {
                crew_name: "c".into(),
                crew_id: None,
                inputs: None,
            },
        );
        let task = bus.emit(
            Some(crew),
            EventKind::TaskStarted {
                task_name: Some("t".into()),
                task_id: None,
                agent_role: Some("A".into()),
                context: None,
            },
        );
        let agent = bus.emit(
            Some(task),
            EventKind::AgentExecutionStarted {
                agent_role: "A".into(),
                agent_id: "a1".into(),
                task_name: Some("t".into()),
                task_prompt: "p".into(),
                tools: vec![],
            },
        );
        bus.emit(
            Some(agent),
            EventKind::LlmCallStarted {
                call_id: "k".into(),
                model: "m".into(),
                agent_role: None,
                task_name: None,
                messages: Value::Null,
                tools: vec![],
            },
        );
        bus.emit(
            Some(agent),
            EventKind::ToolUsageStarted {
                tool_name: "x".into(),
                tool_args: Value::Null,
                agent_role: None,
                task_name: None,
            },
        );
        bus.emit(
            Some(agent),
            EventKind::ToolUsageError {
                tool_name: "x".into(),
                tool_args: Value::Null,
                agent_role: None,
                task_name: None,
                error: "boom".into(),
            },
        );
        bus.emit(
            Some(agent),
            EventKind::LlmCallCompleted {
                call_id: "k".into(),
                model: "m".into(),
                agent_role: None,
                task_name: None,
                response: Value::Null,
                usage: Usage {
                    total_tokens: 3,
                    ..Default::default()
                },
            },
        );
        bus.emit(
            Some(task),
            EventKind::AgentExecutionCompleted {
                agent_role: "A".into(),
                agent_id: "a1".into(),
                task_name: None,
                output: "o".into(),
            },
        );
        bus.emit(
            Some(task),
            EventKind::TaskCompleted {
                task_name: Some("t".into()),
                task_id: None,
                agent_role: None,
                output: "o".into(),
            },
        );
        bus.emit(
            Some(crew),
            EventKind::CrewKickoffCompleted {
                crew_name: "c".into(),
                crew_id: None,
                output: "o".into(),
                total_tokens: 3,
            },
        );

        let events: Vec<Value> = recorder.events().iter().map(|e| e.to_json()).collect();
        let spans = spans_of(&events);
        let kinds: Vec<SpanKind> = spans.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [
                SpanKind::ToolCall,
                SpanKind::LlmCall,
                SpanKind::Agent,
                SpanKind::Task,
                SpanKind::Crew
            ]
        );
        let by_kind = |k: SpanKind| spans.iter().find(|s| s.kind == k).unwrap();
        assert_eq!(by_kind(SpanKind::ToolCall).parent, Some(agent));
        assert_eq!(by_kind(SpanKind::ToolCall).error.as_deref(), Some("boom"));
        assert_eq!(by_kind(SpanKind::LlmCall).usage().unwrap().total_tokens, 3);
        assert_eq!(by_kind(SpanKind::Agent).parent, Some(task));
        assert_eq!(by_kind(SpanKind::Task).parent, Some(crew));
        assert_eq!(by_kind(SpanKind::Crew).parent, None);
    }

    #[test]
    fn unfinished_spans_are_closed_as_such() {
        let bus = EventBus::new();
        let recorder = EventRecorder::attach(&bus);
        let crew = bus.emit(
            None,
            EventKind::CrewKickoffStarted {
                crew_name: "c".into(),
                crew_id: None,
                inputs: None,
            },
        );
        bus.emit(
            Some(crew),
            EventKind::TaskStarted {
                task_name: Some("t".into()),
                task_id: None,
                agent_role: None,
                context: None,
            },
        );
        let events: Vec<Value> = recorder.events().iter().map(|e| e.to_json()).collect();
        let spans = spans_of(&events);
        assert_eq!(spans.len(), 2);
        assert!(
            spans
                .iter()
                .all(|s| s.error.as_deref() == Some("did not finish"))
        );
    }
}
