//! Turning a run's events into spans: each started event opens a span, its completion (or
//! failure) closes it, and its parent is the span its parent event belongs to. The same assembler
//! serves live OpenTelemetry export (fed from the [`EventBus`](crewai_core::events::EventBus)) and
//! the local trace viewer (fed from a trace file, whose lines read back as typed [`Event`]s), so
//! both show the same tree.
//!
//! What each kind of event does to spans is decided in one exhaustive `match` ([`role_of`]): a
//! new [`EventKind`] does not compile until it is given a role here.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use crewai_core::events::{Event, EventKind};
use crewai_llm::Usage;
use serde::Serialize;
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
    /// Opening a session with an MCP server.
    McpConnection,
    /// A call to an MCP server's tool (inside the tool call that made it).
    McpToolCall,
    /// One turn of a conversation with a remote A2A agent (inside the tool call that made it).
    A2aDelegation,
    /// Model-written code running in a sandbox (inside the `CodeInterpreterTool` call).
    CodeExecution,
    /// One step of an agent's plan (`planning_config`), inside the agent's span.
    PlanStep,
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
    pub opened: Event,
    /// The closing event, when there was one.
    pub closed: Option<Event>,
    /// Things that happened inside the span and are worth showing on it (a caught panic, a
    /// rate-limit wait), in the order they happened.
    pub marks: Vec<Event>,
}

impl SpanRecord {
    /// The LLM call's usage (with its cost), for `llm_call` spans that completed.
    pub fn usage(&self) -> Option<Usage> {
        match &self.closed.as_ref()?.kind {
            EventKind::LlmCallCompleted { usage, .. } => Some(*usage),
            _ => None,
        }
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
    opened: Event,
    marks: Vec<Event>,
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
    /// The parent of every span seen (closed ones too), for marks that come after their span
    /// closed.
    parents: BTreeMap<Uuid, Option<Uuid>>,
    last_seen: Option<DateTime<Utc>>,
}

/// How an event relates to spans.
#[derive(Debug, PartialEq)]
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
    /// Shown on the span it happens in (see [`SpanRecord::marks`]).
    Marks,
    /// Neither (a stream chunk): only remembered so its children find their span.
    Inside,
}

