//! A user's model-call layer, added through the public builders (`Crew::builder().llm_layer`,
//! `Agent::builder().llm_layer`), sees every model call of a run against a scripted
//! OpenAI-compatible server: the agents' turns, the LLM guardrail's judge and the
//! structured-output converter, each with its scope (who calls, for which task, why). What the
//! layer rewrites is what the provider receives and what the run's events report.

mod crew_support;

use crew_support::{BudgetStop, budget_stop};

use std::sync::{Arc, Mutex};

use crew_support::{agent_with, conversation, lookup_tool, research_then_score};
use crewai_core::crew::{Crew, CrewBuilder};
use crewai_core::events::{EventBus, EventKind, EventRecorder};
use crewai_core::guardrail::Guardrail;
use crewai_core::interpolate::Inputs;
use crewai_core::llm_stack::{CallPurpose, CallScope};
use crewai_llm::{ContentPart, LlmError, LlmLayer, LlmRequest, LlmResponse, Next, async_trait};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::json;

const SECRET: &str = "ACCT-4711";

/// One call as a layer saw it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    layer: &'static str,
    purpose: Option<CallPurpose>,
    role: Option<String>,
    task: Option<String>,
}

/// Notes every call it sees and replaces the account number in every text part: only `call`
/// is implemented, so streamed calls reach it through the trait's default `stream`.
struct Redact {
    name: &'static str,
    seen: Arc<Mutex<Vec<Seen>>>,
}

#[async_trait]
impl LlmLayer for Redact {
    fn name(&self) -> &str {
        self.name
    }

    async fn call(&self, mut request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
        let scope = CallScope::of(&request);
        self.seen.lock().unwrap().push(Seen {
            layer: self.name,
            purpose: scope.map(CallScope::purpose),
            role: scope.map(|s| s.agent_role().to_string()),
            task: scope.and_then(|s| s.task_name().map(str::to_string)),
        });
        for message in &mut request.messages {
            for part in &mut message.content {
                if let ContentPart::Text { text } = part {
                    *text = text.replace(SECRET, "[account]");
                }
            }
        }
        next.call(request).await
    }
}

/// `research` by the Researcher, then `score` by the Scorer: the Scorer has a tool, so its
/// prose answer is converted to `output_json` by one more call, and an LLM guardrail judges it.
fn crew(
    server: &ScriptedServer,
    scorer_layer: Option<Redact>,
    more: impl FnOnce(CrewBuilder) -> CrewBuilder,
) -> Crew {
    research_then_score(
        server,
        &format!("account {SECRET}"),
        |b| match scorer_layer {
            Some(layer) => b.llm_layer(layer),
            None => b,
        },
        Guardrail::llm("The score must be a whole number"),
        more,
    )
}

