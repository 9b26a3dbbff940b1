//! `Crew::test` and `Crew::train` against a scripted OpenAI-compatible server: the judge's
//! requests and the parsed scores, the score table and the metrics; the training iterations
//! with scripted feedback, the evaluator's request and its suggestions in a later crew's
//! prompt.

mod crew_support;

use std::sync::{Arc, Mutex};

use crew_support::{agent, crew_builder, last_user, task};
use crewai_core::crew::{TEST_EVALUATION_SCHEMA_NAME, TRAINING_EVALUATION_SCHEMA_NAME};
use crewai_core::events::{EventKind, EventRecorder};
use crewai_core::task::InputProvider;
use crewai_core::training::{InMemoryTrainingLog, TrainedAgents};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::json;

#[tokio::test]
async fn a_test_scores_every_task_of_every_run() {
    let server = ScriptedServer::start().await;
    let writer = agent("Writer", &server);
    let crew = crew_builder(
        &[&writer],
        vec![
            task("facts", "List facts about bees", &writer),
            task("line", "Write a line about bees", &writer),
        ],
    )
    .build()
    .unwrap();
    let recorder = EventRecorder::attach(crew.event_bus());
    for (run, scores) in [(1, [8, 6]), (2, [9, 7])] {
        server.push(Reply::text(format!("facts {run}")).with_usage(10, 5));
        server.push(Reply::text(format!("line {run}")).with_usage(10, 5));
        for score in scores {
            server.push_text(json!({ "quality": score }).to_string());
        }
    }
    let report = crew
        .test(2, crew_support::llm(&server), Default::default())
        .await
        .unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 8);
    let judge = &requests[2];
    assert_eq!(
        judge.body["response_format"]["json_schema"]["name"],
        TEST_EVALUATION_SCHEMA_NAME
    );
    let asked = last_user(judge);
    for part in [
        "List facts about bees",
        "The result of facts",
        "Output delivered:\nfacts 1",
    ] {
        assert!(asked.contains(part), "{part:?} missing from {asked}");
    }
    assert!(last_user(&requests[3]).contains("Output delivered:\nline 1"));

    assert_eq!(report.tasks[0].scores, vec![Some(8.0), Some(9.0)]);
    assert_eq!(report.tasks[0].average, Some(8.5));
    assert_eq!(report.tasks[1].average, Some(6.5));
    assert_eq!(report.tasks[1].agent, "Writer");
    assert_eq!(report.crew_scores, vec![Some(7.0), Some(8.0)]);
    assert_eq!(report.crew_average, Some(7.5));
    assert_eq!(report.model, "gpt-4o-mini");
    assert_eq!(report.execution_times.len(), 2);
    assert_eq!(report.crew_usage.total_tokens, 60);

    let table = report.table();
    for part in [
        "Tasks Scores",
        "(1-10 Higher is better)",
        "Tasks/Crew/Agents",
        "Run 1",
        "Run 2",
        "Avg. Total",
        "Agents",
        "Execution Time (s)",
    ] {
        assert!(table.contains(part), "{part:?} missing from\n{table}");
    }
    let row = table.lines().find(|l| l.contains("Task 1 ")).unwrap();
    assert!(
        row.contains("8.0") && row.contains("9.0") && row.contains("8.5") && row.contains("Writer"),
        "{row}"
    );
    let crew_row = table.lines().find(|l| l.starts_with("│ Crew")).unwrap();
    assert!(
        crew_row.contains("7.0") && crew_row.contains("7.5"),
        "{crew_row}"
    );

    // Metrics of both runs' tasks, judged, and of the agent over them.
    assert_eq!(report.metrics.tasks.len(), 4);
    assert_eq!(report.metrics.tasks[2].quality, Some(9.0));
    assert_eq!(report.metrics.tasks[0].work.usage.total_tokens, 15);
    let writer_metrics = &report.metrics.agents["Writer"];
    assert_eq!(writer_metrics.tasks, 4);
    assert_eq!(writer_metrics.quality, Some(7.5));
    assert_eq!(
        writer_metrics.work.llm_calls, 4,
        "the judge's calls are not the writer's"
    );

    let results = recorder.of_type("crew_test_result");
    assert_eq!(results.len(), 4);
    assert!(matches!(
        &results[3].kind,
        EventKind::CrewTestResult { iteration: 2, quality, model, task_name: Some(name), .. }
            if *quality == 7.0 && model == "gpt-4o-mini" && name == "line"
    ));
    assert_eq!(recorder.of_type("crew_test_completed").len(), 1);
}

