//! The task layer's own model calls (an LLM guardrail's judge, the output converter) against a
//! scripted OpenAI-compatible server: their usage reaches the kickoff's total call by call, and a
//! budget stops them the way it stops the agent's calls (typed stop, finished tasks kept), in a
//! crew and in a standalone agent kickoff.

mod crew_support;

use crew_support::{BudgetStop, budget_stop};

use crew_support::{agent_with, research_then_score};
use crewai_core::AgentError;
use crewai_core::KickoffOptions;
use crewai_core::crew::{Crew, CrewBuilder};
use crewai_core::events::{EventBus, EventKind, EventRecorder};
use crewai_core::guardrail::Guardrail;
use crewai_core::interpolate::Inputs;
use crewai_core::usage::{Budget, BudgetLimit, UsageTracker};
use crewai_llm::{LlmConfig, Usage, build_llm};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::json;

/// `research`, then `score`: prose answer, conversion to `output_json`, then `guardrail`.
fn crew(
    server: &ScriptedServer,
    guardrail: Guardrail,
    more: impl FnOnce(CrewBuilder) -> CrewBuilder,
) -> Crew {
    research_then_score(server, "the title", |b| b, guardrail, more)
}

fn script(server: &ScriptedServer, conversion_prompt: u64) {
    server.push(Reply::text("The title is about bees.").with_usage(100, 20));
    server.push(Reply::text("The title scores four.").with_usage(200, 30));
    server.push(Reply::text(r#"{"score": 4}"#).with_usage(conversion_prompt, 10));
    server.push(Reply::text(r#"{"valid": true, "feedback": null}"#).with_usage(70, 5));
}

#[tokio::test]
async fn guardrail_and_conversion_calls_count_toward_the_crew_total() {
    let server = ScriptedServer::start().await;
    script(&server, 50);
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let crew = crew(
        &server,
        Guardrail::llm("The score must be a whole number"),
        |b| b.event_bus(bus),
    );

    let output = crew.kickoff(Inputs::new()).await.unwrap();

    assert_eq!(output.json_dict, Some(json!({"score": 4})));
    assert_eq!(
        server.request_count(),
        4,
        "answer, answer, conversion, judge"
    );
    let reported: Vec<Usage> = recorder
        .events()
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::LlmCallCompleted { usage, .. } => Some(*usage),
            _ => None,
        })
        .collect();
    assert_eq!(reported.len(), 4, "every call, side calls too, is reported");
    let total = output.token_usage;
    assert_eq!(
        (
            total.prompt_tokens,
            total.completion_tokens,
            total.total_tokens
        ),
        (100 + 200 + 50 + 70, 20 + 30 + 10 + 5, 485),
        "the crew total is the sum the server reported over all four requests"
    );
    assert_eq!(total.successful_requests, 4);
    let summed_cost: f64 = reported.iter().map(|u| u.cost_usd).sum();
    assert!((total.cost_usd - summed_cost).abs() < 1e-15);
    assert!((total.cost_usd - (420.0 * 0.15 + 65.0 * 0.60) / 1e6).abs() < 1e-12);
    let usage = crew.usage();
    assert_eq!(usage.by_task["score"].total_tokens, 365);
    assert_eq!(usage.by_agent["Scorer"].successful_requests, 3);
}

#[tokio::test]
async fn a_tight_token_budget_stops_at_the_guardrail_call_keeping_the_research() {
    let server = ScriptedServer::start().await;
    // 120 + 230 + 9610 = 9960 tokens before the judge; its prompt alone is more than 40 tokens.
    script(&server, 9600);
    // The guardrail's own model is a side call of the task too.
    let judge = build_llm(
        &LlmConfig::new("openai/gpt-4o")
            .with_base_url(server.base_url())
            .with_api_key("sk-test"),
    )
    .unwrap();
    let crew = crew(
        &server,
        Guardrail::llm_with("The score must be a whole number", judge),
        |b| b.max_tokens(10_000),
    );

    let error = crew.kickoff(Inputs::new()).await.unwrap_err();

    let BudgetStop {
        task,
        exceeded,
        completed,
        usage,
        ..
    } = budget_stop(&error);
    assert_eq!(task, Some("score"));
    assert_eq!(exceeded.limit, BudgetLimit::Tokens);
    assert_eq!(exceeded.spent, 9960.0);
    assert_eq!(
        exceeded.model, "gpt-4o",
        "the judge's own model was the one refused"
    );
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0].raw, "The title is about bees.");
    assert_eq!(usage.total_tokens, 9960);
    assert_eq!(server.request_count(), 3, "the judge's call was never sent");
}

#[tokio::test]
async fn a_cost_budget_stops_at_the_conversion_call() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text("The title is about bees.").with_usage(100, 20));
    server.push(Reply::text("The title scores four.").with_usage(5500, 150));
    // $0.000942 is spent after this reply: the limit leaves room for less than one prompt token.
    let spent = (5600.0 * 0.15 + 170.0 * 0.60) / 1e6;
    let crew = crew(&server, Guardrail::llm("Be a number"), |b| {
        b.max_cost_usd(spent + 1e-7)
    });

    let error = crew.kickoff(Inputs::new()).await.unwrap_err();

    let BudgetStop {
        task,
        exceeded,
        completed,
        ..
    } = budget_stop(&error);
    assert_eq!(task, Some("score"));
    assert_eq!(exceeded.limit, BudgetLimit::Cost);
    assert_eq!(completed.len(), 1);
    assert_eq!(
        server.request_count(),
        2,
        "the conversion call was never sent"
    );
}

#[tokio::test]
async fn an_agent_kickoffs_guardrail_judge_is_held_to_the_budget_it_runs_under() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text("A draft about bees.").with_usage(900, 95));
    let writer = agent_with("Writer", &server, |b| {
        b.guardrail(Guardrail::llm("The draft must mention bees"))
    });
    // A flow hands its ledger to an agent this way (`FlowContext::agent_kickoff_options`).
    let usage = UsageTracker::new().with_budget(Budget {
        max_tokens: Some(1000),
        ..Default::default()
    });
    let options = KickoffOptions::new().usage(usage.clone());

    let error = writer
        .kickoff_with("Write about bees.", options)
        .await
        .unwrap_err();

    let AgentError::BudgetExceeded { role, exceeded } = &error else {
        panic!("expected a budget stop, got {error}");
    };
    assert_eq!(role, "Writer");
    assert_eq!(exceeded.spent, 995.0);
    assert_eq!(server.request_count(), 1, "the judge's call was never sent");
    assert_eq!(usage.total().total_tokens, 995);
}
