//! The crew's `consensus:` mapping (`process: consensual`; see `crewai_core::consensus`):
//!
//! ```yaml
//! process: consensual
//! consensus:
//!   voters: [analyst, critic, editor]   # agent keys; default: every agent of the crew
//!   revisions: 1                        # revision rounds after the first answers (0-5)
//!   decision: judge                     # vote (default) or judge
//!   judge_llm: openai/gpt-4o            # the judge's model (judge only); default: the default model
//! ```
//!
//! Every key is read, checked and reported at its own line; a key the engine would not use
//! (`judge_llm` with `decision: vote`, `consensus:` without `process: consensual`) is an error.

use crewai_llm::LlmConfig;
use serde_json::Value;

use crate::error::{Diagnostic, did_you_mean};
use crate::load::Loaded;
use crate::spec::{Origin, ProcessSpec, describe, type_error};

/// The keys `consensus:` takes.
pub const CONSENSUS_KEYS: &[&str] = &["voters", "revisions", "decision", "judge_llm"];

/// How the crew decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecisionSpec {
    #[default]
    Vote,
    Judge,
}

/// `consensus:` as written, checked for types.
#[derive(Debug, Clone, Default)]
pub struct ConsensusSpec {
    /// Agent keys, each with where it was written.
    pub voters: Option<Vec<(String, Origin)>>,
    pub revisions: Option<u32>,
    pub decision: DecisionSpec,
    pub judge_llm: Option<LlmConfig>,
    /// Where `consensus:` was written.
    pub origin: Option<Origin>,
}

/// Reads `consensus:`; every problem is a diagnostic at its key's line.
pub fn read(value: &Value, origin: &Origin) -> Result<ConsensusSpec, Vec<Diagnostic>> {
    let mut problems = Vec::new();
    let mut spec = ConsensusSpec {
        origin: Some(origin.clone()),
        ..Default::default()
    };
    let Value::Object(map) = value else {
        return Err(vec![origin.diagnostic(format!(
            "crew field 'consensus' must be a mapping of {}, not {}",
            CONSENSUS_KEYS.join(", "),
            describe(value)
        ))]);
    };
    let mut judge_llm_origin = None;
    for (key, value) in map {
        let at = origin.child(key.as_str());
        match key.as_str() {
            "voters" => match value {
                Value::Array(items) => {
                    let mut voters = Vec::with_capacity(items.len());
                    for (index, item) in items.iter().enumerate() {
                        match item {
                            Value::String(name) if !name.trim().is_empty() => {
                                voters.push((name.trim().to_string(), at.child(index)));
                            }
                            other => problems.push(at.child(index).diagnostic(format!(
                                "consensus voter {} must be the key of an agent in agents.yaml, not {}",
                                index + 1,
                                describe(other)
                            ))),
                        }
                    }
                    spec.voters = Some(voters);
                }
                other => problems.push(at.diagnostic(format!(
                    "consensus `voters` must be a list of agent keys, not {}",
                    describe(other)
                ))),
            },
            "revisions" => match serde_json::from_value::<u32>(value.clone()) {
                Ok(rounds) if rounds <= crewai_core::consensus::MAX_REVISIONS => {
                    spec.revisions = Some(rounds)
                }
                Ok(rounds) => problems.push(at.diagnostic(format!(
                    "consensus `revisions` is {rounds}, more than the {} allowed (each round costs one call per voter)",
                    crewai_core::consensus::MAX_REVISIONS
                ))),
                Err(error) => problems.push(at.diagnostic(format!(
                    "consensus `revisions`: {}",
                    type_error(&error)
                ))),
            },
            "decision" => match value.as_str() {
                Some("vote") => spec.decision = DecisionSpec::Vote,
                Some("judge") => spec.decision = DecisionSpec::Judge,
                _ => problems.push(
                    at.diagnostic(format!(
                        "consensus `decision` must be `vote` or `judge`, not {}",
                        match value {
                            Value::String(s) => format!("'{s}'"),
                            other => describe(other).to_string(),
                        }
                    ))
                    .with_hint(Some(
                        "vote: each voter votes for the best other answer; judge: one judge picks or merges"
                            .into(),
                    )),
                ),
            },
            "judge_llm" => match serde_json::from_value::<LlmConfig>(value.clone()) {
                Ok(config) => {
                    spec.judge_llm = Some(config);
                    judge_llm_origin = Some(at);
                }
                Err(error) => problems.push(at.diagnostic(format!(
                    "consensus `judge_llm`: {}",
                    type_error(&error)
                ))),
            },
            other => problems.push(
                at.diagnostic(format!("consensus has an unknown key '{other}'"))
                    .with_hint(
                        did_you_mean(other, CONSENSUS_KEYS.iter().copied())
                            .or_else(|| Some(format!("known keys: {}", CONSENSUS_KEYS.join(", ")))),
                    ),
            ),
        }
    }
    if let Some(at) = judge_llm_origin
        && spec.decision != DecisionSpec::Judge
    {
        problems.push(
            at.diagnostic("consensus `judge_llm` has no effect unless `decision: judge`")
                .with_hint(Some(
                    "add `decision: judge`, or remove `judge_llm` to decide by a vote".into(),
                )),
        );
    }
    match problems.is_empty() {
        true => Ok(spec),
        false => Err(problems),
    }
}

