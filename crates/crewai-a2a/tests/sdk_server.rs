//! crewai-a2a's client against an agent written with the official Python SDK (`a2a-sdk`,
//! `tests/fixtures/sdk_server.py`): its card, streaming and polled turns, a question and its
//! answer on the same task, a failed task and a cancelled one.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crewai_a2a::types::TaskState;
use crewai_a2a::{A2aClientConfig, A2aError, A2aUpdates, Conversation};
use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_testkit::process::{Announced, ListeningChild};
use tokio_util::sync::CancellationToken;

fn a2a_sdk() -> Prerequisite {
    Prerequisite::program(
        "python3 with the A2A Python SDK (a2a-sdk 1.x, with starlette and uvicorn)",
        "python3",
        &["-c", "import a2a.server.routes, starlette, uvicorn"],
        "python3 -m pip install 'a2a-sdk[http-server]==1.3.0' uvicorn (.ci/run does)",
    )
}

fn sdk_server() -> ListeningChild {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sdk_server.py");
    let mut command = Command::new("python3");
    command.arg(script).args(["--port", "0"]);
    ListeningChild::start(
        command,
        Announced::Stdout,
        Duration::from_secs(60),
        ListeningChild::port_line,
    )
}

fn config(server: &ListeningChild) -> A2aClientConfig {
    A2aClientConfig::new(&format!("http://127.0.0.1:{}", server.port))
        .unwrap()
        .timeout(Duration::from_secs(20))
}

async fn streams_a_turn_and_reads_the_card() {
    let server = sdk_server();
    let conversation = Conversation::connect(config(&server)).await.unwrap();
    assert_eq!(conversation.agent_name(), "Fixture Researcher");
    assert_eq!(conversation.client().card().skills[0].id, "research");
    assert!(conversation.client().can_stream());
    let reply = conversation
        .ask("what is A2A?", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(reply.state, TaskState::Completed);
    assert_eq!(reply.text, "REMOTE ANSWER: what is A2A?");
    assert_eq!(reply.turn, 1);
    assert!(reply.context_id.is_some());
}

async fn polls_a_turn() {
    let server = sdk_server();
    let polled = config(&server).updates(A2aUpdates::Polling {
        interval: Duration::from_millis(100),
    });
    let conversation = Conversation::connect(polled).await.unwrap();
    let reply = conversation
        .ask("polled", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        (reply.state, reply.text.as_str()),
        (TaskState::Completed, "REMOTE ANSWER: polled")
    );
}

async fn a_question_is_answered_on_the_same_task_and_turns_are_counted() {
    let server = sdk_server();
    let conversation = Conversation::connect(config(&server).max_turns(2))
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let question = conversation
        .ask("needs-input please", &cancel)
        .await
        .unwrap();
    assert_eq!(question.state, TaskState::InputRequired);
    assert_eq!(question.text, "Which year?");
    let answer = conversation.ask("2025", &cancel).await.unwrap();
    assert_eq!(answer.state, TaskState::Completed);
    assert_eq!(answer.text, "REMOTE ANSWER after input: 2025");
    assert_eq!(
        answer.task_id, question.task_id,
        "the open task was continued"
    );
    assert_eq!(answer.context_id, question.context_id);
    match conversation.ask("one more", &cancel).await {
        Err(A2aError::MaxTurns { max_turns: 2, .. }) => {}
        other => panic!("the third turn is over max_turns: {other:?}"),
    }
}

async fn a_failed_remote_task_is_a_typed_error_with_its_message() {
    let server = sdk_server();
    let conversation = Conversation::connect(config(&server)).await.unwrap();
    let error = conversation
        .ask("fail now", &CancellationToken::new())
        .await
        .unwrap_err();
    match &error {
        A2aError::TaskEnded {
            state: TaskState::Failed,
            message: Some(message),
            ..
        } => assert!(message.contains("failed on purpose"), "{message}"),
        other => panic!("a failed task: {other:?}"),
    }
}

async fn a_cancelled_turn_returns_at_once() {
    let server = sdk_server();
    let conversation = Conversation::connect(config(&server)).await.unwrap();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(800)).await;
        trigger.cancel();
    });
    let started = std::time::Instant::now();
    let error = conversation.ask("slow please", &cancel).await.unwrap_err();
    assert!(matches!(error, A2aError::Cancelled { .. }), "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

async fn a_turn_that_runs_over_its_timeout_is_a_timeout() {
    let server = sdk_server();
    let short = config(&server).timeout(Duration::from_secs(2));
    let conversation = Conversation::connect(short).await.unwrap();
    let started = std::time::Instant::now();
    let error = conversation
        .ask("slow again", &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(error, A2aError::Timeout { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

fn main() -> std::process::ExitCode {
    let sdk = a2a_sdk();
    Suite::new()
        .async_test_needing(
            "streams_a_turn_and_reads_the_card",
            &[&sdk],
            streams_a_turn_and_reads_the_card,
        )
        .async_test_needing("polls_a_turn", &[&sdk], polls_a_turn)
        .async_test_needing(
            "a_question_is_answered_on_the_same_task_and_turns_are_counted",
            &[&sdk],
            a_question_is_answered_on_the_same_task_and_turns_are_counted,
        )
        .async_test_needing(
            "a_failed_remote_task_is_a_typed_error_with_its_message",
            &[&sdk],
            a_failed_remote_task_is_a_typed_error_with_its_message,
        )
        .async_test_needing(
            "a_cancelled_turn_returns_at_once",
            &[&sdk],
            a_cancelled_turn_returns_at_once,
        )
        .async_test_needing(
            "a_turn_that_runs_over_its_timeout_is_a_timeout",
            &[&sdk],
            a_turn_that_runs_over_its_timeout_is_a_timeout,
        )
        .run()
}
