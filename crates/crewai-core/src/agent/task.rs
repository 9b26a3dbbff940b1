//! [`Agent::run_task`]: one task of a crew's run, with the agent's outside tools (MCP, A2A),
//! its memory and knowledge, and a trained agent's instructions added to what the task layer
//! prepared.

use crewai_tools::ToolSet;
use uuid::Uuid;

use super::{Agent, AgentTaskRequest, AgentTaskResult, KickoffInput, RunServices};
use crate::a2a::A2aRequester;
use crate::agent_knowledge::TaskKnowledge;
use crate::agent_memory::TaskMemory;
use crate::error::AgentError;
use crate::events::EventKind;
use crate::executor::{Execution, RunKind};
use crate::mcp::McpRequester;
use crate::prompts::agent as agent_prompts;
use crate::skills::{self, SkillScope};

impl Agent {
    /// An execution with the agent's skills loaded: their events are reported under `parent`,
    /// and their tools join `tools`.
    pub(super) async fn execution(
        &self,
        services: RunServices,
        mut tools: ToolSet,
        kind: RunKind,
        parent: Option<Uuid>,
        task_name: Option<&str>,
    ) -> Result<Execution, AgentError> {
        let llm = self.llm()?;
        let scope = SkillScope {
            events: &services.events,
            parent,
            task_name,
            crew_skills: &services.skills,
        };
        let skills = skills::prepare(self, scope, &mut tools).await?;
        let mut execution = Execution::new(self, llm, services, tools, kind);
        execution.skills = skills;
        Ok(execution)
    }

    /// `tools` with the agent's outside tools added: its MCP servers' tools, from the run's
    /// sessions, and a delegation tool per remote A2A agent, from the run's conversations. A
    /// session is opened (a card fetched) now when this is the run's first need of it.
    pub(super) async fn with_outside_tools(
        &self,
        mut tools: ToolSet,
        services: &RunServices,
        task_name: Option<&str>,
        parent: Option<Uuid>,
    ) -> Result<ToolSet, AgentError> {
        let role = || self.role().to_string();
        if !self.config.mcps.is_empty() {
            let requester = McpRequester {
                agent_role: self.role(),
                task_name,
                parent,
            };
            services
                .mcp
                .add_tools(&self.config.mcps, &mut tools, &services.events, &requester)
                .await
                .map_err(|source| AgentError::Mcp {
                    role: role(),
                    source: Box::new(source),
                })?;
        }
        if !self.config.a2a.is_empty() {
            let requester = A2aRequester {
                agent_id: self.id(),
                agent_role: self.role(),
                task_name,
                parent,
            };
            services
                .a2a
                .add_tools(&self.config.a2a, &mut tools, &services.events, &requester)
                .await
                .map_err(|source| AgentError::A2a {
                    role: role(),
                    source: Box::new(source),
                })?;
        }
        Ok(tools)
    }

    /// Runs one task the task/crew layer prepared: emits `agent_execution_started` (under the
    /// request's parent event), runs the loop the model and tools call for, and emits
    /// `agent_execution_completed` (or `agent_execution_error` for each failed attempt).
    pub async fn run_task(&self, request: AgentTaskRequest) -> Result<AgentTaskResult, AgentError> {
        let AgentTaskRequest {
            task_prompt,
            context,
            tools,
            response_format,
            task_name,
            task_id,
            parent_event_id,
            tool_failure_policy,
            services,
        } = request;
        let mut tools = self
            .with_outside_tools(tools, &services, task_name.as_deref(), parent_event_id)
            .await?;
        let llm = self.llm()?;
        let memory =
            TaskMemory::prepare(self, &llm, &services, parent_event_id, task_name.as_deref());
        let knowledge =
            TaskKnowledge::prepare(self, &llm, &services, parent_event_id, task_name.as_deref());
        for tool in memory.iter().flat_map(TaskMemory::tools) {
            tools.insert(tool);
        }
        let mut execution = self
            .execution(
                services,
                tools,
                RunKind::Task,
                parent_event_id,
                task_name.as_deref(),
            )
            .await?;
        execution.response_format = response_format;
        execution.task_tool_failure_policy = tool_failure_policy;
        execution.task_name = task_name;
        execution.task_id = task_id;
        let events = execution.services.events.clone();
        let started = events.emit(
            parent_event_id,
            EventKind::AgentExecutionStarted {
                agent_role: self.role().to_string(),
                agent_id: self.id().to_string(),
                task_name: execution.task_name.clone(),
                task_prompt: task_prompt.clone(),
                tools: execution.tool_names(),
            },
        );
        execution.event_id = Some(started);
        let prompt = match &memory {
            Some(memory) => memory.with_recalled(&task_prompt, &task_prompt).await,
            None => task_prompt.clone(),
        };
        let prompt = match &knowledge {
            Some(knowledge) => knowledge.with_snippets(&prompt, &task_prompt).await,
            None => prompt,
        };
        let mut task_text = match context.as_deref().filter(|c| !c.trim().is_empty()) {
            Some(context) => agent_prompts::with_context(&prompt, context),
            None => prompt,
        };
        // Last, as CrewAI puts a trained agent's instructions after everything else.
        if !self.config.trained_suggestions.is_empty() {
            task_text.push_str(&crate::prompts::evaluation::trained_instructions(
                &self.config.trained_suggestions,
            ));
        }
        let messages = execution.opening_messages(&KickoffInput::Text(task_text));
        let outcome = execution
            .run(&messages, &execution.work_label(&task_prompt))
            .await?;
        execution.emit_completed(parent_event_id, &outcome.output);
        if let Some(memory) = &memory {
            memory.save_result(&outcome.output).await;
        }
        Ok(AgentTaskResult {
            raw: outcome.output,
            typed: outcome.typed,
            messages: outcome.messages,
            usage: execution.usage(),
            result_as_answer: outcome.result_as_answer,
            tool_errors: execution.tool_errors(),
        })
    }
}
