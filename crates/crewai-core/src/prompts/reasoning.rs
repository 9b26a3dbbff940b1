//! What an agent that plans (`planning_config`) is told at each phase: making and refining its
//! plan, carrying out one step, judging the results, replanning, and writing the answer. The
//! wording is our own; the function names and fields are CrewAI's.

use crate::reasoning::PlanStep;

/// The line a planner writing prose ends with when its plan is ready.
pub const READY_MARK: &str = "READY: the plan is complete.";

pub const PLAN_FUNCTION_DESCRIPTION: &str = "Record the plan for the task: the approach, the \
numbered steps (each with the tool it needs and the earlier steps it depends on) and whether the \
plan is ready to carry out.";

pub const OBSERVE_FUNCTION_DESCRIPTION: &str = "Record your judgement of the step results so far: \
whether the task's goal is reached, whether the latest result is already the final answer, and \
whether the remaining steps must change.";

/// Whether prose from a planner says its plan is ready.
pub fn says_ready(text: &str) -> bool {
    text.lines()
        .any(|line| line.trim_start().to_ascii_uppercase().starts_with("READY"))
}

/// The planner's system prompt: the agent's identity, planning.
pub fn planner_system(role: &str, goal: &str, backstory: &str) -> String {
    format!(
        "You are {role}. {backstory}\nYour personal goal is: {goal}\n\n\
         Before doing a task you plan it. A good plan has few steps, each small enough to do in \
         one go and producing something the later steps or the answer use. Steps that do not \
         need each other's results do not depend on each other, so they can run at the same \
         time."
    )
}

/// The tools a plan may use, one per line.
pub fn tool_lines(tools: &[(String, String)]) -> String {
    if tools.is_empty() {
        return "(no tools: every step is done by thinking and writing)".to_string();
    }
    tools
        .iter()
        .map(|(name, description)| format!("- {name}: {description}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The request for a plan, or the user's `plan_prompt` with its placeholders filled in.
pub fn plan_request(custom: Option<&str>, task: &str, tools: &str, max_steps: usize) -> String {
    match custom {
        Some(template) => template
            .replace("{task}", task)
            .replace("{tools}", tools)
            .replace("{max_steps}", &max_steps.to_string()),
        None => format!(
            "Plan this task before doing it.\n\n# Task\n{task}\n\n# Tools you can use\n{tools}\n\n\
             Call {function} with your approach, at most {max_steps} numbered steps from 1, and \
             ready set to true when the plan is good enough to carry out. If you cannot call \
             it, write the plan as text and end it with the line \"{READY_MARK}\" once it is \
             ready.",
            function = crate::reasoning::PLAN_FUNCTION,
        ),
    }
}

/// The request to improve a plan the planner did not call ready.
pub fn refine_request(custom: Option<&str>, plan: &str) -> String {
    match custom {
        Some(template) => template.replace("{plan}", plan),
        None => format!(
            "You said this plan is not ready yet:\n{plan}\n\nImprove it: fill the gaps, merge \
             steps that are too small, split steps that are too big. Call {function} again with \
             the whole improved plan.",
            function = crate::reasoning::PLAN_FUNCTION,
        ),
    }
}

/// One result of an earlier step, as later prompts quote it.
pub struct StepResult<'a> {
    pub number: u32,
    pub description: &'a str,
    /// The result, or why the step failed.
    pub outcome: Result<&'a str, &'a str>,
}

fn results_block(results: &[StepResult<'_>]) -> String {
    results
        .iter()
        .map(|result| match result.outcome {
            Ok(text) => format!("## Step {} — {}\n{text}", result.number, result.description),
            Err(error) => format!(
                "## Step {} — {}\n(failed: {error})",
                result.number, result.description
            ),
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The task text one step's execution gets.
pub fn step_task(task: &str, plan: &str, step: &PlanStep, inputs: &[StepResult<'_>]) -> String {
    let mut text = format!(
        "You are carrying out one step of a plan for a larger task.\n\n# The larger task\n{task}\n\n\
         # The plan\n{plan}\n\n# Your step (step {number})\n{description}",
        number = step.step_number,
        description = step.description,
    );
    if let Some(tool) = &step.tool_to_use {
        text.push_str(&format!("\nThe plan suggests the tool {tool} for it."));
    }
    if !inputs.is_empty() {
        text.push_str("\n\n# Results of the steps it builds on\n");
        text.push_str(&results_block(inputs));
    }
    text.push_str(
        "\n\nDo only this step. Your final answer is the step's result, complete enough for \
         the steps after it to use without redoing your work.",
    );
    text
}

/// The request to judge the results so far.
pub fn observe_request(
    task: &str,
    plan: &str,
    remaining: &[String],
    results: &[StepResult<'_>],
) -> String {
    let remaining = match remaining.is_empty() {
        true => "(none)".to_string(),
        false => remaining.join("\n"),
    };
    format!(
        "# Task\n{task}\n\n# Plan\n{plan}\n\n# Results so far\n{results}\n\n# Steps not yet run\n\
         {remaining}\n\nJudge where the work stands and call {function}.",
        results = results_block(results),
        function = crate::reasoning::OBSERVE_FUNCTION,
    )
}

/// The request for a new plan for the rest of the work.
pub fn replan_request(
    task: &str,
    results: &[StepResult<'_>],
    reason: &str,
    first_number: u32,
    max_steps: usize,
) -> String {
    format!(
        "The plan for this task has to change.\n\n# Task\n{task}\n\n# Done so far\n{results}\n\n\
         # Why the plan changes\n{reason}\n\nCall {function} with the steps still to do, at most \
         {max_steps}, numbered from {first_number}. A step may depend on the steps done so far \
         by their numbers.",
        results = results_block(results),
        function = crate::reasoning::PLAN_FUNCTION,
    )
}

/// The request for the final answer from the step results.
pub fn synthesis_request(task: &str, results: &[StepResult<'_>]) -> String {
    format!(
        "{task}\n\nYou planned this task and carried out the plan. These are the steps' \
         results:\n\n{results}\n\nWrite the final answer to the task from them, complete and in \
         the form the task expects.",
        results = results_block(results),
    )
}
