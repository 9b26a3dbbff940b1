//! [`EventKind`], what an event says, and [`EventType`], which kind of event it is.
//!
//! The `type` string has one source: serde's tag (`rename_all = "snake_case"`) writes and reads
//! it, and strum derives [`EventKind::type_name`] and [`EventType`] with the same rule; a test
//! over [`EventType::all`] holds the two together.

use std::str::FromStr;

use crewai_llm::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use strum::IntoEnumIterator;

use super::PanicSite;

/// What happened. Variant names map to CrewAI's event `type` strings (`CrewKickoffStarted` →
/// `crew_kickoff_started`); fields carry CrewAI's attribute names. It reads back from its JSON
/// form ([`Event::to_json`](super::Event::to_json), a trace file's line) as well as it writes.
///
/// The enum is deliberately not `#[non_exhaustive]`: the listeners of this workspace (span
/// assembly, OpenTelemetry, the console, the CLI's progress) match it without a catch-all arm, so
/// a new variant does not compile until each of them has decided what to do with it. For a
/// crate outside the workspace a new variant is a breaking change (a minor version while the
/// version is 0.x); a listener that wants to be immune adds a `_` arm.
#[derive(
    Debug, Clone, PartialEq, Serialize, Deserialize, strum::EnumDiscriminants, strum::IntoStaticStr,
)]
#[serde(tag = "type", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[strum_discriminants(
    name(EventType),
    vis(pub),
    derive(
        Hash,
        PartialOrd,
        Ord,
        strum::EnumIter,
        strum::EnumString,
        strum::IntoStaticStr
    ),
    strum(serialize_all = "snake_case"),
    doc = "The type of an [`EventKind`] without its fields: what `type` names. \
           [`EventType::all`] goes over every one."
)]
pub enum EventKind {
    CrewKickoffStarted {
        crew_name: String,
        crew_id: Option<String>,
        inputs: Option<Value>,
    },
    CrewKickoffCompleted {
        crew_name: String,
        crew_id: Option<String>,
        output: String,
        total_tokens: u64,
    },
    CrewKickoffFailed {
        crew_name: String,
        crew_id: Option<String>,
        error: String,
    },

    /// The crew's planner (`planning: true`) is asked for a plan per task, before the first task
    /// runs (a resumed run whose plan is journaled is not planned again).
    CrewPlanningStarted {
        crew_name: String,
        /// How many tasks the planner is given.
        tasks: usize,
    },
    /// The plans were appended to their tasks' descriptions; `missing` holds the (1-based)
    /// numbers of the tasks the planner gave no plan for.
    CrewPlanningCompleted {
        crew_name: String,
        planned: usize,
        missing: Vec<usize>,
    },
    CrewPlanningFailed {
        crew_name: String,
        error: String,
    },

    /// `Crew::test` (`crewai test`) starts its `n_iterations` kickoffs, judged by `model`.
    CrewTestStarted {
        crew_name: String,
        n_iterations: u32,
        model: String,
    },
    /// Every run of a test is done and judged; `quality` is the crew's average score (1-10).
    CrewTestCompleted {
        crew_name: String,
        n_iterations: u32,
        quality: f64,
    },
    /// The judge scored one task of one test run (CrewAI's `CrewTestResultEvent`):
    /// `execution_duration` is the task's time in seconds.
    CrewTestResult {
        crew_name: String,
        agent_role: Option<String>,
        task_name: Option<String>,
        iteration: u32,
        quality: f64,
        execution_duration: f64,
        model: String,
    },
    /// `Crew::train` (`crewai train`) starts its `n_iterations` kickoffs with human feedback.
    CrewTrainStarted {
        crew_name: String,
        n_iterations: u32,
    },
    /// Training ended: every agent in `trained_agents` (roles) has its suggestions saved.
    CrewTrainCompleted {
        crew_name: String,
        n_iterations: u32,
        trained_agents: Vec<String>,
    },

    TaskStarted {
        task_name: Option<String>,
        task_id: Option<String>,
        agent_role: Option<String>,
        context: Option<String>,
    },
    TaskCompleted {
        task_name: Option<String>,
        task_id: Option<String>,
        agent_role: Option<String>,
        output: String,
    },
    TaskFailed {
        task_name: Option<String>,
        task_id: Option<String>,
        agent_role: Option<String>,
        error: String,
    },

