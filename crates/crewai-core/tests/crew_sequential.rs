//! Sequential crews against a scripted OpenAI-compatible server: context edges, interpolation,
//! structured output, guardrails, conditional tasks, output files, callbacks, events and usage.

mod crew_support;

use std::sync::{Arc, Mutex};

use crew_support::{
    agent, agent_with, conversation, crew, last_user, lookup_tool, run_solo, run_solo_with,
    run_task, score_schema, task, task_builder,
};
use crewai_core::crew::Crew;
use crewai_core::events::{EventBus, EventRecorder};
use crewai_core::guardrail::{Guardrail, GuardrailPass};
use crewai_core::interpolate::Inputs;
use crewai_core::output::OutputFormat;
use crewai_core::task::{InputProvider, Task, TaskError};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use crewai_tools::{DynamicTool, ToolOutput};
use serde_json::json;

fn inputs(pairs: &[(&str, serde_json::Value)]) -> Inputs {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[tokio::test]
async fn three_tasks_follow_their_context_edges() {
    let server = ScriptedServer::start().await;
    server
        .push_text("alpha facts")
        .push_text("beta draft")
        .push_text("gamma summary");
    let writer = agent("Writer", &server);
    let first = task("first", "Collect facts", &writer);
    let second = task("second", "Draft from the facts", &writer);
    let third = task_builder("third", "Summarise the facts only", &writer)
        .context(["first"])
        .build()
        .unwrap();
    let crew = crew(&[&writer], vec![first, second, third]);

    let output = crew.kickoff(Inputs::new()).await.unwrap();

    assert_eq!(
        output
            .tasks_output
            .iter()
            .map(|t| t.raw.as_str())
            .collect::<Vec<_>>(),
        ["alpha facts", "beta draft", "gamma summary"]
    );
    assert_eq!(output.raw, "gamma summary");
    let requests = server.requests();
    assert!(!conversation(&requests[0]).contains("alpha facts"));
    assert!(
        conversation(&requests[1]).contains("alpha facts"),
        "the second task sees the first by default"
    );
    let third_prompt = conversation(&requests[2]);
    assert!(
        third_prompt.contains("alpha facts") && !third_prompt.contains("beta draft"),
        "the third task sees only its listed context: {third_prompt}"
    );
    assert_eq!(output.tasks_output[2].name.as_deref(), Some("third"));
    assert_eq!(output.tasks_output[2].agent, "Writer");
}

#[tokio::test]
async fn default_context_is_all_earlier_outputs_and_none_means_none() {
    let server = ScriptedServer::start().await;
    server
        .push_text("one")
        .push_text("two")
        .push_text("three")
        .push_text("four");
    let a = agent("Analyst", &server);
    let all = task("all", "Combine everything", &a);
    let none = task_builder("none", "Start fresh", &a)
        .expected_output("Anything")
        .context_none()
        .build()
        .unwrap();
    let crew = crew(
        &[&a],
        vec![task("t1", "One", &a), task("t2", "Two", &a), all, none],
    );

    crew.kickoff(Inputs::new()).await.unwrap();

    let requests = server.requests();
    assert!(
        last_user(&requests[2]).contains("one\n\n----------\n\ntwo"),
        "{}",
        last_user(&requests[2])
    );
    let fresh = conversation(&requests[3]);
    assert!(
        !fresh.contains("one") && !fresh.contains("three"),
        "context_none gets no context: {fresh}"
    );
}

#[tokio::test]
async fn inputs_are_interpolated_and_missing_ones_fail_before_any_call() {
    let server = ScriptedServer::start().await;
    server.push_text("Hello, World!");
    let a = crew_support::agent_with("{topic} Researcher", &server, |b| {
        b.goal("Research {topic}")
    });
    let t = Task::builder()
        .name("greet")
        .description("be an assistant that responds with {interpolation-with-hyphens}")
        .expected_output("Addressing {interpolation-with-hyphens} as JSON like {\"a\": 1}")
        .agent(a.clone())
        .build()
        .unwrap();
    let crew = crew(&[&a], vec![t]);

    let missing = crew
        .kickoff(inputs(&[("topic", json!("AI"))]))
        .await
        .unwrap_err();
    let text = missing.to_string();
    assert!(
        text.contains("{interpolation-with-hyphens}") && text.contains("task 'greet' description"),
        "{text}"
    );
    assert_eq!(
        server.request_count(),
        0,
        "nothing runs when an input is missing"
    );

    let output = crew
        .kickoff(inputs(&[
            ("topic", json!("AI")),
            ("interpolation-with-hyphens", json!("say hello world")),
        ]))
        .await
        .unwrap();
    assert_eq!(output.raw, "Hello, World!");
    let sent = conversation(&server.requests()[0]);
    assert!(
        sent.contains("AI Researcher") && sent.contains("Research AI"),
        "{sent}"
    );
    assert!(
        sent.contains("responds with say hello world") && sent.contains("{\"a\": 1}"),
        "{sent}"
    );
    assert_eq!(output.tasks_output[0].agent, "AI Researcher");
}

#[tokio::test]
async fn without_inputs_placeholders_stay_literal() {
    let server = ScriptedServer::start().await;
    server.push_text("done");
    let a = agent_with("{topic} Researcher", &server, |b| b);
    let t = task("t", "Give me an analysis around {topic}.", &a);
    run_solo(&a, vec![t]).await.unwrap();
    let sent = conversation(&server.requests()[0]);
    assert!(
        sent.contains("{topic} Researcher") && sent.contains("around {topic}."),
        "{sent}"
    );
}

#[tokio::test]
async fn values_render_like_python_str() {
    let server = ScriptedServer::start().await;
    server.push_text("ok");
    let a = agent("Clerk", &server);
    let t = task("t", "Count {n}, flag {flag}, items {items}", &a);
    crew(&[&a], vec![t])
        .kickoff(inputs(&[
            ("n", json!(2.0)),
            ("flag", json!(true)),
            ("items", json!(["a", 1])),
        ]))
        .await
        .unwrap();
    assert!(conversation(&server.requests()[0]).contains("Count 2.0, flag True, items ['a', 1]"));
}

#[tokio::test]
async fn structured_output_without_tools_asks_for_the_schema_on_the_first_call() {
    let server = ScriptedServer::start().await;
    server.push_text("{\"score\":4}");
    let scorer = agent("Scorer", &server);
    let t = task_builder("score", "Score the title", &scorer).output_json(score_schema());
    let output = run_task(&scorer, t).await.unwrap();

    let request = &server.requests()[0];
    assert_eq!(request.body["response_format"]["type"], "json_schema");
    assert_eq!(
        request.body["response_format"]["json_schema"]["name"],
        "ScoreOutput"
    );
    assert!(
        conversation(request).contains("\"score\""),
        "the schema is also described in the prompt"
    );
    assert_eq!(output.json_dict, Some(json!({"score": 4})));
    assert_eq!(output.json().unwrap(), r#"{"score": 4}"#);
    assert_eq!(output.tasks_output[0].output_format, OutputFormat::Json);
    assert_eq!(server.request_count(), 1);
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema, PartialEq)]
struct Review {
    title: String,
    stars: u8,
}

#[tokio::test]
async fn typed_output_is_read_back_as_the_rust_type() {
    let server = ScriptedServer::start().await;
    server.push_text("{\"title\": \"Dune\", \"stars\": 5}");
    let critic = agent("Critic", &server);
    let t = task_builder("review", "Review Dune", &critic).output::<Review>();
    let output = run_task(&critic, t).await.unwrap();
    assert_eq!(
        output.tasks_output[0].typed::<Review>().unwrap(),
        Review {
            title: "Dune".into(),
            stars: 5
        }
    );
    assert_eq!(output.typed::<Review>().unwrap().stars, 5);
    assert!(
        output.json().is_err(),
        "a typed (pydantic) output is not output_json"
    );
}

#[tokio::test]
async fn a_reply_that_is_not_the_schema_is_asked_again() {
    let server = ScriptedServer::start().await;
    server.push_text("Thought: I now can give a great answer\nFinal Answer: {\n  \"score\": 4\n}");
    server.push_text("{\"score\":4}");
    let scorer = agent("Scorer", &server);
    let t = task_builder("score", "Score the title", &scorer).output_json(score_schema());
    let output = run_task(&scorer, t).await.unwrap();
    assert_eq!(output.json().unwrap(), r#"{"score": 4}"#);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn with_tools_the_final_answer_is_converted_by_one_more_call() {
    let server = ScriptedServer::start().await;
    server.push(Reply::tool_call("lookup", json!({"query": "AI"})));
    server.push_text("The title scores four.");
    server.push_text("{\"score\": 4}");
    let scorer = agent_with("Scorer", &server, |b| {
        b.tools(vec![lookup_tool("rated four out of five")])
    });
    let t = task_builder("score", "Score the title", &scorer).output_json(score_schema());
    let output = run_task(&scorer, t).await.unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[0].body.get("response_format").is_none(),
        "no response format while tools are in play"
    );
    assert_eq!(
        requests[2].body["response_format"]["json_schema"]["name"],
        "ScoreOutput"
    );
    assert!(requests[2].tool_names().is_empty());
    assert!(conversation(&requests[2]).contains("The title scores four."));
    assert_eq!(output.raw, "The title scores four.");
    assert_eq!(output.json_dict, Some(json!({"score": 4})));
    assert_eq!(
        output.token_usage.successful_requests, 3,
        "the conversion call is counted"
    );
}

#[tokio::test]
async fn a_failed_guardrail_is_fed_back_and_the_agent_retries() {
    let server = ScriptedServer::start().await;
    server
        .push_text("Messi, Ronaldo")
        .push_text("1. Messi\n2. Ronaldo");
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let analyst = agent("Sports Analyst", &server);
    let numbered = Guardrail::named("numbered_list", |out| {
        if out.raw.starts_with("1.") {
            Ok(GuardrailPass::Keep)
        } else {
            Err("Use a numbered list".into())
        }
    });
    let t = task_builder("list", "List players", &analyst)
        .guardrail(numbered)
        .build()
        .unwrap();
    let output = run_solo_with(&analyst, vec![t], |c| c.event_bus(bus))
        .await
        .unwrap();

    assert_eq!(output.raw, "1. Messi\n2. Ronaldo");
    let retry = conversation(&server.requests()[1]);
    assert!(
        retry.contains("Use a numbered list") && retry.contains("Messi, Ronaldo"),
        "the retry carries the feedback and the rejected answer: {retry}"
    );
    let completed: Vec<_> = recorder
        .of_type("llm_guardrail_completed")
        .iter()
        .map(|e| {
            (
                e.to_json()["success"].clone(),
                e.to_json()["retry_count"].clone(),
            )
        })
        .collect();
    assert_eq!(
        completed,
        vec![(json!(false), json!(0)), (json!(true), json!(1))]
    );
    assert_eq!(recorder.of_type("llm_guardrail_started").len(), 2);
}

#[tokio::test]
async fn guardrails_run_in_order_and_give_up_after_the_retries() {
    let server = ScriptedServer::start().await;
    server.push_text("short").push_text("still short");
    let writer = agent("Writer", &server);
    let replace = Guardrail::named("tidy", |out| Ok(GuardrailPass::Raw(out.raw.to_uppercase())));
    let never = Guardrail::named("never", |_| Err("not good enough".into()));
    let t = task_builder("w", "Write", &writer)
        .guardrails(vec![replace, never])
        .guardrail_max_retries(1);
    let error = run_task(&writer, t).await.unwrap_err();
    let text = error.to_string();
    assert!(
        text.starts_with(
            "Task failed guardrail validation after 1 retries. Last error: not good enough"
        ),
        "{text}"
    );
    assert!(
        text.contains("guardrail 1"),
        "the failing guardrail is named by position: {text}"
    );
    assert!(
        conversation(&server.requests()[1]).contains("SHORT"),
        "the first guardrail's replacement is what the second judged"
    );
}

#[tokio::test]
async fn an_llm_guardrail_is_judged_by_the_agents_model() {
    let server = ScriptedServer::start().await;
    server.push_text("A poem about Rome");
    server.push_text("{\"valid\": true, \"feedback\": null}");
    let poet = agent("Poet", &server);
    let t = task_builder("poem", "Write a poem", &poet)
        .guardrail(Guardrail::llm("The poem must be about Italy"));
    let output = run_task(&poet, t).await.unwrap();
    assert_eq!(output.raw, "A poem about Rome");
    let judge = &server.requests()[1];
    assert!(
        conversation(judge).contains("The poem must be about Italy")
            && conversation(judge).contains("A poem about Rome")
    );
    assert!(
        judge.body["response_format"]["json_schema"]["schema"]["properties"]["valid"].is_object()
    );
    assert_eq!(
        output.token_usage.successful_requests, 2,
        "the judge's call is counted"
    );
}

#[tokio::test]
async fn a_skipped_conditional_task_leaves_a_placeholder_and_the_last_real_output_wins() {
    let server = ScriptedServer::start().await;
    server.push_text("Hi");
    let researcher = agent("Researcher", &server);
    let writer = agent("Senior Writer", &server);
    let t2 = task_builder("ideas", "Five ideas", &writer)
        .condition(|previous| previous.raw.contains("ideas"))
        .build()
        .unwrap();
    let crew = crew(
        &[&researcher, &writer],
        vec![task("hi", "Say Hi", &researcher), t2],
    );
    let output = crew.kickoff(Inputs::new()).await.unwrap();
    assert_eq!(output.raw, "Hi");
    assert_eq!(output.tasks_output.len(), 2);
    assert_eq!(output.tasks_output[1].raw, "");
    assert_eq!(output.tasks_output[1].agent, "Senior Writer");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn output_files_are_interpolated_and_their_directories_created() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start().await;
    server.push_text("AI is useful").push_text("{\"score\":3}");
    let a = agent("Writer", &server);
    let text_file = dir.path().join("reports/{topic}/out.txt");
    let json_file = dir.path().join("score_{topic}.json");
    let t1 = task_builder("t1", "Explain {topic}", &a)
        .output_file(&text_file)
        .build()
        .unwrap();
    let t2 = task_builder("t2", "Score {topic}", &a)
        .output_json(score_schema())
        .output_file(&json_file)
        .build()
        .unwrap();
    crew(&[&a], vec![t1, t2])
        .kickoff(inputs(&[("topic", json!("AI"))]))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("reports/AI/out.txt")).unwrap(),
        "AI is useful"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("score_AI.json")).unwrap(),
        "{\n  \"score\": 3\n}"
    );
}

