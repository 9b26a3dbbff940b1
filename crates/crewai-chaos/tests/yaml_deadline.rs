//! `max_execution_time: 3` in a project's agents.yaml ends a run against a provider that never
//! answers: the same loader and builders `crewai run` uses, from the files. It ends it on time,
//! measured on the wall clock.

use std::time::{Duration, Instant};

use crewai_core::crew::CrewError;
use crewai_core::interpolate::Inputs;
use crewai_project::{BuildOptions, Project, ToolRegistry};
use crewai_testkit::fault::{FaultKind, FaultMix, FaultServer};

#[tokio::test]
async fn a_yaml_deadline_ends_a_run_the_provider_never_answers() {
    let server = FaultServer::builder()
        .mix(FaultMix::healthy().with_rate(FaultKind::NeverAnswer, 1.0))
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("agents.yaml"),
        format!(
            "waiter:\n  role: Waiter\n  goal: Wait\n  backstory: Waits.\n  max_execution_time: 3\n  llm:\n    model: openai/gpt-4o-mini\n    api_key: sk-test\n    base_url: '{}'\n    timeout: 600\n",
            server.base_url()
        ),
    )
    .unwrap();
    std::fs::write(
        config.join("tasks.yaml"),
        "wait:\n  description: Wait for the model\n  expected_output: An answer\n  agent: waiter\n  async_execution: true\n",
    )
    .unwrap();
    let project = Project::load(dir.path()).unwrap();
    let crew = project
        .build(
            &Inputs::new(),
            &BuildOptions::new(ToolRegistry::with_builtins(dir.path())),
        )
        .unwrap();

    // The timeout is only a guard against a hang: the deadline under test is 3 s, the HTTP
    // timeout 600 s, and the elapsed wall time is asserted below.
    let started = Instant::now();
    let error = tokio::time::timeout(Duration::from_secs(60), crew.kickoff(Inputs::new()))
        .await
        .expect("the kickoff ended instead of hanging")
        .expect_err("a provider that never answers cannot produce an output");
    let elapsed = started.elapsed();
    // Not before the deadline (the slack is clock granularity: the deadline's clock starts after
    // ours), and within a second after it.
    let (deadline, early) = (Duration::from_secs(3), Duration::from_millis(20));
    assert!(
        elapsed + early >= deadline && elapsed <= deadline + Duration::from_secs(1),
        "the run took {elapsed:?}; the 3 s deadline should end it in [{:?}, {:?}]",
        deadline - early,
        deadline + Duration::from_secs(1)
    );

    assert!(matches!(error, CrewError::Task(_)), "{error:?}");
    let message = crewai_llm::error_chain(&error);
    assert!(
        message.contains("timed out after 3s") && message.contains("max_execution_time"),
        "{message}"
    );
    assert!(server.request_count() >= 1);
}
