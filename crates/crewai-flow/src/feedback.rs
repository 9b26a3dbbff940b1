//! Human feedback on a method's output (CrewAI's `@human_feedback`).
//!
//! After a method with [`HumanFeedback`] completes, its output is shown to a person through a
//! [`FeedbackProvider`]. With outcomes declared, the answer picks the label to emit: an answer equal
//! to an outcome (ignoring case and surrounding space), or containing exactly one outcome as a
//! word, selects it; otherwise the default outcome is used, and without one the kickoff fails
//! naming the answer. (CrewAI can also let an LLM collapse free text into an outcome; that is not
//! done here.) Every answer is stored with the run's progress (and so persisted).
//!
//! A provider may answer [`FeedbackReply::Pending`]: the kickoff then finishes the other running
//! methods, saves the state and returns with [`FlowStatus::AwaitingFeedback`](crate::FlowStatus);
//! [`Flow::resume_with_feedback`](crate::Flow::resume_with_feedback) continues it later, in any
//! process sharing the persistence.

use std::io::{BufRead, Write};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::BoxError;

/// The feedback configuration of one method.
///
/// ```
/// use crewai_flow::HumanFeedback;
/// let review = HumanFeedback::new("Approve this draft?").emit(["approved", "rejected"]).default_outcome("rejected");
/// assert_eq!(review.outcomes, vec!["approved", "rejected"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanFeedback {
    /// Shown to the person with the output.
    pub message: String,
    /// Labels the answer may select; empty: the answer is only recorded.
    pub outcomes: Vec<String>,
    /// The outcome for an empty or unmatched answer.
    pub default_outcome: Option<String>,
}

impl HumanFeedback {
    pub fn new(message: impl Into<String>) -> Self {
        HumanFeedback {
            message: message.into(),
            outcomes: Vec::new(),
            default_outcome: None,
        }
    }

    /// The labels the answer routes to.
    pub fn emit<L: Into<String>>(mut self, outcomes: impl IntoIterator<Item = L>) -> Self {
        self.outcomes = outcomes.into_iter().map(Into::into).collect();
        self
    }

    pub fn default_outcome(mut self, outcome: impl Into<String>) -> Self {
        self.default_outcome = Some(outcome.into());
        self
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        match &self.default_outcome {
            Some(default) if !self.outcomes.contains(default) => Err(format!(
                "default outcome `{default}` is not one of the outcomes ({})",
                self.outcomes.join(", ")
            )),
            _ => Ok(()),
        }
    }

    /// The outcome an answer selects (`None` when no outcomes are declared).
    pub fn resolve(&self, answer: &str) -> Result<Option<String>, String> {
        if self.outcomes.is_empty() {
            return Ok(None);
        }
        let answer = answer.trim();
        if let Some(exact) = self
            .outcomes
            .iter()
            .find(|o| o.eq_ignore_ascii_case(answer))
        {
            return Ok(Some(exact.clone()));
        }
        let words: Vec<String> = answer
            .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '-')
            .map(str::to_lowercase)
            .collect();
        let mentioned: Vec<&String> = self
            .outcomes
            .iter()
            .filter(|o| words.contains(&o.to_lowercase()))
            .collect();
        if let [single] = mentioned.as_slice() {
            return Ok(Some((*single).clone()));
        }
        match &self.default_outcome {
            Some(default) => Ok(Some(default.clone())),
            None => Err(format!(
                "the answer {answer:?} selects none of the outcomes ({}) and there is no default outcome",
                self.outcomes.join(", ")
            )),
        }
    }
}

/// What a provider is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackRequest {
    pub flow_name: String,
    pub flow_id: String,
    pub method: String,
    pub message: String,
    /// The method's output.
    pub output: Value,
    pub outcomes: Vec<String>,
}

/// A provider's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedbackReply {
    Answer(String),
    /// The answer will come later (e.g. from a web UI): the flow pauses and saves its state.
    Pending,
}

/// Shows a method's output to a person and returns the answer.
#[async_trait]
pub trait FeedbackProvider: Send + Sync {
    async fn request(&self, request: &FeedbackRequest) -> Result<FeedbackReply, BoxError>;
}

/// Asks on the terminal: prints the output and the question to stderr, reads one line from stdin.
#[derive(Debug, Default, Clone)]
pub struct ConsoleFeedbackProvider;

#[async_trait]
impl FeedbackProvider for ConsoleFeedbackProvider {
    async fn request(&self, request: &FeedbackRequest) -> Result<FeedbackReply, BoxError> {
        let shown = match &request.output {
            Value::String(text) => text.clone(),
            other => serde_json::to_string_pretty(other)?,
        };
        let choices = if request.outcomes.is_empty() {
            String::new()
        } else {
            format!(" [{}]", request.outcomes.join("/"))
        };
        let prompt = format!(
            "\n── {} · {} ──\n{shown}\n\n{}{choices}\n> ",
            request.flow_name, request.method, request.message
        );
        // Reading stdin blocks, so it runs off the async workers.
        let answer = tokio::task::spawn_blocking(move || -> std::io::Result<String> {
            let mut err = std::io::stderr();
            err.write_all(prompt.as_bytes())?;
            err.flush()?;
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            Ok(line.trim_end_matches(['\r', '\n']).to_string())
        })
        .await??;
        Ok(FeedbackReply::Answer(answer))
    }
}

/// One answer, kept with the run's progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackRecord {
    pub method: String,
    pub output: Value,
    pub feedback: String,
    /// The selected outcome, when the method declares outcomes.
    pub outcome: Option<String>,
    pub timestamp: DateTime<Utc>,
}

/// A method waiting for an answer (the flow is paused on it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AwaitingFeedback {
    pub method: String,
    pub message: String,
    pub output: Value,
    pub outcomes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review() -> HumanFeedback {
        HumanFeedback::new("ok?").emit(["approved", "rejected"])
    }

    #[test]
    fn answers_resolve_to_outcomes() {
        assert_eq!(
            review().resolve(" Approved ").unwrap().as_deref(),
            Some("approved")
        );
        assert_eq!(
            review()
                .resolve("I think it is rejected, sorry")
                .unwrap()
                .as_deref(),
            Some("rejected")
        );
        assert!(review().resolve("approved? rejected?").is_err());
        assert_eq!(
            review()
                .default_outcome("rejected")
                .resolve("")
                .unwrap()
                .as_deref(),
            Some("rejected")
        );
        assert_eq!(
            HumanFeedback::new("note").resolve("anything").unwrap(),
            None
        );
    }

    #[test]
    fn default_must_be_an_outcome() {
        assert!(review().default_outcome("maybe").validate().is_err());
        assert!(review().default_outcome("approved").validate().is_ok());
    }
}