/// The checks of a crew's consensus against the rest of the project: the process, the voters
/// (defined, not repeated, enough of them) and the tasks' agents.
pub(crate) fn check(loaded: &Loaded, process: ProcessSpec, errors: &mut Vec<Diagnostic>) {
    let crew = &loaded.crew;
    let written = crew.consensus.as_ref().zip(crew.origin("consensus"));
    if process != ProcessSpec::Consensual {
        if let Some((_, origin)) = written {
            errors.push(
                origin
                    .diagnostic("crew field 'consensus' has no effect unless `process: consensual`")
                    .with_hint(Some(
                        "set `process: consensual`, or remove `consensus:`".into(),
                    )),
            );
        }
        return;
    }
    let spec = match written {
        Some((value, origin)) => match read(value, origin) {
            Ok(spec) => spec,
            Err(problems) => {
                errors.extend(problems);
                return;
            }
        },
        None => ConsensusSpec::default(),
    };
    let here = |message: String| match spec.origin.as_ref().or(crew.origin("process")) {
        Some(origin) => origin.diagnostic(message),
        None => Diagnostic::in_file("config/crew.yaml", message),
    };
    for field in ["manager_llm", "manager_agent"] {
        if let Some(origin) = crew.origin(field) {
            errors.push(origin.diagnostic(format!(
                "`{field}` has no effect in a consensual crew (it has no manager); remove it or use `process: hierarchical`"
            )));
        }
    }
    let keys: Vec<&str> = loaded.agents.iter().map(|a| a.key.as_str()).collect();
    let voters: Vec<&str> = match &spec.voters {
        Some(voters) => {
            let mut seen: Vec<&str> = Vec::new();
            for (key, at) in voters {
                if !keys.contains(&key.as_str()) {
                    errors.push(
                        at.diagnostic(format!("consensus voter '{key}' is not defined"))
                            .with_hint(
                                did_you_mean(key, keys.iter().copied()).or_else(|| {
                                    Some(format!("defined agents: {}", keys.join(", ")))
                                }),
                            ),
                    );
                } else if seen.contains(&key.as_str()) {
                    errors.push(at.diagnostic(format!("consensus voter '{key}' is listed twice")));
                } else {
                    seen.push(key);
                }
            }
            seen
        }
        None => keys.clone(),
    };
    let enough = match spec.decision {
        DecisionSpec::Vote => 3,
        DecisionSpec::Judge => 2,
    };
    if voters.len() < enough {
        let why = match spec.decision {
            DecisionSpec::Vote => {
                "deciding by vote needs at least 3 voters (with 2, each can only vote for the other's answer)"
            }
            DecisionSpec::Judge => "a consensual crew needs at least 2 voters",
        };
        errors.push(
            here(format!("{why}, and this crew has {}", voters.len())).with_hint(Some(
                "list more agents under `consensus: voters:`, or add agents".into(),
            )),
        );
    }
    for agent in &loaded.agents {
        if voters.contains(&agent.key.as_str())
            && agent.spec.allow_delegation == Some(true)
            && let Some(origin) = agent.spec.origin("allow_delegation")
        {
            errors.push(origin.diagnostic(format!(
                "agent '{}' votes in a consensual crew, where the voters answer on their own; set allow_delegation to false",
                agent.key
            )));
        }
    }
    for task in &loaded.tasks {
        if let (Some(agent), Some(origin)) = (&task.spec.agent, task.spec.origin("agent"))
            && keys.contains(&agent.as_str())
            && !voters.contains(&agent.as_str())
        {
            errors.push(origin.diagnostic(format!(
                "task '{}' is assigned to '{agent}', who is not a consensus voter; every voter works every task of a consensual crew (a task's agent only wins tied votes)"
            , task.key)).with_hint(Some("assign it to a voter, or remove `agent:`".into())));
        }
    }
}