#[tokio::test]
async fn callbacks_log_file_and_kickoff_hooks_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("logs/run.jsonl");
    let server = ScriptedServer::start().await;
    server.push_text("result");
    let a = agent("Writer", &server);
    let seen_by_task = Arc::new(Mutex::new(Vec::new()));
    let seen_by_crew = Arc::new(Mutex::new(Vec::new()));
    let (task_seen, crew_seen) = (seen_by_task.clone(), seen_by_crew.clone());
    let t = task_builder("t", "Write about {topic}", &a)
        .callback(move |out| task_seen.lock().unwrap().push(out.raw.clone()))
        .build()
        .unwrap();
    let crew = Crew::builder()
        .agents(vec![a])
        .tasks(vec![t])
        .task_callback(move |out| crew_seen.lock().unwrap().push(out.raw.clone()))
        .before_kickoff(|mut inputs| {
            inputs.insert("topic".into(), json!("bees"));
            inputs
        })
        .after_kickoff(|mut output| {
            output.raw.push_str(" (checked)");
            output
        })
        .output_log_file(&log)
        .build()
        .unwrap();
    let output = crew.kickoff(Inputs::new()).await.unwrap();
    assert_eq!(output.raw, "result (checked)");
    assert!(conversation(&server.requests()[0]).contains("Write about bees"));
    assert_eq!(*seen_by_task.lock().unwrap(), vec!["result".to_string()]);
    assert_eq!(*seen_by_crew.lock().unwrap(), vec!["result".to_string()]);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.first().unwrap()["type"], "crew_kickoff_started");
    assert_eq!(lines.last().unwrap()["type"], "crew_kickoff_completed");
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "task_completed" && l["output"] == "result")
    );
}

