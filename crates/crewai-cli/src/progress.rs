//! Live progress of a run, as a listener on the crew's event bus: a spinner line per task on a
//! terminal (agent, tool calls as they happen, tokens, elapsed time), plain log lines otherwise.
//! Everything goes to stderr, so stdout carries only the crew's output.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crewai_core::events::{Event, EventBus, EventKind, code_execution_summary, plans_added};
use crewai_observe::local::format_cost;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

struct TaskLine {
    bar: Option<ProgressBar>,
    label: String,
    started: Instant,
    tokens: u64,
    cost_usd: f64,
    tools: u32,
}

struct State {
    multi: Option<MultiProgress>,
    tasks: HashMap<String, TaskLine>,
}

/// Shows a run's progress; attach it before kickoff.
#[derive(Clone)]
pub struct Progress {
    state: Arc<Mutex<State>>,
}

fn short_args(args: &Value) -> String {
    let text = match args {
        Value::Object(map) if map.is_empty() => String::new(),
        other => other.to_string(),
    };
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(59).collect::<String>())
    } else {
        text
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// The spinner text of a running task: its label and what its model calls used so far.
fn running_text(label: &str, tokens: u64, cost_usd: f64) -> String {
    format!("{label} · {tokens} tokens · {}", format_cost(cost_usd))
}

/// The line a finished (or failed) task leaves: `✓ label · tokens · cost · tool calls · time`.
fn finished_text(task: &TaskLine, failed: bool, elapsed: Duration) -> String {
    let tools = task.tools;
    format!(
        "{} {} · {tools} tool call{} · {}",
        if failed { "✗" } else { "✓" },
        running_text(&task.label, task.tokens, task.cost_usd),
        if tools == 1 { "" } else { "s" },
        seconds(elapsed)
    )
}

/// The line of an agent held back by its requests-per-minute limit.
fn rate_limit_text(agent_role: &str, max_rpm: Option<u32>, wait_ms: u64) -> String {
    let limit = max_rpm
        .map(|rpm| format!(" ({rpm} per minute)"))
        .unwrap_or_default();
    format!(
        "  ⏳ {} waits {} for the rate limit{limit}",
        agent_role.trim(),
        seconds(Duration::from_millis(wait_ms))
    )
}

/// The same as a plain log line, for a stderr that is not a terminal.
fn finished_log_line(task: &TaskLine, failed: bool, elapsed: Duration) -> String {
    format!(
        "[task {}] {}",
        if failed { "failed" } else { "completed" },
        finished_text(task, failed, elapsed).trim_start_matches(['✓', '✗', ' '])
    )
}

impl Progress {
    /// A spinner display when stderr is a terminal, plain lines otherwise.
    pub fn new() -> Self {
        let multi = std::io::stderr()
            .is_terminal()
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        Progress {
            state: Arc::new(Mutex::new(State {
                multi,
                tasks: HashMap::new(),
            })),
        }
    }

    /// Subscribes to `bus`.
    pub fn attach(&self, bus: &EventBus) {
        let this = self.clone();
        bus.subscribe(move |event| this.on_event(event));
    }

    fn line(state: &State, text: &str) {
        match &state.multi {
            Some(multi) => {
                // A failed write to the terminal only loses a progress line.
                let _ = multi.println(text);
            }
            None => {
                let mut err = std::io::stderr().lock();
                let _ = writeln!(err, "{text}");
            }
        }
    }

    fn on_event(&self, event: &Event) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let state = &mut *state;
        match &event.kind {
            EventKind::TaskStarted {
                task_name,
                agent_role,
                ..
            } => {
                let name = task_name.clone().unwrap_or_else(|| "task".into());
                let label = match agent_role {
                    Some(role) => format!("{name} · {}", role.trim()),
                    None => name.clone(),
                };
                let bar = state.multi.as_ref().map(|multi| {
                    let bar = multi.add(ProgressBar::new_spinner());
                    bar.set_style(
                        ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    bar.set_message(label.clone());
                    bar.enable_steady_tick(Duration::from_millis(100));
                    bar
                });
                if bar.is_none() {
                    Self::line(state, &format!("[task started] {label}"));
                }
                state.tasks.insert(
                    name,
                    TaskLine {
                        bar,
                        label,
                        started: Instant::now(),
                        tokens: 0,
                        cost_usd: 0.0,
                        tools: 0,
                    },
                );
            }
            EventKind::ToolUsageStarted {
                tool_name,
                tool_args,
                task_name,
                agent_role,
            } => {
                let who = agent_role.as_deref().map(str::trim).unwrap_or("agent");
                let text = format!("  ↳ {who} uses {tool_name}({})", short_args(tool_args));
                if let Some(task) = task_name.as_ref().and_then(|n| state.tasks.get_mut(n)) {
                    task.tools += 1;
                    if let Some(bar) = &task.bar {
                        bar.set_message(format!("{} · {tool_name}…", task.label));
                    }
                }
                Self::line(state, &text);
            }
            EventKind::ToolUsageError {
                tool_name, error, ..
            } => {
                Self::line(state, &format!("  ✗ {tool_name} failed: {error}"));
            }
            EventKind::RateLimitWaitStarted {
                agent_role,
                task_name,
                max_rpm,
                wait_ms,
            } => {
                // A spinner that stops moving for half a minute needs a reason.
                if let Some(task) = task_name.as_ref().and_then(|n| state.tasks.get(n))
                    && let Some(bar) = &task.bar
                {
                    bar.set_message(format!("{} · waiting for the rate limit…", task.label));
                }
                Self::line(state, &rate_limit_text(agent_role, *max_rpm, *wait_ms));
            }
            EventKind::PanicCaught {
                site,
                name,
                message,
                ..
            } => {
                // A caught panic may end in success; the user still sees that code crashed.
                Self::line(
                    state,
                    &format!("  ✗ {site} '{name}' panicked (caught): {message}"),
                );
            }
            EventKind::LlmCallCompleted {
                task_name, usage, ..
            } => {
                if let Some(task) = task_name.as_ref().and_then(|n| state.tasks.get_mut(n)) {
                    task.tokens += usage.total_tokens;
                    task.cost_usd += usage.cost_usd;
                    if let Some(bar) = &task.bar {
                        bar.set_message(running_text(&task.label, task.tokens, task.cost_usd));
                    }
                }
            }
            EventKind::McpConnectionCompleted {
                server_name,
                transport_type,
                tool_count,
                connection_duration_ms,
                ..
            } => {
                Self::line(
                    state,
                    &format!(
                        "  ↳ MCP server {server_name} connected over {transport_type}: {tool_count} tools ({connection_duration_ms} ms)"
                    ),
                );
            }
            EventKind::McpConnectionFailed {
                server_name, error, ..
            } => {
                Self::line(
                    state,
                    &format!("  ✗ MCP server {server_name} could not be used: {error}"),
                );
            }
            EventKind::AgentDelegationStarted {
                from_agent,
                to_agent,
                kind,
                ..
            } => {
                let verb = if kind == "ask" {
                    "asks"
                } else {
                    "delegates to"
                };
                Self::line(
                    state,
                    &format!("  ↳ {} {verb} {}", from_agent.trim(), to_agent.trim()),
                );
            }
            EventKind::TaskCompleted { task_name, .. }
            | EventKind::TaskFailed { task_name, .. } => {
                let failed = matches!(event.kind, EventKind::TaskFailed { .. });
                let name = task_name.clone().unwrap_or_else(|| "task".into());
                let Some(task) = state.tasks.remove(&name) else {
                    return;
                };
                let elapsed = task.started.elapsed();
                match &task.bar {
                    Some(bar) => {
                        if let Ok(style) = ProgressStyle::with_template("{msg}") {
                            bar.set_style(style);
                        }
                        bar.finish_with_message(finished_text(&task, failed, elapsed));
                    }
                    None => Self::line(state, &finished_log_line(&task, failed, elapsed)),
                }
                if let EventKind::TaskFailed { error, .. } = &event.kind {
                    Self::line(state, &format!("  error: {error}"));
                }
            }
            EventKind::SkillActivated {
                agent_role,
                skill_name,
                ..
            } => {
                let who = agent_role.as_deref().map(str::trim).unwrap_or("agent");
                Self::line(state, &format!("  ↳ {who} uses skill {skill_name}"));
            }
            EventKind::SkillLoadFailed {
                skill_name, error, ..
            } => {
                Self::line(
                    state,
                    &format!("  ✗ skill {skill_name} could not be loaded: {error}"),
                );
            }
            EventKind::MemorySaveCompleted {
                agent_role, saved, ..
            } => {
                let who = agent_role.as_deref().map(str::trim).unwrap_or("agent");
                Self::line(state, &format!("  ↳ memory: saved {saved} from {who}"));
            }
            EventKind::MemoryQueryCompleted {
                agent_role,
                results,
                ..
            } if *results > 0 => {
                let who = agent_role.as_deref().map(str::trim).unwrap_or("agent");
                Self::line(state, &format!("  ↳ memory: {results} recalled for {who}"));
            }
            EventKind::MemorySaveFailed { error, .. } => {
                Self::line(state, &format!("  ✗ memory could not save: {error}"));
            }
            EventKind::CrewPlanningStarted { tasks, .. } => {
                Self::line(state, &format!("  planning {tasks} task(s)…"));
            }
            EventKind::CrewPlanningCompleted {
                planned, missing, ..
            } => {
                let mark = if missing.is_empty() { "↳" } else { "⚠" };
                let text = format!("  {mark} {}", plans_added(*planned, missing));
                Self::line(state, &text);
            }
            EventKind::CrewPlanningFailed { error, .. } => {
                Self::line(state, &format!("  ✗ planning failed: {error}"));
            }
            EventKind::AgentReasoningCompleted {
                agent_role, steps, ..
            } => {
                let text = format!("  ↳ {} planned {} step(s)", agent_role.trim(), steps.len());
                Self::line(state, &text);
            }
            EventKind::AgentReasoningFailed { error, .. } => {
                Self::line(state, &format!("  ✗ planning failed: {error}"));
            }
            EventKind::PlanStepStarted {
                step_number,
                description,
                ..
            } => {
                Self::line(state, &format!("  ↳ step {step_number}: {description}"));
            }
            EventKind::PlanStepFailed {
                step_number, error, ..
            } => {
                Self::line(state, &format!("  ✗ step {step_number} failed: {error}"));
            }
            EventKind::PlanStepObserved {
                goal_achieved: true,
                ..
            } => {
                Self::line(state, "  ↳ goal reached; the remaining steps are skipped");
            }
            EventKind::PlanReplanned {
                replan_count,
                steps,
                ..
            } => {
                let text = format!("  ↳ plan changed ({replan_count}): {} step(s) to go", steps.len());
                Self::line(state, &text);
            }
            EventKind::ConsensusRoundStarted { round, voters, .. } => {
                let text = match round {
                    0 => format!("  ↳ consensus: {} agents answer on their own", voters.len()),
                    r => format!("  ↳ consensus: revision round {r}"),
                };
                Self::line(state, &text);
            }
            EventKind::ConsensusRoundCompleted { round, revised, .. } if *round > 0 => {
                Self::line(state, &format!("  ↳ consensus: {revised} answer(s) revised"));
            }
            EventKind::ConsensusDecided {
                outcome,
                agent_role,
                reason,
                ..
            } => {
                let who = agent_role.as_deref().map(str::trim).unwrap_or("agent");
                Self::line(
                    state,
                    &format!("  ↳ consensus: {outcome} by {who} ({reason})"),
                );
            }
            EventKind::MemoryQueryFailed { error, .. } => {
                Self::line(state, &format!("  ✗ memory could not be searched: {error}"));
            }
            EventKind::KnowledgeRetrievalCompleted {
                agent_role,
                results,
                ..
            } if *results > 0 => {
                let who = agent_role.as_deref().map(str::trim).unwrap_or("agent");
                Self::line(state, &format!("  ↳ knowledge: {results} snippets for {who}"));
            }
            EventKind::CodeExecutionCompleted { .. } => {
                let summary = code_execution_summary(&event.kind).unwrap_or_default();
                Self::line(state, &format!("  ↳ {summary}"));
            }
            EventKind::CodeExecutionFailed { backend, error, .. } => {
                Self::line(
                    state,
                    &format!("  ✗ code could not run in the {backend} sandbox: {error}"),
                );
            }
            EventKind::KnowledgeQueryFailed { error, .. }
            | EventKind::KnowledgeSearchQueryFailed { error, .. } => {
                Self::line(state, &format!("  ✗ knowledge could not be searched: {error}"));
            }
            // Not shown: the crew's and agents' own start and end are what the task lines
            // already say, a call's start and chunks are what the spinner's timer shows, a
            // failed call that matters fails its task, and flows have their own output.
            EventKind::CrewKickoffStarted { .. }
            | EventKind::CrewKickoffCompleted { .. }
            | EventKind::CrewKickoffFailed { .. }
            // `crewai test` and `crewai train` print their own summaries.
            | EventKind::CrewTestStarted { .. }
            | EventKind::CrewTestCompleted { .. }
            | EventKind::CrewTestResult { .. }
            | EventKind::CrewTrainStarted { .. }
            | EventKind::CrewTrainCompleted { .. }
            | EventKind::AgentExecutionStarted { .. }
            | EventKind::AgentExecutionCompleted { .. }
            | EventKind::AgentExecutionError { .. }
            | EventKind::LiteAgentExecutionStarted { .. }
            | EventKind::LiteAgentExecutionCompleted { .. }
            | EventKind::LiteAgentExecutionError { .. }
            | EventKind::LlmCallStarted { .. }
            | EventKind::LlmCallFailed { .. }
            | EventKind::LlmStreamChunk { .. }
            | EventKind::ToolUsageFinished { .. }
            // An MCP tool's call is shown by its tool_usage_* lines already.
            | EventKind::McpConnectionStarted { .. }
            | EventKind::McpToolExecutionStarted { .. }
            | EventKind::McpToolExecutionCompleted { .. }
            | EventKind::McpToolExecutionFailed { .. }
            // So is an A2A delegation's turn.
            | EventKind::A2aDelegationStarted { .. }
            | EventKind::A2aDelegationCompleted { .. }
            | EventKind::A2aDelegationFailed { .. }
            // A code execution is shown when it ends.
            | EventKind::CodeExecutionStarted { .. }
            // A plan is shown once made, its steps as they start.
            | EventKind::AgentReasoningStarted { .. }
            | EventKind::PlanStepCompleted { .. }
            | EventKind::PlanStepObserved { .. }
            | EventKind::LlmGuardrailStarted { .. }
            | EventKind::LlmGuardrailCompleted { .. }
            | EventKind::AgentDelegationCompleted { .. }
            | EventKind::FlowStarted { .. }
            | EventKind::FlowFinished { .. }
            | EventKind::MethodExecutionStarted { .. }
            | EventKind::MethodExecutionFinished { .. }
            | EventKind::MethodExecutionFailed { .. }
            // A skill's discovery and loading are setup; its activation is the line that matters.
            | EventKind::SkillDiscoveryStarted { .. }
            | EventKind::SkillDiscoveryCompleted { .. }
            | EventKind::SkillLoaded { .. }
            | EventKind::SkillUsed { .. }
            // A save's start is summed up by its end; an empty recall says nothing.
            | EventKind::MemorySaveStarted { .. }
            | EventKind::MemoryQueryStarted { .. }
            | EventKind::MemoryQueryCompleted { .. }
            // A search's steps are summed up by its end; an empty one says nothing.
            | EventKind::KnowledgeRetrievalStarted { .. }
            | EventKind::KnowledgeRetrievalCompleted { .. }
            | EventKind::KnowledgeQueryStarted { .. }
            | EventKind::KnowledgeQueryCompleted { .. }
            // A consensus shows its rounds, revisions and decision; the rest is in between.
            | EventKind::ConsensusRoundCompleted { .. }
            | EventKind::ConsensusDecisionStarted { .. } => {}
        }
    }

    /// Stops any spinner still running (a run that ended early).
    pub fn finish(&self) {
        if let Ok(mut state) = self.state.lock() {
            for (_, task) in state.tasks.drain() {
                if let Some(bar) = task.bar {
                    bar.abandon();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(tokens: u64, cost_usd: f64, tools: u32) -> TaskLine {
        TaskLine {
            bar: None,
            label: "research · Researcher".into(),
            started: Instant::now(),
            tokens,
            cost_usd,
            tools,
        }
    }

    #[test]
    fn a_rate_limit_wait_says_who_waits_how_long_and_why() {
        assert_eq!(
            rate_limit_text(" Writer ", Some(2), 30_000),
            "  ⏳ Writer waits 30.0s for the rate limit (2 per minute)"
        );
        assert_eq!(
            rate_limit_text("Writer", None, 1_400),
            "  ⏳ Writer waits 1.4s for the rate limit"
        );
    }

    #[test]
    fn every_kind_of_event_goes_through_the_display() {
        use crewai_core::events::EventType;
        let progress = Progress {
            state: Arc::new(Mutex::new(State {
                multi: None,
                tasks: HashMap::new(),
            })),
        };
        let bus = EventBus::new();
        progress.attach(&bus);
        for ty in EventType::all() {
            bus.emit(None, EventKind::blank(ty));
        }
        assert_eq!(
            bus.caught_panics(),
            0,
            "no kind of event upsets the display"
        );
        // The blank task_started opened a line that task_completed closed.
        assert!(progress.state.lock().unwrap().tasks.is_empty());
    }

    #[test]
    fn a_running_task_shows_its_tokens_and_cost() {
        assert_eq!(
            running_text("research · Researcher", 12_345, 0.000123),
            "research · Researcher · 12345 tokens · $0.000123"
        );
        assert_eq!(
            running_text("write", 0, 0.0),
            "write · 0 tokens · $0.000000"
        );
    }

    #[test]
    fn a_finished_task_sums_up_tokens_cost_tools_and_time() {
        let elapsed = Duration::from_millis(2_340);
        assert_eq!(
            finished_text(&task(1_500, 0.0042, 1), false, elapsed),
            "✓ research · Researcher · 1500 tokens · $0.004200 · 1 tool call · 2.3s"
        );
        assert_eq!(
            finished_text(&task(80, 0.000012, 3), true, elapsed),
            "✗ research · Researcher · 80 tokens · $0.000012 · 3 tool calls · 2.3s"
        );
        assert_eq!(
            finished_log_line(&task(1_500, 0.0042, 0), false, elapsed),
            "[task completed] research · Researcher · 1500 tokens · $0.004200 · 0 tool calls · 2.3s"
        );
        assert_eq!(
            finished_log_line(&task(7, 0.0, 2), true, elapsed),
            "[task failed] research · Researcher · 7 tokens · $0.000000 · 2 tool calls · 2.3s"
        );
    }
}
