//! What the judges of `Crew::test` and `Crew::train` are told: the task evaluator that scores one
//! task's output, and the training evaluator that turns an agent's feedback into instructions.
//! Also how trained instructions join an agent's prompt. The wording is our own.

/// The test judge's role.
pub const TEST_EVALUATOR_ROLE: &str = "Task Execution Evaluator";
/// The test judge's goal.
pub const TEST_EVALUATOR_GOAL: &str =
    "Score how well a task's output does what the task asked, from 1 (useless) to 10 (perfect).";
/// The test judge's backstory.
pub const TEST_EVALUATOR_BACKSTORY: &str = "You review the work of AI agents. You compare what \
was delivered with what was asked and expected, and you score it fairly and consistently.";

/// The test judge's task for one output.
pub fn test_evaluation_task(description: &str, expected_output: &str, output: &str) -> String {
    format!(
        "Score the output of this task.\n\n\
         Task:\n{description}\n\n\
         Expected output:\n{expected_output}\n\n\
         Output delivered:\n{output}\n\n\
         Give `quality` as a number from 1 to 10 (higher is better): how completely and how well the \
         output does what the task asked and matches the expected output."
    )
}

/// The test judge's expected output.
pub const TEST_EVALUATION_EXPECTED_OUTPUT: &str = "The output's quality score, from 1 to 10.";

/// The training evaluator's role.
pub const TRAINING_EVALUATOR_ROLE: &str = "Training Evaluator";
/// The training evaluator's goal.
pub const TRAINING_EVALUATOR_GOAL: &str = "Turn a person's feedback on an agent's answers into \
short instructions that make the agent's next answers right the first time.";
/// The training evaluator's backstory.
pub const TRAINING_EVALUATOR_BACKSTORY: &str = "You coach AI agents. You read what an agent \
answered, what a person said about it and how the agent improved, and you write down what it \
should always do.";

/// One training iteration as the training evaluator reads it.
pub struct TrainingIterationText<'a> {
    pub iteration: u32,
    pub task: &'a str,
    pub initial_output: &'a str,
    pub human_feedback: &'a str,
    pub improved_output: &'a str,
}

/// The training evaluator's task for one agent's iterations.
pub fn training_evaluation_task(role: &str, iterations: &[TrainingIterationText<'_>]) -> String {
    let blocks: Vec<String> = iterations
        .iter()
        .map(|it| {
            format!(
                "## Iteration {}\nTask: {}\n\nFirst answer:\n{}\n\nFeedback from the person:\n{}\n\nImproved answer:\n{}",
                it.iteration, it.task, it.initial_output, it.human_feedback, it.improved_output
            )
        })
        .collect();
    format!(
        "The agent '{role}' was trained on its tasks: it answered, a person gave feedback, and it \
         answered again.\n\n{}\n\n\
         From this, write `suggestions`: a list of short, concrete instructions the agent should \
         follow from now on so its first answer already takes the feedback into account. Give \
         `quality` from 0 to 10 for the agent's first answers, and a `final_summary` of what the \
         agent should do differently.",
        blocks.join("\n\n")
    )
}

/// The training evaluator's expected output.
pub const TRAINING_EVALUATION_EXPECTED_OUTPUT: &str =
    "Suggestions for the agent, a quality score from 0 to 10 and a summary.";

/// A trained agent's instructions, as they follow its task prompt.
pub fn trained_instructions(suggestions: &[String]) -> String {
    format!(
        "\n\nAlways follow these instructions:\n - {}",
        suggestions.join("\n - ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trained_instructions_are_a_bulleted_list_after_the_prompt() {
        assert_eq!(
            trained_instructions(&["Cite sources.".into(), "Be brief.".into()]),
            "\n\nAlways follow these instructions:\n - Cite sources.\n - Be brief."
        );
    }
}
