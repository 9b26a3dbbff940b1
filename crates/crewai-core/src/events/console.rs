//! [`ConsoleListener`]: the verbose console output, as a listener on the bus.
//!
//! It stays a synchronous listener although it writes: it prints what a verbose run was asked
//! to show, in step with the run's other output on the same stream (a console line must not
//! come after the final answer the caller prints), and its lines are few and short. Listeners
//! that write files or talk to the network use a channel ([`super::EventBus::subscribe_channel`]).

use std::io::Write;
use std::sync::Mutex;

use super::{Event, EventBus, EventKind, ListenerId};

/// The verbose console output, as a listener: one readable block per crew, task, agent, tool,
/// guardrail and rate-limit event (model calls and stream chunks are left out as noise).
///
/// ```
/// use crewai_core::events::{ConsoleListener, EventBus, EventKind};
/// let bus = EventBus::new();
/// ConsoleListener::stderr().attach(&bus);
/// bus.emit(None, EventKind::CrewKickoffStarted { crew_name: "demo".into(), crew_id: None, inputs: None });
/// ```
pub struct ConsoleListener {
    out: Mutex<Box<dyn Write + Send>>,
}

impl ConsoleListener {
    /// Writes to standard output (where CrewAI's verbose output goes).
    pub fn stdout() -> Self {
        Self::with_writer(Box::new(std::io::stdout()))
    }

    /// Writes to standard error (keeps stdout clean for machine-readable output).
    pub fn stderr() -> Self {
        Self::with_writer(Box::new(std::io::stderr()))
    }

    pub fn with_writer(out: Box<dyn Write + Send>) -> Self {
        ConsoleListener {
            out: Mutex::new(out),
        }
    }

    /// Subscribes this listener to `bus`.
    pub fn attach(self, bus: &EventBus) -> ListenerId {
        bus.subscribe(move |event| {
            if let Some(text) = console_line(event) {
                let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
                // The console is best effort: a closed pipe must not fail the run.
                let _ = writeln!(out, "{text}");
                let _ = out.flush();
            }
        })
    }
}

/// The verbose line of an agent held back by its requests-per-minute limit.
fn rate_limit_line(agent_role: &str, max_rpm: Option<u32>, wait_ms: u64) -> String {
    let limit = max_rpm
        .map(|rpm| format!(" ({rpm} per minute)"))
        .unwrap_or_default();
    format!(
        "⏳ Agent {agent_role}: max RPM reached{limit}; waiting {:.1} s for the next request slot.",
        wait_ms as f64 / 1000.0
    )
}

