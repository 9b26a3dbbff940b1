//! Deadlines hold against a provider that accepts a request and never answers: the agent's
//! `max_execution_time` ends the run, not the (much longer) HTTP timeout, and it ends it on time,
//! measured on the wall clock.

use std::time::{Duration, Instant};

use crewai_core::AgentError;
use crewai_core::agent::Agent;
use crewai_core::crew::{Crew, CrewError};
use crewai_core::interpolate::Inputs;
use crewai_core::task::{Task, TaskError};
use crewai_llm::{LlmConfig, build_llm};
use crewai_testkit::fault::{FaultKind, FaultMix, FaultServer};

/// A server on which every request is read and never answered.
async fn silent_server() -> FaultServer {
    FaultServer::builder()
        .mix(FaultMix::healthy().with_rate(FaultKind::NeverAnswer, 1.0))
        .start()
        .await
}

/// The run ended because the deadline fired: not before it (so it was not some other error), and
/// within a second after it (so the deadline, not the 600 s HTTP timeout or the guard, ended it).
/// The slack below covers clock granularity only: the deadline's clock starts after ours.
fn assert_ends_at_the_deadline(elapsed: Duration, deadline: Duration) {
    let early = Duration::from_millis(20);
    assert!(
        elapsed + early >= deadline && elapsed <= deadline + Duration::from_secs(1),
        "the run took {elapsed:?}; a {deadline:?} deadline should end it in [{:?}, {:?}]",
        deadline - early,
        deadline + Duration::from_secs(1)
    );
}

fn agent(role: &str, server: &FaultServer, deadline: Option<Duration>) -> Agent {
    // A client timeout far past the deadline, so only the deadline can end the call.
    let config = LlmConfig::new("openai/gpt-4o-mini")
        .with_base_url(server.base_url())
        .with_api_key("sk-test")
        .with_timeout(600.0);
    let mut builder = Agent::builder()
        .role(role)
        .goal("Answer")
        .backstory("You answer.")
        .llm(build_llm(&config).expect("the OpenAI client builds"));
    if let Some(deadline) = deadline {
        builder = builder.max_execution_time(deadline);
    }
    builder.build().expect("the agent builds")
}

#[tokio::test]
async fn an_async_task_against_a_silent_provider_ends_with_its_timeout() {
    let server = silent_server().await;
    let waiting = agent("Waiter", &server, Some(Duration::from_secs(3)));
    let after = agent("Follower", &server, None);
    let crew = Crew::builder()
        .agents(vec![waiting.clone(), after.clone()])
        .tasks(vec![
            Task::builder()
                .name("wait")
                .description("Wait for the model")
                .expected_output("An answer")
                .agent(waiting)
                .async_execution(true)
                .build()
                .unwrap(),
            Task::builder()
                .name("follow")
                .description("Use the answer")
                .expected_output("Another answer")
                .agent(after)
                .build()
                .unwrap(),
        ])
        .build()
        .unwrap();

    // The timeout is only a guard against a hang; the deadline under test is 3 s and the elapsed
    // wall time is asserted below.
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(60), crew.kickoff(Inputs::new()))
        .await
        .expect("the kickoff ended instead of hanging");
    let elapsed = started.elapsed();
    assert_ends_at_the_deadline(elapsed, Duration::from_secs(3));

    let error = result.expect_err("a provider that never answers cannot produce an output");
    let message = crewai_llm::error_chain(&error);
    match &error {
        CrewError::Task(TaskError::Timeout { task, agent, after }) => {
            assert_eq!((task.as_str(), agent.as_str()), ("wait", "Waiter"));
            assert_eq!(*after, Duration::from_secs(3));
        }
        CrewError::Task(TaskError::Agent { task, source }) => {
            assert_eq!(task, "wait");
            assert!(
                matches!(source.as_ref(), AgentError::Timeout { after, .. } if *after == Duration::from_secs(3)),
                "{source:?}"
            );
        }
        other => panic!("expected the agent's deadline, got {other:?}"),
    }
    assert!(
        message.contains("timed out after 3s") && message.contains("max_execution_time"),
        "the error names the timeout and the setting: {message}"
    );
    let served = server.served();
    assert!(
        !served
            .iter()
            .any(|s| s.request.body.to_string().contains("Use the answer")),
        "the task after the timed-out one never started"
    );
    assert!(
        !served.is_empty() && served.len() <= 3,
        "the held request (and no storm of retries): {} requests",
        served.len()
    );
}
