//! Shared helpers of the crew integration tests: agents and tasks wired to a scripted
//! OpenAI-compatible server through the real OpenAI client.
#![allow(dead_code)]

use std::sync::Arc;

use crewai_core::agent::{Agent, AgentBuilder};
use crewai_core::crew::{Crew, CrewBuilder, CrewError};
use crewai_core::guardrail::Guardrail;
use crewai_core::interpolate::Inputs;
use crewai_core::output::{CrewOutput, TaskOutput};
use crewai_core::task::{Task, TaskBuilder};
use crewai_core::usage::BudgetExceeded;
use crewai_llm::{Llm, LlmConfig, Usage, build_llm};
use crewai_testkit::scripted::{RecordedRequest, ScriptedServer};
use crewai_tools::{DynamicTool, ToolError, ToolHandle, ToolOutput};

/// A real OpenAI client pointed at `server`.
pub fn llm(server: &ScriptedServer) -> Arc<dyn Llm> {
    let config = LlmConfig::new("openai/gpt-4o-mini")
        .with_base_url(server.base_url())
        .with_api_key("sk-test");
    build_llm(&config).expect("the OpenAI client builds")
}

pub fn agent(role: &str, server: &ScriptedServer) -> Agent {
    agent_with(role, server, |b| b)
}

pub fn agent_with(
    role: &str,
    server: &ScriptedServer,
    more: impl FnOnce(crewai_core::agent::AgentBuilder) -> crewai_core::agent::AgentBuilder,
) -> Agent {
    more(
        Agent::builder()
            .role(role)
            .goal(format!("Be a good {role}"))
            .backstory(format!("You are an experienced {role}."))
            .llm(llm(server)),
    )
    .build()
    .expect("the agent builds")
}

/// A task builder with the fields every task needs: `name`, `description`, an expected output
/// and `agent`.
pub fn task_builder(name: &str, description: impl Into<String>, agent: &Agent) -> TaskBuilder {
    Task::builder()
        .name(name)
        .description(description)
        .expected_output(format!("The result of {name}"))
        .agent(agent.clone())
}

pub fn task(name: &str, description: impl Into<String>, agent: &Agent) -> Task {
    task_builder(name, description, agent)
        .build()
        .expect("the task builds")
}

/// A crew of `agents` that runs `tasks` in order.
pub fn crew(agents: &[&Agent], tasks: Vec<Task>) -> Crew {
    crew_builder(agents, tasks)
        .build()
        .expect("the crew builds")
}

/// A crew builder with `agents` and `tasks` set.
pub fn crew_builder(agents: &[&Agent], tasks: Vec<Task>) -> CrewBuilder {
    Crew::builder()
        .agents(agents.iter().map(|a| (*a).clone()).collect())
        .tasks(tasks)
}

/// Kicks off a crew of `agent` alone on `tasks`, without inputs.
pub async fn run_solo(agent: &Agent, tasks: Vec<Task>) -> Result<CrewOutput, CrewError> {
    run_solo_with(agent, tasks, |crew| crew).await
}

/// [`run_solo`] with the crew set up further by `more`.
pub async fn run_solo_with(
    agent: &Agent,
    tasks: Vec<Task>,
    more: impl FnOnce(CrewBuilder) -> CrewBuilder,
) -> Result<CrewOutput, CrewError> {
    let crew = more(crew_builder(&[agent], tasks));
    crew.build()?.kickoff(Inputs::new()).await
}

/// Kicks off a crew of `agent` alone on the one task `task` builds, without inputs.
pub async fn run_task(agent: &Agent, task: TaskBuilder) -> Result<CrewOutput, CrewError> {
    run_solo(agent, vec![task.build()?]).await
}

/// The schema of a `{"score": <integer>}` output (named `ScoreOutput`).
pub fn score_schema() -> serde_json::Value {
    serde_json::json!({"title": "ScoreOutput", "type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]})
}

/// A `Lookup` tool that answers every `query` with `answer`.
pub fn lookup_tool(answer: &'static str) -> ToolHandle {
    DynamicTool::new(
        "Lookup",
        "Looks something up.",
        serde_json::json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        move |_args, _ctx| async move { Ok(ToolOutput::Text(answer.into())) },
    )
    .into_handle()
}

/// `research` by a Researcher, then `score` by a Scorer (set up further by `scorer`) who has a
/// lookup tool, so the answer comes back as prose and `output_json` needs a conversion call;
/// `guardrail` then judges the score. Both tasks are about `subject`; `more` finishes the crew.
pub fn research_then_score(
    server: &ScriptedServer,
    subject: &str,
    scorer: impl FnOnce(AgentBuilder) -> AgentBuilder,
    guardrail: Guardrail,
    more: impl FnOnce(CrewBuilder) -> CrewBuilder,
) -> Crew {
    let researcher = agent("Researcher", server);
    let scorer = agent_with("Scorer", server, |b| {
        scorer(b.tools(vec![lookup_tool("rated four out of five")]))
    });
    let score = task_builder(
        "score",
        format!("Score {subject} from the research"),
        &scorer,
    )
    .output_json(score_schema())
    .guardrail(guardrail)
    .build()
    .expect("the task builds");
    let research = task("research", format!("Research {subject}"), &researcher);
    more(crew_builder(&[&researcher, &scorer], vec![research, score]))
        .build()
        .expect("the crew builds")
}

/// What a crew's budget stop reports (see [`budget_stop`]).
pub struct BudgetStop<'a> {
    pub task: Option<&'a str>,
    pub exceeded: &'a BudgetExceeded,
    pub completed: &'a [TaskOutput],
    pub usage: &'a Usage,
}

/// The parts of `error`, which must be a [`CrewError::BudgetExceeded`].
pub fn budget_stop(error: &CrewError) -> BudgetStop<'_> {
    let CrewError::BudgetExceeded {
        task,
        exceeded,
        completed,
        usage,
        ..
    } = error
    else {
        panic!("expected a budget stop, got {error:?}");
    };
    BudgetStop {
        task: task.as_deref(),
        exceeded,
        completed,
        usage,
    }
}

/// A tool that always fails with `message`.
pub fn failing_tool(message: &'static str) -> ToolHandle {
    DynamicTool::new(
        "failing_tool",
        "Always fails.",
        serde_json::json!({"type": "object", "properties": {}}),
        move |_args, _ctx| async move { Err::<ToolOutput, ToolError>(ToolError::failed(message)) },
    )
    .into_handle()
}

/// All message texts of a request joined (system, user, assistant, tool), to look for prompt content.
pub fn conversation(request: &RecordedRequest) -> String {
    request
        .messages()
        .iter()
        .map(|m| match &m["content"] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text of the last user message of a request.
pub fn last_user(request: &RecordedRequest) -> String {
    request
        .messages()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str().map(str::to_string))
        .unwrap_or_default()
}