/// What the console shows of one event, if anything. Every kind is decided here (no catch-all),
/// so a new kind does not compile until it is shown or left out on purpose.
fn console_line(event: &Event) -> Option<String> {
    let optional = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
    let text = match &event.kind {
        EventKind::CrewKickoffStarted { crew_name, .. } => format!("🚀 Crew '{crew_name}' started"),
        EventKind::CrewKickoffCompleted {
            crew_name,
            output,
            total_tokens,
            ..
        } => {
            format!(
                "✅ Crew '{crew_name}' completed ({total_tokens} tokens)\nFinal output:\n{output}"
            )
        }
        EventKind::CrewKickoffFailed {
            crew_name, error, ..
        } => format!("❌ Crew '{crew_name}' failed: {error}"),
        EventKind::CrewPlanningStarted { crew_name, tasks } => {
            format!("🗺️  Crew '{crew_name}' is planning its {tasks} task(s)")
        }
        EventKind::CrewPlanningCompleted {
            planned, missing, ..
        } => match missing.is_empty() {
            true => format!("🗺️  {}", plans_added(*planned, missing)),
            false => format!("⚠️  {}", plans_added(*planned, missing)),
        },
        EventKind::CrewPlanningFailed {
            crew_name, error, ..
        } => format!("❌ Crew '{crew_name}' could not plan: {error}"),
        EventKind::ConsensusRoundStarted {
            task_name,
            round,
            voters,
        } => match round {
            0 => format!(
                "🗳️  Task '{}': {} agents answer on their own",
                optional(task_name),
                voters.len()
            ),
            r => format!(
                "🗳️  Task '{}': revision round {r}, each agent reads the others' answers",
                optional(task_name)
            ),
        },
        EventKind::ConsensusRoundCompleted {
            task_name,
            round,
            answers,
            revised,
        } => format!(
            "🗳️  Task '{}': round {round} done, {answers} answer(s), {revised} revised",
            optional(task_name)
        ),
        EventKind::ConsensusDecisionStarted { task_name, method } => {
            format!("🗳️  Task '{}': deciding by {method}", optional(task_name))
        }
        EventKind::ConsensusDecided {
            task_name,
            outcome,
            agent_role,
            reason,
            ..
        } => format!(
            "🗳️  Task '{}': {outcome} ({}) — {reason}",
            optional(task_name),
            optional(agent_role)
        ),
        EventKind::CrewTestStarted {
            crew_name,
            n_iterations,
            model,
        } => format!("🧪 Testing crew '{crew_name}': {n_iterations} run(s), judged by {model}"),
        EventKind::CrewTestCompleted {
            crew_name, quality, ..
        } => format!("🧪 Crew '{crew_name}' tested: average quality {quality:.1}/10"),
        EventKind::CrewTestResult {
            task_name,
            iteration,
            quality,
            ..
        } => format!(
            "🧪 Run {iteration}, task '{}': quality {quality:.1}/10",
            optional(task_name)
        ),
        EventKind::CrewTrainStarted {
            crew_name,
            n_iterations,
        } => format!("🎓 Training crew '{crew_name}': {n_iterations} run(s) with your feedback"),
        EventKind::CrewTrainCompleted {
            trained_agents, ..
        } => format!("🎓 Trained: {}", trained_agents.join(", ")),
        EventKind::TaskStarted {
            task_name,
            agent_role,
            ..
        } => format!(
            "📋 Task '{}' started (agent: {})",
            optional(task_name),
            optional(agent_role)
        ),
        EventKind::TaskCompleted { task_name, .. } => {
            format!("📋 Task '{}' completed", optional(task_name))
        }
        EventKind::TaskFailed {
            task_name, error, ..
        } => format!("❌ Task '{}' failed: {error}", optional(task_name)),
        EventKind::AgentExecutionStarted {
            agent_role,
            task_prompt,
            ..
        } => format!("🤖 Agent: {agent_role}\n   Task: {task_prompt}"),
        EventKind::LiteAgentExecutionStarted { agent_role, .. } => {
            format!("🤖 Agent {agent_role} started")
        }
        // An agent in a crew and an agent alone end the same way.
        EventKind::AgentExecutionCompleted {
            agent_role, output, ..
        }
        | EventKind::LiteAgentExecutionCompleted {
            agent_role, output, ..
        } => format!("🤖 Agent: {agent_role}\n   Final Answer:\n{output}"),
        EventKind::AgentExecutionError {
            agent_role, error, ..
        }
        | EventKind::LiteAgentExecutionError {
            agent_role, error, ..
        } => format!("⚠️  Agent {agent_role} failed: {error}"),
        EventKind::AgentReasoningCompleted {
            agent_role,
            plan,
            steps,
            ..
        } => format!(
            "🧭 Agent {agent_role} planned {} step(s): {plan}\n   {}",
            steps.len(),
            steps.join("\n   ")
        ),
        EventKind::AgentReasoningFailed {
            agent_role, error, ..
        } => format!("🧭 Agent {agent_role} could not plan: {error}"),
        EventKind::PlanStepStarted {
            step_number,
            description,
            ..
        } => format!("🧭 Step {step_number}: {description}"),
        EventKind::PlanStepFailed {
            step_number, error, ..
        } => format!("🧭 Step {step_number} failed: {error}"),
        EventKind::PlanStepObserved {
            goal_achieved: true,
            reason,
            ..
        } => format!("🧭 Goal reached: {reason}"),
        EventKind::PlanReplanned {
            replan_count,
            reason,
            steps,
            ..
        } => format!(
            "🧭 Plan changed ({replan_count}): {reason}\n   {}",
            steps.join("\n   ")
        ),
        EventKind::RateLimitWaitStarted {
            agent_role,
            max_rpm,
            wait_ms,
            ..
        } => rate_limit_line(agent_role, *max_rpm, *wait_ms),
        EventKind::ToolUsageStarted {
            tool_name,
            tool_args,
            ..
        } => format!("🔧 Using tool {tool_name} with {tool_args}"),
        EventKind::ToolUsageFinished {
            tool_name,
            output,
            from_cache,
            ..
        } => {
            format!(
                "🔧 Tool {tool_name}{} returned:\n{output}",
                if *from_cache { " (cached)" } else { "" }
            )
        }
        EventKind::ToolUsageError {
            tool_name, error, ..
        } => format!("🔧 Tool {tool_name} failed: {error}"),
        EventKind::McpConnectionCompleted {
            server_name,
            transport_type,
            tool_count,
            ..
        } => format!("🔌 MCP server {server_name} connected over {transport_type} ({tool_count} tools)"),
        EventKind::McpConnectionFailed {
            server_name, error, ..
        } => format!("🔌 MCP server {server_name} could not be used: {error}"),
        EventKind::CodeExecutionCompleted { .. } => {
            format!("🐍 {}", code_execution_summary(&event.kind).unwrap_or_default())
        }
        EventKind::CodeExecutionFailed { backend, error, .. } => {
            format!("🐍 Code could not run in the {backend} sandbox: {error}")
        }
        EventKind::LlmGuardrailStarted {
            guardrail,
            retry_count,
            ..
        } => format!("🛡️  Guardrail '{guardrail}' checking (retry {retry_count})"),
        EventKind::LlmGuardrailCompleted { success, error, .. } => {
            if *success {
                "🛡️  Guardrail passed".to_string()
            } else {
                format!("🛡️  Guardrail failed: {}", optional(error))
            }
        }
        EventKind::AgentDelegationStarted {
            from_agent,
            to_agent,
            kind,
            ..
        } => format!("🤝 {from_agent} -> {to_agent} ({kind})"),
        EventKind::FlowStarted { flow_name, .. } => format!("🌊 Flow '{flow_name}' started"),
        EventKind::FlowFinished { flow_name, .. } => format!("🌊 Flow '{flow_name}' finished"),
        EventKind::MethodExecutionFailed {
            flow_name,
            method_name,
            error,
        } => format!("❌ Flow '{flow_name}' method '{method_name}' failed: {error}"),
        EventKind::PanicCaught {
            site,
            name,
            message,
            ..
        } => format!("💥 {site} '{name}' panicked (caught): {message}"),
        EventKind::SkillDiscoveryCompleted {
            search_path,
            skill_names,
            ..
        } => format!(
            "🧩 Skills found in {search_path}: {}",
            if skill_names.is_empty() {
                "none".to_string()
            } else {
                skill_names.join(", ")
            }
        ),
        EventKind::SkillLoadFailed {
            skill_name, error, ..
        } => format!("⚠️  Skill '{skill_name}' could not be loaded: {error}"),
        EventKind::SkillActivated { skill_name, .. } => {
            format!("🧩 Skill '{skill_name}' activated")
        }
        EventKind::MemorySaveFailed { scope, error, .. } => {
            format!("⚠️  Memory could not save under {scope}: {error}")
        }
        EventKind::MemoryQueryFailed { scope, error, .. } => {
            format!("⚠️  Memory could not be searched under {scope}: {error}")
        }
        EventKind::MemorySaveCompleted { scope, saved, .. } => {
            format!("🧠 Memory saved {saved} under {scope}")
        }
        EventKind::KnowledgeRetrievalCompleted { results, .. } if *results > 0 => {
            format!("📚 Knowledge found {results} snippets")
        }
        EventKind::KnowledgeQueryFailed { error, .. } => {
            format!("⚠️  Knowledge query could not be written: {error}")
        }
        EventKind::KnowledgeSearchQueryFailed { error, .. } => {
            format!("⚠️  Knowledge could not be searched: {error}")
        }
        // Left out: a save's start is summed up by its end, and recalls and knowledge
        // searches happen before every task (a failed one is shown).
        EventKind::MemorySaveStarted { .. }
        | EventKind::MemoryQueryStarted { .. }
        | EventKind::MemoryQueryCompleted { .. }
        | EventKind::KnowledgeRetrievalStarted { .. }
        | EventKind::KnowledgeRetrievalCompleted { .. }
        | EventKind::KnowledgeQueryStarted { .. }
        | EventKind::KnowledgeQueryCompleted { .. } => return None,
        // Left out: the discovery's start and each loaded skill are summed up by its end, and a
        // use repeats the activation.
        EventKind::SkillDiscoveryStarted { .. }
        | EventKind::SkillLoaded { .. }
        | EventKind::SkillUsed { .. } => return None,
        // Left out: the model calls and their chunks are noise next to the agent's blocks, the
        // delegation's result is the coworker's answer shown already, and a flow's methods are
        // shown only when they fail.
        EventKind::LlmCallStarted { .. }
        | EventKind::LlmCallCompleted { .. }
        | EventKind::LlmCallFailed { .. }
        | EventKind::LlmStreamChunk { .. }
        | EventKind::AgentDelegationCompleted { .. }
        // The tool_usage_* lines already show an MCP tool's call; a connection is shown once
        // it is made (or fails).
        | EventKind::McpConnectionStarted { .. }
        | EventKind::McpToolExecutionStarted { .. }
        | EventKind::McpToolExecutionCompleted { .. }
        | EventKind::McpToolExecutionFailed { .. }
        // Likewise an A2A delegation's turn: its tool_usage_* lines show it.
        | EventKind::A2aDelegationStarted { .. }
        | EventKind::A2aDelegationCompleted { .. }
        | EventKind::A2aDelegationFailed { .. }
        // A code execution is shown when it ends.
        | EventKind::CodeExecutionStarted { .. }
        // A plan is shown once made; a step's result is the next step's or the answer's input.
        | EventKind::AgentReasoningStarted { .. }
        | EventKind::PlanStepCompleted { .. }
        | EventKind::PlanStepObserved { .. }
        | EventKind::MethodExecutionStarted { .. }
        | EventKind::MethodExecutionFinished { .. } => return None,
    };
    Some(text)
}