    /// A round of a consensual task (`process: consensual`) starts, under the task's
    /// `task_started`: round 0 is the voters' independent answers, round `r` the `r`-th
    /// revision. `voters` are the roles, in the order their answers are labelled A, B, ...
    ConsensusRoundStarted {
        task_name: Option<String>,
        round: u32,
        voters: Vec<String>,
    },
    /// Every voter answered in this round; `revised` of them changed their answer.
    ConsensusRoundCompleted {
        task_name: Option<String>,
        round: u32,
        answers: usize,
        revised: usize,
    },
    /// The voters vote, or the judge decides (`method`: `vote` or `judge`), under the task's
    /// `task_started`.
    ConsensusDecisionStarted {
        task_name: Option<String>,
        method: String,
    },
    /// The task's answer is decided: `outcome` is `Answer B` or `merged`, `agent_role` who
    /// wrote it (the judge for a merged one), `tally` the votes per label (empty for a judge).
    ConsensusDecided {
        task_name: Option<String>,
        method: String,
        outcome: String,
        agent_role: Option<String>,
        tally: std::collections::BTreeMap<String, u32>,
        reason: String,
    },

    /// An agent starts working on a task; `task_prompt` is the task text without the user-message
    /// wrapper, `tools` the names of the tools it may use.
    AgentExecutionStarted {
        agent_role: String,
        agent_id: String,
        task_name: Option<String>,
        task_prompt: String,
        tools: Vec<String>,
    },
    AgentExecutionCompleted {
        agent_role: String,
        agent_id: String,
        task_name: Option<String>,
        output: String,
    },
    AgentExecutionError {
        agent_role: String,
        agent_id: String,
        task_name: Option<String>,
        error: String,
    },

    /// `Agent::kickoff` (CrewAI's LiteAgent) starts.
    LiteAgentExecutionStarted {
        agent_role: String,
        agent_id: String,
        tools: Vec<String>,
        messages: Value,
    },
    LiteAgentExecutionCompleted {
        agent_role: String,
        agent_id: String,
        output: String,
    },
    LiteAgentExecutionError {
        agent_role: String,
        agent_id: String,
        error: String,
    },

    /// An agent that plans (`planning_config`) asks for its plan; each refinement of a plan the
    /// planner did not call ready is a new `attempt` (from 1).
    AgentReasoningStarted {
        agent_role: String,
        task_name: Option<String>,
        attempt: u32,
    },
    /// The plan the agent carries out: its summary, its steps (`"1. ..."`), whether the planner
    /// called it ready, and the calls it took.
    AgentReasoningCompleted {
        agent_role: String,
        task_name: Option<String>,
        plan: String,
        steps: Vec<String>,
        ready: bool,
        attempts: u32,
    },
    AgentReasoningFailed {
        agent_role: String,
        task_name: Option<String>,
        error: String,
    },
    /// A step of the agent's plan starts: its model and tool calls hang under this event.
    PlanStepStarted {
        agent_role: String,
        task_name: Option<String>,
        step_number: u32,
        description: String,
        tool_to_use: Option<String>,
    },
    PlanStepCompleted {
        agent_role: String,
        task_name: Option<String>,
        step_number: u32,
        result: String,
    },
    PlanStepFailed {
        agent_role: String,
        task_name: Option<String>,
        step_number: u32,
        error: String,
    },
    /// The planner judged the results after the steps `step_numbers` ran: whether the goal is
    /// reached (the remaining steps are not run) and whether the plan changes.
    PlanStepObserved {
        agent_role: String,
        task_name: Option<String>,
        step_numbers: Vec<u32>,
        goal_achieved: bool,
        replan: bool,
        reason: String,
    },
    /// The steps not yet run were replaced by `steps`, the `replan_count`-th change.
    PlanReplanned {
        agent_role: String,
        task_name: Option<String>,
        replan_count: u32,
        reason: String,
        steps: Vec<String>,
    },

    /// A model call starts; `messages` is the request's conversation as JSON.
    LlmCallStarted {
        call_id: String,
        model: String,
        agent_role: Option<String>,
        task_name: Option<String>,
        messages: Value,
        tools: Vec<String>,
    },
    LlmCallCompleted {
        call_id: String,
        model: String,
        agent_role: Option<String>,
        task_name: Option<String>,
        response: Value,
        usage: Usage,
    },
    LlmCallFailed {
        call_id: String,
        model: String,
        agent_role: Option<String>,
        task_name: Option<String>,
        error: String,
    },
    /// A model call is held back by the requests-per-minute limit (the agent's `max_rpm`, the
    /// crew's, or a shared limiter) and waits `wait_ms` before it is sent.
    RateLimitWaitStarted {
        agent_role: String,
        task_name: Option<String>,
        max_rpm: Option<u32>,
        wait_ms: u64,
    },
    /// A piece of streamed reply text.
    LlmStreamChunk {
        call_id: String,
        agent_role: Option<String>,
        task_name: Option<String>,
        chunk: String,
    },

