//! How a finished span record becomes an OpenTelemetry span: its name, kind, status and
//! attributes after the GenAI semantic conventions, per kind of span.

use std::borrow::Cow;
use std::time::SystemTime;

use crewai_core::events::{Event, EventKind};
use crewai_llm::ProviderRegistry;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind as OtelSpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value as OtelValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde_json::Value;
use uuid::Uuid;

use crate::spans::{SpanKind, SpanRecord};

/// How span records become OpenTelemetry spans.
pub(super) struct SpanShape {
    pub(super) record_content: bool,
    /// Names a model's provider (`gen_ai.provider.name`) from its prefix or family.
    pub(super) providers: ProviderRegistry,
}

pub(super) fn span_id_of(id: Uuid) -> SpanId {
    let bytes = id.as_bytes();
    let mut eight = [0u8; 8];
    eight.copy_from_slice(&bytes[8..]);
    if eight == [0; 8] {
        eight[7] = 1;
    }
    SpanId::from_bytes(eight)
}

pub(super) fn system_time(at: chrono::DateTime<chrono::Utc>) -> SystemTime {
    SystemTime::from(at)
}

pub(super) fn json_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A span's attributes as they are collected (empty texts are left out).
#[derive(Default)]
struct Attributes(Vec<KeyValue>);

impl Attributes {
    fn text(&mut self, key: &'static str, value: Option<&str>) {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            self.0.push(KeyValue::new(key, value.to_string()));
        }
    }

    fn value(&mut self, key: &'static str, value: impl Into<OtelValue>) {
        self.0.push(KeyValue::new(key, value));
    }
}

