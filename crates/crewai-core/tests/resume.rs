//! Durable runs against a scripted OpenAI-compatible server: every task's output is journaled
//! as it finishes, `Crew::resume` continues a run that failed, was cancelled, dropped or stopped
//! by its budget without running finished tasks again, and `Crew::fork` starts a new run from a
//! stored one.

mod crew_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crew_support::{agent, conversation, crew_builder, task, task_builder};
use crewai_core::crew::{Crew, CrewError, KickoffOptions};
use crewai_core::guardrail::{Guardrail, GuardrailPass};
use crewai_core::interpolate::Inputs;
use crewai_core::output::TaskOutput;
use crewai_core::store::{
    InMemoryRunJournal, RunJournal, RunOwner, RunStart, RunStatus, StoreError, StoredTaskOutput,
};
use crewai_core::task::Task;
use crewai_llm::Usage;
use crewai_testkit::scripted::{RecordedRequest, Reply, ScriptedServer};
use tokio_util::sync::CancellationToken;

const DESCRIPTIONS: [&str; 3] = [
    "Find facts about alpha",
    "Compare the facts with beta",
    "Conclude about gamma",
];

/// The crew a (re)started process builds: tasks `a`, `b`, `c` (`a` and `b` async when asked),
/// every task's guardrail from `guard`.
fn crew_with(
    server: &ScriptedServer,
    journal: &Arc<InMemoryRunJournal>,
    async_first_two: bool,
    guard: impl Fn(&str) -> Option<Guardrail>,
) -> Crew {
    let worker = agent("Worker", server);
    let tasks: Vec<Task> = ["a", "b", "c"]
        .iter()
        .zip(DESCRIPTIONS)
        .enumerate()
        .map(|(index, (name, description))| {
            let mut builder = task_builder(name, description, &worker)
                .async_execution(async_first_two && index < 2);
            if let Some(guardrail) = guard(name) {
                builder = builder.guardrail(guardrail);
            }
            builder.build().unwrap()
        })
        .collect();
    crew_builder(&[&worker], tasks)
        .name("research crew")
        .run_journal(journal.clone())
        .build()
        .unwrap()
}

fn crew(server: &ScriptedServer, journal: &Arc<InMemoryRunJournal>) -> Crew {
    crew_with(server, journal, false, |_| None)
}

fn named(run_id: &str) -> KickoffOptions {
    KickoffOptions::new().run_id(run_id)
}

/// Which of the three tasks a request works on (its description is in the prompt).
fn task_of(request: &RecordedRequest) -> Option<usize> {
    let text = conversation(request);
    DESCRIPTIONS.iter().position(|d| text.contains(d))
}

fn raws(output: &[TaskOutput]) -> Vec<&str> {
    output.iter().map(|t| t.raw.as_str()).collect()
}

#[tokio::test]
async fn a_failed_run_resumes_without_running_finished_tasks_again() {
    let server = ScriptedServer::start().await;
    server.push_text("alpha facts");
    server.push(Reply::error(400, "the model refused"));
    let journal = Arc::new(InMemoryRunJournal::new());

    let error = crew(&server, &journal)
        .kickoff_with(Inputs::new(), named("run-1"))
        .await
        .unwrap_err();
    assert!(matches!(error, CrewError::Task(_)), "{error}");
    let stored = journal.load("run-1").await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Failed);
    assert_eq!(stored.task_keys, ["a", "b", "c"]);
    assert_eq!(stored.tasks.keys().copied().collect::<Vec<_>>(), [0]);
    assert!(stored.error.unwrap().contains("refused"));

    // A new process builds the crew again and resumes.
    server.push_text("beta comparison");
    server.push_text("gamma conclusion");
    let resumed = crew(&server, &journal).resume("run-1").await.unwrap();
    assert_eq!(
        raws(&resumed.tasks_output),
        ["alpha facts", "beta comparison", "gamma conclusion"]
    );
    assert_eq!(resumed.run_id.as_deref(), Some("run-1"));
    let resume_requests = &server.requests()[2..];
    assert_eq!(
        resume_requests.iter().map(task_of).collect::<Vec<_>>(),
        [Some(1), Some(2)],
        "only the unfinished tasks asked the model"
    );
    assert!(
        conversation(&resume_requests[0]).contains("alpha facts"),
        "the restored output is the next task's context"
    );
    let stored = journal.load("run-1").await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Completed);
    assert_eq!(stored.tasks.len(), 3);

    // A completed run resumes to its stored output without a call.
    let again = crew(&server, &journal).resume("run-1").await.unwrap();
    assert_eq!(again.raw, "gamma conclusion");
    assert_eq!(again.tasks_output.len(), 3);
    assert_eq!(server.request_count(), 4);
}

