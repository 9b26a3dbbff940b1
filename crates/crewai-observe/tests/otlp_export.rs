//! OTLP/HTTP export against a local collector (axum on 127.0.0.1): a crew run against a scripted
//! OpenAI-compatible server produces spans with the right names, parents and GenAI attributes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use crewai_core::agent::Agent;
use crewai_core::crew::Crew;
use crewai_core::events::EventBus;
use crewai_core::interpolate::Inputs;
use crewai_core::task::Task;
use crewai_llm::{LlmConfig, build_llm};
use crewai_observe::otel::{OtelConfig, OtelExport, OtlpProtocol};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use crewai_tools::{DynamicTool, ToolOutput};
use serde_json::{Value, json};

/// What the collector received: (path, content type, body).
type Received = Arc<Mutex<Vec<(String, String, Vec<u8>)>>>;

async fn start_collector() -> (String, Received) {
    let received: Received = Arc::default();
    let app = Router::new()
        .route(
            "/v1/traces",
            post(
                |State(received): State<Received>, headers: HeaderMap, body: Bytes| async move {
                    let content_type = headers
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    received.lock().unwrap().push((
                        "/v1/traces".into(),
                        content_type,
                        body.to_vec(),
                    ));
                    ""
                },
            ),
        )
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), received)
}

/// A researcher with one tool and a writer, two tasks, against `server`.
fn crew(server: &ScriptedServer, bus: &EventBus) -> Crew {
    let llm = build_llm(
        &LlmConfig::new("openai/gpt-4o-mini")
            .with_base_url(server.base_url())
            .with_api_key("sk-test"),
    )
    .unwrap();
    let lookup = DynamicTool::new(
        "lookup",
        "Looks a fact up.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        |_args: Value, _ctx| async { Ok(ToolOutput::Text("bees dance".into())) },
    )
    .into_handle();
    let researcher = Agent::builder()
        .role("Researcher")
        .goal("Find facts")
        .backstory("Careful.")
        .llm(llm.clone())
        .tools(vec![lookup])
        .build()
        .unwrap();
    let writer = Agent::builder()
        .role("Writer")
        .goal("Write")
        .backstory("Brief.")
        .llm(llm)
        .build()
        .unwrap();
    let task = |name: &str, description: &str, expected_output: &str, agent: &Agent| {
        Task::builder()
            .name(name)
            .description(description)
            .expected_output(expected_output)
            .agent(agent.clone())
            .build()
            .unwrap()
    };
    let research = task("research", "Find a fact about bees", "A fact", &researcher);
    let write = task("write", "Write a line", "A line", &writer);
    Crew::builder()
        .name("bees")
        .agents(vec![researcher, writer])
        .tasks(vec![research, write])
        .event_bus(bus.clone())
        .build()
        .unwrap()
}

fn script(server: &ScriptedServer) {
    server.push(Reply::tool_call("lookup", json!({"q": "bees"})).with_usage(300, 20));
    server.push(Reply::text("Bees dance.").with_usage(400, 10));
    server.push(Reply::text("Bees dance, they say.").with_usage(500, 30));
}

fn attributes(span: &Value) -> BTreeMap<String, Value> {
    span["attributes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|kv| {
            let value = &kv["value"];
            let plain = value
                .get("stringValue")
                .cloned()
                .or_else(|| {
                    value.get("intValue").map(|v| match v {
                        Value::String(s) => json!(s.parse::<i64>().unwrap()),
                        other => other.clone(),
                    })
                })
                .or_else(|| value.get("doubleValue").cloned())
                .or_else(|| value.get("boolValue").cloned())
                .unwrap_or(Value::Null);
            (kv["key"].as_str().unwrap().to_string(), plain)
        })
        .collect()
}

/// What the collector received while the scripted crew ran with its spans exported as
/// `config(collector's URL)` says.
async fn export_a_run(config: impl FnOnce(&str) -> OtelConfig) -> Vec<(String, String, Vec<u8>)> {
    let (collector, received) = start_collector().await;
    let server = ScriptedServer::start().await;
    script(&server);
    let bus = EventBus::new();
    let export = OtelExport::start(&bus, &config(&collector)).unwrap();
    crew(&server, &bus).kickoff(Inputs::new()).await.unwrap();
    export.shutdown(Duration::from_secs(10)).await;
    received.lock().unwrap().clone()
}

