//! What training produces and keeps (CrewAI's `crew.train`, `crewai train`): each iteration's
//! first answer, the person's feedback and the improved answer ([`TrainingExample`], kept in a
//! [`TrainingLog`]: the project's SQLite store in `crewai-store`, or [`InMemoryTrainingLog`]),
//! and, per agent role, the suggestions an evaluator drew from them ([`TrainedAgents`], the
//! trained-agents JSON file that later runs read; see [`crate::crew::CrewBuilder::trained_agents`]).
//!
//! CrewAI keeps both in Python pickles (`training_data.pkl`, `trained_agents_data.pkl`); a
//! pickle can run code when it is read, so crewai-rs reads neither and says how to convert one
//! ([`TrainedAgentsError::Pickle`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::store::StoreError;

/// The trained-agents file a project uses when nothing names another (CrewAI's is
/// `trained_agents_data.pkl`; this one is JSON).
pub const DEFAULT_TRAINED_AGENTS_FILE: &str = "trained_agents_data.json";
/// The environment variable that names the trained-agents file (CrewAI's).
pub const TRAINED_AGENTS_FILE_ENV: &str = "CREWAI_TRAINED_AGENTS_FILE";

/// One training iteration of one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainingExample {
    /// The kickoff it came from, from 1.
    pub iteration: u32,
    /// The role of the agent that answered (interpolated).
    pub agent_role: String,
    /// The task's name (else the start of its description).
    pub task: String,
    pub initial_output: String,
    /// Empty when the person accepted the first answer.
    pub human_feedback: String,
    /// The answer after the feedback (the first answer when there was none).
    pub improved_output: String,
}

/// Where training iterations are kept as they happen.
#[async_trait]
pub trait TrainingLog: Send + Sync {
    /// Keeps one iteration of `crew`'s training.
    async fn record(&self, crew: &str, example: &TrainingExample) -> Result<(), StoreError>;
}

/// A [`TrainingLog`] in memory (tests, programs that keep the examples themselves).
#[derive(Debug, Clone, Default)]
pub struct InMemoryTrainingLog {
    examples: Arc<Mutex<Vec<(String, TrainingExample)>>>,
}

impl InMemoryTrainingLog {
    pub fn new() -> Self {
        Self::default()
    }

    /// The iterations recorded, with their crew's name, in order.
    pub fn examples(&self) -> Vec<(String, TrainingExample)> {
        self.examples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait]
impl TrainingLog for InMemoryTrainingLog {
    async fn record(&self, crew: &str, example: &TrainingExample) -> Result<(), StoreError> {
        self.examples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((crew.to_string(), example.clone()));
        Ok(())
    }
}

/// The training state one kickoff of `Crew::train` carries into its tasks.
#[derive(Clone)]
pub(crate) struct TrainingRun {
    pub(crate) iteration: u32,
    pub(crate) crew: String,
    pub(crate) log: Arc<dyn TrainingLog>,
    /// Every iteration kept so far, for the evaluation at the end.
    pub(crate) examples: Arc<Mutex<Vec<TrainingExample>>>,
}

impl std::fmt::Debug for TrainingRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrainingRun")
            .field("iteration", &self.iteration)
            .field("crew", &self.crew)
            .finish_non_exhaustive()
    }
}

impl TrainingRun {
    /// Keeps one iteration: in the log first (durable), then for the evaluation.
    pub(crate) async fn record(&self, example: TrainingExample) -> Result<(), StoreError> {
        self.log.record(&self.crew, &example).await?;
        self.examples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(example);
        Ok(())
    }
}

/// What training taught one agent (CrewAI's `TrainingTaskEvaluation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainedAgent {
    /// Instructions its later task prompts end with.
    pub suggestions: Vec<String>,
    /// The evaluator's score of its first answers, from 0 to 10.
    pub quality: f64,
    pub final_summary: String,
}

/// The trained-agents file: what each agent, by role, was taught.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TrainedAgents {
    pub agents: BTreeMap<String, TrainedAgent>,
}