/// The owner a killed process leaves behind: no process has its id (Linux pids stay below 2^22).
fn dead_process() -> RunOwner {
    RunOwner {
        pid: 4_194_304 + 3,
        ..RunOwner::this_process()
    }
}

fn stored_output(index: usize, raw: &str) -> StoredTaskOutput {
    StoredTaskOutput {
        task_id: format!("old-{index}"),
        task_name: Some(["a", "b", "c"][index].into()),
        task_index: index,
        output: TaskOutput::new(DESCRIPTIONS[index], "e", raw, "Worker"),
        inputs: Inputs::new(),
        was_replayed: false,
        timestamp: chrono::Utc::now(),
    }
}

#[tokio::test]
async fn an_async_task_that_finished_out_of_order_is_not_run_again() {
    let server = ScriptedServer::start().await;
    let journal = Arc::new(InMemoryRunJournal::new());
    // What a process killed while `a` was still running leaves: the later async task `b` done.
    journal
        .start(&RunStart {
            run_id: "killed".into(),
            crew: "research crew".into(),
            inputs: Inputs::new(),
            task_keys: vec!["a".into(), "b".into(), "c".into()],
            parent: None,
            carried_over: Vec::new(),
            owner: dead_process(),
        })
        .await
        .unwrap();
    journal
        .task_finished(
            "killed",
            &stored_output(1, "beta stored"),
            &Usage::default(),
        )
        .await
        .unwrap();
    server.push_text("alpha facts");
    server.push_text("gamma conclusion");

    let resumed = crew_with(&server, &journal, true, |_| None)
        .resume("killed")
        .await
        .unwrap();

    assert_eq!(
        raws(&resumed.tasks_output),
        ["alpha facts", "beta stored", "gamma conclusion"]
    );
    let requests = server.requests();
    assert_eq!(
        requests.iter().map(task_of).collect::<Vec<_>>(),
        [Some(0), Some(2)]
    );
    let last = conversation(&requests[1]);
    let (alpha, beta) = (
        last.find("alpha facts").unwrap(),
        last.find("beta stored").unwrap(),
    );
    assert!(alpha < beta, "the context keeps task order");
    let stored = journal.load("killed").await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Completed);
    assert_eq!(stored.tasks[&1].output.raw, "beta stored");
}

