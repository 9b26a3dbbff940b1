//! Stop words, emulated on the client.
//!
//! CrewAI's native OpenAI client sends no `stop` field and cuts the reply at the earliest stop
//! string itself; providers that do accept stop sequences (Anthropic) may get them too, and the
//! cut here is harmless when the server already stopped. [`StopWordsLayer`] is the layer of a
//! model's stack that applies the config's and the request's stop words to complete and
//! streamed replies.
//!
//! ```
//! use crewai_llm::stop_words::cut_at_stop;
//! let stops = vec!["\nObservation:".to_string()];
//! let cut = cut_at_stop("Action: search\nObservation: made up", &stops);
//! assert_eq!(cut.as_deref(), Some("Action: search"));
//! ```

use async_trait::async_trait;
use futures::StreamExt;

use crate::error::LlmError;
use crate::layer::{LlmLayer, Next};
use crate::traits::LlmStream;
use crate::types::{Capabilities, FinishReason, LlmRequest, LlmResponse, StreamEvent};

/// The text before the earliest occurrence of any stop word, or `None` when none occurs.
pub fn cut_at_stop(text: &str, stop: &[String]) -> Option<String> {
    earliest_stop(text, stop).map(|at| text[..at].to_string())
}

fn earliest_stop(text: &str, stop: &[String]) -> Option<usize> {
    stop.iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()))
        .min()
}

/// Applies stop words to a complete response: cuts the content and marks the finish reason.
pub fn apply_to_response(response: &mut LlmResponse, stop: &[String]) {
    if let Some(content) = &response.content
        && let Some(cut) = cut_at_stop(content, stop)
    {
        response.content = Some(cut);
        if response.tool_calls.is_empty() {
            response.finish_reason = FinishReason::StopSequence;
        }
    }
}

/// Cuts streamed text at the earliest stop word. Text that could still be the start of a stop
/// word is held back until the next delta shows whether it is.
#[derive(Debug, Clone, Default)]
pub struct StopWordFilter {
    stop: Vec<String>,
    held: String,
    stopped: bool,
}

impl StopWordFilter {
    pub fn new(stop: Vec<String>) -> Self {
        StopWordFilter {
            stop: stop.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
            stopped: false,
        }
    }

    /// True once a stop word was seen; later text is dropped.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Feeds a delta; returns the text that is safe to show now.
    pub fn push(&mut self, delta: &str) -> String {
        if self.stopped {
            return String::new();
        }
        self.held.push_str(delta);
        if let Some(at) = earliest_stop(&self.held, &self.stop) {
            self.stopped = true;
            let out = self.held[..at].to_string();
            self.held.clear();
            return out;
        }
        let keep = self.longest_partial_suffix();
        let split = self.held.len() - keep;
        let out = self.held[..split].to_string();
        self.held.drain(..split);
        out
    }

    /// Ends the stream; returns the held-back text.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// The length of the longest end of the held text that begins some stop word.
    fn longest_partial_suffix(&self) -> usize {
        let mut best = 0;
        for stop in &self.stop {
            for (start, _) in self.held.char_indices() {
                let tail = &self.held[start..];
                if tail.len() < stop.len() && stop.starts_with(tail) {
                    best = best.max(tail.len());
                    break;
                }
            }
        }
        best
    }
}

/// The stop-word layer: every reply is cut at the configured and the requested stop words.
///
/// ```
/// # futures::executor::block_on(async {
/// use std::sync::Arc;
/// use crewai_llm::{LayeredLlm, Llm, LlmRequest, Message, ScriptedLlm, StopWordsLayer};
/// let model = ScriptedLlm::new("m").then_text("Action: search\nObservation: invented");
/// let llm = LayeredLlm::builder(Arc::new(model)).layer(StopWordsLayer::new(vec!["\nObservation:".into()])).build();
/// let reply = llm.call(LlmRequest::new(vec![Message::user("go")])).await.unwrap();
/// assert_eq!(reply.content.as_deref(), Some("Action: search"));
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct StopWordsLayer {
    stop: Vec<String>,
}

impl StopWordsLayer {
    /// `stop` are the config's stop words; each request's own are added to them.
    pub fn new(stop: Vec<String>) -> Self {
        StopWordsLayer { stop }
    }

    fn merged(&self, request: &mut LlmRequest) -> Vec<String> {
        for word in &self.stop {
            if !request.options.stop.contains(word) {
                request.options.stop.push(word.clone());
            }
        }
        request.options.stop.clone()
    }
}

#[async_trait]
impl LlmLayer for StopWordsLayer {
    fn name(&self) -> &str {
        "stop_words"
    }

    fn capabilities(&self, below: Capabilities) -> Capabilities {
        Capabilities {
            stop_words: true,
            ..below
        }
    }

    async fn call(&self, mut request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
        let stop = self.merged(&mut request);
        let mut response = next.call(request).await?;
        apply_to_response(&mut response, &stop);
        Ok(response)
    }

    async fn stream(&self, mut request: LlmRequest, next: Next<'_>) -> Result<LlmStream, LlmError> {
        let stop = self.merged(&mut request);
        if stop.is_empty() {
            return next.stream(request).await;
        }
        let inner = next.stream(request).await?;
        let mut filter = StopWordFilter::new(stop.clone());
        let events = inner.flat_map(move |event| {
            let out: Vec<Result<StreamEvent, LlmError>> = match event {
                Ok(StreamEvent::TextDelta(text)) => {
                    let shown = filter.push(&text);
                    if shown.is_empty() {
                        Vec::new()
                    } else {
                        vec![Ok(StreamEvent::TextDelta(shown))]
                    }
                }
                Ok(StreamEvent::Done(mut response)) => {
                    let rest = filter.finish();
                    apply_to_response(&mut response, &stop);
                    let mut out = Vec::new();
                    if !rest.is_empty() {
                        out.push(Ok(StreamEvent::TextDelta(rest)));
                    }
                    out.push(Ok(StreamEvent::Done(response)));
                    out
                }
                other => vec![other],
            };
            futures::stream::iter(out)
        });
        Ok(Box::pin(events))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stops() -> Vec<String> {
        vec!["\nObservation:".to_string(), "STOP".to_string()]
    }

    #[test]
    fn cuts_at_the_earliest_stop_word() {
        assert_eq!(
            cut_at_stop("a STOP b\nObservation: c", &stops()).as_deref(),
            Some("a ")
        );
        assert_eq!(cut_at_stop("nothing here", &stops()), None);
        assert_eq!(cut_at_stop("x", &["".to_string()]), None);
    }

    #[test]
    fn streaming_filter_holds_back_partial_stop_words() {
        let mut filter = StopWordFilter::new(stops());
        let mut shown = String::new();
        for delta in ["Thought: ok", "\nObs", "erv", "ation: invented", " more"] {
            shown.push_str(&filter.push(delta));
        }
        shown.push_str(&filter.finish());
        assert_eq!(shown, "Thought: ok");
        assert!(filter.stopped());

        let mut filter = StopWordFilter::new(stops());
        let mut shown = filter.push("ends with \nOb");
        shown.push_str(&filter.push("viously fine"));
        shown.push_str(&filter.finish());
        assert_eq!(shown, "ends with \nObviously fine");
    }

    #[test]
    fn response_gets_cut_and_marked() {
        let mut response = LlmResponse {
            content: Some("Final Answer: 4\nObservation: x".into()),
            ..Default::default()
        };
        apply_to_response(&mut response, &stops());
        assert_eq!(response.content.as_deref(), Some("Final Answer: 4"));
        assert_eq!(response.finish_reason, FinishReason::StopSequence);
    }
}