/// What went wrong in a sandboxed code execution, none when it ran to its end, exited 0 and
/// hit no limit: `exit status 1`, `stopped: <reason>`, each with the limit it reached.
pub fn code_execution_problem(
    exit_code: Option<i32>,
    stopped: Option<&str>,
    limit_hit: Option<&str>,
) -> Option<String> {
    let mut text = match (stopped, exit_code) {
        (None, Some(0)) if limit_hit.is_none() => return None,
        (Some(reason), _) => format!("stopped: {reason}"),
        (None, Some(code)) => format!("exit status {code}"),
        (None, None) => "ended without an exit status".to_string(),
    };
    if let Some(limit) = limit_hit {
        text.push_str(&format!(" (limit reached: {limit})"));
    }
    Some(text)
}

/// How a sandboxed code execution ended, as the console and the CLI's progress show it:
/// `code in the wasi sandbox: exit status 0 · 0.41s · 1 file saved`; none for any other event.
pub fn code_execution_summary(kind: &EventKind) -> Option<String> {
    let EventKind::CodeExecutionCompleted {
        backend,
        exit_code,
        stopped,
        limit_hit,
        duration_ms,
        artifacts,
        ..
    } = kind
    else {
        return None;
    };
    let outcome = code_execution_problem(*exit_code, stopped.as_deref(), limit_hit.as_deref())
        .unwrap_or_else(|| "exit status 0".to_string());
    let mut text = format!(
        "code in the {backend} sandbox: {outcome} · {:.2}s",
        *duration_ms as f64 / 1000.0
    );
    let saved = artifacts.len();
    if saved > 0 {
        text.push_str(&format!(
            " · {saved} file{} saved",
            if saved == 1 { "" } else { "s" }
        ));
    }
    Some(text)
}

