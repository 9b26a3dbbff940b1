//! Running crews against scripted OpenAI-compatible servers: async tasks and their deadlines,
//! kickoff_for_each, replay from the task output store, and streaming.

mod crew_support;

use crewai_testkit::timing::assert_ended_on_time;
use std::sync::Arc;
use std::time::Duration;

use crew_support::{agent, agent_with, conversation, crew, task, task_builder};
use crewai_core::crew::{Crew, CrewError, KickoffOptions, StreamChunkType};
use crewai_core::interpolate::Inputs;
use crewai_core::output::TaskOutput;
use crewai_core::store::{InMemoryTaskOutputStore, StoredTaskOutput, TaskOutputStore};
use crewai_core::task::{Task, TaskError};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use futures::StreamExt;
use serde_json::json;

fn async_task(name: &str, agent: &crewai_core::agent::Agent) -> Task {
    task_builder(name, format!("Do {name}"), agent)
        .async_execution(true)
        .build()
        .unwrap()
}

#[tokio::test]
async fn async_tasks_run_together_and_are_joined_in_definition_order() {
    let (slow_server, fast_server, final_server) = (
        ScriptedServer::start().await,
        ScriptedServer::start().await,
        ScriptedServer::start().await,
    );
    slow_server.push(Reply::text("slow result").delayed(Duration::from_millis(300)));
    fast_server.push_text("fast result");
    final_server.push_text("combined");
    let (slow, fast, editor) = (
        agent("Slow", &slow_server),
        agent("Fast", &fast_server),
        agent("Editor", &final_server),
    );
    let crew = crew(
        &[&slow, &fast, &editor],
        vec![
            async_task("slow", &slow),
            async_task("fast", &fast),
            task("combine", "Combine both", &editor),
        ],
    );

    let output = crew.kickoff(Inputs::new()).await.unwrap();

    assert_eq!(
        output
            .tasks_output
            .iter()
            .map(|t| t.raw.as_str())
            .collect::<Vec<_>>(),
        ["slow result", "fast result", "combined"]
    );
    let last = conversation(&final_server.requests()[0]);
    assert!(
        last.contains("slow result\n\n----------\n\nfast result"),
        "the sync task waited for both: {last}"
    );
}

#[tokio::test]
async fn a_stuck_async_task_times_out_and_the_kickoff_returns_the_error() {
    let (stuck_server, other_server) =
        (ScriptedServer::start().await, ScriptedServer::start().await);
    stuck_server.push(Reply::text("too late").delayed(Duration::from_secs(60)));
    other_server.push_text("never needed");
    let stuck = agent_with("Stuck", &stuck_server, |b| {
        b.max_execution_time(Duration::from_millis(200))
            .max_retry_limit(0)
    });
    let other = agent("Other", &other_server);
    let crew = crew(
        &[&stuck, &other],
        vec![async_task("stuck", &stuck), task("after", "After", &other)],
    );

    // A generous bound only guards against a hang; the deadline itself is 200 ms, and the
    // elapsed time is asserted.
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(20), crew.kickoff(Inputs::new()))
        .await
        .expect("the kickoff returned instead of hanging");
    // The deadline, not the reply held for 60 s, ended it.
    assert_ended_on_time(started.elapsed(), Duration::from_millis(200), "deadline");

    match result {
        Err(CrewError::Task(TaskError::Timeout { task, agent, .. })) => {
            assert_eq!((task.as_str(), agent.as_str()), ("stuck", "Stuck"))
        }
        Err(CrewError::Task(TaskError::Agent { source, .. })) => {
            assert!(source.to_string().contains("timed out"), "{source}")
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(
        other_server.request_count(),
        0,
        "the task after it never started"
    );
}

#[tokio::test]
async fn the_crew_task_timeout_applies_when_the_agent_has_none() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text("late").delayed(Duration::from_secs(60)));
    let slow = agent_with("Slow", &server, |b| b.max_retry_limit(0));
    let crew = Crew::builder()
        .agents(vec![slow.clone()])
        .tasks(vec![task("t", "Work", &slow)])
        .task_timeout(Some(Duration::from_millis(200)))
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(20), crew.kickoff(Inputs::new()))
        .await
        .expect("no hang");
    // The deadline, not the reply held for 60 s, ended it.
    assert_ended_on_time(started.elapsed(), Duration::from_millis(200), "deadline");
    let error = crewai_llm::error_chain(&result.unwrap_err());
    assert!(error.contains("timed out"), "{error}");
}

