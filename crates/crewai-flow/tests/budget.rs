//! Flow budgets against a scripted OpenAI-compatible server (the real OpenAI client over HTTP on
//! 127.0.0.1): the crews and agents a flow's methods run draw from one ledger, the flow's
//! `max_tokens` stops the run with a typed error that keeps what was produced, and a persisted
//! run resumes from the stopped method once the limit is raised.

mod common;
use common::{one_task_crew, scripted_agent};

use std::sync::Arc;

use crewai_core::agent::Agent;
use crewai_core::interpolate::Inputs;
use crewai_core::usage::BudgetLimit;
use crewai_flow::{
    Flow, FlowBuildError, FlowContext, FlowError, FlowPersistence, RunStatus,
    SqliteFlowPersistence, on,
};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Article {
    #[serde(default)]
    id: String,
    #[serde(default)]
    outline: String,
    #[serde(default)]
    draft: String,
}

fn agent(server: &ScriptedServer, role: &str) -> Agent {
    scripted_agent(server, role, "Write well", "You write crisp prose.")
}

/// `outline` runs an agent, `write` runs a one-task crew; both with the flow's kickoff options.
fn article_flow(
    server: &ScriptedServer,
    max_tokens: u64,
    store: Option<SqliteFlowPersistence>,
) -> Flow<Article> {
    let planner = agent(server, "Planner");
    let writer = agent(server, "Writer");
    let builder = Flow::typed_builder::<Article>()
        .name("article")
        .max_tokens(max_tokens);
    let builder = match store {
        Some(store) => builder.persistence(Arc::new(store)).persist(),
        None => builder,
    };
    builder
        .start("outline", move |ctx: FlowContext<Article>| {
            let planner = planner.clone();
            async move {
                let outline = planner
                    .kickoff_with("Outline an article on bees.", ctx.agent_kickoff_options())
                    .await?;
                ctx.update_state(|s| s.outline = outline.raw.clone());
                Ok(outline.raw)
            }
        })
        .listen("write", on("outline"), move |ctx: FlowContext<Article>| {
            let writer = writer.clone();
            async move {
                let crew = one_task_crew(
                    "writers",
                    writer,
                    (
                        "draft",
                        "Write the article from this outline: {outline}",
                        "The article",
                    ),
                )
                .build()?;
                let mut inputs = Inputs::new();
                inputs.insert(
                    "outline".into(),
                    json!(ctx.read_state(|s| s.outline.clone())),
                );
                let output = crew
                    .kickoff_with(inputs, ctx.crew_kickoff_options())
                    .await?;
                ctx.update_state(|s| s.draft = output.raw.clone());
                Ok(output.raw)
            }
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn agent_and_crew_calls_share_the_flows_ledger() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text("1. Hives 2. Honey").with_usage(300, 40));
    server.push(Reply::text("Bees build hives and make honey.").with_usage(500, 60));
    let output = article_flow(&server, 100_000, None)
        .kickoff(Vec::<(String, serde_json::Value)>::new())
        .await
        .unwrap();
    assert_eq!(output.state.draft, "Bees build hives and make honey.");
    let total = output.usage.total;
    assert_eq!(
        (
            total.prompt_tokens,
            total.completion_tokens,
            total.total_tokens
        ),
        (800, 100, 900),
        "the flow's usage is the sum the server reported"
    );
    assert_eq!(total.successful_requests, 2);
    assert_eq!(output.usage.by_agent["Planner"].total_tokens, 340);
    assert_eq!(output.usage.by_task["draft"].total_tokens, 560);
    let expected_cost = (800.0 * 0.15 + 100.0 * 0.60) / 1e6;
    assert!((total.cost_usd - expected_cost).abs() < 1e-12, "{total:?}");
}

#[tokio::test]
async fn a_token_budget_stops_the_crew_keeps_the_outline_and_resume_finishes() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text("1. Hives 2. Honey").with_usage(900, 100));
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteFlowPersistence::open(dir.path().join("flows.db")).unwrap();

    // The outline uses the whole budget, so the crew's first call is refused before it is sent.
    let error = article_flow(&server, 1000, Some(store.clone()))
        .kickoff(Vec::<(String, serde_json::Value)>::new())
        .await
        .unwrap_err();
    let message = error.to_string();
    let FlowError::BudgetExceeded {
        id,
        method,
        exceeded,
        completed,
        state,
        usage,
        saved,
        ..
    } = error
    else {
        panic!("expected a budget stop, got {message}");
    };
    assert_eq!(method, "write");
    assert_eq!(exceeded.limit, BudgetLimit::Tokens);
    assert_eq!(exceeded.spent, 1000.0);
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0].output, json!("1. Hives 2. Honey"));
    assert_eq!(state["outline"], "1. Hives 2. Honey");
    assert_eq!(usage.total.total_tokens, 1000);
    assert!(saved);
    assert_eq!(server.request_count(), 1, "the refused call was never sent");
    assert!(
        message.contains("method `write`") && message.contains("max_tokens = 1000"),
        "{message}"
    );
    let snapshot = store.load_state(&id).await.unwrap().unwrap();
    assert_eq!(snapshot.progress.status, RunStatus::BudgetExceeded);
    assert_eq!(snapshot.progress.usage.total.total_tokens, 1000);

    // Resumed with a higher limit: only the stopped method runs, and the budget counts the
    // tokens spent before the stop.
    server.push(Reply::text("Bees build hives.").with_usage(400, 50));
    let output = article_flow(&server, 5000, Some(store.clone()))
        .resume(id.clone())
        .await
        .unwrap();
    assert_eq!(
        server.request_count(),
        2,
        "the outline was not asked for again"
    );
    assert_eq!(output.state.draft, "Bees build hives.");
    assert_eq!(output.method_outputs.len(), 2);
    assert_eq!(output.usage.total.total_tokens, 1450);

    // A limit the spent tokens already reach stops the resumed run at once, sending nothing.
    let fresh = tempfile::tempdir().unwrap();
    let store = SqliteFlowPersistence::open(fresh.path().join("flows.db")).unwrap();
    server.push(Reply::text("outline").with_usage(900, 100));
    let Err(FlowError::BudgetExceeded { id, .. }) =
        article_flow(&server, 1000, Some(store.clone()))
            .kickoff(Vec::<(String, serde_json::Value)>::new())
            .await
    else {
        panic!("expected a budget stop");
    };
    let again = article_flow(&server, 1000, Some(store)).resume(id).await;
    assert!(
        matches!(&again, Err(FlowError::BudgetExceeded { method, .. }) if method == "write"),
        "{again:?}"
    );
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn without_persistence_the_stop_still_keeps_the_outputs() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text("outline").with_usage(900, 100));
    let error = article_flow(&server, 1000, None)
        .kickoff(Vec::<(String, serde_json::Value)>::new())
        .await
        .unwrap_err();
    let FlowError::BudgetExceeded {
        completed, saved, ..
    } = error
    else {
        panic!("expected a budget stop, got {error}");
    };
    assert_eq!(completed.len(), 1);
    assert!(!saved);
}

#[test]
fn budgets_must_be_positive() {
    let noop = |_ctx: FlowContext| async move { Ok(1) };
    let zero = Flow::builder().start("s", noop).max_tokens(0).build();
    assert!(matches!(
        zero,
        Err(FlowBuildError::InvalidBudget {
            setting: "max_tokens",
            ..
        })
    ));
    let negative = Flow::builder().start("s", noop).max_cost_usd(-0.5).build();
    assert!(
        matches!(
            &negative,
            Err(FlowBuildError::InvalidBudget {
                setting: "max_cost_usd",
                ..
            })
        ),
        "{:?}",
        negative.err()
    );
    let flow = Flow::builder()
        .start("s", noop)
        .max_cost_usd(0.25)
        .build()
        .unwrap();
    assert_eq!(flow.budget().max_cost_usd, Some(0.25));
}
