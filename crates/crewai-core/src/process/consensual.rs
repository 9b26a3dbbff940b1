//! The consensual process: one task worked by a panel of voters (see [`crate::consensus`] for
//! the rules). Every answer and revision is one attempt on the ordinary task path
//! ([`TaskRun::attempt`]: the agent's tools, structured output, the run's layers), every vote
//! and the judge's decision one structured answer ([`StructuredTask`]); the decided answer then
//! goes through the rest of the task path ([`TaskRun::finish`]: human feedback, guardrails,
//! callbacks, the output file) with its author as the task's agent.

use std::future::Future;
use std::time::Duration;

use crewai_tools::ToolHandle;
use futures::future::try_join_all;
use uuid::Uuid;

use crate::agent::{Agent, AgentTaskResult};
use crate::consensus::{
    ConsensusAnswer, ConsensusError, ConsensusOutcome, ConsensusRecord, ConsensusRound,
    ConsensusVote, DecisionMethod, JudgementReply, MERGE_PICK, VoteReply, answer_label,
    judgement_schema, tally, vote_schema,
};
use crate::converter::OutputSchema;
use crate::error::AgentError;
use crate::events::EventKind;
use crate::output::TaskOutput;
use crate::prompts::agent::task_prompt;
use crate::prompts::consensus::{self as prompts, LabelledAnswer};
use crate::prompts::crew::{join_context, structured_output_instructions};
use crate::structured_task::StructuredTask;
use crate::task::{Task, TaskError};

use super::{RunContext, TaskRun};

/// One voter: an agent with the tools it works the task with.
#[derive(Clone)]
pub struct Voter {
    pub agent: Agent,
    pub tools: Vec<ToolHandle>,
}

/// Who works one task of a consensual crew.
#[derive(Clone)]
pub struct Panel {
    /// In label order (the first wrote Answer A); at least two.
    pub voters: Vec<Voter>,
    pub revisions: u32,
    /// The judge of a crew that decides by a judge; `None`: the voters vote.
    pub judge: Option<Agent>,
    /// The position of the task's own agent among the voters: it wins a tied vote.
    pub preferred: Option<usize>,
}

/// Runs one task with `panel`: emits `task_started`, the rounds and the decision under it,
/// then `task_completed` (naming the role that wrote the answer) or `task_failed`.
pub async fn execute_consensual_task(
    run: &RunContext,
    task: &Task,
    panel: &Panel,
    context: Option<String>,
    parent: Option<Uuid>,
) -> Result<TaskOutput, TaskError> {
    let events = &run.services.events;
    let started = events.emit(
        parent,
        EventKind::TaskStarted {
            task_name: task.name().map(str::to_string),
            task_id: Some(task.id().to_string()),
            agent_role: None,
            context: context.clone(),
        },
    );
    let consensus = Consensus {
        run,
        task,
        panel,
        started,
        labels: (0..panel.voters.len()).map(answer_label).collect(),
    };
    let result = consensus.steps(context).await;
    let kind = match &result {
        Ok(output) => EventKind::TaskCompleted {
            task_name: task.name().map(str::to_string),
            task_id: Some(task.id().to_string()),
            agent_role: Some(output.agent.clone()),
            output: output.raw.clone(),
        },
        Err(error) => EventKind::TaskFailed {
            task_name: task.name().map(str::to_string),
            task_id: Some(task.id().to_string()),
            agent_role: None,
            error: crewai_llm::error_chain(error),
        },
    };
    events.emit(Some(started), kind);
    result
}

/// One consensual task's run: what its rounds and its decision share.
struct Consensus<'a> {
    run: &'a RunContext,
    task: &'a Task,
    panel: &'a Panel,
    /// The task's `task_started` event.
    started: Uuid,
    /// `A`, `B`, ...: one per voter.
    labels: Vec<String>,
}

/// What the decision settled on, before the rest of the task path.
struct Decision {
    output: TaskOutput,
    votes: Vec<ConsensusVote>,
    tally: std::collections::BTreeMap<String, u32>,
    outcome: ConsensusOutcome,
    reason: String,
    /// Who finishes the task (a guardrail's or a human's retry): the answer's author.
    author: Agent,
    tools: Vec<ToolHandle>,
}