struct ScriptedFeedback(Mutex<Vec<String>>);

#[crewai_tools::async_trait]
impl InputProvider for ScriptedFeedback {
    async fn ask(&self, _prompt: &str) -> Result<String, std::io::Error> {
        let mut answers = self.0.lock().unwrap();
        Ok(if answers.is_empty() {
            String::new()
        } else {
            answers.remove(0)
        })
    }
}

#[tokio::test]
async fn human_feedback_makes_the_agent_improve_until_accepted() {
    let server = ScriptedServer::start().await;
    server.push_text("draft").push_text("better draft");
    let a = agent("Writer", &server);
    let t = task_builder("t", "Write", &a)
        .human_input(true)
        .build()
        .unwrap();
    let provider = Arc::new(ScriptedFeedback(Mutex::new(vec!["make it better".into()])));
    let output = run_solo_with(&a, vec![t], |c| c.input_provider(provider))
        .await
        .unwrap();
    assert_eq!(output.raw, "better draft");
    let second = conversation(&server.requests()[1]);
    assert!(
        second.contains("make it better") && second.contains("draft"),
        "{second}"
    );
}

#[tokio::test]
async fn usage_is_totalled_per_crew_agent_and_task() {
    let server = ScriptedServer::start().await;
    server
        .push(Reply::text("a").with_usage(100, 10))
        .push(Reply::text("b").with_usage(200, 20).with_cached_tokens(50));
    let first = agent("First", &server);
    let second = agent("Second", &server);
    let crew = crew(
        &[&first, &second],
        vec![task("one", "One", &first), task("two", "Two", &second)],
    );
    let output = crew.kickoff(Inputs::new()).await.unwrap();
    assert_eq!(output.token_usage.prompt_tokens, 300);
    assert_eq!(output.token_usage.completion_tokens, 30);
    assert_eq!(output.token_usage.cached_prompt_tokens, 50);
    assert_eq!(output.token_usage.successful_requests, 2);
    let usage = crew.usage();
    assert_eq!(usage.by_agent["Second"].prompt_tokens, 200);
    assert_eq!(usage.by_task["one"].completion_tokens, 10);
}

