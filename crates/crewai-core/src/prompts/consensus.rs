//! What the voters and the judge of a consensual crew (`process: consensual`) are told: the
//! others' answers for a revision, the ballot, and the judge's brief. Answers are shown by
//! their labels ("Answer B"), never by the role that wrote them.

/// One answer as the others see it.
pub struct LabelledAnswer<'a> {
    pub label: &'a str,
    pub text: &'a str,
}

fn answer_blocks(answers: &[LabelledAnswer<'_>]) -> String {
    answers
        .iter()
        .map(|a| format!("### Answer {}\n{}", a.label, a.text.trim()))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Added to a voter's context for a revision round: its own latest answer and the others'.
pub fn revision_context(own: &str, others: &[LabelledAnswer<'_>]) -> String {
    format!(
        "You already answered this task, and other agents answered it on their own too. \
         Here is your answer:\n\n### Your answer\n{own}\n\n\
         Here are theirs, without their names:\n\n{others}\n\n\
         Read them carefully. Where they show that your answer is wrong, incomplete or unclear, \
         improve it; where yours is better, keep it. Do not mention the other answers or this \
         review: give your complete final answer to the task on its own.",
        own = own.trim(),
        others = answer_blocks(others),
    )
}

/// The ballot's task: the task itself, the voter's own answer and the others' to vote between.
pub fn vote_task(
    description: &str,
    expected_output: &str,
    own: &str,
    others: &[LabelledAnswer<'_>],
) -> String {
    format!(
        "Several agents answered the same task, you among them. Vote for the best answer that is \
         not yours.\n\n\
         ## The task\n{description}\n\nExpected output: {expected_output}\n\n\
         ## Your own answer (you may not vote for it)\n{own}\n\n\
         ## The answers you can vote for\n{others}\n\n\
         Judge them by how well they do the task and meet the expected output: correct, \
         complete and clear beats long.",
        description = description.trim(),
        expected_output = expected_output.trim(),
        own = own.trim(),
        others = answer_blocks(others),
    )
}

/// The ballot's expected output.
pub const VOTE_EXPECTED_OUTPUT: &str =
    "The label of the best answer other than yours, and the reason for your vote.";

/// The judge agent's role.
pub const JUDGE_ROLE: &str = "Consensus Judge";
/// The judge agent's goal.
pub const JUDGE_GOAL: &str = "Choose, from several independent answers to one task, the answer that does the task best, \
     or combine their strengths into one better answer.";
/// The judge agent's backstory.
pub const JUDGE_BACKSTORY: &str = "You review the work of a panel of AI agents who answered the \
same task on their own. You are fair to every answer, you check them against what the task asked \
for, and you explain your decision in plain words.";

/// The judge's task: the task itself and every answer.
pub fn judge_task(
    description: &str,
    expected_output: &str,
    answers: &[LabelledAnswer<'_>],
) -> String {
    format!(
        "Several agents answered the same task on their own. Decide which answer the task should \
         get.\n\n\
         ## The task\n{description}\n\nExpected output: {expected_output}\n\n\
         ## The answers\n{answers}\n\n\
         Pick the label of the best answer when one of them does the task well on its own. When \
         each has something the others miss, pick {merge} instead and write in `merged_answer` \
         one complete answer to the task that keeps the best of them (not a comparison, and \
         without mentioning the answers or their labels). Give your reason either way.",
        description = description.trim(),
        expected_output = expected_output.trim(),
        answers = answer_blocks(answers),
        merge = crate::consensus::MERGE_PICK,
    )
}

/// The judge's expected output.
pub const JUDGE_EXPECTED_OUTPUT: &str =
    "The label of the best answer or MERGE with the merged answer, and the reason.";

/// How a vote went, in the record's `reason`.
pub fn vote_reason(winner: &str, votes: u32, cast: usize, tie_broken: bool) -> String {
    let tie = if tie_broken {
        "; it was a tie, settled for the task's agent's answer, else the first tied answer"
    } else {
        ""
    };
    format!("Answer {winner} had {votes} of {cast} vote(s){tie}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_shown_by_label_only() {
        let others = [
            LabelledAnswer {
                label: "B",
                text: " Bees dance. ",
            },
            LabelledAnswer {
                label: "C",
                text: "Bees hum.",
            },
        ];
        let text = revision_context("Bees sting.", &others);
        assert!(text.contains("### Your answer\nBees sting."));
        assert!(text.contains("### Answer B\nBees dance.\n\n### Answer C\nBees hum."));
        let ballot = vote_task("Say a fact", "A line", "Bees sting.", &others);
        assert!(ballot.contains("## Your own answer (you may not vote for it)\nBees sting."));
        assert!(ballot.contains("### Answer C\nBees hum."));
        assert!(judge_task("Say a fact", "A line", &others).contains("pick MERGE"));
    }
}