/// The four replies of a run: the two answers (the Scorer's repeats the account number), the
/// conversion, the judge's verdict.
fn script(server: &ScriptedServer) {
    server.push(Reply::text(format!("Account {SECRET} pays on time.")));
    server.push(Reply::text(format!("Account {SECRET} scores four.")));
    server.push(Reply::text(r#"{"score": 4}"#));
    server.push(Reply::text(r#"{"valid": true, "feedback": null}"#));
}

fn seen(layer: &'static str, purpose: CallPurpose, role: &str, task: &str) -> Seen {
    Seen {
        layer,
        purpose: Some(purpose),
        role: Some(role.to_string()),
        task: Some(task.to_string()),
    }
}

async fn a_crew_layer_sees_and_rewrites_every_call(stream: bool) {
    let server = ScriptedServer::start().await;
    script(&server);
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let log = Arc::new(Mutex::new(Vec::new()));
    let layer = Redact {
        name: "crew",
        seen: log.clone(),
    };
    let crew = crew(&server, None, |b| {
        b.llm_layer(layer).event_bus(bus).stream(stream)
    });

    let output = crew.kickoff(Inputs::new()).await.unwrap();

    assert_eq!(output.json_dict, Some(json!({"score": 4})));
    assert_eq!(
        *log.lock().unwrap(),
        [
            seen("crew", CallPurpose::Agent, "Researcher", "research"),
            seen("crew", CallPurpose::Agent, "Scorer", "score"),
            seen("crew", CallPurpose::Conversion, "Scorer", "score"),
            seen("crew", CallPurpose::Guardrail, "Scorer", "score"),
        ],
        "the agents' turns, the converter and the judge all pass the layer"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for (index, request) in requests.iter().enumerate() {
        let sent = conversation(request);
        assert!(!sent.contains(SECRET), "request {index} leaked: {sent}");
        assert!(sent.contains("[account]"), "request {index}: {sent}");
    }
    // The events hang below the layer: they report what was sent, not what the agent wrote.
    let started: Vec<String> = recorder
        .events()
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::LlmCallStarted { messages, .. } => Some(messages.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(started.len(), 4, "one llm_call_started per call");
    assert!(started.iter().all(|messages| !messages.contains(SECRET)));
}

#[tokio::test]
async fn a_crew_layer_sees_every_model_call_of_the_crew() {
    a_crew_layer_sees_and_rewrites_every_call(false).await;
}

#[tokio::test]
async fn a_call_only_layer_sees_streamed_calls_too() {
    a_crew_layer_sees_and_rewrites_every_call(true).await;
}

#[tokio::test]
async fn an_agents_layer_sees_its_own_calls_after_the_crews_layer() {
    let server = ScriptedServer::start().await;
    script(&server);
    let log = Arc::new(Mutex::new(Vec::new()));
    let scorer_layer = Redact {
        name: "agent",
        seen: log.clone(),
    };
    let crew_layer = Redact {
        name: "crew",
        seen: log.clone(),
    };
    let crew = crew(&server, Some(scorer_layer), |b| b.llm_layer(crew_layer));

    crew.kickoff(Inputs::new()).await.unwrap();

    assert_eq!(
        *log.lock().unwrap(),
        [
            seen("crew", CallPurpose::Agent, "Researcher", "research"),
            seen("crew", CallPurpose::Agent, "Scorer", "score"),
            seen("agent", CallPurpose::Agent, "Scorer", "score"),
            seen("crew", CallPurpose::Conversion, "Scorer", "score"),
            seen("agent", CallPurpose::Conversion, "Scorer", "score"),
            seen("crew", CallPurpose::Guardrail, "Scorer", "score"),
            seen("agent", CallPurpose::Guardrail, "Scorer", "score"),
        ],
        "the crew's layer runs first; the Scorer's sees only the Scorer's calls"
    );
}

#[tokio::test]
async fn a_standalone_kickoffs_judge_passes_the_agents_layer() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text(format!("A note about {SECRET}.")));
    server.push(Reply::text(r#"{"valid": true, "feedback": null}"#));
    let log = Arc::new(Mutex::new(Vec::new()));
    let writer = agent_with("Writer", &server, |b| {
        b.guardrail(Guardrail::llm("The note must be short"))
            .llm_layer(Redact {
                name: "agent",
                seen: log.clone(),
            })
    });

    let output = writer
        .kickoff(format!("Write a note about {SECRET}."))
        .await
        .unwrap();

    assert_eq!(output.raw, format!("A note about {SECRET}."));
    let purposes: Vec<Option<CallPurpose>> =
        log.lock().unwrap().iter().map(|s| s.purpose).collect();
    assert_eq!(
        purposes,
        [Some(CallPurpose::Agent), Some(CallPurpose::Guardrail)]
    );
    assert!(
        server
            .requests()
            .iter()
            .all(|request| !conversation(request).contains(SECRET))
    );
    assert_eq!(
        output.usage.successful_requests, 2,
        "the judge's call counts in the kickoff's usage"
    );
}

#[tokio::test]
async fn a_layers_budget_refusal_stops_the_crew_with_the_finished_outputs() {
    /// Refuses every call of the Scorer with the typed budget error.
    struct ScorerBudget;

    #[async_trait]
    impl LlmLayer for ScorerBudget {
        fn name(&self) -> &str {
            "scorer_budget"
        }
        async fn call(&self, request: LlmRequest, next: Next<'_>) -> Result<LlmResponse, LlmError> {
            if CallScope::of(&request).is_some_and(|s| s.agent_role() == "Scorer") {
                return Err(LlmError::BudgetExceeded(Box::new(
                    crewai_llm::BudgetExceeded {
                        limit: crewai_llm::BudgetLimit::Tokens,
                        max: 0.0,
                        spent: 0.0,
                        next_call: 1.0,
                        model: next.model().model().to_string(),
                    },
                )));
            }
            next.call(request).await
        }
    }

    let server = ScriptedServer::start().await;
    script(&server);
    let crew = crew(&server, None, |b| b.llm_layer(ScorerBudget));

    let error = crew.kickoff(Inputs::new()).await.unwrap_err();

    let BudgetStop {
        task, completed, ..
    } = budget_stop(&error);
    assert_eq!(task, Some("score"));
    assert_eq!(completed.len(), 1);
    assert_eq!(server.request_count(), 1, "only the research was sent");
}

#[tokio::test]
async fn a_before_hooks_rewrite_stays_in_the_agents_conversation() {
    let server = ScriptedServer::start().await;
    server.push(Reply::tool_call("Lookup", json!({"query": "account 7"})));
    server.push(Reply::text("Account 7 is in good standing."));
    let hooks = crewai_core::hooks::Hooks::new().before_llm_call(|ctx| {
        if ctx.iterations == 0 {
            ctx.messages
                .push(crewai_llm::Message::user("Answer in one sentence."));
        }
        crewai_core::hooks::HookDecision::Continue
    });
    let checker = agent_with("Checker", &server, |b| {
        b.tools(vec![lookup_tool("in good standing")]).hooks(hooks)
    });

    checker.kickoff("Check account 7.").await.unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert!(
            conversation(request).contains("Answer in one sentence."),
            "the note the hook added on the first call is still there on the second"
        );
    }
    assert_eq!(
        requests[1].messages().len(),
        requests[0].messages().len() + 2,
        "the second call adds the tool round to the rewritten conversation, once"
    );
}