#[tokio::test]
async fn two_crews_in_one_process_do_not_see_each_others_events() {
    let (server_a, server_b) = (ScriptedServer::start().await, ScriptedServer::start().await);
    server_a.push_text("from a");
    server_b.push_text("from b");
    let make = |name: &str, server: &ScriptedServer| {
        let a = agent("Worker", server);
        Crew::builder()
            .name(name)
            .agents(vec![a.clone()])
            .tasks(vec![task("t", "Work", &a)])
            .build()
            .unwrap()
    };
    let (crew_a, crew_b) = (make("alpha", &server_a), make("beta", &server_b));
    let (seen_a, seen_b) = (
        EventRecorder::attach(crew_a.event_bus()),
        EventRecorder::attach(crew_b.event_bus()),
    );
    let (out_a, out_b) = tokio::join!(crew_a.kickoff(Inputs::new()), crew_b.kickoff(Inputs::new()));
    assert_eq!(
        (out_a.unwrap().raw, out_b.unwrap().raw),
        ("from a".to_string(), "from b".to_string())
    );
    for (seen, name, other) in [(&seen_a, "alpha", "from b"), (&seen_b, "beta", "from a")] {
        let events = seen.events();
        assert_eq!(seen.of_type("crew_kickoff_started").len(), 1);
        assert_eq!(
            seen.of_type("crew_kickoff_started")[0].to_json()["crew_name"],
            name
        );
        assert!(
            events
                .iter()
                .all(|e| !e.to_json().to_string().contains(other)),
            "{name} saw the other crew's work"
        );
        let task_started = &seen.of_type("task_started")[0];
        assert_eq!(
            task_started.parent_event_id,
            Some(seen.of_type("crew_kickoff_started")[0].event_id)
        );
    }
}

