//! Evaluation over the event stream: per-task and per-agent metrics of one or more kickoffs,
//! computed from the events the run emitted, plus the quality a judge gave each task (what
//! `Crew::test` and `crewai test --json` report).
//!
//! Record the events with [`EventRecorder`](crate::events::EventRecorder) (or any listener) and
//! call [`EvaluationMetrics::from_events`]:
//!
//! ```
//! use std::sync::Arc;
//! use crewai_core::agent::Agent;
//! use crewai_core::crew::Crew;
//! use crewai_core::evaluate::EvaluationMetrics;
//! use crewai_core::events::EventRecorder;
//! use crewai_core::task::Task;
//! use crewai_llm::ScriptedLlm;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let llm = Arc::new(ScriptedLlm::new("scripted").then_text("Bees dance."));
//! let writer = Agent::builder().role("Writer").goal("Write").backstory("Brief.").llm(llm).build()?;
//! let task = Task::builder().name("facts").description("A fact").expected_output("A line").agent(writer.clone()).build()?;
//! let crew = Crew::builder().agents(vec![writer]).tasks(vec![task]).build()?;
//! let recorder = EventRecorder::attach(crew.event_bus());
//! crew.kickoff(Default::default()).await?;
//!
//! let metrics = EvaluationMetrics::from_events(&recorder.events());
//! assert_eq!(metrics.tasks[0].task_name.as_deref(), Some("facts"));
//! assert_eq!(metrics.tasks[0].work.llm_calls, 1);
//! assert_eq!(metrics.agents["Writer"].tasks, 1);
//! assert_eq!(metrics.agents["Writer"].work.tool_success_rate, None); // it called no tool
//! # Ok(()) }
//! ```
//!
//! What each number counts:
//! - `llm_calls` / `failed_llm_calls`: `llm_call_completed` / `llm_call_failed` events (one per
//!   logical call, however many attempts the retry layer made);
//! - `tool_calls` / `tool_errors`: `tool_usage_finished` plus `tool_usage_error`, and the
//!   errors alone; `tool_success_rate` is the share that succeeded;
//! - `retries`: the extra times the task's agent was run on it (after a failed guardrail, with
//!   human feedback, after a conversion failure);
//! - `usage`: the tokens and cost of the completed calls (priced with the run's price table);
//! - `duration_ms`: from `task_started` to `task_completed` / `task_failed`.
//!
//! A call, tool use or agent run belongs to the task whose `task_started` event it hangs under
//! (a coworker's work counts toward the task that delegated it) and to the agent that made it.

use std::collections::{BTreeMap, HashMap};

use crewai_llm::Usage;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::events::{Event, EventKind};

/// What some work used and how it went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkMetrics {
    pub llm_calls: u64,
    pub failed_llm_calls: u64,
    pub tool_calls: u64,
    pub tool_errors: u64,
    pub retries: u64,
    pub usage: Usage,
    pub duration_ms: i64,
    /// The share of tool calls that succeeded (`None` when no tool was called).
    pub tool_success_rate: Option<f64>,
}

impl WorkMetrics {
    fn update_rate(&mut self) {
        self.tool_success_rate = (self.tool_calls > 0)
            .then(|| (self.tool_calls - self.tool_errors) as f64 / self.tool_calls as f64);
    }

    fn add(&mut self, other: &WorkMetrics) {
        self.llm_calls += other.llm_calls;
        self.failed_llm_calls += other.failed_llm_calls;
        self.tool_calls += other.tool_calls;
        self.tool_errors += other.tool_errors;
        self.retries += other.retries;
        self.usage.add(&other.usage);
        self.duration_ms += other.duration_ms;
    }
}

/// One task's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskMetrics {
    pub task_id: Option<String>,
    pub task_name: Option<String>,
    /// The agent that ran it (the manager, in a hierarchical crew).
    pub agent_role: Option<String>,
    /// `completed`, `failed`, or `running` when the events end before the task did.
    pub status: String,
    /// The judge's score from 1 to 10, when one was given.
    pub quality: Option<f64>,
    pub work: WorkMetrics,
}

/// One agent over the tasks it ran and the calls it made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentMetrics {
    /// The tasks it ran itself.
    pub tasks: u64,
    /// The average of the judge's scores of its tasks.
    pub quality: Option<f64>,
    /// Its own calls and tool uses, its tasks' retries and durations.
    pub work: WorkMetrics,
}

/// Per-task and per-agent metrics of the events given, in the order the tasks started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvaluationMetrics {
    pub tasks: Vec<TaskMetrics>,
    pub agents: BTreeMap<String, AgentMetrics>,
}