impl SpanShape {
    pub(super) fn span_data(&self, record: &SpanRecord) -> SpanData {
        use EventKind as K;
        let content = self.record_content;
        let closed = record.closed.as_ref().map(|event| &event.kind);
        let mut attributes = Attributes::default();
        attributes.value("crewai.span.kind", span_kind_name(record.kind));
        attributes.text("gen_ai.agent.name", record.opened.kind.agent_role());
        attributes.text("crewai.task.name", record.opened.kind.task_name());
        let label = &record.label;
        // Every kind is listed: a new kind of event must say whether it opens a span of its own.
        let (name, kind) = match &record.opened.kind {
            K::CrewKickoffStarted {
                crew_name, crew_id, ..
            } => {
                attributes.text("crewai.crew.name", Some(crew_name));
                attributes.text("crewai.crew.id", crew_id.as_deref());
                (format!("crew_kickoff {label}"), OtelSpanKind::Internal)
            }
            K::TaskStarted { task_id, .. } => {
                attributes.text("crewai.task.id", task_id.as_deref());
                (format!("task {label}"), OtelSpanKind::Internal)
            }
            K::AgentExecutionStarted {
                agent_id,
                task_prompt,
                ..
            } => {
                self.agent(&mut attributes, agent_id, Some(task_prompt), closed);
                (format!("invoke_agent {label}"), OtelSpanKind::Internal)
            }
            K::LiteAgentExecutionStarted { agent_id, .. } => {
                self.agent(&mut attributes, agent_id, None, closed);
                (format!("invoke_agent {label}"), OtelSpanKind::Internal)
            }
            K::LlmCallStarted {
                model, messages, ..
            } => {
                attributes.text("gen_ai.operation.name", Some("chat"));
                attributes.text(
                    "gen_ai.provider.name",
                    Some(self.providers.gen_ai_system(model)),
                );
                attributes.text("gen_ai.request.model", Some(model));
                if let Some(usage) = record.usage() {
                    let tokens = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
                    attributes.value("gen_ai.usage.input_tokens", tokens(usage.prompt_tokens));
                    attributes.value(
                        "gen_ai.usage.output_tokens",
                        tokens(usage.completion_tokens),
                    );
                    attributes.value(
                        "gen_ai.usage.cache_read.input_tokens",
                        tokens(usage.cached_prompt_tokens),
                    );
                    attributes.value(
                        "gen_ai.usage.reasoning.output_tokens",
                        tokens(usage.reasoning_tokens),
                    );
                    attributes.value("crewai.usage.cost_usd", usage.cost_usd);
                }
                if content {
                    attributes.value("gen_ai.input.messages", json_text(messages));
                    if let Some(K::LlmCallCompleted { response, .. }) = closed {
                        attributes.value("gen_ai.output.messages", json_text(response));
                    }
                }
                (format!("chat {model}"), OtelSpanKind::Client)
            }
            K::ToolUsageStarted { tool_args, .. } => {
                attributes.text("gen_ai.operation.name", Some("execute_tool"));
                attributes.text("gen_ai.tool.name", Some(label));
                attributes.text("gen_ai.tool.type", Some("function"));
                let finished = match closed {
                    Some(K::ToolUsageFinished {
                        output, from_cache, ..
                    }) => Some((output, *from_cache)),
                    _ => None,
                };
                if content {
                    attributes.text("gen_ai.tool.call.arguments", Some(&json_text(tool_args)));
                    attributes.text(
                        "gen_ai.tool.call.result",
                        finished.map(|(output, _)| output.as_str()),
                    );
                }
                if let Some((_, from_cache)) = finished {
                    attributes.value("crewai.tool.from_cache", from_cache);
                }
                (format!("execute_tool {label}"), OtelSpanKind::Internal)
            }
            K::AgentDelegationStarted {
                from_agent,
                to_agent,
                kind,
                task,
            } => {
                attributes.text("crewai.delegation.from_agent", Some(from_agent));
                attributes.text("crewai.delegation.to_agent", Some(to_agent));
                attributes.text("crewai.delegation.kind", Some(kind));
                if content {
                    attributes.text("crewai.delegation.task", Some(task));
                }
                (format!("delegate {label}"), OtelSpanKind::Internal)
            }
            K::McpConnectionStarted {
                server_url,
                transport_type,
                ..
            } => {
                attributes.text("mcp.server.name", Some(label));
                attributes.text("mcp.server.url", Some(server_url));
                attributes.text("mcp.transport", Some(transport_type));
                (format!("mcp_connect {label}"), OtelSpanKind::Client)
            }
            K::McpToolExecutionStarted {
                server_name,
                tool_args,
                ..
            } => {
                attributes.text("mcp.server.name", Some(server_name));
                attributes.text("mcp.tool.name", Some(label));
                if content {
                    attributes.text("mcp.tool.arguments", Some(&json_text(tool_args)));
                }
                (format!("mcp_tool {label}"), OtelSpanKind::Client)
            }
            K::A2aDelegationStarted {
                endpoint, message, ..
            } => {
                attributes.text("a2a.agent.name", Some(label));
                attributes.text("a2a.endpoint", Some(endpoint));
                if content {
                    attributes.text("a2a.message", Some(message));
                }
                (format!("a2a_delegate {label}"), OtelSpanKind::Client)
            }
            K::CodeExecutionStarted {
                code_sha256,
                libraries_used,
                ..
            } => {
                attributes.text("crewai.sandbox.backend", Some(label));
                attributes.text("crewai.code.sha256", Some(code_sha256));
                attributes.text("crewai.code.libraries", Some(&libraries_used.join(",")));
                if let Some(K::CodeExecutionCompleted {
                    exit_code,
                    limit_hit,
                    duration_ms,
                    artifacts,
                    ..
                }) = closed
                {
                    if let Some(code) = exit_code {
                        attributes.value("process.exit.code", i64::from(*code));
                    }
                    attributes.text("crewai.sandbox.limit_hit", limit_hit.as_deref());
                    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
                    attributes.value("crewai.code.artifacts", count(artifacts.len()));
                    attributes.value(
                        "crewai.code.duration_ms",
                        i64::try_from(*duration_ms).unwrap_or(i64::MAX),
                    );
                }
                (format!("execute_code {label}"), OtelSpanKind::Internal)
            }
            K::LlmGuardrailStarted { .. } => (format!("guardrail {label}"), OtelSpanKind::Internal),
            K::PlanStepStarted {
                step_number,
                tool_to_use,
                ..
            } => {
                attributes.value("crewai.plan.step", i64::from(*step_number));
                attributes.text("crewai.plan.tool", tool_to_use.as_deref());
                (format!("plan_step {step_number}"), OtelSpanKind::Internal)
            }
            K::FlowStarted { flow_name, .. } => {
                attributes.text("crewai.flow.name", Some(flow_name));
                (format!("flow {label}"), OtelSpanKind::Internal)
            }
            K::MethodExecutionStarted { method_name, .. } => {
                attributes.text("crewai.flow.method", Some(method_name));
                (format!("flow_method {label}"), OtelSpanKind::Internal)
            }
            // These never open a span (spans::role_of), so no record starts with one; named
            // after the span kind should that ever change.
            K::CrewKickoffCompleted { .. }
            | K::CrewKickoffFailed { .. }
            | K::TaskCompleted { .. }
            | K::TaskFailed { .. }
            | K::AgentExecutionCompleted { .. }
            | K::AgentExecutionError { .. }
            | K::LiteAgentExecutionCompleted { .. }
            | K::LiteAgentExecutionError { .. }
            | K::LlmCallCompleted { .. }
            | K::LlmCallFailed { .. }
            | K::RateLimitWaitStarted { .. }
            | K::LlmStreamChunk { .. }
            | K::ToolUsageFinished { .. }
            | K::ToolUsageError { .. }
            | K::McpConnectionCompleted { .. }
            | K::McpConnectionFailed { .. }
            | K::McpToolExecutionCompleted { .. }
            | K::McpToolExecutionFailed { .. }
            | K::CodeExecutionCompleted { .. }
            | K::CodeExecutionFailed { .. }
            | K::A2aDelegationCompleted { .. }
            | K::A2aDelegationFailed { .. }
            | K::LlmGuardrailCompleted { .. }
            | K::AgentDelegationCompleted { .. }
            | K::FlowFinished { .. }
            | K::MethodExecutionFinished { .. }
            | K::MethodExecutionFailed { .. }
            | K::PanicCaught { .. }
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
            | K::CrewPlanningStarted { .. }
            | K::CrewPlanningCompleted { .. }
            | K::CrewPlanningFailed { .. }
            | K::ConsensusRoundStarted { .. }
            | K::ConsensusRoundCompleted { .. }
            | K::ConsensusDecisionStarted { .. }
            | K::ConsensusDecided { .. }
            | K::CrewTestStarted { .. }
            | K::CrewTestCompleted { .. }
            | K::CrewTestResult { .. }
            | K::CrewTrainStarted { .. }
            | K::CrewTrainCompleted { .. }
            | K::KnowledgeRetrievalStarted { .. }
            | K::KnowledgeRetrievalCompleted { .. }
            | K::KnowledgeQueryStarted { .. }
            | K::KnowledgeQueryCompleted { .. }
            | K::KnowledgeQueryFailed { .. }
            | K::KnowledgeSearchQueryFailed { .. }
            | K::AgentReasoningStarted { .. }
            | K::AgentReasoningCompleted { .. }
            | K::AgentReasoningFailed { .. }
            | K::PlanStepCompleted { .. }
            | K::PlanStepFailed { .. }
            | K::PlanStepObserved { .. }
            | K::PlanReplanned { .. } => (
                format!("{} {label}", span_kind_name(record.kind)),
                OtelSpanKind::Internal,
            ),
        };
        let status = match &record.error {
            Some(message) => Status::error(message.clone()),
            None => Status::Ok,
        };
        if record.error.is_some() {
            attributes.value("error.type", "crewai_error");
        }
        let mut events = SpanEvents::default();
        events.events = record
            .marks
            .iter()
            .map(|mark| self.span_event(mark))
            .collect();
        SpanData {
            span_context: SpanContext::new(
                TraceId::from_bytes(*record.root.as_bytes()),
                span_id_of(record.id),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: record.parent.map(span_id_of).unwrap_or(SpanId::INVALID),
            parent_span_is_remote: false,
            span_kind: kind,
            name: Cow::Owned(name),
            start_time: system_time(record.start),
            end_time: system_time(record.end),
            attributes: attributes.0,
            dropped_attributes_count: 0,
            events,
            links: SpanLinks::default(),
            status,
            instrumentation_scope: InstrumentationScope::builder("crewai-rs")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        }
    }

    /// The attributes of an agent span (`task_prompt` for a task's agent, none for a lone one).
    fn agent(
        &self,
        attributes: &mut Attributes,
        agent_id: &str,
        task_prompt: Option<&str>,
        closed: Option<&EventKind>,
    ) {
        attributes.text("gen_ai.operation.name", Some("invoke_agent"));
        attributes.text("gen_ai.agent.id", Some(agent_id));
        if self.record_content {
            attributes.text("crewai.task.prompt", task_prompt);
            let output = match closed {
                Some(
                    EventKind::AgentExecutionCompleted { output, .. }
                    | EventKind::LiteAgentExecutionCompleted { output, .. },
                ) => Some(output.as_str()),
                _ => None,
            };
            attributes.text("crewai.agent.output", output);
        }
    }

    /// A mark ([`SpanRecord::marks`]) as an event on its span, named by its `type`.
    fn span_event(&self, mark: &Event) -> opentelemetry::trace::Event {
        let mut attributes = Attributes::default();
        match &mark.kind {
            EventKind::PanicCaught {
                site,
                name,
                message,
                ..
            } => {
                attributes.text("crewai.panic.site", Some(site.name()));
                attributes.text("crewai.panic.name", Some(name));
                if self.record_content {
                    attributes.text("crewai.panic.message", Some(message));
                }
            }
            EventKind::RateLimitWaitStarted {
                max_rpm, wait_ms, ..
            } => {
                if let Some(rpm) = max_rpm {
                    attributes.value("crewai.rate_limit.max_rpm", i64::from(*rpm));
                }
                attributes.value(
                    "crewai.rate_limit.wait_ms",
                    i64::try_from(*wait_ms).unwrap_or(i64::MAX),
                );
            }
            EventKind::SkillLoaded {
                skill_name,
                disclosure_level,
                ..
            }
            | EventKind::SkillActivated {
                skill_name,
                disclosure_level,
                ..
            }
            | EventKind::SkillUsed {
                skill_name,
                disclosure_level,
                ..
            } => {
                attributes.text("crewai.skill.name", Some(skill_name));
                attributes.value(
                    "crewai.skill.disclosure_level",
                    i64::from(*disclosure_level),
                );
            }
            EventKind::SkillLoadFailed {
                skill_name, error, ..
            } => {
                attributes.text("crewai.skill.name", Some(skill_name));
                attributes.text("crewai.skill.error", Some(error));
            }
            EventKind::SkillDiscoveryCompleted { skills_found, .. } => {
                attributes.value(
                    "crewai.skill.found",
                    i64::try_from(*skills_found).unwrap_or(i64::MAX),
                );
            }
            EventKind::MemorySaveStarted {
                scope, statements, ..
            } => {
                attributes.text("crewai.memory.scope", Some(scope));
                attributes.value(
                    "crewai.memory.statements",
                    i64::try_from(*statements).unwrap_or(i64::MAX),
                );
            }
            EventKind::MemorySaveCompleted {
                scope,
                saved,
                elapsed_ms,
                ..
            } => {
                attributes.text("crewai.memory.scope", Some(scope));
                attributes.value(
                    "crewai.memory.saved",
                    i64::try_from(*saved).unwrap_or(i64::MAX),
                );
                attributes.value(
                    "crewai.memory.elapsed_ms",
                    i64::try_from(*elapsed_ms).unwrap_or(i64::MAX),
                );
            }
            EventKind::MemoryQueryCompleted {
                scope,
                results,
                elapsed_ms,
                ..
            } => {
                attributes.text("crewai.memory.scope", Some(scope));
                attributes.value(
                    "crewai.memory.results",
                    i64::try_from(*results).unwrap_or(i64::MAX),
                );
                attributes.value(
                    "crewai.memory.elapsed_ms",
                    i64::try_from(*elapsed_ms).unwrap_or(i64::MAX),
                );
            }
            EventKind::MemorySaveFailed { scope, error, .. }
            | EventKind::MemoryQueryFailed { scope, error, .. } => {
                attributes.text("crewai.memory.scope", Some(scope));
                attributes.text("crewai.memory.error", Some(error));
            }
            EventKind::KnowledgeRetrievalCompleted {
                query,
                results,
                elapsed_ms,
                ..
            } => {
                attributes.text("crewai.knowledge.query", Some(query));
                attributes.value(
                    "crewai.knowledge.results",
                    i64::try_from(*results).unwrap_or(i64::MAX),
                );
                attributes.value(
                    "crewai.knowledge.elapsed_ms",
                    i64::try_from(*elapsed_ms).unwrap_or(i64::MAX),
                );
            }
            EventKind::KnowledgeQueryFailed { error, .. }
            | EventKind::KnowledgeSearchQueryFailed { error, .. } => {
                attributes.text("crewai.knowledge.error", Some(error));
            }
            // Another kind of mark is still an event on the span, with its name only.
            _ => {}
        }
        opentelemetry::trace::Event::new(
            mark.type_name(),
            system_time(mark.timestamp),
            attributes.0,
            0,
        )
    }
}

pub(super) fn span_kind_name(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Crew => "crew",
        SpanKind::Task => "task",
        SpanKind::Agent => "agent",
        SpanKind::LlmCall => "llm_call",
        SpanKind::ToolCall => "tool_call",
        SpanKind::Delegation => "delegation",
        SpanKind::Guardrail => "guardrail",
        SpanKind::Flow => "flow",
        SpanKind::Method => "method",
        SpanKind::McpConnection => "mcp_connection",
        SpanKind::McpToolCall => "mcp_tool_call",
        SpanKind::A2aDelegation => "a2a_delegation",
        SpanKind::CodeExecution => "code_execution",
        SpanKind::PlanStep => "plan_step",
    }
}