#[tokio::test]
async fn a_fork_copies_the_earlier_outputs_into_a_new_run() {
    let server = ScriptedServer::start().await;
    server.push_text("alpha facts");
    server.push_text("beta comparison");
    server.push_text("gamma conclusion");
    let journal = Arc::new(InMemoryRunJournal::new());
    let crew = crew(&server, &journal);
    let original = crew.kickoff(Inputs::new()).await.unwrap();
    let original_id = original.run_id.clone().unwrap();
    assert_eq!(crew.last_run_id().as_deref(), Some(original_id.as_str()));

    server.push_text("beta again");
    server.push_text("gamma again");
    let fork = crew
        .fork_with(&original_id, "b", named("the-fork"))
        .await
        .unwrap();

    assert_eq!(fork.run_id.as_deref(), Some("the-fork"));
    assert_eq!(
        raws(&fork.tasks_output),
        ["alpha facts", "beta again", "gamma again"]
    );
    assert_eq!(
        server.requests()[3..]
            .iter()
            .map(task_of)
            .collect::<Vec<_>>(),
        [Some(1), Some(2)]
    );
    let forked = journal.load("the-fork").await.unwrap().unwrap();
    let parent = forked.parent.unwrap();
    assert_eq!(
        (parent.run_id.as_str(), parent.from_task_index),
        (original_id.as_str(), 1)
    );
    assert_eq!(forked.tasks.len(), 3);
    let untouched = journal.load(&original_id).await.unwrap().unwrap();
    assert_eq!(untouched.status, RunStatus::Completed);
    assert_eq!(
        untouched
            .tasks
            .values()
            .map(|t| t.output.raw.as_str())
            .collect::<Vec<_>>(),
        ["alpha facts", "beta comparison", "gamma conclusion"]
    );

    let unknown = crew.fork(&original_id, "zzz").await.unwrap_err();
    assert!(unknown.to_string().contains("no task 'zzz'"), "{unknown}");
}

#[tokio::test]
async fn dropping_the_kickoff_records_it_cancelled_and_it_resumes() {
    let server = ScriptedServer::start().await;
    server.push_text("alpha facts");
    server.push(Reply::text("never sent").delayed(Duration::from_secs(60)));
    let journal = Arc::new(InMemoryRunJournal::new());
    let crew = crew(&server, &journal);

    tokio::select! {
        result = crew.kickoff_with(Inputs::new(), named("dropped")) => panic!("the kickoff ended: {result:?}"),
        arrived = server.wait_for_requests(2, Duration::from_secs(20)) => assert!(arrived),
    }

    let stored = journal.load("dropped").await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Cancelled);
    assert_eq!(stored.tasks.keys().copied().collect::<Vec<_>>(), [0]);

    server.push_text("beta comparison");
    server.push_text("gamma conclusion");
    let resumed = crew.resume("dropped").await.unwrap();
    assert_eq!(resumed.raw, "gamma conclusion");
    assert_eq!(
        server.requests()[2..]
            .iter()
            .map(task_of)
            .collect::<Vec<_>>(),
        [Some(1), Some(2)]
    );
}

#[tokio::test]
async fn a_cancelled_token_records_the_run_cancelled() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text("never sent").delayed(Duration::from_secs(60)));
    let journal = Arc::new(InMemoryRunJournal::new());
    let token = CancellationToken::new();
    let cancel = token.clone();
    let crew = crew(&server, &journal);
    let run = crew.kickoff_with(
        Inputs::new(),
        KickoffOptions::new().cancellation(token).run_id("stopped"),
    );
    let (result, _) = tokio::join!(run, async move {
        server.wait_for_requests(1, Duration::from_secs(20)).await;
        cancel.cancel();
    });
    assert!(matches!(result, Err(CrewError::Cancelled { .. })));
    assert_eq!(
        journal.load("stopped").await.unwrap().unwrap().status,
        RunStatus::Cancelled
    );
}

