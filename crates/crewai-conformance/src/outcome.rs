//! What one run of a case produced, in a form the expectation checker can read without knowing
//! the engine's types.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Map, Value};

use std::fmt;

use crate::case::{HookPoint, ResultType};

/// Everything a case run observed.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The outputs (one per kickoff; `inputs_for_each` gives several), or the error text.
    pub result: Result<Vec<Output>, String>,
    /// Every event emitted, in emission order.
    pub events: Vec<EventRecord>,
    /// Every call of each registered hook, in order.
    pub hook_calls: BTreeMap<HookPoint, Vec<HookCall>>,
    /// How many times each test tool's body actually ran.
    pub tool_runs: BTreeMap<String, usize>,
    /// Every rate limiter the run's `max_rpm` settings made, and how often it slept.
    pub rate_limits: Vec<RateLimitView>,
    /// The hierarchical manager's tools after kickoff, when there was one.
    pub manager_tools: Option<Vec<ToolInfo>>,
    /// The run's working directory (output files are relative to it).
    pub workdir: PathBuf,
    pub requests_consumed: usize,
    pub requests_recorded: usize,
    /// Requests the replay server could not answer.
    pub unmatched: Vec<String>,
}

impl Default for Outcome {
    fn default() -> Self {
        Outcome {
            result: Ok(Vec::new()),
            events: Vec::new(),
            hook_calls: BTreeMap::new(),
            tool_runs: BTreeMap::new(),
            rate_limits: Vec::new(),
            manager_tools: None,
            workdir: PathBuf::new(),
            requests_consumed: 0,
            requests_recorded: 0,
            unmatched: Vec::new(),
        }
    }
}

impl Default for Output {
    fn default() -> Self {
        Output {
            kind: ResultKind::CrewOutput,
            raw: String::new(),
            json_dict: None,
            json_text: Err("no JSON output".into()),
            pydantic: None,
            tasks_output: Vec::new(),
            usage: None,
            chunks: None,
        }
    }
}

/// The type of value the engine handed back (see [`crate::returned`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultKind {
    /// `Crew::kickoff` and friends: a `CrewOutput` (CrewAI's CrewOutput).
    CrewOutput,
    /// `Agent::kickoff`: an `AgentOutput` (CrewAI's LiteAgentOutput).
    AgentOutput,
    /// `Crew::kickoff_stream`: a `CrewStream`, iterated to its end (CrewStreamingOutput).
    CrewStreamingOutput,
    /// Tasks run one by one (mode task): their `TaskOutput`s.
    TaskOutputs,
    /// A bare LLM call: the reply text.
    Text,
}

impl ResultKind {
    /// The case format's name for it, where it has one.
    pub fn result_type(self) -> Option<ResultType> {
        match self {
            ResultKind::CrewOutput => Some(ResultType::CrewOutput),
            ResultKind::AgentOutput => Some(ResultType::AgentOutput),
            ResultKind::CrewStreamingOutput => Some(ResultType::CrewStreamingOutput),
            ResultKind::TaskOutputs | ResultKind::Text => None,
        }
    }
}

impl fmt::Display for ResultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.result_type() {
            Some(kind) => kind.fmt(f),
            None if *self == ResultKind::TaskOutputs => f.write_str("task outputs"),
            None => f.write_str("the reply text of a bare LLM call"),
        }
    }
}

/// One result of the run, whatever produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub kind: ResultKind,
    pub raw: String,
    pub json_dict: Option<Value>,
    /// `CrewOutput.json`: the text, or the error reading it gave.
    pub json_text: Result<String, String>,
    pub pydantic: Option<Value>,
    pub tasks_output: Vec<TaskView>,
    pub usage: Option<UsageView>,
    /// Streaming: how many text chunks (non-empty content deltas) iterating it yielded.
    pub chunks: Option<usize>,
}

/// One task's output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskView {
    pub raw: String,
    /// The agent's role.
    pub agent: String,
}

/// Token usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageView {
    pub total_tokens: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub successful_requests: u64,
}

/// One emitted event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventRecord {
    /// CrewAI's `type` string.
    pub name: String,
    pub event_id: String,
    pub parent_event_id: Option<String>,
    /// The event's attributes by CrewAI's names.
    pub attributes: Map<String, Value>,
}

/// What a hook was called with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookCall {
    pub tool_name: Option<String>,
    pub tool_input: Option<Value>,
    pub tool_result: Option<String>,
    pub agent_role: Option<String>,
    pub has_agent: bool,
    pub has_task: bool,
    pub has_crew: bool,
    pub has_llm: bool,
    /// Messages passed to the LLM.
    pub messages: usize,
    pub response: Option<String>,
}

/// A tool's name and description.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
}

/// Whose model calls a rate limiter holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateLimitScope {
    /// One agent's own `max_rpm` (by role).
    Agent(String),
    /// The crew's `max_rpm`: every agent without a limit of its own.
    Crew,
}

/// A rate limiter of the run: its scope, its limit and how many times its (virtual) clock slept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitView {
    pub scope: RateLimitScope,
    pub max_rpm: u32,
    pub sleeps: usize,
}
