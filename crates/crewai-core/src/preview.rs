//! The text an agent is sent, rendered without running anything: for a dry run that shows a
//! kickoff's prompts, and for trying a model on exactly the messages the executor would send it.
//!
//! The text itself lives in the crate's prompt fragments, which the executor renders through the
//! same functions, so a preview never drifts from a run.
//!
//! ```
//! use crewai_core::preview::{self, TaskLoop};
//!
//! let system = preview::system_prompt("Researcher", "Find facts", "You check every claim.");
//! assert!(system.starts_with("You are Researcher."));
//! let task = preview::task_prompt("Two facts about bees", "Two bullets");
//! let message = preview::task_message(&task, TaskLoop::NoTools);
//! assert!(message.contains("Two facts about bees"));
//! ```

use crewai_llm::ToolDefinition;

use crate::prompts::{agent as prompts, crew as crew_prompts};

/// The loop an agent's run goes through, which decides how its task message ends and what it is
/// told after tool results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskLoop {
    /// Tools through the provider's tool-calling API.
    NativeTools,
    /// Tools through ReAct text (`Thought:` / `Action:` / `Action Input:`), for models without
    /// tool calling; the instructions go into the system prompt
    /// ([`react_instructions`]).
    React,
    /// No tools: the first reply is the answer.
    NoTools,
}

/// The role-playing system prompt of an agent with this role, goal and backstory (before any
/// date block or ReAct instructions).
pub fn system_prompt(role: &str, goal: &str, backstory: &str) -> String {
    prompts::role_playing(role, backstory, goal)
}

/// What a [`TaskLoop::React`] run appends to the system prompt: each tool with its argument
/// schema, then the reply format the ReAct parser ([`crate::react::parse`]) reads.
pub fn react_instructions(tools: &[ToolDefinition]) -> String {
    let entries: Vec<String> = tools
        .iter()
        .map(|tool| {
            let schema = serde_json::to_string_pretty(&tool.parameters)
                .unwrap_or_else(|_| tool.parameters.to_string());
            prompts::react_tool_entry(&tool.name, &schema, &tool.description)
        })
        .collect();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    prompts::react_instructions(&entries, &names)
}

/// The task prompt of a task with this description and expected output (what
/// [`Task::prompt`](crate::task::Task::prompt) renders for a task without Markdown or an output
/// schema).
pub fn task_prompt(description: &str, expected_output: &str) -> String {
    prompts::task_prompt(description, expected_output)
}

/// A task prompt with the earlier outputs it works from, as a crew hands it to the agent.
pub fn with_context(task_prompt: &str, context: &str) -> String {
    prompts::with_context(task_prompt, context)
}

/// Earlier tasks' outputs joined into one context, as a crew joins them.
pub fn join_context<'a>(outputs: impl IntoIterator<Item = &'a str>) -> String {
    crew_prompts::join_context(outputs)
}

/// The user message that carries `task_prompt` in a run through `task_loop`.
pub fn task_message(task_prompt: &str, task_loop: TaskLoop) -> String {
    match task_loop {
        TaskLoop::NativeTools => prompts::task_message_native(task_prompt),
        TaskLoop::React => prompts::task_message_react(task_prompt),
        TaskLoop::NoTools => prompts::task_message_no_tools(task_prompt),
    }
}

/// The user message that follows tool results in a run through `task_loop` (`None` for
/// [`TaskLoop::NoTools`], which has no tool results).
pub fn after_tool_results(task_loop: TaskLoop) -> Option<&'static str> {
    match task_loop {
        TaskLoop::NativeTools => Some(prompts::AFTER_TOOLS_NATIVE),
        TaskLoop::React => Some(prompts::AFTER_TOOL_REACT),
        TaskLoop::NoTools => None,
    }
}

/// The message a run is sent when it has used its last tool round (`max_iter`) and must answer.
pub fn forced_final_answer() -> &'static str {
    prompts::FORCED_FINAL_ANSWER
}

/// The system prompt of the call that condenses a conversation grown past the model's context
/// window (`respect_context_window`).
pub fn summarizer_system_prompt() -> &'static str {
    prompts::SUMMARIZER_SYSTEM
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_react_preview_names_every_tool_and_ends_on_thought() {
        let tool = ToolDefinition {
            name: "get_weather".into(),
            description: "Gives today's weather.".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
            strict: false,
        };
        let instructions = react_instructions(std::slice::from_ref(&tool));
        assert!(instructions.contains("Tool Name: get_weather"));
        assert!(instructions.contains("\"city\""));
        assert!(instructions.contains("[get_weather]"));
        let message = task_message(
            &task_prompt("Weather in Paris", "A sentence"),
            TaskLoop::React,
        );
        assert!(message.trim_end().ends_with("Thought:"), "{message}");
        assert_eq!(after_tool_results(TaskLoop::NoTools), None);
        assert_ne!(
            after_tool_results(TaskLoop::React),
            after_tool_results(TaskLoop::NativeTools)
        );
    }
}