impl EvaluationMetrics {
    /// The metrics of `events` (in emission order, as a recorder keeps them).
    pub fn from_events(events: &[Event]) -> EvaluationMetrics {
        let parents: HashMap<Uuid, Option<Uuid>> = events
            .iter()
            .map(|e| (e.event_id, e.parent_event_id))
            .collect();
        let mut task_index: HashMap<Uuid, usize> = HashMap::new();
        let mut started_at = Vec::new();
        let mut metrics = EvaluationMetrics::default();
        // The task an event hangs under: the nearest `task_started` up its parent chain.
        let task_of = |event: &Event, task_index: &HashMap<Uuid, usize>| {
            let mut at = event.parent_event_id;
            // A chain is at most as long as the events; the bound guards a malformed cycle.
            for _ in 0..=events.len() {
                let id = at?;
                if let Some(index) = task_index.get(&id) {
                    return Some(*index);
                }
                at = parents.get(&id).copied().flatten();
            }
            None
        };
        let mut agent_work: BTreeMap<String, WorkMetrics> = BTreeMap::new();
        for event in events {
            match &event.kind {
                EventKind::TaskStarted {
                    task_name,
                    task_id,
                    agent_role,
                    ..
                } => {
                    task_index.insert(event.event_id, metrics.tasks.len());
                    started_at.push(event.timestamp);
                    metrics.tasks.push(TaskMetrics {
                        task_id: task_id.clone(),
                        task_name: task_name.clone(),
                        agent_role: agent_role.clone(),
                        status: "running".into(),
                        quality: None,
                        work: WorkMetrics::default(),
                    });
                }
                EventKind::TaskCompleted { .. } | EventKind::TaskFailed { .. } => {
                    let Some(index) = event.parent_event_id.and_then(|p| task_index.get(&p)) else {
                        continue;
                    };
                    let task = &mut metrics.tasks[*index];
                    task.status = match event.kind {
                        EventKind::TaskCompleted { .. } => "completed".into(),
                        _ => "failed".into(),
                    };
                    task.work.duration_ms = (event.timestamp - started_at[*index])
                        .num_milliseconds()
                        .max(0);
                }
                EventKind::AgentExecutionStarted { .. } => {
                    // A run of the task's own agent directly under the task: the first is the
                    // task's work, each further one a retry.
                    if let Some(index) = event.parent_event_id.and_then(|p| task_index.get(&p)) {
                        let task = &mut metrics.tasks[*index];
                        task.work.retries += 1;
                    }
                }
                EventKind::LlmCallCompleted {
                    agent_role, usage, ..
                } => {
                    let add = |work: &mut WorkMetrics| {
                        work.llm_calls += 1;
                        work.usage.add(usage);
                    };
                    add(agent_work.entry(role_or_unknown(agent_role)).or_default());
                    if let Some(index) = task_of(event, &task_index) {
                        add(&mut metrics.tasks[index].work);
                    }
                }
                EventKind::LlmCallFailed { agent_role, .. } => {
                    agent_work
                        .entry(role_or_unknown(agent_role))
                        .or_default()
                        .failed_llm_calls += 1;
                    if let Some(index) = task_of(event, &task_index) {
                        metrics.tasks[index].work.failed_llm_calls += 1;
                    }
                }
                EventKind::ToolUsageFinished { agent_role, .. }
                | EventKind::ToolUsageError { agent_role, .. } => {
                    let failed = matches!(event.kind, EventKind::ToolUsageError { .. });
                    let add = |work: &mut WorkMetrics| {
                        work.tool_calls += 1;
                        work.tool_errors += u64::from(failed);
                    };
                    add(agent_work.entry(role_or_unknown(agent_role)).or_default());
                    if let Some(index) = task_of(event, &task_index) {
                        add(&mut metrics.tasks[index].work);
                    }
                }
                _ => {}
            }
        }
        for task in &mut metrics.tasks {
            // Counted runs of the agent; the first one is no retry.
            task.work.retries = task.work.retries.saturating_sub(1);
        }
        for (role, work) in agent_work {
            metrics.agents.entry(role).or_default().work = work;
        }
        metrics.summarise_agents();
        metrics
    }

    /// Sets the judge's score of the task at `index` (in [`EvaluationMetrics::tasks`] order) and
    /// updates its agent's average.
    pub fn set_quality(&mut self, index: usize, quality: f64) {
        if let Some(task) = self.tasks.get_mut(index) {
            task.quality = Some(quality);
        }
        self.summarise_agents();
    }