    ToolUsageStarted {
        tool_name: String,
        tool_args: Value,
        agent_role: Option<String>,
        task_name: Option<String>,
    },
    ToolUsageFinished {
        tool_name: String,
        tool_args: Value,
        agent_role: Option<String>,
        task_name: Option<String>,
        output: String,
        from_cache: bool,
    },
    ToolUsageError {
        tool_name: String,
        tool_args: Value,
        agent_role: Option<String>,
        task_name: Option<String>,
        error: String,
    },

    /// A session with an agent's MCP server is being opened (once per server per kickoff).
    /// `server_url` is its command line or URL, never a header or an environment value.
    McpConnectionStarted {
        server_name: String,
        server_url: String,
        transport_type: String,
        agent_role: Option<String>,
        task_name: Option<String>,
    },
    McpConnectionCompleted {
        server_name: String,
        server_url: String,
        transport_type: String,
        agent_role: Option<String>,
        task_name: Option<String>,
        connection_duration_ms: u64,
        tool_count: u32,
    },
    McpConnectionFailed {
        server_name: String,
        server_url: String,
        transport_type: String,
        agent_role: Option<String>,
        task_name: Option<String>,
        error: String,
    },
    /// `tool_name` is the server's name for the tool (the model sees `{server_name}_{tool_name}`).
    McpToolExecutionStarted {
        server_name: String,
        tool_name: String,
        tool_args: Value,
        agent_role: Option<String>,
        task_name: Option<String>,
    },
    McpToolExecutionCompleted {
        server_name: String,
        tool_name: String,
        tool_args: Value,
        agent_role: Option<String>,
        task_name: Option<String>,
        result: String,
        execution_duration_ms: u64,
    },
    McpToolExecutionFailed {
        server_name: String,
        tool_name: String,
        tool_args: Value,
        agent_role: Option<String>,
        task_name: Option<String>,
        error: String,
    },

    /// An agent sends a message to a remote A2A agent (one turn of the conversation);
    /// `endpoint` is the remote's JSON-RPC URL, never a credential.
    A2aDelegationStarted {
        endpoint: String,
        a2a_agent_name: String,
        message: String,
        agent_role: Option<String>,
        task_name: Option<String>,
    },
    /// The remote agent answered: `state` is `completed` or `input-required` (its question is
    /// the `result`).
    A2aDelegationCompleted {
        endpoint: String,
        a2a_agent_name: String,
        context_id: Option<String>,
        state: String,
        result: String,
        turn_number: u32,
        agent_role: Option<String>,
        task_name: Option<String>,
        duration_ms: u64,
    },
    /// A turn gave no answer, or the remote agent's card could not be fetched
    /// (`a2a_agent_name` unknown, `turn_number` 0).
    A2aDelegationFailed {
        endpoint: String,
        a2a_agent_name: Option<String>,
        turn_number: u32,
        agent_role: Option<String>,
        task_name: Option<String>,
        error: String,
    },

    /// Code a model wrote starts in a sandbox (`CodeInterpreterTool`; not a CrewAI event, CrewAI
    /// has no sandbox). `backend` is `wasi`, `bubblewrap` or `unsafe`; `code_sha256` names the
    /// code, which the tool call's own event carries.
    CodeExecutionStarted {
        backend: String,
        code_sha256: String,
        libraries_used: Vec<String>,
        agent_role: Option<String>,
        task_name: Option<String>,
    },
    /// The code ended: `exit_code` when it exited by itself, `stopped` when the runtime stopped
    /// it, `limit_hit` (`deadline`, `memory`, `output`) when a limit did; `artifacts` are the
    /// files it wrote, where they were saved.
    CodeExecutionCompleted {
        backend: String,
        code_sha256: String,
        exit_code: Option<i32>,
        stopped: Option<String>,
        limit_hit: Option<String>,
        duration_ms: u64,
        artifacts: Vec<String>,
        agent_role: Option<String>,
        task_name: Option<String>,
    },
    /// The code could not run: the sandbox did not start, or failed itself.
    CodeExecutionFailed {
        backend: String,
        code_sha256: String,
        agent_role: Option<String>,
        task_name: Option<String>,
        error: String,
    },

    /// A guardrail check starts; `guardrail` is the description of an LLM guardrail or the name of a
    /// function guardrail; `retry_count` counts the retries before this check.
    LlmGuardrailStarted {
        guardrail: String,
        retry_count: u32,
        agent_role: Option<String>,
        task_name: Option<String>,
    },
    /// `result` is the (possibly replaced) output when it passed, `error` the feedback when not.
    LlmGuardrailCompleted {
        success: bool,
        result: Option<Value>,
        error: Option<String>,
        retry_count: u32,
        agent_role: Option<String>,
        task_name: Option<String>,
    },