/// What `kind` does to spans. Exhaustive on purpose: every kind of event is decided here.
fn role_of(kind: &EventKind) -> Role {
    use EventKind as K;
    let opens = |kind: SpanKind, label: &str, key: &str| Role::Opens {
        kind,
        label: label.to_string(),
        key: key.to_string(),
    };
    let closes = |kind: SpanKind, key: &str, error: Option<&str>| Role::Closes {
        kind,
        key: key.to_string(),
        error: error.map(str::to_string),
    };
    let tool_key =
        |tool_name: &str, tool_args: &serde_json::Value| format!("{tool_name}\u{1f}{tool_args}");
    match kind {
        K::CrewKickoffStarted { crew_name, .. } => opens(SpanKind::Crew, crew_name, ""),
        K::CrewKickoffCompleted { .. } => closes(SpanKind::Crew, "", None),
        K::CrewKickoffFailed { error, .. } => closes(SpanKind::Crew, "", Some(error)),
        K::TaskStarted {
            task_name, task_id, ..
        } => {
            let label = match task_name.as_deref() {
                Some(name) if !name.is_empty() => name,
                _ => task_id.as_deref().unwrap_or_default(),
            };
            opens(SpanKind::Task, label, "")
        }
        K::TaskCompleted { .. } => closes(SpanKind::Task, "", None),
        K::TaskFailed { error, .. } => closes(SpanKind::Task, "", Some(error)),
        K::AgentExecutionStarted {
            agent_role,
            agent_id,
            ..
        }
        | K::LiteAgentExecutionStarted {
            agent_role,
            agent_id,
            ..
        } => opens(SpanKind::Agent, agent_role, agent_id),
        K::AgentExecutionCompleted { agent_id, .. }
        | K::LiteAgentExecutionCompleted { agent_id, .. } => {
            closes(SpanKind::Agent, agent_id, None)
        }
        K::AgentExecutionError {
            agent_id, error, ..
        }
        | K::LiteAgentExecutionError {
            agent_id, error, ..
        } => closes(SpanKind::Agent, agent_id, Some(error)),
        K::LlmCallStarted { call_id, model, .. } => opens(SpanKind::LlmCall, model, call_id),
        K::LlmCallCompleted { call_id, .. } => closes(SpanKind::LlmCall, call_id, None),
        K::LlmCallFailed { call_id, error, .. } => closes(SpanKind::LlmCall, call_id, Some(error)),
        K::ToolUsageStarted {
            tool_name,
            tool_args,
            ..
        } => opens(
            SpanKind::ToolCall,
            tool_name,
            &tool_key(tool_name, tool_args),
        ),
        K::ToolUsageFinished {
            tool_name,
            tool_args,
            ..
        } => closes(SpanKind::ToolCall, &tool_key(tool_name, tool_args), None),
        K::ToolUsageError {
            tool_name,
            tool_args,
            error,
            ..
        } => closes(
            SpanKind::ToolCall,
            &tool_key(tool_name, tool_args),
            Some(error),
        ),
        K::McpConnectionStarted { server_name, .. } => {
            opens(SpanKind::McpConnection, server_name, server_name)
        }
        K::McpConnectionCompleted { server_name, .. } => {
            closes(SpanKind::McpConnection, server_name, None)
        }
        K::McpConnectionFailed {
            server_name, error, ..
        } => closes(SpanKind::McpConnection, server_name, Some(error)),
        K::McpToolExecutionStarted {
            server_name,
            tool_name,
            tool_args,
            ..
        } => opens(
            SpanKind::McpToolCall,
            tool_name,
            &tool_key(&format!("{server_name}\u{1f}{tool_name}"), tool_args),
        ),
        K::McpToolExecutionCompleted {
            server_name,
            tool_name,
            tool_args,
            ..
        } => closes(
            SpanKind::McpToolCall,
            &tool_key(&format!("{server_name}\u{1f}{tool_name}"), tool_args),
            None,
        ),
        K::McpToolExecutionFailed {
            server_name,
            tool_name,
            tool_args,
            error,
            ..
        } => closes(
            SpanKind::McpToolCall,
            &tool_key(&format!("{server_name}\u{1f}{tool_name}"), tool_args),
            Some(error),
        ),
        K::A2aDelegationStarted {
            endpoint,
            a2a_agent_name,
            ..
        } => opens(SpanKind::A2aDelegation, a2a_agent_name, endpoint),
        K::A2aDelegationCompleted { endpoint, .. } => {
            closes(SpanKind::A2aDelegation, endpoint, None)
        }
        K::A2aDelegationFailed {
            endpoint, error, ..
        } => closes(SpanKind::A2aDelegation, endpoint, Some(error)),
        K::CodeExecutionStarted {
            backend,
            code_sha256,
            ..
        } => opens(SpanKind::CodeExecution, backend, code_sha256),
        K::CodeExecutionCompleted {
            code_sha256,
            exit_code,
            stopped,
            limit_hit,
            ..
        } => {
            let problem = crewai_core::events::code_execution_problem(
                *exit_code,
                stopped.as_deref(),
                limit_hit.as_deref(),
            );
            closes(SpanKind::CodeExecution, code_sha256, problem.as_deref())
        }
        K::CodeExecutionFailed {
            code_sha256, error, ..
        } => closes(SpanKind::CodeExecution, code_sha256, Some(error)),
        K::PlanStepStarted {
            step_number,
            description,
            ..
        } => opens(SpanKind::PlanStep, description, &step_number.to_string()),
        K::PlanStepCompleted { step_number, .. } => {
            closes(SpanKind::PlanStep, &step_number.to_string(), None)
        }
        K::PlanStepFailed {
            step_number, error, ..
        } => closes(SpanKind::PlanStep, &step_number.to_string(), Some(error)),
        K::AgentDelegationStarted { to_agent, .. } => opens(SpanKind::Delegation, to_agent, ""),
        K::AgentDelegationCompleted { .. } => closes(SpanKind::Delegation, "", None),
        K::LlmGuardrailStarted { guardrail, .. } => opens(SpanKind::Guardrail, guardrail, ""),
        K::LlmGuardrailCompleted { success, error, .. } => {
            let failure = (!success).then(|| error.as_deref().unwrap_or("the guardrail failed"));
            closes(SpanKind::Guardrail, "", failure)
        }
        K::FlowStarted { flow_name, .. } => opens(SpanKind::Flow, flow_name, ""),
        K::FlowFinished { .. } => closes(SpanKind::Flow, "", None),
        K::MethodExecutionStarted { method_name, .. } => {
            opens(SpanKind::Method, method_name, method_name)
        }
        K::MethodExecutionFinished { method_name, .. } => {
            closes(SpanKind::Method, method_name, None)
        }
        K::MethodExecutionFailed {
            method_name, error, ..
        } => closes(SpanKind::Method, method_name, Some(error)),
        // A skill's discovery, loading and use, memory's recalls and saves, and knowledge searches, are moments of
        // the agent's (or the task's, or a tool's) span, not work of their own.
        // Planning, test scores and training are moments of the crew's span (the planner's own
        // calls are spans under the crew's); a consensus's rounds and decision are moments of
        // the task's (the voters' and the judge's calls are spans under it).
        K::ConsensusRoundStarted { .. }
        | K::ConsensusRoundCompleted { .. }
        | K::ConsensusDecisionStarted { .. }
        | K::ConsensusDecided { .. }
        | K::CrewPlanningStarted { .. }
        | K::CrewPlanningCompleted { .. }
        | K::CrewPlanningFailed { .. }
        // An agent's planning calls are spans of their own; the plan, its observations and its
        // changes are moments of the agent's span.
        | K::AgentReasoningStarted { .. }
        | K::AgentReasoningCompleted { .. }
        | K::AgentReasoningFailed { .. }
        | K::PlanStepObserved { .. }
        | K::PlanReplanned { .. }
        | K::CrewTestStarted { .. }
        | K::CrewTestCompleted { .. }
        | K::CrewTestResult { .. }
        | K::CrewTrainStarted { .. }
        | K::CrewTrainCompleted { .. }
        | K::PanicCaught { .. }
        | K::RateLimitWaitStarted { .. }
        | K::SkillDiscoveryStarted { .. }
        | K::SkillDiscoveryCompleted { .. }
        | K::SkillLoaded { .. }
        | K::SkillActivated { .. }
        | K::SkillLoadFailed { .. }
        | K::SkillUsed { .. }
        | K::MemorySaveStarted { .. }
        | K::MemorySaveCompleted { .. }
        | K::MemorySaveFailed { .. }
        | K::MemoryQueryStarted { .. }
        | K::MemoryQueryCompleted { .. }
        | K::MemoryQueryFailed { .. }
        | K::KnowledgeRetrievalStarted { .. }
        | K::KnowledgeRetrievalCompleted { .. }
        | K::KnowledgeQueryStarted { .. }
        | K::KnowledgeQueryCompleted { .. }
        | K::KnowledgeQueryFailed { .. }
        | K::KnowledgeSearchQueryFailed { .. } => Role::Marks,
        K::LlmStreamChunk { .. } => Role::Inside,
    }
}

