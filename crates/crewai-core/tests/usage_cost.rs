//! Exact usage, cost and budgets against a scripted OpenAI-compatible server: the totals equal
//! what the server reported call by call (streaming included), every aggregate carries its cost,
//! and a budget stops a crew between tasks, keeping what was done, so a replay can resume it.

mod crew_support;

use crew_support::{BudgetStop, budget_stop};

use crew_support::{agent, crew_builder, task};
use crewai_core::agent::Agent;
use crewai_core::crew::{Crew, CrewError};
use crewai_core::events::{EventBus, EventKind, EventRecorder};
use crewai_core::interpolate::Inputs;
use crewai_core::usage::BudgetLimit;
use crewai_llm::{PriceTable, Usage};
use crewai_testkit::scripted::{Reply, ScriptedServer};

/// gpt-4o-mini's built-in prices, USD per million tokens.
const INPUT: f64 = 0.15;
const CACHED: f64 = 0.075;
const OUTPUT: f64 = 0.60;

fn expected_cost(prompt: u64, cached: u64, completion: u64) -> f64 {
    ((prompt - cached) as f64 * INPUT + cached as f64 * CACHED + completion as f64 * OUTPUT) / 1e6
}

fn assert_close(actual: f64, expected: f64) {
    assert!((actual - expected).abs() < 1e-12, "{actual} != {expected}");
}

fn two_replies(server: &ScriptedServer) {
    server.push(Reply::text("facts about bees").with_usage(1200, 80));
    server.push(
        Reply::text("a poem about bees")
            .with_usage(2500, 150)
            .with_cached_tokens(1000),
    );
}

fn two_task_crew(server: &ScriptedServer, events: &EventBus, stream: bool) -> Crew {
    let researcher = agent("Researcher", server);
    let writer = agent("Writer", server);
    crew_builder(
        &[&researcher, &writer],
        vec![
            task("research", "Find facts about bees", &researcher),
            task("write", "Write a poem from the facts", &writer),
        ],
    )
    .event_bus(events.clone())
    .stream(stream)
    .build()
    .unwrap()
}

/// Every `llm_call_completed` usage of a run, in order.
fn call_usages(recorder: &EventRecorder) -> Vec<Usage> {
    recorder
        .events()
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::LlmCallCompleted { usage, .. } => Some(*usage),
            _ => None,
        })
        .collect()
}

async fn check_usage_of_a_two_task_run(stream: bool) {
    let server = ScriptedServer::start().await;
    two_replies(&server);
    let events = EventBus::new();
    let recorder = EventRecorder::attach(&events);
    let crew = two_task_crew(&server, &events, stream);

    let output = crew.kickoff(Inputs::new()).await.unwrap();

    let total = output.token_usage;
    assert_eq!(
        (
            total.prompt_tokens,
            total.completion_tokens,
            total.total_tokens
        ),
        (3700, 230, 3930)
    );
    assert_eq!(
        (total.cached_prompt_tokens, total.successful_requests),
        (1000, 2)
    );
    let research_cost = expected_cost(1200, 0, 80);
    let write_cost = expected_cost(2500, 1000, 150);
    assert_close(total.cost_usd, research_cost + write_cost);

    let calls = call_usages(&recorder);
    assert_eq!(calls.len(), 2);
    assert_close(calls[0].cost_usd, research_cost);
    assert_close(calls[1].cost_usd, write_cost);
    assert_eq!(
        calls.iter().map(|u| u.prompt_tokens).sum::<u64>(),
        total.prompt_tokens,
        "totals are the sum of the calls"
    );

    let summary = crew.usage();
    assert_eq!(summary.total, total);
    assert_eq!(summary.by_task["research"].prompt_tokens, 1200);
    assert_close(summary.by_task["write"].cost_usd, write_cost);
    assert_close(summary.by_agent["Researcher"].cost_usd, research_cost);
    assert_eq!(summary.by_agent["Writer"].cached_prompt_tokens, 1000);
    assert_eq!(summary.by_model.len(), 1);
    let (model, by_model) = summary.by_model.iter().next().unwrap();
    assert!(model.ends_with("gpt-4o-mini"), "{model}");
    assert_eq!(by_model.total_tokens, 3930);
}