impl Consensus<'_> {
    async fn steps(&self, context: Option<String>) -> Result<TaskOutput, TaskError> {
        let voters = &self.panel.voters;
        let mut answers = self
            .round(0, vec![context.clone(); voters.len()], None)
            .await?;
        let mut rounds = vec![self.record_round(0, &answers, None)];
        for round in 1..=self.panel.revisions {
            let contexts = (0..voters.len())
                .map(|i| {
                    let others = self.others(&answers, i);
                    let review = prompts::revision_context(&answers[i].raw, &others);
                    Some(match &context {
                        Some(base) => join_context([base.as_str(), review.as_str()]),
                        None => review,
                    })
                })
                .collect();
            let revised = self.round(round, contexts, Some(&answers)).await?;
            rounds.push(self.record_round(round, &revised, Some(&answers)));
            answers = revised;
        }

        let method = match self.panel.judge {
            Some(_) => DecisionMethod::Judge,
            None => DecisionMethod::Vote,
        };
        let events = &self.run.services.events;
        let deciding = events.emit(
            Some(self.started),
            EventKind::ConsensusDecisionStarted {
                task_name: self.task.name().map(str::to_string),
                method: method.as_str().to_string(),
            },
        );
        let decision = match &self.panel.judge {
            Some(judge) => self.judge(judge, answers, deciding).await?,
            None => self.vote(answers, deciding).await?,
        };
        events.emit(
            Some(deciding),
            EventKind::ConsensusDecided {
                task_name: self.task.name().map(str::to_string),
                method: method.as_str().to_string(),
                outcome: decision.outcome.describe(),
                agent_role: Some(decision.author.role().to_string()),
                tally: decision.tally.clone(),
                reason: decision.reason.clone(),
            },
        );
        let record = ConsensusRecord {
            method,
            voters: voters.iter().map(|v| v.agent.role().to_string()).collect(),
            rounds,
            votes: decision.votes,
            tally: decision.tally,
            outcome: decision.outcome,
            reason: decision.reason,
        };
        let mut output = decision.output;
        output.consensus = Some(record.clone());
        let finisher = TaskRun {
            run: self.run,
            task: self.task,
            agent: &decision.author,
            tools: decision.tools,
            started: self.started,
            consensus: Some(&record),
        };
        finisher.finish(output, context).await
    }

    /// Every voter answers once (concurrently), each with its own context; the first failure
    /// fails the task.
    async fn round(
        &self,
        round: u32,
        contexts: Vec<Option<String>>,
        before: Option<&[TaskOutput]>,
    ) -> Result<Vec<TaskOutput>, TaskError> {
        let events = &self.run.services.events;
        let task_name = self.task.name().map(str::to_string);
        let started = events.emit(
            Some(self.started),
            EventKind::ConsensusRoundStarted {
                task_name: task_name.clone(),
                round,
                voters: self
                    .panel
                    .voters
                    .iter()
                    .map(|v| v.agent.role().to_string())
                    .collect(),
            },
        );
        let answers = try_join_all(
            self.panel
                .voters
                .iter()
                .zip(contexts)
                .map(|(voter, context)| self.answer(voter, context, started)),
        )
        .await?;
        events.emit(
            Some(started),
            EventKind::ConsensusRoundCompleted {
                task_name,
                round,
                answers: answers.len(),
                revised: self
                    .record_round(round, &answers, before)
                    .answers
                    .iter()
                    .filter(|a| a.revised)
                    .count(),
            },
        );
        Ok(answers)
    }

    /// One voter's answer on the ordinary task path, within its deadline.
    async fn answer(
        &self,
        voter: &Voter,
        context: Option<String>,
        parent: Uuid,
    ) -> Result<TaskOutput, TaskError> {
        let task_run = TaskRun {
            run: self.run,
            task: self.task,
            agent: &voter.agent,
            tools: voter.tools.clone(),
            started: parent,
            consensus: None,
        };
        let limit = self.run.deadline_for(&voter.agent);
        within(limit, task_run.attempt(context), |after| {
            self.timeout(&voter.agent, after)
        })
        .await
    }

    /// Each voter votes for the best answer other than its own (concurrently).
    async fn vote(&self, answers: Vec<TaskOutput>, parent: Uuid) -> Result<Decision, TaskError> {
        let voters = &self.panel.voters;
        let votes = try_join_all(voters.iter().enumerate().map(|(i, voter)| {
            let answers = &answers;
            async move {
                let allowed: Vec<String> = (0..voters.len())
                    .filter(|j| *j != i)
                    .map(|j| self.labels[j].clone())
                    .collect();
                let schema = vote_schema(&allowed);
                let ballot = prompts::vote_task(
                    self.task.description(),
                    self.task.expected_output(),
                    &answers[i].raw,
                    &self.others(answers, i),
                );
                let prompt = structured_prompt(&ballot, prompts::VOTE_EXPECTED_OUTPUT, &schema);
                let value = self.ask(&voter.agent, prompt, &schema, parent).await?;
                let reply: VoteReply = serde_json::from_value(value).map_err(|source| {
                    self.failed(ConsensusError::NotAVote {
                        voter: voter.agent.role().to_string(),
                        source,
                    })
                })?;
                let vote = reply.vote.trim().to_string();
                if !allowed.contains(&vote) {
                    return Err(self.failed(ConsensusError::BadVote {
                        voter: voter.agent.role().to_string(),
                        vote,
                        allowed: allowed.join(", "),
                    }));
                }
                Ok(ConsensusVote {
                    voter: voter.agent.role().to_string(),
                    voter_label: self.labels[i].clone(),
                    vote,
                    reason: reply.reason,
                })
            }
        }))
        .await?;
        let (winner, counts, tie_broken) = tally(&self.labels, &votes, self.panel.preferred);
        let label = self.labels[winner].clone();
        let reason = prompts::vote_reason(
            &label,
            counts.get(&label).copied().unwrap_or(0),
            votes.len(),
            tie_broken,
        );
        let voter = &voters[winner];
        let output = answers.into_iter().nth(winner).unwrap_or_default();
        Ok(Decision {
            output,
            votes,
            tally: counts,
            outcome: ConsensusOutcome::Chosen {
                label,
                agent: voter.agent.role().to_string(),
                tie_broken,
            },
            reason,
            author: voter.agent.clone(),
            tools: voter.tools.clone(),
        })
    }

    /// The judge picks one answer or merges them.
    async fn judge(
        &self,
        judge: &Agent,
        answers: Vec<TaskOutput>,
        parent: Uuid,
    ) -> Result<Decision, TaskError> {
        let schema = judgement_schema(&self.labels);
        let all: Vec<LabelledAnswer<'_>> = self
            .labels
            .iter()
            .zip(&answers)
            .map(|(label, answer)| LabelledAnswer {
                label,
                text: &answer.raw,
            })
            .collect();
        let brief = prompts::judge_task(self.task.description(), self.task.expected_output(), &all);
        let prompt = structured_prompt(&brief, prompts::JUDGE_EXPECTED_OUTPUT, &schema);
        let value = self.ask(judge, prompt, &schema, parent).await?;
        let reply: JudgementReply = serde_json::from_value(value)
            .map_err(|source| self.failed(ConsensusError::NotAJudgement(source)))?;
        let pick = reply.pick.trim();
        if pick == MERGE_PICK {
            if reply.merged_answer.trim().is_empty() {
                return Err(self.failed(ConsensusError::EmptyMerge));
            }
            // The merged text is the judge's answer to the task: shaped as any answer is.
            let shaper = TaskRun {
                run: self.run,
                task: self.task,
                agent: judge,
                tools: Vec::new(),
                started: parent,
                consensus: None,
            };
            let output = shaper
                .shape(AgentTaskResult {
                    raw: reply.merged_answer.trim().to_string(),
                    ..Default::default()
                })
                .await?;
            return Ok(Decision {
                output,
                votes: Vec::new(),
                tally: Default::default(),
                outcome: ConsensusOutcome::Merged {
                    by: judge.role().to_string(),
                },
                reason: reply.reason,
                author: judge.clone(),
                tools: Vec::new(),
            });
        }
        let Some(winner) = self.labels.iter().position(|l| l == pick) else {
            return Err(self.failed(ConsensusError::BadPick {
                pick: pick.to_string(),
                allowed: self.labels.join(", "),
            }));
        };
        let voter = &self.panel.voters[winner];
        Ok(Decision {
            output: answers.into_iter().nth(winner).unwrap_or_default(),
            votes: Vec::new(),
            tally: Default::default(),
            outcome: ConsensusOutcome::Chosen {
                label: self.labels[winner].clone(),
                agent: voter.agent.role().to_string(),
                tie_broken: false,
            },
            reason: reply.reason,
            author: voter.agent.clone(),
            tools: voter.tools.clone(),
        })
    }

    /// A structured answer from `agent` (a voter's ballot, the judge's decision), counted
    /// toward the task and within the agent's deadline.
    async fn ask(
        &self,
        agent: &Agent,
        prompt: String,
        schema: &OutputSchema,
        parent: Uuid,
    ) -> Result<serde_json::Value, TaskError> {
        let ask = async {
            StructuredTask {
                agent,
                prompt,
                schema,
                task_name: self.task.name().map(str::to_string),
                parent: Some(parent),
            }
            .run(&self.run.services)
            .await
            .map_err(|source| self.agent_failed(source))
        };
        within(self.run.deadline_for(agent), ask, |after| {
            self.timeout(agent, after)
        })
        .await
    }

    /// The answers other than the `own`-th, by label.
    fn others<'b>(&'b self, answers: &'b [TaskOutput], own: usize) -> Vec<LabelledAnswer<'b>> {
        self.labels
            .iter()
            .zip(answers)
            .enumerate()
            .filter(|(i, _)| *i != own)
            .map(|(_, (label, answer))| LabelledAnswer {
                label,
                text: &answer.raw,
            })
            .collect()
    }

    /// A round's answers for the record; `before` is the previous round's, to mark revisions.
    fn record_round(
        &self,
        round: u32,
        answers: &[TaskOutput],
        before: Option<&[TaskOutput]>,
    ) -> ConsensusRound {
        ConsensusRound {
            round,
            answers: answers
                .iter()
                .enumerate()
                .map(|(i, answer)| ConsensusAnswer {
                    label: self.labels[i].clone(),
                    agent: answer.agent.clone(),
                    raw: answer.raw.clone(),
                    revised: before
                        .and_then(|b| b.get(i))
                        .is_some_and(|b| b.raw.trim() != answer.raw.trim()),
                })
                .collect(),
        }
    }

    fn failed(&self, source: ConsensusError) -> TaskError {
        TaskError::Consensus {
            task: self.task.key(),
            source: Box::new(source),
        }
    }

    fn agent_failed(&self, source: AgentError) -> TaskError {
        TaskError::Agent {
            task: self.task.key(),
            source: Box::new(source),
        }
    }

    fn timeout(&self, agent: &Agent, after: Duration) -> TaskError {
        TaskError::Timeout {
            task: self.task.key(),
            agent: agent.role().to_string(),
            after,
        }
    }
}

/// A ballot's or the judge's task prompt, with the schema it answers in.
fn structured_prompt(description: &str, expected_output: &str, schema: &OutputSchema) -> String {
    let mut prompt = task_prompt(description, expected_output);
    prompt.push('\n');
    prompt.push_str(&structured_output_instructions(&schema.pretty()));
    prompt
}

/// `work` within `limit`, if there is one.
async fn within<T>(
    limit: Option<Duration>,
    work: impl Future<Output = Result<T, TaskError>>,
    timed_out: impl FnOnce(Duration) -> TaskError,
) -> Result<T, TaskError> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, work)
            .await
            .unwrap_or_else(|_| Err(timed_out(limit))),
        None => work.await,
    }
}