#[tokio::test]
async fn kickoff_for_each_runs_every_input_with_its_own_usage_and_a_total() {
    let server = ScriptedServer::start().await;
    for topic in ["one", "two", "three"] {
        server.push(Reply::text(format!("about {topic}")).with_usage(10, 5));
    }
    let a = agent("Writer", &server);
    let crew = Crew::builder()
        .agents(vec![a.clone()])
        .tasks(vec![task("t", "Write about {topic}", &a)])
        .kickoff_concurrency(1)
        .build()
        .unwrap();
    let sets: Vec<Inputs> = ["one", "two", "three"]
        .iter()
        .map(|t| [("topic".to_string(), json!(t))].into())
        .collect();

    let outputs = crew.kickoff_for_each(sets).await.unwrap();

    assert_eq!(
        outputs.iter().map(|o| o.raw.as_str()).collect::<Vec<_>>(),
        ["about one", "about two", "about three"]
    );
    for output in &outputs {
        assert_eq!(
            output.token_usage.total_tokens, 15,
            "each run reports its own usage, not a running total"
        );
    }
    let total = crew.usage();
    assert_eq!(total.total.total_tokens, 45);
    assert_eq!(total.total.successful_requests, 3);
    assert_eq!(total.by_agent["Writer"].prompt_tokens, 30);
}