#[tokio::test]
async fn usage_and_cost_equal_the_servers_counts_call_by_call() {
    check_usage_of_a_two_task_run(false).await;
}

#[tokio::test]
async fn streamed_runs_count_the_same_usage() {
    check_usage_of_a_two_task_run(true).await;
}

#[tokio::test]
async fn a_custom_price_table_prices_the_run() {
    let server = ScriptedServer::start().await;
    two_replies(&server);
    let researcher = agent("Researcher", &server);
    let prices = PriceTable::from_yaml_str("gpt-4o-mini: {input: 1.0, output: 2.0}").unwrap();
    let crew = crew_builder(
        &[&researcher],
        vec![
            task("research", "Find facts", &researcher),
            task("write", "Write", &researcher),
        ],
    )
    .prices(prices)
    .build()
    .unwrap();
    let output = crew.kickoff(Inputs::new()).await.unwrap();
    assert_close(
        output.token_usage.cost_usd,
        (3700.0 * 1.0 + 230.0 * 2.0) / 1e6,
    );
}

#[tokio::test]
async fn a_token_budget_stops_between_tasks_keeps_the_output_and_replay_resumes() {
    let server = ScriptedServer::start().await;
    two_replies(&server);
    let researcher = agent("Researcher", &server);
    let writer = agent("Writer", &server);
    // The first call uses 1280 tokens; the second call's prompt alone would go over 1300.
    let crew = crew_builder(
        &[&researcher, &writer],
        vec![
            task("research", "Find facts about bees", &researcher),
            task("write", "Write a poem from the facts", &writer),
        ],
    )
    .max_tokens(1300)
    .build()
    .unwrap();

    let error = crew.kickoff(Inputs::new()).await.unwrap_err();

    let BudgetStop {
        task,
        exceeded,
        completed,
        usage,
        ..
    } = budget_stop(&error);
    assert_eq!(task, Some("write"));
    assert_eq!(exceeded.limit, BudgetLimit::Tokens);
    assert_eq!(exceeded.spent, 1280.0);
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0].raw, "facts about bees");
    assert_eq!(usage.total_tokens, 1280);
    assert_eq!(
        server.request_count(),
        1,
        "the call over budget was never sent"
    );
    let message = crewai_llm::error_chain(&error);
    assert!(
        message.contains("max_tokens = 1300") && message.contains("'write'"),
        "{message}"
    );

    // Resuming from the stopped task reuses the stored research output and spends only the rest.
    let resumed = crew.replay("write", None).await.unwrap();
    assert_eq!(resumed.tasks_output.len(), 2);
    assert_eq!(resumed.tasks_output[0].raw, "facts about bees");
    assert_eq!(resumed.raw, "a poem about bees");
    assert_eq!(resumed.token_usage.prompt_tokens, 2500);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_cost_budget_stops_before_the_first_call_it_cannot_afford() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text("expensive facts").with_usage(1_000_000, 1000));
    server.push_text("never sent");
    let researcher = agent("Researcher", &server);
    let crew = crew_builder(
        &[&researcher],
        vec![
            task("research", "Find facts", &researcher),
            task("write", "Write", &researcher),
        ],
    )
    .max_cost_usd(0.10)
    .build()
    .unwrap();

    let error = crew.kickoff(Inputs::new()).await.unwrap_err();

    let BudgetStop {
        exceeded,
        completed,
        usage,
        ..
    } = budget_stop(&error);
    assert_eq!(exceeded.limit, BudgetLimit::Cost);
    assert_close(exceeded.spent, expected_cost(1_000_000, 0, 1000));
    assert_eq!(completed.len(), 1);
    assert_close(usage.cost_usd, exceeded.spent);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn budgets_must_be_positive() {
    let server = ScriptedServer::start().await;
    let researcher = agent("Researcher", &server);
    let build = |b: crewai_core::crew::CrewBuilder| {
        b.agents(vec![researcher.clone()])
            .tasks(vec![task("t", "T", &researcher)])
            .build()
    };
    assert!(matches!(
        build(Crew::builder().max_cost_usd(0.0)),
        Err(CrewError::Config { .. })
    ));
    assert!(matches!(
        build(Crew::builder().max_tokens(0)),
        Err(CrewError::Config { .. })
    ));
}