/// What a crew's planning did, as the console and the CLI's progress show it: how many tasks got
/// a plan, and which task numbers the planner left without one.
pub fn plans_added(planned: usize, missing: &[usize]) -> String {
    if missing.is_empty() {
        return format!("plans added to {planned} task(s)");
    }
    let numbers: Vec<String> = missing.iter().map(usize::to_string).collect();
    format!(
        "plans added to {planned} task(s); the planner gave none for task(s) {}",
        numbers.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::super::EventType;
    use super::*;

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_code_execution_says_how_it_ended_and_what_went_wrong_only_when_something_did() {
        assert_eq!(code_execution_problem(Some(0), None, None), None);
        assert_eq!(
            code_execution_problem(Some(1), None, Some("memory")).as_deref(),
            Some("exit status 1 (limit reached: memory)")
        );
        assert_eq!(
            code_execution_problem(None, Some("the deadline of 30s passed"), Some("deadline"))
                .as_deref(),
            Some("stopped: the deadline of 30s passed (limit reached: deadline)")
        );
        let completed = |backend: &str, exit_code: i32, duration_ms: u64, saved: usize| {
            EventKind::CodeExecutionCompleted {
                backend: backend.into(),
                code_sha256: String::new(),
                exit_code: Some(exit_code),
                stopped: None,
                limit_hit: None,
                duration_ms,
                artifacts: vec!["a".into(); saved],
                agent_role: None,
                task_name: None,
            }
        };
        assert_eq!(
            code_execution_summary(&completed("wasi", 0, 412, 1)).as_deref(),
            Some("code in the wasi sandbox: exit status 0 · 0.41s · 1 file saved")
        );
        assert_eq!(
            code_execution_summary(&completed("bubblewrap", 1, 2000, 3)).as_deref(),
            Some("code in the bubblewrap sandbox: exit status 1 · 2.00s · 3 files saved")
        );
        assert_eq!(
            code_execution_summary(&EventKind::blank(EventType::CodeExecutionStarted)),
            None
        );
    }

    #[test]
    fn a_rate_limit_wait_is_printed_with_the_agent_the_limit_and_the_wait() {
        let bus = EventBus::new();
        let out = Shared::default();
        ConsoleListener::with_writer(Box::new(out.clone())).attach(&bus);
        bus.emit(
            None,
            EventKind::RateLimitWaitStarted {
                agent_role: "Writer".into(),
                task_name: None,
                max_rpm: Some(2),
                wait_ms: 30_000,
            },
        );
        let printed = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            printed,
            "⏳ Agent Writer: max RPM reached (2 per minute); waiting 30.0 s for the next request slot.\n"
        );
        assert!(!rate_limit_line("Writer", None, 1500).contains("per minute"));
        assert!(rate_limit_line("Writer", None, 1500).contains("waiting 1.5 s"));
    }

    #[test]
    fn model_calls_are_left_out_and_every_crew_task_and_tool_event_is_shown() {
        let shown: Vec<EventType> = EventType::all()
            .filter(|ty| {
                let event = Event {
                    event_id: uuid::Uuid::nil(),
                    parent_event_id: None,
                    emission_sequence: 1,
                    timestamp: chrono::Utc::now(),
                    kind: EventKind::blank(*ty),
                };
                console_line(&event).is_some()
            })
            .collect();
        assert!(!shown.contains(&EventType::LlmCallStarted));
        assert!(!shown.contains(&EventType::LlmStreamChunk));
        for ty in [
            EventType::CrewKickoffStarted,
            EventType::TaskFailed,
            EventType::ToolUsageStarted,
            EventType::RateLimitWaitStarted,
            EventType::PanicCaught,
        ] {
            assert!(shown.contains(&ty), "{ty} is shown");
        }
    }
}
