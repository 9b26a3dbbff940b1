//! Streamed replies are decoded from raw bytes a server sent: server-sent events, then each
//! provider's chunk format (OpenAI chat completions, OpenAI Responses, Anthropic, Gemini). Any
//! bytes, split anywhere, must give events or an error, never a panic or a hang.
//!
//! Input: byte 0 picks the provider and the HTTP status, byte 1 the size of the body chunks the
//! transport hands out (0: one chunk), the rest is the response body.
#![no_main]

use std::sync::{Arc, LazyLock, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use crewai_llm::http::{ErrorContext, HttpRequest, HttpResponse, ResponseBody, Transport};
use crewai_llm::openai::Auth;
use crewai_llm::{
    AnthropicLlm, GeminiLlm, Llm, LlmConfig, LlmError, LlmRequest, Message, OpenAiClient,
    OpenAiResponsesClient, collect_stream,
};
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;

/// Hands out the body of the current input.
#[derive(Default)]
struct FuzzTransport {
    reply: Mutex<Option<(u16, Vec<Bytes>)>>,
}

#[async_trait]
impl Transport for FuzzTransport {
    async fn send(
        &self,
        _request: HttpRequest,
        _context: &ErrorContext,
    ) -> Result<HttpResponse, LlmError> {
        let (status, chunks) = self
            .reply
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
            .unwrap_or_default();
        let body = futures::stream::iter(chunks.into_iter().map(Ok)).boxed();
        Ok(HttpResponse {
            status,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: ResponseBody::Streaming(body),
        })
    }
}

struct Harness {
    transport: Arc<FuzzTransport>,
    clients: Vec<Box<dyn Llm>>,
    runtime: tokio::runtime::Runtime,
}

static HARNESS: LazyLock<Harness> = LazyLock::new(|| {
    let transport = Arc::new(FuzzTransport::default());
    let shared: Arc<dyn Transport> = transport.clone();
    let config = LlmConfig::new("fuzz-model");
    let base = "http://127.0.0.1:9/v1";
    let built: Result<Vec<Box<dyn Llm>>, LlmError> = (|| {
        Ok(vec![
            Box::new(
                OpenAiClient::compatible("openai", "gpt-fuzz", base, Auth::None, "KEY", &config)?
                    .with_transport(shared.clone()),
            ) as Box<dyn Llm>,
            Box::new(
                OpenAiResponsesClient::new(&config, "gpt-fuzz", base, Auth::None)?
                    .with_transport(shared.clone()),
            ),
            Box::new(
                AnthropicLlm::new("claude-fuzz", "key".into(), Some(base), &config)?
                    .with_transport(shared.clone()),
            ),
            Box::new(
                GeminiLlm::new("gemini-fuzz", "key".into(), Some(base), &config)?
                    .with_transport(shared),
            ),
        ])
    })();
    let clients = built.unwrap_or_else(|error| panic!("fuzz clients: {error}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("fuzz runtime: {error}"));
    Harness {
        transport,
        clients,
        runtime,
    }
});

const STATUSES: [u16; 4] = [200, 400, 401, 429];

fuzz_target!(|data: &[u8]| {
    let [selector, chunk_size, body @ ..] = data else {
        return;
    };
    let harness = &*HARNESS;
    let client = &harness.clients[usize::from(*selector) % harness.clients.len()];
    let status = STATUSES[usize::from(*selector / 4) % STATUSES.len()];
    let chunks = match usize::from(*chunk_size) % 64 {
        0 => vec![Bytes::copy_from_slice(body)],
        size => body.chunks(size).map(Bytes::copy_from_slice).collect(),
    };
    *harness
        .transport
        .reply
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some((status, chunks));
    let request = LlmRequest::new(vec![Message::user("hi")]);
    harness.runtime.block_on(async {
        match client.stream(request).await {
            Ok(stream) => {
                let _ = collect_stream(stream, |_| {}).await;
            }
            Err(error) => {
                let _ = error.to_string();
            }
        }
    });
});