#[tokio::test]
async fn a_cost_budget_on_a_model_without_a_price_is_refused_unless_allowed() {
    let server = ScriptedServer::start().await;
    let unpriced = crewai_llm::build_llm(
        &crewai_llm::LlmConfig::new("openai/our-own-finetune-7")
            .with_base_url(server.base_url())
            .with_api_key("sk-test"),
    )
    .unwrap();
    let researcher = Agent::builder()
        .role("Researcher")
        .goal("Find facts")
        .backstory("Careful.")
        .llm(unpriced)
        .build()
        .unwrap();
    let budgeted = || {
        Crew::builder()
            .agents(vec![researcher.clone()])
            .tasks(vec![task("research", "Find facts", &researcher)])
            .max_cost_usd(1.0)
    };

    let Err(CrewError::Config { message, .. }) = budgeted().build() else {
        panic!("a budget over an unpriced model must be refused");
    };
    assert!(message.contains("'Researcher'"), "{message}");
    assert!(message.contains("our-own-finetune-7"), "{message}");
    assert!(message.contains("--allow-unpriced"), "{message}");

    assert!(budgeted().allow_unpriced(true).build().is_ok());
    // A model the generated LiteLLM table prices needs no allowance.
    let priced = agent("Researcher", &server);
    assert!(
        Crew::builder()
            .agents(vec![priced.clone()])
            .tasks(vec![task("research", "Find facts", &priced)])
            .max_cost_usd(1.0)
            .build()
            .is_ok()
    );
}

#[tokio::test]
async fn a_model_litellm_prices_only_under_its_provider_is_priced_and_budgeted() {
    // watsonx's chat replies have OpenAI's shape, so the scripted server can play the service.
    let server = ScriptedServer::start().await;
    server.push(Reply::text("facts").with_usage(1_000_000, 1_000_000));
    let origin = server.base_url().trim_end_matches("/v1").to_string();
    let env = [
        ("WATSONX_URL", origin.as_str()),
        ("WATSONX_TOKEN", "t"),
        ("WATSONX_PROJECT_ID", "p"),
    ];
    let options = crewai_llm::BuildOptions::new()
        .with_env_vars(env.map(|(k, v)| (k.to_string(), v.to_string())));
    let granite = crewai_llm::build_llm_with(
        &crewai_llm::LlmConfig::new("watsonx/ibm/granite-4-h-small"),
        &options,
    )
    .unwrap();
    assert_eq!(granite.model(), "ibm/granite-4-h-small");
    let researcher = Agent::builder()
        .role("Researcher")
        .goal("Find facts")
        .backstory("Careful.")
        .llm(granite)
        .build()
        .unwrap();
    // LiteLLM lists the model as `watsonx/ibm/granite-4-h-small` only: without the provider the
    // budget would refuse it as unpriced.
    let crew = Crew::builder()
        .agents(vec![researcher.clone()])
        .tasks(vec![task("research", "Find facts", &researcher)])
        .max_cost_usd(10.0)
        .build()
        .unwrap();

    let output = crew.kickoff(Inputs::new()).await.unwrap();

    // $0.0636 per million prompt tokens and $0.265 per million completion tokens.
    assert_close(output.token_usage.cost_usd, 0.0636 + 0.265);
    assert_eq!(server.requests()[0].path, "/ml/v1/text/chat");
}
