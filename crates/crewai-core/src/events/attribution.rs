//! Which agent and task an event is about: the `agent_role` and `task_name` attributes of the
//! kinds that carry them (delegations name two agents, so they carry none).

use super::EventKind;

impl EventKind {
    /// The event's `agent_role` attribute, for the kinds that have one.
    pub fn agent_role(&self) -> Option<&str> {
        self.attribution().0
    }

    /// The event's `task_name` attribute, for the kinds that have one.
    pub fn task_name(&self) -> Option<&str> {
        self.attribution().1
    }

    /// The `agent_role` and `task_name` attributes, in one match with no catch-all, so a new
    /// kind does not compile until it says which of the two it carries.
    fn attribution(&self) -> (Option<&str>, Option<&str>) {
        use EventKind as K;
        match self {
            K::TaskStarted {
                agent_role,
                task_name,
                ..
            }
            | K::TaskCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::TaskFailed {
                agent_role,
                task_name,
                ..
            }
            | K::LlmCallStarted {
                agent_role,
                task_name,
                ..
            }
            | K::LlmCallCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::LlmCallFailed {
                agent_role,
                task_name,
                ..
            }
            | K::LlmStreamChunk {
                agent_role,
                task_name,
                ..
            }
            | K::ToolUsageStarted {
                agent_role,
                task_name,
                ..
            }
            | K::ToolUsageFinished {
                agent_role,
                task_name,
                ..
            }
            | K::ToolUsageError {
                agent_role,
                task_name,
                ..
            }
            | K::McpConnectionStarted {
                agent_role,
                task_name,
                ..
            }
            | K::McpConnectionCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::McpConnectionFailed {
                agent_role,
                task_name,
                ..
            }
            | K::McpToolExecutionStarted {
                agent_role,
                task_name,
                ..
            }
            | K::McpToolExecutionCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::McpToolExecutionFailed {
                agent_role,
                task_name,
                ..
            }
            | K::A2aDelegationStarted {
                agent_role,
                task_name,
                ..
            }
            | K::A2aDelegationCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::A2aDelegationFailed {
                agent_role,
                task_name,
                ..
            }
            | K::CodeExecutionStarted {
                agent_role,
                task_name,
                ..
            }
            | K::CodeExecutionCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::CodeExecutionFailed {
                agent_role,
                task_name,
                ..
            }
            | K::LlmGuardrailStarted {
                agent_role,
                task_name,
                ..
            }
            | K::LlmGuardrailCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::PanicCaught {
                agent_role,
                task_name,
                ..
            }
            | K::SkillActivated {
                agent_role,
                task_name,
                ..
            }
            | K::SkillUsed {
                agent_role,
                task_name,
                ..
            }
            | K::MemorySaveStarted {
                agent_role,
                task_name,
                ..
            }
            | K::MemorySaveCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::MemorySaveFailed {
                agent_role,
                task_name,
                ..
            }
            | K::MemoryQueryStarted {
                agent_role,
                task_name,
                ..
            }
            | K::MemoryQueryCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::CrewTestResult {
                agent_role,
                task_name,
                ..
            }
            | K::MemoryQueryFailed {
                agent_role,
                task_name,
                ..
            }
            | K::KnowledgeRetrievalStarted {
                agent_role,
                task_name,
                ..
            }
            | K::KnowledgeRetrievalCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::KnowledgeQueryStarted {
                agent_role,
                task_name,
                ..
            }
            | K::KnowledgeQueryCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::KnowledgeQueryFailed {
                agent_role,
                task_name,
                ..
            }
            | K::KnowledgeSearchQueryFailed {
                agent_role,
                task_name,
                ..
            } => (agent_role.as_deref(), task_name.as_deref()),
            K::ConsensusDecided {
                agent_role,
                task_name,
                ..
            } => (agent_role.as_deref(), task_name.as_deref()),
            K::ConsensusRoundStarted { task_name, .. }
            | K::ConsensusRoundCompleted { task_name, .. }
            | K::ConsensusDecisionStarted { task_name, .. } => (None, task_name.as_deref()),
            K::SkillDiscoveryStarted { agent_role, .. }
            | K::SkillDiscoveryCompleted { agent_role, .. }
            | K::SkillLoaded { agent_role, .. }
            | K::SkillLoadFailed { agent_role, .. } => (agent_role.as_deref(), None),
            K::AgentExecutionStarted {
                agent_role,
                task_name,
                ..
            }
            | K::AgentExecutionCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::AgentExecutionError {
                agent_role,
                task_name,
                ..
            }
            | K::RateLimitWaitStarted {
                agent_role,
                task_name,
                ..
            }
            | K::AgentReasoningStarted {
                agent_role,
                task_name,
                ..
            }
            | K::AgentReasoningCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::AgentReasoningFailed {
                agent_role,
                task_name,
                ..
            }
            | K::PlanStepStarted {
                agent_role,
                task_name,
                ..
            }
            | K::PlanStepCompleted {
                agent_role,
                task_name,
                ..
            }
            | K::PlanStepFailed {
                agent_role,
                task_name,
                ..
            }
            | K::PlanStepObserved {
                agent_role,
                task_name,
                ..
            }
            | K::PlanReplanned {
                agent_role,
                task_name,
                ..
            } => (Some(agent_role), task_name.as_deref()),
            K::LiteAgentExecutionStarted { agent_role, .. }
            | K::LiteAgentExecutionCompleted { agent_role, .. }
            | K::LiteAgentExecutionError { agent_role, .. } => (Some(agent_role), None),
            // Delegations name two agents (`from_agent`, `to_agent`), none of them `agent_role`.
            K::CrewKickoffStarted { .. }
            | K::CrewKickoffCompleted { .. }
            | K::CrewKickoffFailed { .. }
            | K::CrewPlanningStarted { .. }
            | K::CrewPlanningCompleted { .. }
            | K::CrewPlanningFailed { .. }
            | K::CrewTestStarted { .. }
            | K::CrewTestCompleted { .. }
            | K::CrewTrainStarted { .. }
            | K::CrewTrainCompleted { .. }
            | K::AgentDelegationStarted { .. }
            | K::AgentDelegationCompleted { .. }
            | K::FlowStarted { .. }
            | K::FlowFinished { .. }
            | K::MethodExecutionStarted { .. }
            | K::MethodExecutionFinished { .. }
            | K::MethodExecutionFailed { .. } => (None, None),
        }
    }
}