    /// Adds another run's metrics: its tasks after these, its agents' numbers to theirs.
    pub fn extend(&mut self, other: EvaluationMetrics) {
        for (role, agent) in other.agents {
            self.agents.entry(role).or_default().work.add(&agent.work);
        }
        self.tasks.extend(other.tasks);
        self.summarise_agents();
    }

    /// Each agent's task count, retries, durations and quality from its tasks (its calls and
    /// tool uses are counted from its own events).
    fn summarise_agents(&mut self) {
        for agent in self.agents.values_mut() {
            agent.tasks = 0;
            agent.quality = None;
            agent.work.retries = 0;
            agent.work.duration_ms = 0;
        }
        let mut scores: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for task in &self.tasks {
            let role = role_or_unknown(&task.agent_role);
            let agent = self.agents.entry(role.clone()).or_default();
            agent.tasks += 1;
            agent.work.retries += task.work.retries;
            agent.work.duration_ms += task.work.duration_ms;
            if let Some(quality) = task.quality {
                scores.entry(role).or_default().push(quality);
            }
        }
        for (role, scores) in scores {
            if let Some(agent) = self.agents.get_mut(&role) {
                agent.quality = average(&scores);
            }
        }
        for work in self
            .tasks
            .iter_mut()
            .map(|t| &mut t.work)
            .chain(self.agents.values_mut().map(|a| &mut a.work))
        {
            work.update_rate();
        }
    }
}

/// The mean of `values` (`None` for none).
pub fn average(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn role_or_unknown(role: &Option<String>) -> String {
    role.clone().unwrap_or_else(|| "(no agent)".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventBus;
    use crate::events::EventRecorder;
    use serde_json::Value;

    #[test]
    fn calls_and_tools_count_toward_their_task_and_agent() {
        let bus = EventBus::new();
        let recorder = EventRecorder::attach(&bus);
        let role = Some("Researcher".to_string());
        let task = bus.emit(
            None,
            EventKind::TaskStarted {
                task_name: Some("research".into()),
                task_id: Some("t1".into()),
                agent_role: role.clone(),
                context: None,
            },
        );
        let run = |bus: &EventBus| {
            bus.emit(
                Some(task),
                EventKind::AgentExecutionStarted {
                    agent_role: "Researcher".into(),
                    agent_id: "a".into(),
                    task_name: Some("research".into()),
                    task_prompt: String::new(),
                    tools: Vec::new(),
                },
            )
        };
        let first = run(&bus);
        let usage = Usage {
            total_tokens: 10,
            cost_usd: 0.5,
            ..Usage::default()
        };
        bus.emit(
            Some(first),
            EventKind::LlmCallCompleted {
                call_id: "c".into(),
                model: "m".into(),
                agent_role: role.clone(),
                task_name: Some("research".into()),
                response: Value::Null,
                usage,
            },
        );
        for failed in [false, true] {
            let kind = match failed {
                false => EventKind::ToolUsageFinished {
                    tool_name: "search".into(),
                    tool_args: Value::Null,
                    agent_role: role.clone(),
                    task_name: None,
                    output: String::new(),
                    from_cache: false,
                },
                true => EventKind::ToolUsageError {
                    tool_name: "search".into(),
                    tool_args: Value::Null,
                    agent_role: role.clone(),
                    task_name: None,
                    error: "down".into(),
                },
            };
            bus.emit(Some(first), kind);
        }
        run(&bus); // a guardrail retry
        bus.emit(
            Some(task),
            EventKind::TaskCompleted {
                task_name: Some("research".into()),
                task_id: Some("t1".into()),
                agent_role: role,
                output: "done".into(),
            },
        );
        let mut metrics = EvaluationMetrics::from_events(&recorder.events());
        let work = &metrics.tasks[0].work;
        assert_eq!(metrics.tasks[0].status, "completed");
        assert_eq!(
            (work.llm_calls, work.tool_calls, work.tool_errors),
            (1, 2, 1)
        );
        assert_eq!(work.retries, 1);
        assert_eq!(work.usage.total_tokens, 10);
        assert_eq!(work.tool_success_rate, Some(0.5));
        metrics.set_quality(0, 8.0);
        let agent = &metrics.agents["Researcher"];
        assert_eq!((agent.tasks, agent.quality), (1, Some(8.0)));
        assert_eq!(agent.work.usage.cost_usd, 0.5);
        assert_eq!(agent.work.retries, 1);
    }
}