#[tokio::test]
async fn spans_arrive_with_names_parents_and_genai_attributes_over_http_json() {
    let bodies = export_a_run(|collector| {
        OtelConfig::new(collector)
            .with_protocol(OtlpProtocol::HttpJson)
            .with_service_name("bee-crew")
    })
    .await;
    assert!(!bodies.is_empty(), "the collector got no request");
    let mut spans = Vec::new();
    for (path, content_type, body) in &bodies {
        assert_eq!(path, "/v1/traces");
        assert_eq!(content_type, "application/json");
        let request: Value = serde_json::from_slice(body).unwrap();
        for resource in request["resourceSpans"].as_array().unwrap() {
            let service = attributes(&resource["resource"]);
            assert_eq!(service["service.name"], "bee-crew");
            for scope in resource["scopeSpans"].as_array().unwrap() {
                spans.extend(scope["spans"].as_array().unwrap().iter().cloned());
            }
        }
    }
    let named = |name: &str| {
        spans
            .iter()
            .filter(|s| s["name"] == name)
            .cloned()
            .collect::<Vec<_>>()
    };
    let one = |name: &str| {
        let found = named(name);
        assert_eq!(
            found.len(),
            1,
            "one span named {name}: {:?}",
            spans.iter().map(|s| s["name"].clone()).collect::<Vec<_>>()
        );
        found[0].clone()
    };
    let crew_span = one("crew_kickoff bees");
    let research = one("task research");
    let write = one("task write");
    let researcher = one("invoke_agent Researcher");
    let tool = one("execute_tool lookup");
    let chats = named("chat gpt-4o-mini");
    assert_eq!(chats.len(), 3);
    assert_eq!(spans.len(), 9, "crew, 2 tasks, 2 agents, 3 chats, 1 tool");

    let parent = |span: &Value| {
        span.get("parentSpanId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let id = |span: &Value| span["spanId"].as_str().unwrap().to_string();
    assert_eq!(parent(&crew_span), "", "the kickoff is the root");
    assert_eq!(parent(&research), id(&crew_span));
    assert_eq!(parent(&write), id(&crew_span));
    assert_eq!(parent(&researcher), id(&research));
    assert_eq!(parent(&tool), id(&researcher));
    assert!(chats.iter().take(2).all(|c| parent(c) == id(&researcher)));
    assert!(
        spans.iter().all(|s| s["traceId"] == crew_span["traceId"]),
        "one trace per kickoff"
    );

    let first_chat = chats
        .iter()
        .find(|c| attributes(c)["gen_ai.usage.input_tokens"] == 300)
        .expect("the tool-calling chat");
    let attrs = attributes(first_chat);
    assert_eq!(attrs["gen_ai.operation.name"], "chat");
    assert_eq!(attrs["gen_ai.request.model"], "gpt-4o-mini");
    assert_eq!(attrs["gen_ai.provider.name"], "openai");
    assert_eq!(attrs["gen_ai.usage.output_tokens"], 20);
    assert_eq!(attrs["gen_ai.agent.name"], "Researcher");
    assert!(attrs["crewai.usage.cost_usd"].as_f64().unwrap() > 0.0);
    assert!(
        !attrs.contains_key("gen_ai.input.messages"),
        "contents are recorded only when asked for"
    );
    let tool_attrs = attributes(&tool);
    assert_eq!(tool_attrs["gen_ai.operation.name"], "execute_tool");
    assert_eq!(tool_attrs["gen_ai.tool.name"], "lookup");
    assert!(!tool_attrs.contains_key("gen_ai.tool.call.arguments"));
    assert_eq!(
        attributes(&researcher)["gen_ai.operation.name"],
        "invoke_agent"
    );
}

#[tokio::test]
async fn protobuf_is_the_default_and_contents_are_opt_in() {
    let bodies = export_a_run(|collector| OtelConfig::new(collector).with_content(true)).await;
    assert!(!bodies.is_empty());
    let all: Vec<u8> = bodies
        .iter()
        .flat_map(|(_, _, body)| body.clone())
        .collect();
    assert!(
        bodies
            .iter()
            .all(|(_, content_type, _)| content_type == "application/x-protobuf")
    );
    let contains = |needle: &str| all.windows(needle.len()).any(|w| w == needle.as_bytes());
    for name in [
        "crew_kickoff bees",
        "task write",
        "execute_tool lookup",
        "gen_ai.usage.input_tokens",
        "gen_ai.input.messages",
        "gen_ai.tool.call.arguments",
        "Find a fact about bees",
    ] {
        assert!(contains(name), "the protobuf export carries {name}");
    }
}
