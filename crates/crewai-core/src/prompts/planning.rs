//! What the crew's planner (`planning: true`) is told: who it is, the summary of every task it
//! plans for, and how a plan joins its task's description.
//!
//! The summary's field names (`task_description`, `agent_goal`, ...) are CrewAI's, as the
//! planner's structured answer refers to tasks by the numbers the summary gives them; the
//! wording around them is our own.

/// The planner agent's role.
pub const PLANNER_ROLE: &str = "Task Execution Planner";
/// The planner agent's goal.
pub const PLANNER_GOAL: &str = "Work out, for every task of the crew, a concrete step-by-step plan that \
the assigned agent can follow with the tools it has, so each task is done as well as it can be.";
/// The planner agent's backstory.
pub const PLANNER_BACKSTORY: &str = "You plan the work of a crew of AI agents before they start. \
You read what each task asks for and what each agent can use, and you turn that into steps.";

/// What the planner sees about one task (its number is 1-based).
pub struct TaskSummary<'a> {
    pub number: usize,
    pub description: &'a str,
    pub expected_output: &'a str,
    /// The assigned agent's role and goal (`None` in a hierarchical crew's unassigned task).
    pub agent: Option<(&'a str, &'a str)>,
    pub task_tools: Vec<&'a str>,
    pub agent_tools: Vec<&'a str>,
}

fn tool_list(tools: &[&str]) -> String {
    format!("[{}]", tools.join(", "))
}

/// One task's block in the planner's prompt.
pub fn task_summary(task: &TaskSummary<'_>) -> String {
    let (role, goal) = task.agent.unwrap_or(("None", "None"));
    let agent_tools = match task.agent_tools.is_empty() {
        true => "\"the agent has no tools\"".to_string(),
        false => tool_list(&task.agent_tools),
    };
    format!(
        "Task Number {number} - {description}\n\
         \"task_description\": {description}\n\
         \"task_expected_output\": {expected}\n\
         \"agent\": {role}\n\
         \"agent_goal\": {goal}\n\
         \"task_tools\": {task_tools}\n\
         \"agent_tools\": {agent_tools}",
        number = task.number,
        description = task.description,
        expected = task.expected_output,
        task_tools = tool_list(&task.task_tools),
    )
}

/// The planner's task description: every task's summary, then what to produce.
pub fn planner_task(summaries: &[String]) -> String {
    format!(
        "Here is every task of the crew, in the order they run:\n\n{}\n\n\
         Write one plan per task: the steps its agent should take, which of its tools to use at \
         each step, and what to check before answering, so the result meets the expected output. \
         Refer to each task by its task number.",
        summaries.join("\n\n")
    )
}

/// The planner's expected output.
pub const PLANNER_EXPECTED_OUTPUT: &str = "For every task, its number, its name and a step-by-step plan its agent can follow with the tools it has.";

/// A task's description with its plan after it.
pub fn description_with_plan(description: &str, plan: &str) -> String {
    format!("{description}\n\n{plan}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_names_every_field_and_says_when_the_agent_has_no_tools() {
        let summary = task_summary(&TaskSummary {
            number: 2,
            description: "Write the report",
            expected_output: "A page",
            agent: Some(("Writer", "Write well")),
            task_tools: vec!["file_read"],
            agent_tools: Vec::new(),
        });
        assert!(summary.starts_with("Task Number 2 - Write the report\n"));
        for line in [
            "\"task_description\": Write the report",
            "\"task_expected_output\": A page",
            "\"agent\": Writer",
            "\"agent_goal\": Write well",
            "\"task_tools\": [file_read]",
            "\"agent_tools\": \"the agent has no tools\"",
        ] {
            assert!(summary.contains(line), "{line} missing from {summary}");
        }
        assert_eq!(
            description_with_plan("Do it.", "1. Start."),
            "Do it.\n\n1. Start."
        );
    }
}