#[tokio::test]
async fn a_budget_stop_is_recorded_and_the_run_resumes() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text("alpha facts").with_usage(1200, 80));
    let journal = Arc::new(InMemoryRunJournal::new());
    let worker = agent("Worker", &server);
    let tight = |budget: u64| {
        Crew::builder()
            .agents(vec![worker.clone()])
            .tasks(vec![
                task("a", DESCRIPTIONS[0], &worker),
                task("b", DESCRIPTIONS[1], &worker),
            ])
            .max_tokens(budget)
            .run_journal(journal.clone())
            .build()
            .unwrap()
    };

    let error = tight(1300)
        .kickoff_with(Inputs::new(), named("budget"))
        .await
        .unwrap_err();
    assert!(matches!(error, CrewError::BudgetExceeded { .. }), "{error}");
    let stored = journal.load("budget").await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::BudgetStopped);
    assert_eq!(stored.tasks.len(), 1);
    assert_eq!(stored.usage.unwrap().total_tokens, 1280);

    // The budget is the run's: the resume starts with the 1280 tokens already spent.
    let again = tight(1300).resume("budget").await.unwrap_err();
    assert!(matches!(again, CrewError::BudgetExceeded { .. }), "{again}");
    let text = crewai_llm::error_chain(&again);
    assert!(text.contains("1280 tokens used"), "{text}");
    assert_eq!(
        server.request_count(),
        1,
        "the stopped resume called nothing"
    );
    assert_eq!(
        journal
            .load("budget")
            .await
            .unwrap()
            .unwrap()
            .usage
            .unwrap()
            .total_tokens,
        1280,
        "a resume that spent nothing adds nothing"
    );

    server.push(Reply::text("beta comparison").with_usage(900, 20));
    let resumed = tight(100_000).resume("budget").await.unwrap();
    assert_eq!(
        raws(&resumed.tasks_output),
        ["alpha facts", "beta comparison"]
    );
    assert_eq!(server.request_count(), 2);
    let stored = journal.load("budget").await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Completed);
    assert_eq!(
        stored.usage.unwrap().total_tokens,
        1280 + 920,
        "the journal adds the attempts up"
    );
}

#[tokio::test]
async fn a_resumed_task_is_checked_by_the_guardrail_of_the_resuming_crew() {
    let server = ScriptedServer::start().await;
    server.push_text("alpha facts");
    server.push(Reply::error(400, "the model refused"));
    let journal = Arc::new(InMemoryRunJournal::new());
    crew(&server, &journal)
        .kickoff_with(Inputs::new(), named("guarded"))
        .await
        .unwrap_err();

    let checks = Arc::new(AtomicUsize::new(0));
    let counted = checks.clone();
    let guarded = crew_with(&server, &journal, false, move |name| {
        let counted = counted.clone();
        (name == "b").then(|| {
            Guardrail::named("mentions_beta", move |output: &TaskOutput| {
                counted.fetch_add(1, Ordering::SeqCst);
                if output.raw.contains("beta") {
                    Ok(GuardrailPass::Keep)
                } else {
                    Err("mention beta".to_string())
                }
            })
        })
    });
    server.push_text("no mention");
    server.push_text("beta comparison");
    server.push_text("gamma conclusion");
    let resumed = guarded.resume("guarded").await.unwrap();

    assert_eq!(
        checks.load(Ordering::SeqCst),
        2,
        "rejected once, then passed"
    );
    assert_eq!(resumed.tasks_output[1].raw, "beta comparison");
    assert_eq!(resumed.raw, "gamma conclusion");
}

#[tokio::test]
async fn a_resume_names_what_is_wrong() {
    let server = ScriptedServer::start().await;
    server.push_text("alpha facts");
    server.push(Reply::error(400, "the model refused"));
    let journal = Arc::new(InMemoryRunJournal::new());
    crew(&server, &journal)
        .kickoff_with(Inputs::new(), named("r"))
        .await
        .unwrap_err();

    let worker = agent("Worker", &server);
    let tasks = ["a", "x", "c"].into_iter().zip(DESCRIPTIONS);
    let other = crew_builder(
        &[&worker],
        tasks.map(|(name, d)| task(name, d, &worker)).collect(),
    )
    .run_journal(journal.clone())
    .build()
    .unwrap();
    let message = other.resume("r").await.unwrap_err().to_string();
    assert!(
        message.contains("task 2 is 'b'") && message.contains("'x'"),
        "{message}"
    );
    let message = other.resume("nope").await.unwrap_err().to_string();
    assert!(message.contains("no run with that id"), "{message}");

    let no_journal = crew_support::crew(&[&worker], vec![task("a", DESCRIPTIONS[0], &worker)]);
    let message = no_journal.resume("r").await.unwrap_err().to_string();
    assert!(message.contains("run_journal"), "{message}");
    assert_eq!(
        server.request_count(),
        2,
        "no failed resume called the model"
    );
}

