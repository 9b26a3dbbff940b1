//! What a request gets on the wire for each [`Fault`].

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::http::{HttpRequest, response_head};
use super::server::{ServedRequest, Shared, State};
use super::{Fault, UNKNOWN_TOOL_NAME};
use crate::scripted::{RecordedRequest, RenderedReply, Reply};

/// Decides and serves the answer to one request; returns whether the connection stays usable.
pub(super) async fn answer(stream: &mut TcpStream, shared: &Shared, request: HttpRequest) -> bool {
    let body_json = if request.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&request.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&request.body).into_owned()))
    };
    let recorded = RecordedRequest {
        method: request.method,
        path: request.path,
        headers: request.headers,
        body: body_json,
    };
    let offers_tools = !recorded.tool_names().is_empty();
    let (fault, number) = {
        let mut state = shared.lock();
        let fault = match state.script.pop_front() {
            Some(fault) => fault,
            None => {
                let State { mix, rng, .. } = &mut *state;
                mix.draw(rng, offers_tools)
            }
        };
        let number = state.served.len() + 1;
        state.served.push(ServedRequest {
            number,
            request: recorded.clone(),
            fault: fault.clone(),
        });
        (fault, number)
    };
    let response_id = format!("chatcmpl-fault-{number}");
    let streaming = recorded.body["stream"].as_bool().unwrap_or(false);

    let healthy = |reply: Reply| -> RenderedReply {
        let call_ids = reply.assign_call_ids(&mut shared.lock().next_call_id);
        reply.render(&recorded.body, &response_id, call_ids)
    };
    let rendered = match fault {
        Fault::NeverAnswer => {
            // Held until the client gives up or the server stops (the caller's select ends it).
            let mut sink = [0u8; 1024];
            while matches!(stream.read(&mut sink).await, Ok(read) if read > 0) {}
            return false;
        }
        Fault::Slow(pause) => {
            tokio::time::sleep(pause).await;
            healthy(respond(shared, &recorded).await)
        }
        Fault::None => healthy(respond(shared, &recorded).await),
        Fault::RateLimited {
            retry_after_seconds,
        } => healthy(Reply::rate_limited(retry_after_seconds)),
        Fault::ServerError(status) => healthy(Reply::error(
            status,
            "The server had an error while processing your request. Sorry about that!",
        )),
        Fault::ResetMidBody => {
            let rendered = healthy(respond(shared, &recorded).await);
            let head = response_head(&rendered, rendered.body.len());
            let half = &rendered.body.as_bytes()[..rendered.body.len() / 2];
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(half).await;
            let _ = stream.flush().await;
            // SO_LINGER 0: closing sends RST instead of FIN, as a crashed proxy would.
            let _ = stream.set_zero_linger();
            return false;
        }
        Fault::MalformedJson => {
            if streaming {
                healthy(Reply::raw_sse([
                    json!({"id": response_id, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]}).to_string(),
                    "{\"id\": \"chatcmpl-broken\", \"choices\": [{\"delta\": {\"content\": \"hal".to_string(),
                    "[DONE]".to_string(),
                ]))
            } else {
                healthy(Reply::raw(
                    200,
                    "application/json",
                    "<html><head><title>502 Bad Gateway</title></head><body>upstream connect error</body></html>",
                ))
            }
        }
        Fault::TruncatedStream => {
            let mut rendered = healthy(respond(shared, &recorded).await);
            rendered.body = if streaming {
                let events: Vec<&str> = rendered.body.split_inclusive("\n\n").collect();
                // Keep the role chunk and the first half of the content: no finish reason, no [DONE].
                let keep = (events.len() / 2)
                    .max(1)
                    .min(events.len().saturating_sub(3).max(1));
                events[..keep].concat()
            } else {
                let cut = rendered.body.len() / 2;
                let cut = (0..=cut)
                    .rev()
                    .find(|i| rendered.body.is_char_boundary(*i))
                    .unwrap_or(0);
                rendered.body[..cut].to_string()
            };
            rendered
        }
        Fault::NoChoices => {
            let model = recorded.body["model"].as_str().unwrap_or("fault-model");
            let usage = json!({"prompt_tokens": 10, "completion_tokens": 0, "total_tokens": 10});
            if streaming {
                healthy(Reply::raw_sse([
                    json!({"id": response_id, "object": "chat.completion.chunk", "created": 1_700_000_000u64, "model": model, "choices": []}).to_string(),
                    json!({"id": response_id, "object": "chat.completion.chunk", "created": 1_700_000_000u64, "model": model, "choices": [], "usage": usage}).to_string(),
                    "[DONE]".to_string(),
                ]))
            } else {
                healthy(Reply::raw(
                    200,
                    "application/json",
                    json!({"id": response_id, "object": "chat.completion", "created": 1_700_000_000u64, "model": model, "choices": [], "usage": usage}).to_string(),
                ))
            }
        }
        Fault::UnknownTool => healthy(Reply::tool_call(
            UNKNOWN_TOOL_NAME,
            json!({"confirm": true}),
        )),
        Fault::InvalidArguments => {
            let tool = recorded
                .tool_names()
                .into_iter()
                .next()
                .unwrap_or_else(|| UNKNOWN_TOOL_NAME.to_string());
            healthy(Reply::tool_call(
                tool,
                json!({"unexpected_argument": [1, 2, 3]}),
            ))
        }
    };
    let head = response_head(&rendered, rendered.body.len());
    stream.write_all(head.as_bytes()).await.is_ok()
        && stream.write_all(rendered.body.as_bytes()).await.is_ok()
        && stream.flush().await.is_ok()
}

/// The responder's reply, after the pause it asks for ([`Reply::delayed`]).
async fn respond(shared: &Shared, request: &RecordedRequest) -> Reply {
    let reply = (shared.responder)(request);
    if let Some(pause) = reply.delay() {
        tokio::time::sleep(pause).await;
    }
    reply
}
