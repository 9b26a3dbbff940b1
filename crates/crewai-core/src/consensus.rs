//! The consensual process (`process: consensual`; CrewAI declares it and never implemented it,
//! so this design is crewai-rs's own): for each task several agents (the *voters*) answer
//! independently and at the same time, each then reads the others' answers, anonymised as
//! "Answer A", "Answer B", ... and may revise its own (once per configured revision round),
//! and finally a decision picks the task's answer:
//!
//! - [`ConsensusDecision::Vote`]: each voter votes, through a structured output, for the best
//!   answer other than its own; the answer with the most votes wins. A tie goes to the answer of
//!   the task's own agent when it is among the tied ones, else to the first tied answer (voter
//!   order). A vote needs at least three voters: with two, each can only vote for the other.
//! - [`ConsensusDecision::Judge`]: one judge call, through a structured output, picks one answer
//!   or writes a merged one, and says why.
//!
//! The task output's `raw` is the chosen (or merged) answer, made into the task's structured
//! output when it has one; guardrails, human feedback, callbacks and `output_file` apply to it
//! as to any task's answer (a retry asked by a guardrail or by human feedback is run by the
//! agent that wrote the answer, the judge for a merged one). The rounds, the votes and the
//! reason are in [`TaskOutput::consensus`](crate::output::TaskOutput::consensus) as a
//! [`ConsensusRecord`], and in the `consensus_*` events.
//!
//! Every call is an ordinary agent call under the run's layers (hooks, the budget, rate limits,
//! events and usage), so a task costs, in model calls, `voters × (1 + revisions)` answers plus
//! `voters` votes or one judge call (more when an answer needs tool calls or a conversion).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crewai_llm::Llm;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::converter::OutputSchema;

/// The most revision rounds a consensual crew may ask for (each costs one call per voter).
pub const MAX_REVISIONS: u32 = 5;
/// The title of the vote's schema: the `response_format` name a provider sees.
pub const VOTE_SCHEMA_NAME: &str = "ConsensusVote";
/// The title of the judge's schema: the `response_format` name a provider sees.
pub const JUDGEMENT_SCHEMA_NAME: &str = "ConsensusJudgement";
/// What the judge picks to write a merged answer instead of choosing one.
pub const MERGE_PICK: &str = "MERGE";

/// How a consensual crew decides between its voters' answers.
#[derive(Clone, Default)]
pub enum ConsensusDecision {
    /// Each voter votes for the best answer other than its own.
    #[default]
    Vote,
    /// One judge picks an answer or merges them. `llm` is the judge's model (`None`: the
    /// default model, as for an agent without `llm`).
    Judge { llm: Option<Arc<dyn Llm>> },
}

impl fmt::Debug for ConsensusDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConsensusDecision::Vote => f.write_str("Vote"),
            ConsensusDecision::Judge { llm } => f
                .debug_struct("Judge")
                .field("llm", &llm.as_ref().map(|l| l.model().to_string()))
                .finish(),
        }
    }
}

impl ConsensusDecision {
    pub fn method(&self) -> DecisionMethod {
        match self {
            ConsensusDecision::Vote => DecisionMethod::Vote,
            ConsensusDecision::Judge { .. } => DecisionMethod::Judge,
        }
    }
}

/// How a consensual crew works its tasks (see the [module docs](self)); give it with
/// [`CrewBuilder::consensus`](crate::crew::CrewBuilder::consensus).
///
/// ```
/// use crewai_core::consensus::{ConsensusConfig, ConsensusDecision};
/// let config = ConsensusConfig::new().voters(["Analyst", "Critic", "Editor"]).revisions(1);
/// assert_eq!(config.revision_rounds(), 1);
/// assert!(matches!(config.decision_kind(), ConsensusDecision::Vote));
/// ```
#[derive(Debug, Clone)]
pub struct ConsensusConfig {
    voters: Option<Vec<String>>,
    revisions: u32,
    decision: ConsensusDecision,
}

