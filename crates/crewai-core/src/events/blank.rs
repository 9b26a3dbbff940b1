//! [`EventKind::blank`]: an event of each type with empty fields, for the code that must cover
//! every type (the round-trip test over [`EventType::all`], listeners' exhaustiveness checks).

use crewai_llm::Usage;
use serde_json::Value;

use super::PanicSite;
use super::kind::{EventKind, EventType};

impl EventKind {
    /// An event of type `ty` with empty fields (empty strings and lists, `None`, JSON `null`,
    /// zeros, `false`; a `panic_caught` at [`PanicSite::Tool`]): for code that goes over every
    /// type, such as a test that each one is handled.
    ///
    /// ```
    /// use crewai_core::events::{EventKind, EventType};
    /// for ty in EventType::all() {
    ///     assert_eq!(EventKind::blank(ty).event_type(), ty);
    /// }
    /// ```
    pub fn blank(ty: EventType) -> EventKind {
        use EventKind as K;
        let text = String::new;
        match ty {
            EventType::CrewKickoffStarted => K::CrewKickoffStarted {
                crew_name: text(),
                crew_id: None,
                inputs: None,
            },
            EventType::MemorySaveStarted => K::MemorySaveStarted {
                agent_role: None,
                task_name: None,
                scope: text(),
                statements: 0,
            },
            EventType::MemorySaveCompleted => K::MemorySaveCompleted {
                agent_role: None,
                task_name: None,
                scope: text(),
                saved: 0,
                elapsed_ms: 0,
            },
            EventType::MemorySaveFailed => K::MemorySaveFailed {
                agent_role: None,
                task_name: None,
                scope: text(),
                error: text(),
            },
            EventType::MemoryQueryStarted => K::MemoryQueryStarted {
                agent_role: None,
                task_name: None,
                query: text(),
                scope: text(),
                limit: 0,
            },
            EventType::MemoryQueryCompleted => K::MemoryQueryCompleted {
                agent_role: None,
                task_name: None,
                query: text(),
                scope: text(),
                results: 0,
                elapsed_ms: 0,
            },
            EventType::MemoryQueryFailed => K::MemoryQueryFailed {
                agent_role: None,
                task_name: None,
                query: text(),
                scope: text(),
                error: text(),
            },
            EventType::KnowledgeRetrievalStarted => K::KnowledgeRetrievalStarted {
                agent_role: None,
                task_name: None,
            },
            EventType::KnowledgeRetrievalCompleted => K::KnowledgeRetrievalCompleted {
                agent_role: None,
                task_name: None,
                query: text(),
                retrieved_knowledge: text(),
                results: 0,
                elapsed_ms: 0,
            },
            EventType::KnowledgeQueryStarted => K::KnowledgeQueryStarted {
                agent_role: None,
                task_name: None,
                task_prompt: text(),
            },
            EventType::KnowledgeQueryCompleted => K::KnowledgeQueryCompleted {
                agent_role: None,
                task_name: None,
                query: text(),
            },
            EventType::KnowledgeQueryFailed => K::KnowledgeQueryFailed {
                agent_role: None,
                task_name: None,
                error: text(),
            },
            EventType::KnowledgeSearchQueryFailed => K::KnowledgeSearchQueryFailed {
                agent_role: None,
                task_name: None,
                query: text(),
                error: text(),
            },
            EventType::SkillDiscoveryStarted => K::SkillDiscoveryStarted {
                agent_role: None,
                search_path: text(),
            },
            EventType::SkillDiscoveryCompleted => K::SkillDiscoveryCompleted {
                agent_role: None,
                search_path: text(),
                skills_found: 0,
                skill_names: Vec::new(),
            },
            EventType::SkillLoaded => K::SkillLoaded {
                agent_role: None,
                skill_name: text(),
                skill_path: None,
                disclosure_level: 0,
            },
            EventType::SkillActivated => K::SkillActivated {
                agent_role: None,
                task_name: None,
                skill_name: text(),
                skill_path: None,
                disclosure_level: 0,
            },
            EventType::SkillLoadFailed => K::SkillLoadFailed {
                agent_role: None,
                skill_name: text(),
                skill_path: None,
                error: text(),
            },
            EventType::SkillUsed => K::SkillUsed {
                agent_role: None,
                task_name: None,
                skill_name: text(),
                skill_path: None,
                disclosure_level: 0,
            },
            EventType::CrewKickoffCompleted => K::CrewKickoffCompleted {
                crew_name: text(),
                crew_id: None,
                output: text(),
                total_tokens: 0,
            },
            EventType::CrewKickoffFailed => K::CrewKickoffFailed {
                crew_name: text(),
                crew_id: None,
                error: text(),
            },
            EventType::ConsensusRoundStarted => K::ConsensusRoundStarted {
                task_name: None,
                round: 0,
                voters: Vec::new(),
            },
            EventType::ConsensusRoundCompleted => K::ConsensusRoundCompleted {
                task_name: None,
                round: 0,
                answers: 0,
                revised: 0,
            },
            EventType::ConsensusDecisionStarted => K::ConsensusDecisionStarted {
                task_name: None,
                method: text(),
            },
            EventType::ConsensusDecided => K::ConsensusDecided {
                task_name: None,
                method: text(),
                outcome: text(),
                agent_role: None,
                tally: Default::default(),
                reason: text(),
            },
            EventType::CrewPlanningStarted => K::CrewPlanningStarted {
                crew_name: text(),
                tasks: 0,
            },
            EventType::CrewPlanningCompleted => K::CrewPlanningCompleted {
                crew_name: text(),
                planned: 0,
                missing: Vec::new(),
            },
            EventType::CrewPlanningFailed => K::CrewPlanningFailed {
                crew_name: text(),
                error: text(),
            },
            EventType::CrewTestStarted => K::CrewTestStarted {
                crew_name: text(),
                n_iterations: 0,
                model: text(),
            },
            EventType::CrewTestCompleted => K::CrewTestCompleted {
                crew_name: text(),
                n_iterations: 0,
                quality: 0.0,
            },
            EventType::CrewTestResult => K::CrewTestResult {
                crew_name: text(),
                agent_role: None,
                task_name: None,
                iteration: 0,
                quality: 0.0,
                execution_duration: 0.0,
                model: text(),
            },
            EventType::CrewTrainStarted => K::CrewTrainStarted {
                crew_name: text(),
                n_iterations: 0,
            },
            EventType::CrewTrainCompleted => K::CrewTrainCompleted {
                crew_name: text(),
                n_iterations: 0,
                trained_agents: Vec::new(),
            },
            EventType::TaskStarted => K::TaskStarted {
                task_name: None,
                task_id: None,
                agent_role: None,
                context: None,
            },
            EventType::TaskCompleted => K::TaskCompleted {
                task_name: None,
                task_id: None,
                agent_role: None,
                output: text(),
            },
            EventType::TaskFailed => K::TaskFailed {
                task_name: None,
                task_id: None,
                agent_role: None,
                error: text(),
            },
            EventType::AgentExecutionStarted => K::AgentExecutionStarted {
                agent_role: text(),
                agent_id: text(),
                task_name: None,
                task_prompt: text(),
                tools: Vec::new(),
            },
            EventType::AgentExecutionCompleted => K::AgentExecutionCompleted {
                agent_role: text(),
                agent_id: text(),
                task_name: None,
                output: text(),
            },
            EventType::AgentExecutionError => K::AgentExecutionError {
                agent_role: text(),
                agent_id: text(),
                task_name: None,
                error: text(),
            },
            EventType::LiteAgentExecutionStarted => K::LiteAgentExecutionStarted {
                agent_role: text(),
                agent_id: text(),
                tools: Vec::new(),
                messages: Value::Null,
            },
            EventType::LiteAgentExecutionCompleted => K::LiteAgentExecutionCompleted {
                agent_role: text(),
                agent_id: text(),
                output: text(),
            },
            EventType::LiteAgentExecutionError => K::LiteAgentExecutionError {
                agent_role: text(),
                agent_id: text(),
                error: text(),
            },
            EventType::AgentReasoningStarted => K::AgentReasoningStarted {
                agent_role: text(),
                task_name: None,
                attempt: 0,
            },
            EventType::AgentReasoningCompleted => K::AgentReasoningCompleted {
                agent_role: text(),
                task_name: None,
                plan: text(),
                steps: Vec::new(),
                ready: false,
                attempts: 0,
            },
            EventType::AgentReasoningFailed => K::AgentReasoningFailed {
                agent_role: text(),
                task_name: None,
                error: text(),
            },
            EventType::PlanStepStarted => K::PlanStepStarted {
                agent_role: text(),
                task_name: None,
                step_number: 0,
                description: text(),
                tool_to_use: None,
            },
            EventType::PlanStepCompleted => K::PlanStepCompleted {
                agent_role: text(),
                task_name: None,
                step_number: 0,
                result: text(),
            },
            EventType::PlanStepFailed => K::PlanStepFailed {
                agent_role: text(),
                task_name: None,
                step_number: 0,
                error: text(),
            },
            EventType::PlanStepObserved => K::PlanStepObserved {
                agent_role: text(),
                task_name: None,
                step_numbers: Vec::new(),
                goal_achieved: false,
                replan: false,
                reason: text(),
            },
            EventType::PlanReplanned => K::PlanReplanned {
                agent_role: text(),
                task_name: None,
                replan_count: 0,
                reason: text(),
                steps: Vec::new(),
            },
            EventType::LlmCallStarted => K::LlmCallStarted {
                call_id: text(),
                model: text(),
                agent_role: None,
                task_name: None,
                messages: Value::Null,
                tools: Vec::new(),
            },
            EventType::LlmCallCompleted => K::LlmCallCompleted {
                call_id: text(),
                model: text(),
                agent_role: None,
                task_name: None,
                response: Value::Null,
                usage: Usage::default(),
            },
            EventType::LlmCallFailed => K::LlmCallFailed {
                call_id: text(),
                model: text(),
                agent_role: None,
                task_name: None,
                error: text(),
            },
            EventType::RateLimitWaitStarted => K::RateLimitWaitStarted {
                agent_role: text(),
                task_name: None,
                max_rpm: None,
                wait_ms: 0,
            },
            EventType::LlmStreamChunk => K::LlmStreamChunk {
                call_id: text(),
                agent_role: None,
                task_name: None,
                chunk: text(),
            },
            EventType::ToolUsageStarted => K::ToolUsageStarted {
                tool_name: text(),
                tool_args: Value::Null,
                agent_role: None,
                task_name: None,
            },
            EventType::ToolUsageFinished => K::ToolUsageFinished {
                tool_name: text(),
                tool_args: Value::Null,
                agent_role: None,
                task_name: None,
                output: text(),
                from_cache: false,
            },
            EventType::ToolUsageError => K::ToolUsageError {
                tool_name: text(),
                tool_args: Value::Null,
                agent_role: None,
                task_name: None,
                error: text(),
            },
            EventType::McpConnectionStarted => K::McpConnectionStarted {
                server_name: text(),
                server_url: text(),
                transport_type: text(),
                agent_role: None,
                task_name: None,
            },
            EventType::McpConnectionCompleted => K::McpConnectionCompleted {
                server_name: text(),
                server_url: text(),
                transport_type: text(),
                agent_role: None,
                task_name: None,
                connection_duration_ms: 0,
                tool_count: 0,
            },
            EventType::McpConnectionFailed => K::McpConnectionFailed {
                server_name: text(),
                server_url: text(),
                transport_type: text(),
                agent_role: None,
                task_name: None,
                error: text(),
            },
            EventType::McpToolExecutionStarted => K::McpToolExecutionStarted {
                server_name: text(),
                tool_name: text(),
                tool_args: Value::Null,
                agent_role: None,
                task_name: None,
            },
            EventType::McpToolExecutionCompleted => K::McpToolExecutionCompleted {
                server_name: text(),
                tool_name: text(),
                tool_args: Value::Null,
                agent_role: None,
                task_name: None,
                result: text(),
                execution_duration_ms: 0,
            },
            EventType::McpToolExecutionFailed => K::McpToolExecutionFailed {
                server_name: text(),
                tool_name: text(),
                tool_args: Value::Null,
                agent_role: None,
                task_name: None,
                error: text(),
            },
            EventType::CodeExecutionStarted => K::CodeExecutionStarted {
                backend: text(),
                code_sha256: text(),
                libraries_used: Vec::new(),
                agent_role: None,
                task_name: None,
            },
            EventType::CodeExecutionCompleted => K::CodeExecutionCompleted {
                backend: text(),
                code_sha256: text(),
                exit_code: None,
                stopped: None,
                limit_hit: None,
                duration_ms: 0,
                artifacts: Vec::new(),
                agent_role: None,
                task_name: None,
            },
            EventType::CodeExecutionFailed => K::CodeExecutionFailed {
                backend: text(),
                code_sha256: text(),
                agent_role: None,
                task_name: None,
                error: text(),
            },
            EventType::A2aDelegationStarted => K::A2aDelegationStarted {
                endpoint: text(),
                a2a_agent_name: text(),
                message: text(),
                agent_role: None,
                task_name: None,
            },
            EventType::A2aDelegationCompleted => K::A2aDelegationCompleted {
                endpoint: text(),
                a2a_agent_name: text(),
                context_id: None,
                state: text(),
                result: text(),
                turn_number: 0,
                agent_role: None,
                task_name: None,
                duration_ms: 0,
            },
            EventType::A2aDelegationFailed => K::A2aDelegationFailed {
                endpoint: text(),
                a2a_agent_name: None,
                turn_number: 0,
                agent_role: None,
                task_name: None,
                error: text(),
            },
            EventType::LlmGuardrailStarted => K::LlmGuardrailStarted {
                guardrail: text(),
                retry_count: 0,
                agent_role: None,
                task_name: None,
            },
            EventType::LlmGuardrailCompleted => K::LlmGuardrailCompleted {
                success: false,
                result: None,
                error: None,
                retry_count: 0,
                agent_role: None,
                task_name: None,
            },
            EventType::AgentDelegationStarted => K::AgentDelegationStarted {
                from_agent: text(),
                to_agent: text(),
                kind: text(),
                task: text(),
            },
            EventType::AgentDelegationCompleted => K::AgentDelegationCompleted {
                from_agent: text(),
                to_agent: text(),
                kind: text(),
                output: text(),
            },
            EventType::FlowStarted => K::FlowStarted {
                flow_name: text(),
                inputs: None,
            },
            EventType::FlowFinished => K::FlowFinished {
                flow_name: text(),
                result: None,
            },
            EventType::MethodExecutionStarted => K::MethodExecutionStarted {
                flow_name: text(),
                method_name: text(),
            },
            EventType::MethodExecutionFinished => K::MethodExecutionFinished {
                flow_name: text(),
                method_name: text(),
                result: None,
            },
            EventType::MethodExecutionFailed => K::MethodExecutionFailed {
                flow_name: text(),
                method_name: text(),
                error: text(),
            },
            EventType::PanicCaught => K::PanicCaught {
                site: PanicSite::Tool,
                name: text(),
                message: text(),
                agent_role: None,
                task_name: None,
            },
        }
    }
}