#[tokio::test]
async fn invalid_crews_are_rejected_at_build() {
    let server = ScriptedServer::start().await;
    let a = agent("Worker", &server);
    let no_agent = Task::builder()
        .name("orphan")
        .description("d")
        .expected_output("e")
        .build()
        .unwrap();
    let error = Crew::builder()
        .agents(vec![a])
        .tasks(vec![no_agent])
        .build()
        .unwrap_err();
    assert!(
        error.to_string().contains("'orphan' has no agent"),
        "{error}"
    );
}

#[tokio::test]
async fn a_single_delegating_agent_gets_no_delegation_tools() {
    let server = ScriptedServer::start().await;
    server.push_text("done alone");
    let a = agent_with("Lead", &server, |b| b.allow_delegation(true));
    run_solo(&a, vec![task("t", "Work", &a)]).await.unwrap();
    assert!(server.requests()[0].tool_names().is_empty());
}

#[tokio::test]
async fn standalone_task_execute_applies_guardrails() {
    let server = ScriptedServer::start().await;
    server.push_text("no").push_text("yes");
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let a = agent_with("Checker", &server, |b| b.event_bus(bus.clone()));
    let t = Task::builder()
        .name("check")
        .description("Answer yes")
        .expected_output("yes")
        .agent(a)
        .guardrail(Guardrail::func(|out| {
            if out.raw == "yes" {
                Ok(GuardrailPass::Keep)
            } else {
                Err("say yes".into())
            }
        }))
        .build()
        .unwrap();
    let output = t.execute(None).await.unwrap();
    assert_eq!(output.raw, "yes");
    assert_eq!(
        recorder.of_type("llm_guardrail_completed").len(),
        2,
        "events reach the agent's bus"
    );
    assert_eq!(recorder.of_type("task_completed").len(), 1);
    let unassigned = Task::builder()
        .name("x")
        .description("d")
        .expected_output("e")
        .build()
        .unwrap();
    assert!(matches!(
        unassigned.execute(None).await,
        Err(TaskError::NoAgent { .. })
    ));
}

