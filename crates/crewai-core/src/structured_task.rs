//! A one-off structured answer from an agent the engine makes for itself (the crew's planner,
//! the judges of `Crew::test` and `Crew::train`): one task through [`Agent::run_task`] under the
//! run's services (so hooks, the user's layers, the budget, rate limits, `llm_call_*` events and
//! usage apply as to any agent), asking the provider for the schema, and the answer made into
//! the schema's value as any task's structured output is (the typed reply, else JSON found in
//! the text, else a conversion call).

use std::sync::Arc;

use crewai_llm::LlmError;
use serde_json::Value;
use uuid::Uuid;

use crate::agent::{Agent, AgentTaskRequest, RunServices};
use crate::converter::{ConversionError, OutputSchema};
use crate::error::AgentError;
use crate::llm_stack::{self, CallPurpose, CallScope};

/// What an engine-made agent is asked.
pub(crate) struct StructuredTask<'a> {
    pub(crate) agent: &'a Agent,
    /// The task prompt (description and expected output, as `Task::prompt` renders them).
    pub(crate) prompt: String,
    pub(crate) schema: &'a OutputSchema,
    /// What the agent's usage counts toward and its events name.
    pub(crate) task_name: Option<String>,
    pub(crate) parent: Option<Uuid>,
}

/// The run's services as an engine-made agent gets them: the run's bus, hooks, layers, budget,
/// limits and cancellation, without what belongs to the crew's own agents (memory, skills,
/// the step callback, streaming).
pub(crate) fn services_for_engine_agent(services: &RunServices) -> RunServices {
    let mut services = services.clone();
    services.memory = None;
    services.skills = Vec::new();
    services.step_callback = None;
    services.stream = false;
    services
}

impl StructuredTask<'_> {
    /// Runs the task and returns the answer as the schema's value.
    pub(crate) async fn run(self, services: &RunServices) -> Result<Value, AgentError> {
        let services = services_for_engine_agent(services);
        let mut request = AgentTaskRequest::new(self.prompt)
            .with_response_format(self.schema.response_format())
            .with_services(services.clone());
        request.task_name = self.task_name.clone();
        request.parent_event_id = self.parent;
        let result = self.agent.run_task(request).await?;
        if let Some(typed) = &result.typed
            && self.schema.validate(typed).is_ok()
        {
            return Ok(typed.clone());
        }
        if let Ok(value) = self.schema.parse_lenient(&result.raw) {
            return Ok(value);
        }
        let scope = CallScope::new(self.agent, &services, CallPurpose::Conversion)
            .with_task(self.task_name.as_deref())
            .with_parent(self.parent);
        let converter = llm_stack::stack(self.agent.llm()?, Arc::new(scope));
        let attempts = self.agent.max_retry_limit() + 1;
        match self
            .schema
            .convert_with_llm(converter.as_ref(), &result.raw, attempts)
            .await
        {
            Ok((value, _usage)) => Ok(value),
            Err(ConversionError::Llm(LlmError::BudgetExceeded(exceeded))) => {
                Err(AgentError::BudgetExceeded {
                    role: self.agent.role().to_string(),
                    exceeded,
                })
            }
            Err(error) => Err(AgentError::InvalidStructuredOutput {
                role: self.agent.role().to_string(),
                format: self.schema.name().to_string(),
                source: Box::new(error),
            }),
        }
    }
}