struct ScriptedFeedback(Mutex<Vec<&'static str>>);

#[crewai_tools::async_trait]
impl InputProvider for ScriptedFeedback {
    async fn ask(&self, _prompt: &str) -> Result<String, std::io::Error> {
        let mut answers = self.0.lock().unwrap();
        Ok(match answers.is_empty() {
            true => String::new(),
            false => answers.remove(0).to_string(),
        })
    }
}

#[tokio::test]
async fn training_keeps_each_iteration_and_its_suggestions_reach_a_later_prompt() {
    let server = ScriptedServer::start().await;
    let writer = crew_support::agent_with("Writer", &server, |b| b.allow_delegation(true));
    let editor = agent("Editor", &server);
    let feedback = Arc::new(ScriptedFeedback(Mutex::new(vec!["Cite a source.", ""])));
    let crew = crew_builder(
        &[&writer, &editor],
        vec![task("line", "Write a line about bees", &writer)],
    )
    .input_provider(feedback)
    .build()
    .unwrap();
    let recorder = EventRecorder::attach(crew.event_bus());
    // Iteration 1: an answer, feedback, the improved answer. Iteration 2: accepted as it is.
    server.push_text("Bees dance.");
    server.push_text("Bees dance (Frisch, 1967).");
    server.push_text("Bees hum.");
    server.push_text(
        json!({"suggestions": ["Cite a source for every claim."], "quality": 6.5, "final_summary": "Cite sources."})
            .to_string(),
    );
    let log = InMemoryTrainingLog::new();
    let report = crew
        .train(2, Default::default(), Arc::new(log.clone()))
        .await
        .unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(
        requests[0].body.get("tools").is_none(),
        "delegation is off while training"
    );
    assert!(last_user(&requests[1]).contains("Cite a source."));
    let evaluator = &requests[3];
    assert_eq!(
        evaluator.body["response_format"]["json_schema"]["name"],
        TRAINING_EVALUATION_SCHEMA_NAME
    );
    let asked = last_user(evaluator);
    for part in [
        "The agent 'Writer'",
        "## Iteration 1",
        "First answer:\nBees dance.",
        "Feedback from the person:\nCite a source.",
        "Improved answer:\nBees dance (Frisch, 1967).",
        "## Iteration 2",
    ] {
        assert!(asked.contains(part), "{part:?} missing from {asked}");
    }

    let kept = log.examples();
    assert_eq!(kept.len(), 2);
    assert_eq!(kept[0].0, "crew");
    assert_eq!(kept[0].1.initial_output, "Bees dance.");
    assert_eq!(kept[0].1.improved_output, "Bees dance (Frisch, 1967).");
    assert_eq!(kept[1].1.human_feedback, "");
    assert_eq!(kept[1].1.improved_output, "Bees hum.");
    assert_eq!(
        report.examples,
        kept.into_iter().map(|(_, e)| e).collect::<Vec<_>>()
    );
    let taught = &report.trained.agents["Writer"];
    assert_eq!(taught.suggestions, ["Cite a source for every claim."]);
    assert_eq!(taught.quality, 6.5);
    assert!(
        !report.trained.agents.contains_key("Editor"),
        "the editor did no task"
    );
    assert!(matches!(
        &recorder.of_type("crew_train_completed")[0].kind,
        EventKind::CrewTrainCompleted { trained_agents, .. } if trained_agents == &vec!["Writer".to_string()]
    ));

    // A later crew with the trained agents: the writer's prompt ends with its suggestions.
    let later = crew_builder(
        &[&writer],
        vec![task("line", "Write a line about bees", &writer)],
    )
    .trained_agents(TrainedAgents::default().merged(report.trained))
    .build()
    .unwrap();
    server.push_text("Bees dance (Frisch, 1967).");
    later.kickoff(Default::default()).await.unwrap();
    let prompt = last_user(&server.requests()[4]);
    assert!(
        prompt.contains(
            "you MUST return the actual complete content as the final answer, not a summary.\n\nAlways follow these instructions:\n - Cite a source for every claim."
        ),
        "{prompt}"
    );
}
