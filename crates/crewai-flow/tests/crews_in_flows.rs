//! A flow whose methods run an agent and a crew against a scripted OpenAI-compatible server (the
//! real OpenAI client over HTTP on 127.0.0.1), with a router on the crew's verdict.

mod common;
use common::{one_task_crew, scripted_agent};

use crewai_core::events::{EventBus, EventRecorder};
use crewai_core::interpolate::Inputs;
use crewai_flow::{Flow, FlowContext, on};
use crewai_testkit::scripted::ScriptedServer;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Article {
    #[serde(default)]
    topic: String,
    #[serde(default)]
    draft: String,
}

fn article_flow(server: &ScriptedServer, bus: EventBus) -> Flow<Article> {
    let writer = scripted_agent(
        server,
        "Writer",
        "Write short drafts",
        "You write crisp prose.",
    );
    let editor = scripted_agent(server, "Editor", "Judge drafts", "You are a strict editor.");
    Flow::typed_builder::<Article>()
        .name("article")
        .event_bus(bus)
        .start("write", move |ctx: FlowContext<Article>| {
            let writer = writer.clone();
            async move {
                let topic = ctx.read_state(|s| s.topic.clone());
                let draft = writer
                    .kickoff_with(
                        format!("Write one sentence about {topic}."),
                        ctx.agent_kickoff_options(),
                    )
                    .await?;
                ctx.update_state(|s| s.draft = draft.raw.clone());
                Ok(draft.raw)
            }
        })
        .router("review", on("write"), move |ctx: FlowContext<Article>| {
            let editor = editor.clone();
            async move {
                let crew = one_task_crew(
                    "editors",
                    editor,
                    (
                        "verdict",
                        "Answer approved or rejected for this draft: {draft}",
                        "One word: approved or rejected",
                    ),
                )
                .event_bus(ctx.events().clone())
                .build()?;
                let mut inputs = Inputs::new();
                inputs.insert("draft".into(), json!(ctx.read_state(|s| s.draft.clone())));
                let verdict = crew.kickoff(inputs).await?;
                Ok(if verdict.raw.trim().eq_ignore_ascii_case("approved") {
                    "approved"
                } else {
                    "rejected"
                })
            }
        })
        .emits(["approved", "rejected"])
        .listen(
            "publish",
            on("approved"),
            |ctx: FlowContext<Article>| async move {
                Ok(json!({"published": ctx.read_state(|s| s.draft.clone())}))
            },
        )
        .listen(
            "shelve",
            on("rejected"),
            |_ctx: FlowContext<Article>| async move { Ok(json!({"published": null})) },
        )
        .build()
        .unwrap()
}

#[tokio::test]
async fn an_agent_and_a_crew_run_inside_flow_methods_and_route_the_flow() {
    let server = ScriptedServer::start().await;
    server.push_text("Flows make pipelines readable.");
    server.push_text("approved");
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);

    let output = article_flow(&server, bus)
        .kickoff([("topic", json!("flows"))])
        .await
        .unwrap();
    assert_eq!(
        output.result,
        Some(json!({"published": "Flows make pipelines readable."}))
    );
    assert_eq!(output.output_of("review"), Some(&json!("approved")));
    assert_eq!(server.request_count(), 2);
    assert!(server.requests()[0].messages().iter().any(|m| {
        m["content"]
            .as_str()
            .is_some_and(|c| c.contains("Write one sentence about flows."))
    }));

    let events = recorder.events();
    // The first event of type `kind`, of the flow method `method` when one is given.
    let find = |kind: &str, method: Option<&str>| {
        events
            .iter()
            .find(|e| {
                e.type_name() == kind
                    && method.is_none_or(|method| e.to_json()["method_name"] == method)
            })
            .unwrap_or_else(|| panic!("no {kind} event of {method:?}"))
    };
    let write_started = find("method_execution_started", Some("write"));
    let agent_started = find("lite_agent_execution_started", None);
    assert_eq!(
        agent_started.parent_event_id,
        Some(write_started.event_id),
        "the agent's run hangs under the flow method"
    );
    let crew_started = find("crew_kickoff_started", None);
    let review_started = find("method_execution_started", Some("review"));
    let review_finished = find("method_execution_finished", Some("review"));
    assert!(
        review_started.emission_sequence < crew_started.emission_sequence
            && crew_started.emission_sequence < review_finished.emission_sequence
    );
    assert_eq!(recorder.type_names().last(), Some(&"flow_finished"));
}

#[tokio::test]
async fn a_crew_verdict_of_rejected_takes_the_other_branch() {
    let server = ScriptedServer::start().await;
    server.push_text("Draft.");
    server.push_text("rejected");
    let output = article_flow(&server, EventBus::new())
        .kickoff([("topic", json!("x"))])
        .await
        .unwrap();
    assert_eq!(output.result, Some(json!({"published": null})));
    assert!(output.output_of("publish").is_none());
}

#[tokio::test]
async fn a_provider_failure_inside_a_method_fails_the_flow_naming_the_method() {
    let server = ScriptedServer::start().await;
    server.push(crewai_testkit::scripted::Reply::error(
        400,
        "bad request: model not found",
    ));
    let error = article_flow(&server, EventBus::new())
        .kickoff([("topic", json!("x"))])
        .await
        .unwrap_err();
    let text = crewai_llm::error_chain(&error);
    assert!(
        text.starts_with("flow `article`: method `write` failed:"),
        "{text}"
    );
}