#[tokio::test]
async fn an_async_task_is_journaled_when_it_finishes_not_at_the_join() {
    let server = ScriptedServer::start().await;
    // `a` and `b` run at once; whichever asks first waits a minute, the other answers at once.
    server.push(Reply::text("slow answer").delayed(Duration::from_secs(60)));
    server.push_text("fast answer");
    let journal = Arc::new(InMemoryRunJournal::new());
    let crew = crew_with(&server, &journal, true, |_| None);

    let one_journaled = async {
        for _ in 0..2000 {
            let finished = journal
                .load("concurrent")
                .await
                .unwrap()
                .map_or(0, |run| run.tasks.len());
            if finished == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the fast async task was never journaled");
    };
    tokio::select! {
        result = crew.kickoff_with(Inputs::new(), named("concurrent")) => panic!("the kickoff ended: {result:?}"),
        () = one_journaled => {}
    }

    let stored = journal.load("concurrent").await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Cancelled);
    let (&fast, row) = stored.tasks.iter().next().unwrap();
    assert_eq!(row.output.raw, "fast answer");
    let fast_request = server
        .requests()
        .iter()
        .position(|r| task_of(r) == Some(fast))
        .unwrap();
    assert_eq!(fast_request, 1, "the second request got the fast reply");

    server.push_text("slow task done");
    server.push_text("gamma conclusion");
    let resumed = crew.resume("concurrent").await.unwrap();
    assert_eq!(resumed.tasks_output[fast].raw, "fast answer");
    assert_eq!(resumed.tasks_output[1 - fast].raw, "slow task done");
    assert_eq!(
        server.requests()[2..]
            .iter()
            .map(task_of)
            .collect::<Vec<_>>(),
        [Some(1 - fast), Some(2)]
    );
}

#[tokio::test]
async fn a_run_still_going_cannot_be_resumed_and_its_tasks_usage_is_journaled() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text("alpha facts").with_usage(100, 20));
    server.push(Reply::text("beta comparison").delayed(Duration::from_secs(60)));
    let journal = Arc::new(InMemoryRunJournal::new());
    let first = crew(&server, &journal);
    let second = crew(&server, &journal);

    let refused = tokio::select! {
        result = first.kickoff_with(Inputs::new(), named("busy")) => panic!("the kickoff ended: {result:?}"),
        refused = async {
            assert!(server.wait_for_requests(2, Duration::from_secs(20)).await);
            second.resume("busy").await
        } => refused,
    };
    let error = refused.unwrap_err();
    assert!(
        matches!(error, CrewError::Store(StoreError::RunOwned { .. })),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "run busy is still running in process {}",
            std::process::id()
        )) && message.contains("stop it first, or wait"),
        "{message}"
    );
    assert_eq!(
        server.request_count(),
        2,
        "the refused resume asked nothing"
    );

    // The first kickoff was dropped: the run is released, with task a's spending journaled.
    let stored = journal.load("busy").await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Cancelled);
    assert_eq!(stored.owner, None);
    assert_eq!(stored.usage.unwrap().total_tokens, 120);

    server.push(Reply::text("beta comparison").with_usage(50, 5));
    server.push(Reply::text("gamma conclusion").with_usage(50, 5));
    let resumed = second.resume("busy").await.unwrap();
    assert_eq!(resumed.raw, "gamma conclusion");
    assert_eq!(
        resumed.token_usage.total_tokens, 110,
        "this attempt's own usage"
    );
    let stored = journal.load("busy").await.unwrap().unwrap();
    assert_eq!(
        stored.usage.unwrap().total_tokens,
        120 + 110,
        "the run's usage counts both attempts"
    );
}