impl Default for ConsensusConfig {
    fn default() -> Self {
        ConsensusConfig {
            voters: None,
            revisions: 1,
            decision: ConsensusDecision::Vote,
        }
    }
}

impl ConsensusConfig {
    /// Every agent of the crew votes, one revision round, decided by a vote.
    pub fn new() -> Self {
        Self::default()
    }

    /// The voters, by role (as the agents are built, before `{placeholder}` interpolation), in
    /// the order their answers are labelled; default: every agent of the crew, in crew order.
    pub fn voters(mut self, roles: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.voters = Some(roles.into_iter().map(Into::into).collect());
        self
    }

    /// How many times each voter may revise its answer after reading the others' (default 1;
    /// 0: the independent answers go straight to the decision; at most [`MAX_REVISIONS`]).
    pub fn revisions(mut self, rounds: u32) -> Self {
        self.revisions = rounds;
        self
    }

    pub fn decision(mut self, decision: ConsensusDecision) -> Self {
        self.decision = decision;
        self
    }

    /// Decide by a judge on `llm` (`None`: the default model).
    pub fn judge(self, llm: Option<Arc<dyn Llm>>) -> Self {
        self.decision(ConsensusDecision::Judge { llm })
    }

    /// The voters' roles, if chosen.
    pub fn voter_roles(&self) -> Option<&[String]> {
        self.voters.as_deref()
    }
    pub fn revision_rounds(&self) -> u32 {
        self.revisions
    }
    pub fn decision_kind(&self) -> &ConsensusDecision {
        &self.decision
    }
}

/// Which decision a record's task was decided by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionMethod {
    Vote,
    Judge,
}

impl DecisionMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionMethod::Vote => "vote",
            DecisionMethod::Judge => "judge",
        }
    }
}

/// How a consensual task was decided: every round's answers, the votes, the outcome and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsensusRecord {
    pub method: DecisionMethod,
    /// The voters' roles; the `i`-th wrote the answer labelled [`answer_label`]`(i)`.
    pub voters: Vec<String>,
    /// Round 0 holds the independent answers, round `r` the answers after the `r`-th revision.
    pub rounds: Vec<ConsensusRound>,
    /// The votes, in voter order (empty for a judge).
    #[serde(default)]
    pub votes: Vec<ConsensusVote>,
    /// Votes per answer label (empty for a judge).
    #[serde(default)]
    pub tally: BTreeMap<String, u32>,
    pub outcome: ConsensusOutcome,
    /// The judge's reason, or how the vote went.
    pub reason: String,
}

impl ConsensusRecord {
    /// The answers the decision was made on (the last round's).
    pub fn final_answers(&self) -> &[ConsensusAnswer] {
        self.rounds.last().map_or(&[], |round| &round.answers)
    }
}

/// One round's answers, in voter order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsensusRound {
    pub round: u32,
    pub answers: Vec<ConsensusAnswer>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsensusAnswer {
    /// `A`, `B`, ...: what the other voters and the judge call it.
    pub label: String,
    /// The role of the voter who wrote it.
    pub agent: String,
    pub raw: String,
    /// Whether it differs from the same voter's answer of the round before (always `false` in
    /// round 0).
    #[serde(default)]
    pub revised: bool,
}

/// One voter's vote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsensusVote {
    pub voter: String,
    /// The label of the voter's own answer.
    pub voter_label: String,
    /// The label it voted for.
    pub vote: String,
    pub reason: String,
}

/// What the decision settled on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ConsensusOutcome {
    /// One voter's answer, as it was written.
    Chosen {
        label: String,
        agent: String,
        /// A vote that tied, settled by the tie rule (the task's agent, else the first answer).
        #[serde(default)]
        tie_broken: bool,
    },
    /// An answer the judge wrote from the voters' answers.
    Merged { by: String },
}

impl ConsensusOutcome {
    /// `Answer B`, or `merged`: for events and messages.
    pub fn describe(&self) -> String {
        match self {
            ConsensusOutcome::Chosen { label, .. } => format!("Answer {label}"),
            ConsensusOutcome::Merged { .. } => "merged".to_string(),
        }
    }
}

