//! Context-window recovery: when the history no longer fits, it is summarised in chunks (each sized
//! to 85% of the model's window, summarised concurrently), and replaced by one user message holding
//! the summary; system messages are kept.

use crewai_llm::{LlmRequest, Message, Role};

use super::Execution;
use super::llm_call::CallFailure;
use crate::error::AgentError;
use crate::prompts::agent as prompts;

/// Share of the window a chunk may fill (CrewAI's 85%).
const USABLE_WINDOW_SHARE: f64 = 0.85;
/// Characters per token: English averages about four, so three keeps a chunk well inside the window.
const CHARS_PER_TOKEN: usize = 3;
/// Summaries made at once.
const CONCURRENT_SUMMARIES: usize = 4;

/// One message as a summariser reads it.
fn transcript_line(message: &Message) -> String {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut line = format!("{role}: {}", message.text());
    for call in &message.tool_calls {
        line.push_str(&format!(
            "\n(called tool {} with {})",
            call.name,
            call.arguments_text()
        ));
    }
    line
}

/// Splits the lines into chunks of at most `limit` characters (a longer line is split too).
pub(crate) fn chunk_transcript(lines: &[String], limit: usize) -> Vec<String> {
    let limit = limit.max(1);
    let mut chunks = Vec::new();
    let mut current = String::new();
    for line in lines {
        let pieces: Vec<String> = if line.chars().count() > limit {
            line.chars()
                .collect::<Vec<_>>()
                .chunks(limit)
                .map(|c| c.iter().collect())
                .collect()
        } else {
            vec![line.clone()]
        };
        for piece in pieces {
            if !current.is_empty() && current.chars().count() + piece.chars().count() + 2 > limit {
                chunks.push(std::mem::take(&mut current));
            }
            if !current.is_empty() {
                current.push_str("\n\n");
            }
            current.push_str(&piece);
        }
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// The text between `<summary>` and `</summary>`, or the whole reply when the tags are missing.
pub(crate) fn extract_summary(reply: &str) -> String {
    match (reply.find("<summary>"), reply.rfind("</summary>")) {
        (Some(start), Some(end)) if end > start => {
            reply[start + "<summary>".len()..end].trim().to_string()
        }
        _ => reply.trim().to_string(),
    }
}

impl Execution {
    async fn summarize_chunk(
        &self,
        chunk: &str,
        permits: &tokio::sync::Semaphore,
    ) -> Result<String, AgentError> {
        let _permit = permits.acquire().await;
        let mut request = LlmRequest::new(vec![
            Message::system(prompts::SUMMARIZER_SYSTEM),
            Message::user(prompts::summarize_chunk(chunk)),
        ]);
        // A summary is the agent's call too, but not a turn of its conversation.
        request.extensions = self.stack().summaries.clone();
        match self.send(request).await {
            Ok(response) => Ok(extract_summary(&response.content.unwrap_or_default())),
            Err(CallFailure::Llm(error)) if error.is_context_length() => Err(self.context_error(
                "a part of the history is too long even to summarise".into(),
                error,
            )),
            Err(CallFailure::Llm(source)) => Err(AgentError::Llm {
                role: self.role().to_string(),
                source,
            }),
            Err(CallFailure::NotJson(message)) => Err(self.not_json_error(message)),
            Err(CallFailure::Budget(exceeded)) => Err(self.budget_error(exceeded)),
            Err(CallFailure::Blocked(reason)) => Err(AgentError::LlmCallBlocked {
                role: self.role().to_string(),
                reason,
            }),
        }
    }

    /// Replaces the non-system history with a summary of it.
    pub(crate) async fn summarize(&self, messages: &mut Vec<Message>) -> Result<(), AgentError> {
        let window_tokens = self.llm.capabilities().context_window.max(1024) as f64;
        let chunk_chars = (window_tokens * USABLE_WINDOW_SHARE) as usize * CHARS_PER_TOKEN;
        let (system, history): (Vec<Message>, Vec<Message>) =
            messages.drain(..).partition(|m| m.role == Role::System);
        let lines: Vec<String> = history.iter().map(transcript_line).collect();
        let chunks = chunk_transcript(&lines, chunk_chars);
        // Futures collected first, then polled together: a closure inside a stream adapter would make
        // this future non-`Send` (rustc's higher-ranked lifetime limitation), and crews spawn runs.
        let permits = tokio::sync::Semaphore::new(CONCURRENT_SUMMARIES);
        let runs: Vec<_> = chunks
            .iter()
            .map(|chunk| self.summarize_chunk(chunk, &permits))
            .collect();
        let summaries = futures::future::join_all(runs).await;
        let merged = summaries
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?
            .join("\n\n");
        *messages = system;
        messages.push(Message::user(prompts::summary_continuation(&merged)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_respect_the_limit_and_keep_everything() {
        let lines: Vec<String> = (0..10)
            .map(|i| format!("line {i} {}", "x".repeat(20)))
            .collect();
        let chunks = chunk_transcript(&lines, 60);
        assert!(chunks.len() > 1);
        assert!(chunks.iter().all(|c| c.chars().count() <= 60));
        for line in &lines {
            assert!(chunks.iter().any(|c| c.contains(line.as_str())));
        }
    }

    #[test]
    fn an_overlong_line_is_split() {
        let chunks = chunk_transcript(&["y".repeat(25)], 10);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks.concat().len(), 25);
    }

    #[test]
    fn summary_tags_are_extracted() {
        assert_eq!(
            extract_summary("Sure.\n<summary>\nfacts\n</summary>"),
            "facts"
        );
        assert_eq!(extract_summary("no tags"), "no tags");
    }
}