fn counting_tool(runs: Arc<std::sync::atomic::AtomicUsize>) -> crewai_tools::ToolHandle {
    DynamicTool::new(
        "Counter",
        "Counts its runs.",
        json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}),
        move |_args, _ctx| {
            let runs = runs.clone();
            async move {
                Ok(ToolOutput::Text(format!(
                    "run {}",
                    runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
                )))
            }
        },
    )
    .into_handle()
}

#[tokio::test]
async fn the_crew_cache_is_opt_in_and_shared_by_its_agents() {
    for (cache, expected_runs) in [(false, 2), (true, 1)] {
        let server = ScriptedServer::start().await;
        for _ in 0..2 {
            server.push(Reply::tool_call("counter", json!({"key": "same"})));
            server.push_text("done");
        }
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let first = agent_with("First", &server, |b| {
            b.tools(vec![counting_tool(runs.clone())])
        });
        let second = agent_with("Second", &server, |b| {
            b.tools(vec![counting_tool(runs.clone())])
        });
        let crew = Crew::builder()
            .agents(vec![first.clone(), second.clone()])
            .tasks(vec![task("a", "A", &first), task("b", "B", &second)])
            .cache(cache)
            .build()
            .unwrap();
        crew.kickoff(Inputs::new()).await.unwrap();
        assert_eq!(
            runs.load(std::sync::atomic::Ordering::SeqCst),
            expected_runs,
            "cache: {cache}"
        );
    }
}

#[tokio::test]
async fn crew_hooks_and_step_callback_reach_every_agent() {
    let server = ScriptedServer::start().await;
    server.push_text("plain answer");
    let a = agent("Writer", &server);
    let steps = Arc::new(Mutex::new(Vec::new()));
    let seen = steps.clone();
    let hooks = crewai_core::hooks::Hooks::new().after_llm_call(|ctx| {
        ctx.response
            .as_ref()
            .map(|text| format!("[reviewed] {text}"))
    });
    let crew = Crew::builder()
        .agents(vec![a.clone()])
        .tasks(vec![task("t", "Write", &a)])
        .hooks(hooks)
        .step_callback(move |step| seen.lock().unwrap().push(format!("{step:?}")))
        .build()
        .unwrap();
    let output = crew.kickoff(Inputs::new()).await.unwrap();
    assert_eq!(output.raw, "[reviewed] plain answer");
    assert!(
        steps
            .lock()
            .unwrap()
            .iter()
            .any(|s| s.contains("FinalAnswer")),
        "{:?}",
        steps.lock().unwrap()
    );
}

#[tokio::test]
async fn fetch_inputs_lists_the_placeholders() {
    let server = ScriptedServer::start().await;
    let a = agent_with("{topic} Researcher", &server, |b| {
        b.goal("Study {field-name}")
    });
    let t = task("t", "Write about {topic} in {year}", &a);
    let crew = crew(&[&a], vec![t]);
    assert_eq!(
        crew.fetch_inputs().into_iter().collect::<Vec<_>>(),
        ["field-name", "topic", "year"]
    );
}