impl SpanAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one event; returns the span it closed, if any.
    pub fn push(&mut self, event: &Event) -> Option<SpanRecord> {
        let id = event.event_id;
        let parent_event = event.parent_event_id;
        let at = event.timestamp;
        self.last_seen = Some(self.last_seen.map_or(at, |last| last.max(at)));
        match role_of(&event.kind) {
            Role::Opens { kind, label, key } => {
                let parent = parent_event.and_then(|p| self.span_of_event.get(&p).copied());
                let root = parent
                    .and_then(|p| self.roots.get(&p).copied())
                    .unwrap_or(id);
                self.roots.insert(id, root);
                self.parents.insert(id, parent);
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
                        marks: Vec::new(),
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
            Role::Marks => {
                let span = self.remember_inside(id, parent_event)?;
                if let Some(open) = self.open_at_or_above(span) {
                    open.marks.push(event.clone());
                }
                None
            }
            Role::Inside => {
                self.remember_inside(id, parent_event);
                None
            }
        }
    }

    /// Records that event `id` belongs to its parent event's span; returns that span.
    fn remember_inside(&mut self, id: Uuid, parent_event: Option<Uuid>) -> Option<Uuid> {
        let span = parent_event.and_then(|p| self.span_of_event.get(&p).copied())?;
        self.span_of_event.insert(id, span);
        Some(span)
    }

    /// `span` if it is still open, else its nearest open ancestor (a listener's panic on a
    /// closing event comes after that span closed).
    fn open_at_or_above(&mut self, span: Uuid) -> Option<&mut OpenSpan> {
        let mut current = Some(span);
        while let Some(id) = current {
            if self.open.contains_key(&id) {
                return self.open.get_mut(&id);
            }
            current = self.parents.get(&id).copied().flatten();
        }
        None
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
        closed: Option<Event>,
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
            marks: open.marks,
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
pub fn spans_of(events: &[Event]) -> Vec<SpanRecord> {
    let mut assembler = SpanAssembler::new();
    let mut spans: Vec<SpanRecord> = events.iter().filter_map(|e| assembler.push(e)).collect();
    spans.extend(assembler.finish());
    spans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crewai_core::events::{CaughtPanic, EventBus, EventRecorder, EventType, PanicSite};
    use serde_json::Value;
    use uuid::Uuid;

    /// A crew kickoff starting, at the top.
    fn crew_started(bus: &EventBus) -> Uuid {
        bus.emit(
            None,
            EventKind::CrewKickoffStarted {
                crew_name: "c".into(),
                crew_id: None,
                inputs: None,
            },
        )
    }

    /// Agent `A` starting its run (of task `task_name`) under `parent`.
    fn agent_started(bus: &EventBus, parent: Option<Uuid>, task_name: Option<&str>) -> Uuid {
        bus.emit(
            parent,
            EventKind::AgentExecutionStarted {
                agent_role: "A".into(),
                agent_id: "a1".into(),
                task_name: task_name.map(Into::into),
                task_prompt: "p".into(),
                tools: vec![],
            },
        )
    }

    /// Tool `x` called under `agent`.
    fn tool_started(bus: &EventBus, agent: Uuid) -> Uuid {
        bus.emit(
            Some(agent),
            EventKind::ToolUsageStarted {
                tool_name: "x".into(),
                tool_args: Value::Null,
                agent_role: None,
                task_name: None,
            },
        )
    }

    #[test]
    fn nests_crew_task_agent_and_calls() {
        let bus = EventBus::new();
        let recorder = EventRecorder::attach(&bus);
        let crew = crew_started(&bus);
        let task = bus.emit(
            Some(crew),
            EventKind::TaskStarted {
                task_name: Some("t".into()),
                task_id: None,
                agent_role: Some("A".into()),
                context: None,
            },
        );
        let agent = agent_started(&bus, Some(task), Some("t"));
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
        tool_started(&bus, agent);
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

        let spans = spans_of(&recorder.events());
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
        let crew = crew_started(&bus);
        bus.emit(
            Some(crew),
            EventKind::TaskStarted {
                task_name: Some("t".into()),
                task_id: None,
                agent_role: None,
                context: None,
            },
        );
        let spans = spans_of(&recorder.events());
        assert_eq!(spans.len(), 2);
        assert!(
            spans
                .iter()
                .all(|s| s.error.as_deref() == Some("did not finish"))
        );
    }

    #[test]
    fn every_kind_of_span_that_opens_can_close() {
        let roles: Vec<Role> = EventType::all()
            .map(|ty| role_of(&EventKind::blank(ty)))
            .collect();
        let opened: Vec<SpanKind> = roles
            .iter()
            .filter_map(|role| match role {
                Role::Opens { kind, .. } => Some(*kind),
                _ => None,
            })
            .collect();
        for kind in &opened {
            assert!(
                roles.iter().any(
                    |role| matches!(role, Role::Closes { kind: closed, .. } if closed == kind)
                ),
                "nothing closes a {kind:?} span"
            );
        }
        assert_eq!(opened.len(), 15, "{opened:?}");
    }

    #[test]
    fn panics_and_rate_limit_waits_are_marked_on_their_span() {
        let bus = EventBus::new();
        let recorder = EventRecorder::attach(&bus);
        let agent = agent_started(&bus, None, None);
        bus.emit(
            Some(agent),
            EventKind::RateLimitWaitStarted {
                agent_role: "A".into(),
                task_name: None,
                max_rpm: Some(2),
                wait_ms: 1500,
            },
        );
        let call = tool_started(&bus, agent);
        bus.report_panic(Some(call), CaughtPanic::new(PanicSite::Tool, "x", "boom"));
        let finished = bus.emit(
            Some(agent),
            EventKind::ToolUsageFinished {
                tool_name: "x".into(),
                tool_args: Value::Null,
                agent_role: None,
                task_name: None,
                output: "o".into(),
                from_cache: false,
            },
        );
        // A panic reported under an event whose span has closed goes to the open span above.
        bus.report_panic(
            Some(finished),
            CaughtPanic::new(PanicSite::Listener, "l", "late"),
        );
        bus.emit(
            None,
            EventKind::AgentExecutionCompleted {
                agent_role: "A".into(),
                agent_id: "a1".into(),
                task_name: None,
                output: "o".into(),
            },
        );
        let spans = spans_of(&recorder.events());
        let marks = |kind: SpanKind| -> Vec<&'static str> {
            let span = spans.iter().find(|s| s.kind == kind).unwrap();
            span.marks.iter().map(|e| e.type_name()).collect()
        };
        assert_eq!(marks(SpanKind::ToolCall), vec!["panic_caught"]);
        assert_eq!(
            marks(SpanKind::Agent),
            vec!["rate_limit_wait_started", "panic_caught"]
        );
    }
}