    /// An agent hands work to (or asks) a coworker; `kind` is `delegate` or `ask`.
    AgentDelegationStarted {
        from_agent: String,
        to_agent: String,
        kind: String,
        task: String,
    },
    AgentDelegationCompleted {
        from_agent: String,
        to_agent: String,
        kind: String,
        output: String,
    },

    /// A folder of skills is searched for the agent (CrewAI's skill events; paths are as given).
    SkillDiscoveryStarted {
        agent_role: Option<String>,
        search_path: String,
    },
    SkillDiscoveryCompleted {
        agent_role: Option<String>,
        search_path: String,
        skills_found: usize,
        skill_names: Vec<String>,
    },
    /// A skill is ready for the agent at `disclosure_level` (1 metadata, 2 instructions, 3
    /// resources); `skill_path` is none for an inline skill.
    SkillLoaded {
        agent_role: Option<String>,
        skill_name: String,
        skill_path: Option<String>,
        disclosure_level: u8,
    },
    /// A skill's instructions are disclosed to the agent: in its system prompt, or the first
    /// time its `load_skill` tool returns them in an execution.
    SkillActivated {
        agent_role: Option<String>,
        task_name: Option<String>,
        skill_name: String,
        skill_path: Option<String>,
        disclosure_level: u8,
    },
    /// A skill could not be loaded: a skill folder inside a searched folder (left out, the run
    /// goes on) or a skill the agent was given (the run fails with the same error).
    SkillLoadFailed {
        agent_role: Option<String>,
        skill_name: String,
        skill_path: Option<String>,
        error: String,
    },
    /// An execution uses a skill: its instructions are in the system prompt, or the model
    /// called `load_skill` for it.
    SkillUsed {
        agent_role: Option<String>,
        task_name: Option<String>,
        skill_name: String,
        skill_path: Option<String>,
        disclosure_level: u8,
    },

    /// Memory stores statements (CrewAI's memory events; scopes are full paths in the store).
    /// `agent_role` and `task_name` name the work that caused it.
    MemorySaveStarted {
        agent_role: Option<String>,
        task_name: Option<String>,
        scope: String,
        statements: usize,
    },
    MemorySaveCompleted {
        agent_role: Option<String>,
        task_name: Option<String>,
        scope: String,
        saved: usize,
        elapsed_ms: u64,
    },
    MemorySaveFailed {
        agent_role: Option<String>,
        task_name: Option<String>,
        scope: String,
        error: String,
    },
    /// Memory is searched (before a task, or by the `search_memory` tool).
    MemoryQueryStarted {
        agent_role: Option<String>,
        task_name: Option<String>,
        query: String,
        scope: String,
        limit: usize,
    },
    MemoryQueryCompleted {
        agent_role: Option<String>,
        task_name: Option<String>,
        query: String,
        scope: String,
        results: usize,
        elapsed_ms: u64,
    },
    MemoryQueryFailed {
        agent_role: Option<String>,
        task_name: Option<String>,
        query: String,
        scope: String,
        error: String,
    },

    /// An agent searches its and its crew's knowledge before a task (CrewAI's knowledge
    /// events): retrieval spans the whole search, the query events its model's rewrite of the
    /// task into a search query.
    KnowledgeRetrievalStarted {
        agent_role: Option<String>,
        task_name: Option<String>,
    },
    KnowledgeRetrievalCompleted {
        agent_role: Option<String>,
        task_name: Option<String>,
        query: String,
        /// The snippets as the prompt gets them (empty when none passed the threshold).
        retrieved_knowledge: String,
        results: usize,
        elapsed_ms: u64,
    },
    KnowledgeQueryStarted {
        agent_role: Option<String>,
        task_name: Option<String>,
        task_prompt: String,
    },
    KnowledgeQueryCompleted {
        agent_role: Option<String>,
        task_name: Option<String>,
        query: String,
    },
    /// The model could not rewrite the task into a query; the task runs without knowledge.
    KnowledgeQueryFailed {
        agent_role: Option<String>,
        task_name: Option<String>,
        error: String,
    },
    /// The search itself failed (embedder, store); the task runs without knowledge.
    KnowledgeSearchQueryFailed {
        agent_role: Option<String>,
        task_name: Option<String>,
        query: String,
        error: String,
    },