#[tokio::test]
async fn kickoff_for_each_checks_every_input_before_running() {
    let server = ScriptedServer::start().await;
    let a = agent("Writer", &server);
    let crew = crew(&[&a], vec![task("t", "Write about {topic}", &a)]);
    let sets: Vec<Inputs> = vec![
        [("topic".to_string(), json!("ok"))].into(),
        [("other".to_string(), json!("x"))].into(),
    ];
    let error = crew.kickoff_for_each(sets).await.unwrap_err();
    assert!(error.to_string().contains("{topic}"), "{error}");
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn replay_restores_earlier_outputs_and_reruns_from_the_task() {
    let server = ScriptedServer::start().await;
    server
        .push_text("facts v1")
        .push_text("report v1")
        .push_text("report v2");
    let a = agent("Analyst", &server);
    let store = Arc::new(InMemoryTaskOutputStore::new());
    let report = task_builder("report", "Report on {topic}", &a)
        .context(["facts"])
        .build()
        .unwrap();
    let crew = Crew::builder()
        .agents(vec![a.clone()])
        .tasks(vec![task("facts", "Facts on {topic}", &a), report])
        .task_output_store(store.clone())
        .build()
        .unwrap();
    crew.kickoff([("topic".to_string(), json!("bees"))].into())
        .await
        .unwrap();
    assert_eq!(store.load().await.unwrap().len(), 2);

    let replayed = crew.replay("report", None).await.unwrap();

    assert_eq!(
        replayed
            .tasks_output
            .iter()
            .map(|t| t.raw.as_str())
            .collect::<Vec<_>>(),
        ["facts v1", "report v2"]
    );
    let rerun = conversation(&server.requests()[2]);
    assert!(
        rerun.contains("Report on bees") && rerun.contains("facts v1"),
        "stored inputs and the restored context: {rerun}"
    );
    assert!(store.load().await.unwrap()[1].was_replayed);
    let missing = crew.replay("nope", None).await.unwrap_err();
    assert_eq!(
        missing.to_string(),
        "Task with id nope not found in the crew's tasks."
    );
}

#[tokio::test]
async fn replay_uses_outputs_stored_by_another_process() {
    let server = ScriptedServer::start().await;
    server.push_text("Hi");
    let a = agent("test_agent", &server);
    let context_task = task("context_task", "Context Task", &a);
    let test_task = task_builder("test_task", "Test Task", &a)
        .context(["context_task"])
        .build()
        .unwrap();
    let store = Arc::new(InMemoryTaskOutputStore::new());
    for (index, (name, raw)) in [
        ("context_task", "context raw output"),
        ("test_task", "test raw output"),
    ]
    .into_iter()
    .enumerate()
    {
        store
            .save(StoredTaskOutput {
                task_id: format!("id-{index}"),
                task_name: Some(name.into()),
                task_index: index,
                output: TaskOutput::new("stored", "stored", raw, "test_agent"),
                inputs: Inputs::new(),
                was_replayed: false,
                timestamp: chrono::Utc::now(),
            })
            .await
            .unwrap();
    }
    let crew = Crew::builder()
        .agents(vec![a])
        .tasks(vec![context_task, test_task.clone()])
        .task_output_store(store)
        .build()
        .unwrap();
    let output = crew
        .replay(&test_task.id().to_string(), None)
        .await
        .unwrap();
    assert_eq!(output.tasks_output[0].raw, "context raw output");
    assert_eq!(output.raw, "Hi");
    assert!(conversation(&server.requests()[0]).contains("context raw output"));
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn kickoff_stream_yields_text_chunks_and_tool_calls_then_the_result() {
    let server = ScriptedServer::start().await;
    server.push(Reply::tool_call("lookup", json!({"q": "bees"})));
    server.push_text("Bees make honey.");
    let lookup = crewai_tools::DynamicTool::new(
        "Lookup",
        "Looks things up.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        |_a, _c| async { Ok(crewai_tools::ToolOutput::Text("honey".into())) },
    )
    .into_handle();
    let a = agent_with("Researcher", &server, |b| b.tools(vec![lookup]));
    let crew = crew(&[&a], vec![task("t", "Tell me about bees", &a)]);

    let mut stream = crew.kickoff_stream(Inputs::new());
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.next().await {
        chunks.push(chunk);
    }
    let output = stream.result().await.unwrap();

    assert_eq!(output.raw, "Bees make honey.");
    let text: String = chunks
        .iter()
        .filter(|c| c.chunk_type == StreamChunkType::Text)
        .map(|c| c.content.as_str())
        .collect();
    assert_eq!(text, "Bees make honey.");
    let tool = chunks
        .iter()
        .find(|c| c.chunk_type == StreamChunkType::ToolCall)
        .expect("a tool-call chunk");
    assert_eq!(tool.tool_call.as_ref().unwrap().tool_name, "lookup");
    assert_eq!(tool.agent_role.as_deref(), Some("Researcher"));
    assert!(
        server.requests().iter().all(|r| r.body["stream"] == true),
        "the model was asked to stream"
    );
}

#[tokio::test]
async fn kickoff_with_hangs_under_a_parent_event_and_can_be_cancelled() {
    let server = ScriptedServer::start().await;
    server.push_text("quick");
    server.push(Reply::text("slow").delayed(Duration::from_secs(60)));
    let a = agent("Worker", &server);
    let crew = crew(&[&a], vec![task("t", "Work", &a)]);
    let recorder = crewai_core::events::EventRecorder::attach(crew.event_bus());
    let parent = crew.event_bus().emit(
        None,
        crewai_core::events::EventKind::MethodExecutionStarted {
            flow_name: "f".into(),
            method_name: "m".into(),
        },
    );

    crew.kickoff_with(Inputs::new(), KickoffOptions::new().parent_event(parent))
        .await
        .unwrap();
    assert_eq!(
        recorder.of_type("crew_kickoff_started")[0].parent_event_id,
        Some(parent)
    );

    let token = tokio_util::sync::CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let result = tokio::time::timeout(
        Duration::from_secs(20),
        crew.kickoff_with(Inputs::new(), KickoffOptions::new().cancellation(token)),
    )
    .await
    .expect("no hang");
    assert!(
        matches!(result, Err(CrewError::Cancelled { .. })),
        "{result:?}"
    );
    assert_eq!(recorder.of_type("crew_kickoff_failed").len(), 1);
}

/// Compiles only if the future can move between threads (what `tokio::spawn` needs).
fn assert_send<T: Send>(_: T) {}

#[tokio::test]
async fn kickoff_futures_are_send() {
    let server = ScriptedServer::start().await;
    let a = agent("Writer", &server);
    let crew = crew(&[&a], vec![task("t", "Write about {topic}", &a)]);
    // Never awaited: only their types matter.
    assert_send(crew.kickoff(Inputs::new()));
    assert_send(crew.kickoff_with(Inputs::new(), KickoffOptions::default()));
    assert_send(crew.kickoff_for_each(Vec::new()));
    assert_send(crew.kickoff_stream(Inputs::new()));
    assert_send(crew.replay("t", None));
    assert_send(a.kickoff("hello"));
    assert_eq!(server.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kickoff_for_each_runs_on_a_spawned_task() {
    let server = ScriptedServer::start().await;
    for topic in ["one", "two"] {
        server.push(Reply::text(format!("about {topic}")));
    }
    let a = agent("Writer", &server);
    let crew = Crew::builder()
        .agents(vec![a.clone()])
        .tasks(vec![task("t", "Write about {topic}", &a)])
        .kickoff_concurrency(1)
        .build()
        .unwrap();
    let sets: Vec<Inputs> = ["one", "two"]
        .iter()
        .map(|t| [("topic".to_string(), json!(t))].into())
        .collect();

    let spawned = crew.clone();
    let outputs = tokio::spawn(async move { spawned.kickoff_for_each(sets).await })
        .await
        .expect("the spawned kickoff did not panic")
        .unwrap();

    assert_eq!(
        outputs.iter().map(|o| o.raw.as_str()).collect::<Vec<_>>(),
        ["about one", "about two"]
    );
    assert_eq!(crew.usage().total.successful_requests, 2);
}

/// The policy a failing tool follows in a crew: the task's, else the agent's, else the crew's,
/// else `warn`. Under `raise` the task fails with the tool's error as the cause; otherwise the
/// model is told and the run goes on.
#[tokio::test]
async fn tool_failure_policy_is_the_tasks_then_the_agents_then_the_crews() {
    use crewai_core::AgentError;
    use crewai_tools::ToolFailurePolicy::{Ignore, Raise, Warn};
    type Policy = Option<crewai_tools::ToolFailurePolicy>;
    let cases: [(Policy, Policy, Policy, bool); 5] = [
        // (crew, agent, task, the run fails)
        (None, None, None, false),
        (Some(Raise), None, None, true),
        (Some(Raise), None, Some(Warn), false),
        (Some(Raise), Some(Ignore), None, false),
        (None, Some(Ignore), Some(Raise), true),
    ];
    for (crew_policy, agent_policy, task_policy, fails) in cases {
        let server = ScriptedServer::start().await;
        server.push(Reply::tool_call("failing_tool", json!({})));
        server.push_text("done without the tool");
        let worker = agent_with("Worker", &server, |b| {
            let b = b.tools(vec![crew_support::failing_tool("disk on fire")]);
            match agent_policy {
                Some(policy) => b.tool_failure_policy(policy),
                None => b,
            }
        });
        let mut t = crew_support::task_builder("work", "Use the tool", &worker);
        if let Some(policy) = task_policy {
            t = t.tool_failure_policy(policy);
        }
        let mut crew = crew_support::crew_builder(&[&worker], vec![t.build().unwrap()]);
        if let Some(policy) = crew_policy {
            crew = crew.tool_failure_policy(policy);
        }
        let result = crew.build().unwrap().kickoff(Inputs::new()).await;
        let case = format!("crew {crew_policy:?}, agent {agent_policy:?}, task {task_policy:?}");
        if fails {
            let error = result.expect_err(&case);
            let CrewError::Task(TaskError::Agent { source, .. }) = &error else {
                panic!("{case}: {error:?}");
            };
            assert!(
                matches!(source.as_ref(), AgentError::ToolFailed { tool, .. } if tool == "failing_tool"),
                "{case}: {source:?}"
            );
            let chain = crewai_llm::error_chain(&error);
            assert!(chain.contains("disk on fire"), "{case}: {chain}");
            assert_eq!(
                server.request_count(),
                1,
                "{case}: nothing runs after the failure"
            );
        } else {
            let output = result.expect(&case);
            assert_eq!(output.raw, "done without the tool", "{case}");
            assert!(
                conversation(&server.requests()[1]).contains("disk on fire"),
                "{case}: the model is told what failed"
            );
        }
    }
}
