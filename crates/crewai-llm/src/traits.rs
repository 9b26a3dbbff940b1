//! The `Llm` trait every provider, wrapper and test double implements.

use std::pin::Pin;

use async_trait::async_trait;
use futures::Stream;

use crate::error::LlmError;
use crate::types::{Capabilities, LlmRequest, LlmResponse, StreamEvent};

/// A stream of response pieces that ends with [`StreamEvent::Done`].
pub type LlmStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, LlmError>> + Send>>;

/// A chat model.
///
/// Implement it for your own model (CrewAI's custom `BaseLLM`): only [`Llm::call`] and
/// [`Llm::model`] are required.
///
/// ```
/// use crewai_llm::{async_trait, Llm, LlmError, LlmRequest, LlmResponse};
///
/// struct Echo;
///
/// #[async_trait]
/// impl Llm for Echo {
///     fn model(&self) -> &str { "echo" }
///     async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
///         let last = request.messages.last().map(|m| m.text()).unwrap_or_default();
///         Ok(LlmResponse { content: Some(last), ..Default::default() })
///     }
/// }
/// # let answer = futures::executor::block_on(Echo.call(LlmRequest::new(vec![crewai_llm::Message::user("hi")]))).unwrap();
/// # assert_eq!(answer.content.as_deref(), Some("hi"));
/// ```
#[async_trait]
pub trait Llm: Send + Sync {
    /// The model's name (without the provider prefix).
    fn model(&self) -> &str;

    /// The provider's name (`openai`, `anthropic`, ...); used in errors and events.
    fn provider(&self) -> &str {
        "custom"
    }

    /// One complete call.
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError>;

    /// A streamed call. The default makes a complete call and yields its text as one delta.
    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        let response = self.call(request).await?;
        let mut events = Vec::new();
        if let Some(text) = response.content.clone().filter(|t| !t.is_empty()) {
            events.push(Ok(StreamEvent::TextDelta(text)));
        }
        events.push(Ok(StreamEvent::Done(response)));
        Ok(Box::pin(futures::stream::iter(events)))
    }

    /// What the model supports.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
}

#[async_trait]
impl<T: Llm + ?Sized> Llm for std::sync::Arc<T> {
    fn model(&self) -> &str {
        (**self).model()
    }
    fn provider(&self) -> &str {
        (**self).provider()
    }
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        (**self).call(request).await
    }
    async fn stream(&self, request: LlmRequest) -> Result<LlmStream, LlmError> {
        (**self).stream(request).await
    }
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
}

/// Collects a stream into its final response, calling `on_event` for each piece on the way.
pub async fn collect_stream(
    mut stream: LlmStream,
    mut on_event: impl FnMut(&StreamEvent),
) -> Result<LlmResponse, LlmError> {
    use futures::StreamExt;
    while let Some(event) = stream.next().await {
        let event = event?;
        on_event(&event);
        if let StreamEvent::Done(response) = event {
            return Ok(response);
        }
    }
    Err(LlmError::malformed(
        "stream",
        "the stream ended without a final response",
    ))
}