    // Reserved for the flow engine, with CrewAI's names.
    FlowStarted {
        flow_name: String,
        inputs: Option<Value>,
    },
    FlowFinished {
        flow_name: String,
        result: Option<Value>,
    },
    MethodExecutionStarted {
        flow_name: String,
        method_name: String,
    },
    MethodExecutionFinished {
        flow_name: String,
        method_name: String,
        result: Option<Value>,
    },
    MethodExecutionFailed {
        flow_name: String,
        method_name: String,
        error: String,
    },

    /// A panic was caught at `site` (not a CrewAI event: CrewAI has no panics to catch). `name`
    /// says what panicked (the tool's or guardrail's name, the hook's kind, the task's key, the
    /// flow method's name); `message` is the panic's text. The run went on or failed with a typed
    /// error; either way the bus counted it
    /// ([`EventBus::caught_panics`](super::EventBus::caught_panics)).
    PanicCaught {
        site: PanicSite,
        name: String,
        message: String,
        agent_role: Option<String>,
        task_name: Option<String>,
    },
}

impl EventType {
    /// Every event type, in declaration order.
    ///
    /// ```
    /// use crewai_core::events::EventType;
    /// assert!(EventType::all().any(|t| t.name() == "llm_call_completed"));
    /// ```
    pub fn all() -> impl Iterator<Item = EventType> {
        EventType::iter()
    }

    /// CrewAI's `type` string (`task_started`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The type a `type` string names, if it names one.
    ///
    /// ```
    /// use crewai_core::events::EventType;
    /// assert_eq!(EventType::from_name("task_started"), Some(EventType::TaskStarted));
    /// assert_eq!(EventType::from_name("TaskStarted"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<EventType> {
        EventType::from_str(name).ok()
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl EventKind {
    /// Which kind of event this is.
    pub fn event_type(&self) -> EventType {
        self.into()
    }

    /// CrewAI's `type` string for this kind of event.
    pub fn type_name(&self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_name_is_its_serde_tag_and_reads_back() {
        let mut names = std::collections::BTreeSet::new();
        for ty in EventType::all() {
            let kind = EventKind::blank(ty);
            assert_eq!(kind.event_type(), ty);
            assert_eq!(kind.type_name(), ty.name());
            let json = serde_json::to_value(&kind).unwrap();
            assert_eq!(json["type"], ty.name(), "{ty:?}");
            assert_eq!(EventType::from_name(ty.name()), Some(ty));
            let back: EventKind = serde_json::from_value(json).unwrap();
            assert_eq!(back, kind, "{ty:?} reads back as written");
            assert!(names.insert(ty.name()), "{} is used twice", ty.name());
        }
        assert!(names.contains("crew_kickoff_started") && names.contains("panic_caught"));
    }

    #[test]
    fn fields_with_values_read_back() {
        let kind = EventKind::LlmCallCompleted {
            call_id: "k1".into(),
            model: "gpt-4o-mini".into(),
            agent_role: Some("Researcher".into()),
            task_name: Some("research".into()),
            response: serde_json::json!([{"name": "search"}]),
            usage: Usage {
                prompt_tokens: 12,
                completion_tokens: 3,
                total_tokens: 15,
                successful_requests: 1,
                cost_usd: 0.25,
                ..Default::default()
            },
        };
        let back: EventKind = serde_json::from_value(serde_json::to_value(&kind).unwrap()).unwrap();
        assert_eq!(back, kind);
        let panic = EventKind::PanicCaught {
            site: PanicSite::FlowMethod,
            name: "m".into(),
            message: "boom".into(),
            agent_role: None,
            task_name: Some("t".into()),
        };
        let json = serde_json::to_value(&panic).unwrap();
        assert_eq!(json["site"], "flow_method");
        assert_eq!(serde_json::from_value::<EventKind>(json).unwrap(), panic);
    }

    #[test]
    fn an_unknown_type_does_not_read() {
        let error =
            serde_json::from_value::<EventKind>(serde_json::json!({"type": "crew_exploded"}))
                .unwrap_err()
                .to_string();
        assert!(error.contains("crew_exploded"), "{error}");
        assert_eq!(EventType::from_name("crew_exploded"), None);
    }

    #[test]
    fn agent_and_task_are_read_where_the_kind_has_them() {
        let started = EventKind::AgentExecutionStarted {
            agent_role: "Writer".into(),
            agent_id: "a".into(),
            task_name: Some("write".into()),
            task_prompt: "p".into(),
            tools: vec![],
        };
        assert_eq!(started.agent_role(), Some("Writer"));
        assert_eq!(started.task_name(), Some("write"));
        let crew = EventKind::blank(EventType::CrewKickoffStarted);
        assert_eq!((crew.agent_role(), crew.task_name()), (None, None));
    }
}