/// Why a consensus could not be reached from the answers (the model calls themselves fail with
/// the agent's error).
#[derive(Debug, thiserror::Error)]
pub enum ConsensusError {
    #[error("the vote of '{voter}' is not an object with `vote` and `reason`")]
    NotAVote {
        voter: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("'{voter}' voted for '{vote}', which is not one of the other answers ({allowed})")]
    BadVote {
        voter: String,
        vote: String,
        allowed: String,
    },
    #[error("the judge's answer is not an object with `pick`, `merged_answer` and `reason`")]
    NotAJudgement(#[source] serde_json::Error),
    #[error("the judge picked '{pick}', which is neither an answer ({allowed}) nor {MERGE_PICK}")]
    BadPick { pick: String, allowed: String },
    #[error("the judge chose to merge the answers but wrote no merged answer")]
    EmptyMerge,
}

/// The label of the `index`-th answer: `A` ... `Z`, then `A2` ... (a crew of more than 26
/// voters is unusual, but has labels).
pub fn answer_label(index: usize) -> String {
    // `index % 26` is below 26, so the byte is an ASCII capital.
    let letter = char::from(b'A' + (index % 26) as u8);
    match index / 26 {
        0 => letter.to_string(),
        n => format!("{letter}{}", n + 1),
    }
}

/// A voter's reply.
#[derive(Debug, Deserialize)]
pub(crate) struct VoteReply {
    pub(crate) vote: String,
    pub(crate) reason: String,
}

/// The judge's reply.
#[derive(Debug, Deserialize)]
pub(crate) struct JudgementReply {
    pub(crate) pick: String,
    pub(crate) merged_answer: String,
    pub(crate) reason: String,
}

/// The schema a voter answers in: `vote` is one of `allowed` (the others' labels).
pub(crate) fn vote_schema(allowed: &[String]) -> OutputSchema {
    OutputSchema::pydantic(json!({
        "title": VOTE_SCHEMA_NAME,
        "type": "object",
        "properties": {
            "vote": {
                "title": "Vote",
                "description": "The label of the best answer, which is not your own.",
                "type": "string",
                "enum": allowed,
            },
            "reason": {
                "title": "Reason",
                "description": "Why that answer is the best, in one or two sentences.",
                "type": "string"
            }
        },
        "required": ["vote", "reason"]
    }))
}

/// The schema the judge answers in: `pick` is one of `labels` or [`MERGE_PICK`].
pub(crate) fn judgement_schema(labels: &[String]) -> OutputSchema {
    let mut picks: Vec<Value> = labels.iter().map(|l| Value::String(l.clone())).collect();
    picks.push(Value::String(MERGE_PICK.to_string()));
    OutputSchema::pydantic(json!({
        "title": JUDGEMENT_SCHEMA_NAME,
        "type": "object",
        "properties": {
            "pick": {
                "title": "Pick",
                "description": format!("The label of the best answer, or {MERGE_PICK} to write one answer from the best parts of several."),
                "type": "string",
                "enum": picks,
            },
            "merged_answer": {
                "title": "Merged Answer",
                "description": format!("With {MERGE_PICK}: the complete merged answer. Otherwise an empty string."),
                "type": "string"
            },
            "reason": {
                "title": "Reason",
                "description": "Why this answer (or this merge) is the best.",
                "type": "string"
            }
        },
        "required": ["pick", "merged_answer", "reason"]
    }))
}

/// Who won a vote: the index of the answer with most votes, the tally by label, and whether a
/// tie was settled (by `preferred`, the task's agent's answer, when it is among the tied ones,
/// else by the first tied answer).
pub(crate) fn tally(
    labels: &[String],
    votes: &[ConsensusVote],
    preferred: Option<usize>,
) -> (usize, BTreeMap<String, u32>, bool) {
    let mut counts = vec![0u32; labels.len()];
    for vote in votes {
        if let Some(at) = labels.iter().position(|l| *l == vote.vote) {
            counts[at] += 1;
        }
    }
    let best = counts.iter().copied().max().unwrap_or(0);
    let tied: Vec<usize> = (0..labels.len()).filter(|i| counts[*i] == best).collect();
    let winner = match preferred {
        Some(p) if tied.contains(&p) => p,
        _ => tied.first().copied().unwrap_or(0),
    };
    let by_label = labels.iter().cloned().zip(counts).collect();
    (winner, by_label, tied.len() > 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(voter: &str, own: &str, vote: &str) -> ConsensusVote {
        ConsensusVote {
            voter: voter.into(),
            voter_label: own.into(),
            vote: vote.into(),
            reason: String::new(),
        }
    }

    fn labels(n: usize) -> Vec<String> {
        (0..n).map(answer_label).collect()
    }

    #[test]
    fn labels_are_letters_then_numbered() {
        assert_eq!(answer_label(0), "A");
        assert_eq!(answer_label(2), "C");
        assert_eq!(answer_label(25), "Z");
        assert_eq!(answer_label(26), "A2");
    }

    #[test]
    fn the_most_votes_win_and_ties_are_settled_deterministically() {
        let l = labels(3);
        let votes = [
            vote("x", "A", "B"),
            vote("y", "B", "C"),
            vote("z", "C", "B"),
        ];
        let (winner, counts, tie) = tally(&l, &votes, None);
        assert_eq!((winner, tie), (1, false));
        assert_eq!(counts["B"], 2);
        assert_eq!(counts["A"], 0);

        let split = [
            vote("x", "A", "B"),
            vote("y", "B", "C"),
            vote("z", "C", "A"),
        ];
        assert_eq!(tally(&l, &split, None), (0, counts_of(&[1, 1, 1]), true));
        assert_eq!(
            tally(&l, &split, Some(2)).0,
            2,
            "the task's agent wins a tie"
        );
        // The task's agent does not win when it is not among the tied.
        let two_way = [
            vote("x", "A", "B"),
            vote("y", "B", "A"),
            vote("z", "C", "A"),
        ];
        assert_eq!(
            tally(&l, &two_way, Some(2)),
            (0, counts_of(&[2, 1, 0]), false)
        );
    }

    fn counts_of(n: &[u32]) -> BTreeMap<String, u32> {
        labels(n.len()).into_iter().zip(n.iter().copied()).collect()
    }

    #[test]
    fn the_schemas_compile_and_hold_the_choices() {
        let schema = vote_schema(&["B".into(), "C".into()]);
        schema.check_schema().unwrap();
        schema
            .validate(&json!({"vote": "B", "reason": "r"}))
            .unwrap();
        assert!(
            schema
                .validate(&json!({"vote": "A", "reason": "r"}))
                .is_err()
        );
        assert_eq!(schema.response_format().name, VOTE_SCHEMA_NAME);

        let judge = judgement_schema(&labels(2));
        judge.check_schema().unwrap();
        judge
            .validate(&json!({"pick": "MERGE", "merged_answer": "m", "reason": "r"}))
            .unwrap();
        assert!(
            judge
                .validate(&json!({"pick": "C", "merged_answer": "", "reason": "r"}))
                .is_err()
        );
        assert_eq!(judge.response_format().name, JUDGEMENT_SCHEMA_NAME);
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let record = ConsensusRecord {
            method: DecisionMethod::Vote,
            voters: vec!["a".into(), "b".into(), "c".into()],
            rounds: vec![ConsensusRound {
                round: 0,
                answers: vec![ConsensusAnswer {
                    label: "A".into(),
                    agent: "a".into(),
                    raw: "x".into(),
                    revised: false,
                }],
            }],
            votes: vec![vote("a", "A", "B")],
            tally: counts_of(&[0, 1, 0]),
            outcome: ConsensusOutcome::Chosen {
                label: "B".into(),
                agent: "b".into(),
                tie_broken: false,
            },
            reason: "r".into(),
        };
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["outcome"]["kind"], "chosen");
        assert_eq!(json["method"], "vote");
        let back: ConsensusRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, record);
        assert_eq!(back.final_answers().len(), 1);
    }
}
