//! A consensual crew's side of [`crate::consensus`]: checking the configuration when the crew
//! is built (who votes, how many, whether a vote can decide), and the panel each task gets.

use crate::agent::Agent;
use crate::consensus::{ConsensusConfig, ConsensusDecision, MAX_REVISIONS};
use crate::process::consensual::{Panel, Voter};
use crate::prompts::consensus as prompts;
use crate::task::Task;

use super::kickoff::Prepared;

/// A checked consensus configuration.
#[derive(Clone)]
pub(super) struct ConsensusSetup {
    /// The voters, as positions in the crew's agents, in label order.
    voters: Vec<usize>,
    revisions: u32,
    /// The judge agent, when a judge decides.
    judge: Option<Agent>,
}

/// Checks `config` against the crew's agents and tasks; the message says what to change.
pub(super) fn setup(
    config: &ConsensusConfig,
    agents: &[Agent],
    tasks: &[Task],
) -> Result<ConsensusSetup, String> {
    let voters: Vec<usize> = match config.voter_roles() {
        None => (0..agents.len()).collect(),
        Some(roles) => {
            let mut chosen = Vec::with_capacity(roles.len());
            for role in roles {
                let at = agents
                    .iter()
                    .position(|a| a.role() == role)
                    .ok_or_else(|| {
                        format!(
                            "consensus voter '{role}' is not one of the crew's agents ({})",
                            roles_of(agents)
                        )
                    })?;
                if chosen.contains(&at) {
                    return Err(format!("consensus voter '{role}' is listed twice"));
                }
                chosen.push(at);
            }
            chosen
        }
    };
    if voters.len() < 2 {
        return Err(format!(
            "a consensual crew needs at least 2 voters, and it has {}: add agents (or list more of them as voters)",
            voters.len()
        ));
    }
    if matches!(config.decision_kind(), ConsensusDecision::Vote) && voters.len() < 3 {
        return Err(
            "deciding by `vote` needs at least 3 voters (with 2, each can only vote for the other's answer, so every vote is a tie); add a voter or decide by a judge"
                .into(),
        );
    }
    if config.revision_rounds() > MAX_REVISIONS {
        return Err(format!(
            "consensus `revisions` is {}, more than the {MAX_REVISIONS} allowed (each round costs one call per voter)",
            config.revision_rounds()
        ));
    }
    for &at in &voters {
        let agent = &agents[at];
        if agent.allow_delegation() {
            return Err(format!(
                "agent '{}' has allow_delegation: true, but the voters of a consensual crew answer on their own; set it to false",
                agent.role()
            ));
        }
    }
    for task in tasks {
        if let Some(agent) = task.agent()
            && !voters.iter().any(|&at| agents[at].id() == agent.id())
        {
            return Err(format!(
                "task '{}' is assigned to '{}', who is not a voter of this consensual crew; in a consensual crew every voter works every task (a task's agent only wins tied votes), so assign it to a voter or leave it unassigned",
                task.key(),
                agent.role()
            ));
        }
    }
    let judge = match config.decision_kind() {
        ConsensusDecision::Vote => None,
        ConsensusDecision::Judge { llm } => {
            let builder = Agent::builder()
                .role(prompts::JUDGE_ROLE)
                .goal(prompts::JUDGE_GOAL)
                .backstory(prompts::JUDGE_BACKSTORY);
            let built = match llm {
                Some(llm) => builder.llm(llm.clone()).build(),
                None => builder.build(),
            };
            Some(built.map_err(|e| format!("cannot set up the consensus judge: {e}"))?)
        }
    };
    Ok(ConsensusSetup {
        voters,
        revisions: config.revision_rounds(),
        judge,
    })
}

fn roles_of(agents: &[Agent]) -> String {
    agents
        .iter()
        .map(|a| format!("'{}'", a.role()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl ConsensusSetup {
    /// The judge, for the crew's checks (its model must be priced under a cost budget).
    pub(super) fn judge(&self) -> Option<&Agent> {
        self.judge.as_ref()
    }

    /// The voters of one kickoff, from its interpolated agents.
    pub(super) fn voters_of(&self, agents: &[Agent]) -> Vec<Agent> {
        self.voters
            .iter()
            .filter_map(|&at| agents.get(at).cloned())
            .collect()
    }

    /// The panel for `task`: each voter with the task's tools (else its own).
    pub(super) fn panel(&self, prepared: &Prepared, task: &Task) -> Panel {
        let voters: Vec<Voter> = prepared
            .voters
            .iter()
            .map(|agent| Voter {
                agent: agent.clone(),
                tools: if task.tools().is_empty() {
                    agent.tools().to_vec()
                } else {
                    task.tools().to_vec()
                },
            })
            .collect();
        let preferred = task
            .agent()
            .and_then(|own| voters.iter().position(|v| v.agent.id() == own.id()));
        Panel {
            voters,
            revisions: self.revisions,
            judge: self.judge.clone(),
            preferred,
        }
    }
}