/// Why a trained-agents file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TrainedAgentsError {
    #[error(
        "{} is a Python pickle (CrewAI's trained-agents format), which crewai-rs does not read: reading a pickle can run code. \
         Convert it once to JSON with\n  python3 -c \"import json, pickle, sys; json.dump(pickle.load(open(sys.argv[1], 'rb')), open(sys.argv[2], 'w'), indent=2)\" {} {}\n\
         and use the JSON file (or train again with `crewai train`)",
        path.display(),
        path.display(),
        DEFAULT_TRAINED_AGENTS_FILE
    )]
    Pickle { path: PathBuf },
    #[error("cannot read or write the trained-agents file {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the trained-agents file {} is not valid JSON of agents by role (each with suggestions, quality, final_summary)", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// The first byte of a pickle of protocol 2 or later.
const PICKLE_PROTOCOL_MARK: u8 = 0x80;

impl TrainedAgents {
    /// Reads the file at `path`; a missing file is no trained agent.
    pub async fn load(path: &Path) -> Result<TrainedAgents, TrainedAgentsError> {
        let io = |source| TrainedAgentsError::Io {
            path: path.to_path_buf(),
            source,
        };
        if is_pickle_name(path) {
            return Err(TrainedAgentsError::Pickle {
                path: path.to_path_buf(),
            });
        }
        let bytes = match tokio::fs::read(path).await {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(TrainedAgents::default());
            }
            Err(error) => return Err(io(error)),
        };
        if bytes.first() == Some(&PICKLE_PROTOCOL_MARK) {
            return Err(TrainedAgentsError::Pickle {
                path: path.to_path_buf(),
            });
        }
        serde_json::from_slice(&bytes).map_err(|source| TrainedAgentsError::Json {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Writes the agents to `path` (indented JSON), replacing it.
    pub async fn save(&self, path: &Path) -> Result<(), TrainedAgentsError> {
        if is_pickle_name(path) {
            return Err(TrainedAgentsError::Pickle {
                path: path.to_path_buf(),
            });
        }
        let text =
            serde_json::to_string_pretty(self).map_err(|source| TrainedAgentsError::Json {
                path: path.to_path_buf(),
                source,
            })?;
        tokio::fs::write(path, text)
            .await
            .map_err(|source| TrainedAgentsError::Io {
                path: path.to_path_buf(),
                source,
            })
    }

    /// These agents with `newer`'s over them (a retrained agent replaces its entry, as CrewAI
    /// does).
    pub fn merged(mut self, newer: TrainedAgents) -> TrainedAgents {
        self.agents.extend(newer.agents);
        self
    }

    /// The suggestions for the agent with this role.
    pub fn suggestions_for(&self, role: &str) -> Option<&[String]> {
        self.agents.get(role).map(|a| a.suggestions.as_slice())
    }
}

fn is_pickle_name(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("pkl" | "pickle")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_file_round_trips_and_a_pickle_is_refused_with_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trained.json");
        assert_eq!(
            TrainedAgents::load(&path).await.unwrap(),
            TrainedAgents::default()
        );
        let mut agents = TrainedAgents::default();
        agents.agents.insert(
            "Writer".into(),
            TrainedAgent {
                suggestions: vec!["Cite sources.".into()],
                quality: 7.0,
                final_summary: "Good.".into(),
            },
        );
        agents.save(&path).await.unwrap();
        let read = TrainedAgents::load(&path).await.unwrap();
        assert_eq!(
            read.suggestions_for("Writer"),
            Some(&["Cite sources.".to_string()][..])
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"Writer\": {"), "{text}");

        let pickle = dir.path().join("trained_agents_data.pkl");
        let error = TrainedAgents::load(&pickle).await.unwrap_err();
        assert!(matches!(error, TrainedAgentsError::Pickle { .. }));
        assert!(error.to_string().contains("pickle.load"), "{error}");
        // A pickle under another name is recognised by its first byte.
        let disguised = dir.path().join("trained.dat");
        std::fs::write(&disguised, [0x80, 0x04, 0x95]).unwrap();
        assert!(matches!(
            TrainedAgents::load(&disguised).await.unwrap_err(),
            TrainedAgentsError::Pickle { .. }
        ));
    }
}
