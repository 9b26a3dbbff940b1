//! The hierarchical process: every task goes to a manager whose only tools are the delegation
//! tools; the manager is created from `manager_llm`, or is the crew's `manager_agent`.

use std::sync::Arc;

use crewai_llm::Llm;

use crate::agent::Agent;
use crate::error::AgentError;
use crate::prompts::crew as prompts;
use crate::task::Task;

/// Why a hierarchical crew cannot get its manager.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error("a hierarchical crew needs `manager_llm` or `manager_agent`")]
    Missing,
    #[error(
        "the manager agent '{0}' has tools; a manager may only delegate (its tools are the delegation tools), so remove its tools"
    )]
    HasTools(String),
    #[error(
        "the manager agent '{0}' is also one of the crew's agents; give the manager separately from `agents`"
    )]
    AlsoWorker(String),
    #[error("could not create the manager")]
    Build(#[source] Box<AgentError>),
}

/// The crew's manager: `manager_agent` as given (checked), or a new one on `manager_llm`.
pub fn manager(
    manager_agent: Option<&Agent>,
    manager_llm: Option<&Arc<dyn Llm>>,
    agents: &[Agent],
) -> Result<Agent, ManagerError> {
    if let Some(agent) = manager_agent {
        if !agent.tools().is_empty() {
            return Err(ManagerError::HasTools(agent.role().to_string()));
        }
        if agents.iter().any(|a| a.id() == agent.id()) {
            return Err(ManagerError::AlsoWorker(agent.role().to_string()));
        }
        return Ok(agent.clone());
    }
    let llm = manager_llm.ok_or(ManagerError::Missing)?;
    Agent::builder()
        .role(prompts::MANAGER_ROLE)
        .goal(prompts::MANAGER_GOAL)
        .backstory(prompts::MANAGER_BACKSTORY)
        .llm(llm.clone())
        .allow_delegation(true)
        .build()
        .map_err(|e| ManagerError::Build(Box::new(e)))
}

/// The coworkers the manager may use for `task`: its agent if it has one, else every agent.
pub fn coworkers_for(task: &Task, agents: &[Agent]) -> Vec<Agent> {
    match task.agent() {
        Some(agent) => vec![agent.clone()],
        None => agents.to_vec(),
    }
}