impl crate::Project {
    /// The engine's consensus configuration from the checked `consensus:` (`roles_by_key`: the
    /// built agents' roles, by their keys in agents.yaml).
    pub(crate) fn consensus_config(
        &self,
        roles_by_key: &std::collections::BTreeMap<String, String>,
        options: &crate::BuildOptions,
    ) -> Result<crewai_core::consensus::ConsensusConfig, crate::ProjectError> {
        let crew = &self.crew;
        let spec = match crew.consensus.as_ref().zip(crew.origin("consensus")) {
            Some((value, origin)) => read(value, origin).map_err(crate::ProjectError::Invalid)?,
            None => ConsensusSpec::default(),
        };
        let mut config = crewai_core::consensus::ConsensusConfig::new();
        if let Some(voters) = &spec.voters {
            let mut roles = Vec::with_capacity(voters.len());
            for (key, at) in voters {
                let role = roles_by_key.get(key).ok_or_else(|| {
                    crate::ProjectError::Invalid(vec![
                        at.diagnostic(format!("consensus voter '{key}' is not defined")),
                    ])
                })?;
                roles.push(role.clone());
            }
            config = config.voters(roles);
        }
        if let Some(rounds) = spec.revisions {
            config = config.revisions(rounds);
        }
        if spec.decision == DecisionSpec::Judge {
            // The judge's model: `judge_llm`, else the default model; `--llm` overrides it as it
            // does every model.
            let llm_config = options.llm_override.as_ref().or(spec.judge_llm.as_ref());
            let at = spec.origin.as_ref().map(|o| o.child("judge_llm"));
            config = config.judge(Some(crate::options::make_llm(
                llm_config,
                "the crew's consensus judge_llm",
                at.as_ref(),
                options,
            )?));
        }
        Ok(config)
    }
}

impl crate::Project {
    /// What the dry-run plan shows of a consensual crew (`None` when `consensus:` is invalid,
    /// which the checks have reported).
    pub(crate) fn planned_consensus(&self) -> Option<crate::plan::PlannedConsensus> {
        let crew = &self.crew;
        let spec = match crew.consensus.as_ref().zip(crew.origin("consensus")) {
            Some((value, origin)) => read(value, origin).ok()?,
            None => ConsensusSpec::default(),
        };
        let voters: Vec<String> = match &spec.voters {
            Some(voters) => voters.iter().map(|(key, _)| key.clone()).collect(),
            None => self.members().map(|a| a.key.clone()).collect(),
        };
        let revisions = spec.revisions.unwrap_or(1);
        let count = u32::try_from(voters.len()).unwrap_or(u32::MAX);
        let (decision, decide_calls) = match spec.decision {
            DecisionSpec::Vote => ("vote", count),
            DecisionSpec::Judge => ("judge", 1),
        };
        Some(crate::plan::PlannedConsensus {
            voters,
            revisions,
            decision,
            judge_llm: spec.judge_llm.map(|l| l.model),
            calls_per_task: count
                .saturating_mul(revisions.saturating_add(1))
                .saturating_add(decide_calls),
        })
    }
}
