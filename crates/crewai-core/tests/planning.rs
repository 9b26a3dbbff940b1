//! Crew planning (`planning: true`) against a scripted OpenAI-compatible server: the planner's
//! request (its response format and the summary of every task), the plans in the prompts of
//! the tasks after it, duplicates and missing plans, the events, the budget, a failed planner,
//! and a resume that applies the journaled plan without asking again.

mod crew_support;

use std::sync::Arc;

use crew_support::{agent, agent_with, budget_stop, crew_builder, last_user, lookup_tool, task};
use crewai_core::crew::{CrewError, KickoffOptions, PLANNER_SCHEMA_NAME, PLANNING_TASK_NAME};
use crewai_core::events::{EventKind, EventRecorder};
use crewai_core::store::{InMemoryRunJournal, RunJournal, RunStatus};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::json;

fn plans(entries: &[(usize, &str)]) -> String {
    let list: Vec<_> = entries
        .iter()
        .map(|(n, plan)| json!({"task_number": n, "task": format!("task {n}"), "plan": plan}))
        .collect();
    json!({ "list_of_plans_per_task": list }).to_string()
}

#[tokio::test]
async fn the_planner_sees_every_task_and_each_plan_reaches_its_task() {
    let server = ScriptedServer::start().await;
    let researcher = agent_with("Researcher", &server, |b| {
        b.tools(vec![lookup_tool("bees dance")])
    });
    let writer = agent("Writer", &server);
    let crew = crew_builder(
        &[&researcher, &writer],
        vec![
            task("research", "Find facts about bees", &researcher),
            task("write", "Write a line about bees", &writer),
        ],
    )
    .planning(true)
    .planning_llm(crew_support::llm(&server))
    .build()
    .unwrap();
    let recorder = EventRecorder::attach(crew.event_bus());
    server.push(
        Reply::text(plans(&[
            (1, "Step 1: look up bees."),
            (2, "Step 1: write one line."),
        ]))
        .with_usage(40, 20),
    );
    server.push_text("Bees dance.");
    server.push_text("Bees dance to talk.");

    let output = crew.kickoff(Default::default()).await.unwrap();
    assert_eq!(output.raw, "Bees dance to talk.");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let planner = &requests[0];
    assert_eq!(planner.body["response_format"]["type"], "json_schema");
    assert_eq!(
        planner.body["response_format"]["json_schema"]["name"],
        PLANNER_SCHEMA_NAME
    );
    assert!(
        planner.body.get("tools").is_none(),
        "the planner has no tools"
    );
    let summary = last_user(planner);
    for line in [
        "Task Number 1 - Find facts about bees",
        "\"task_expected_output\": The result of research",
        "\"agent\": Researcher",
        "\"agent_goal\": Be a good Researcher",
        "\"agent_tools\": [lookup]",
        "Task Number 2 - Write a line about bees",
        "\"agent\": Writer",
        "\"agent_tools\": \"the agent has no tools\"",
    ] {
        assert!(summary.contains(line), "{line:?} missing from {summary}");
    }
    assert!(
        planner.messages()[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You are Task Execution Planner.")
    );
    assert!(
        last_user(&requests[1]).contains("Find facts about bees\n\nStep 1: look up bees."),
        "{}",
        last_user(&requests[1])
    );
    assert!(last_user(&requests[2]).contains("Write a line about bees\n\nStep 1: write one line."));
    assert!(!last_user(&requests[2]).contains("look up bees"));
    assert!(
        output.tasks_output[0]
            .description
            .ends_with("Step 1: look up bees.")
    );

    let types = recorder.type_names();
    let at = |name: &str| types.iter().position(|t| *t == name).unwrap();
    assert!(at("crew_planning_started") < at("crew_planning_completed"));
    assert!(at("crew_planning_completed") < at("task_started"));
    let completed = recorder.of_type("crew_planning_completed");
    assert!(matches!(
        &completed[0].kind,
        EventKind::CrewPlanningCompleted { planned: 2, missing, .. } if missing.is_empty()
    ));
    let usage = crew.usage();
    assert_eq!(usage.by_agent["Task Execution Planner"].total_tokens, 60);
    assert_eq!(usage.by_task[PLANNING_TASK_NAME].total_tokens, 60);
    assert_eq!(usage.total.successful_requests, 3);
}

#[tokio::test]
async fn a_duplicate_keeps_the_first_plan_and_a_missing_plan_is_reported() {
    let server = ScriptedServer::start().await;
    let writer = agent("Writer", &server);
    let crew = crew_builder(
        &[&writer],
        vec![
            task("one", "First job", &writer),
            task("two", "Second job", &writer),
        ],
    )
    .planning(true)
    .planning_llm(crew_support::llm(&server))
    .build()
    .unwrap();
    let recorder = EventRecorder::attach(crew.event_bus());
    server.push_text(plans(&[(1, "Plan A."), (1, "Plan B.")]));
    server.push_text("done one");
    server.push_text("done two");
    crew.kickoff(Default::default()).await.unwrap();
    let requests = server.requests();
    assert!(last_user(&requests[1]).contains("First job\n\nPlan A."));
    assert!(!last_user(&requests[1]).contains("Plan B."));
    assert!(!last_user(&requests[2]).contains("Plan"));
    let completed = recorder.of_type("crew_planning_completed");
    assert!(matches!(
        &completed[0].kind,
        EventKind::CrewPlanningCompleted { planned: 1, missing, .. } if missing == &vec![2]
    ));
}

#[tokio::test]
async fn a_resumed_run_applies_its_journaled_plan_without_planning_again() {
    let server = ScriptedServer::start().await;
    let writer = agent("Writer", &server);
    let journal = Arc::new(InMemoryRunJournal::new());
    let crew = crew_builder(
        &[&writer],
        vec![
            task("one", "First job", &writer),
            task("two", "Second job", &writer),
        ],
    )
    .planning(true)
    .planning_llm(crew_support::llm(&server))
    .run_journal(journal.clone())
    .build()
    .unwrap();
    server.push_text(plans(&[(1, "Plan A."), (2, "Plan B.")]));
    server.push_text("done one");
    server.push(Reply::error(400, "the model refused"));
    let error = crew
        .kickoff_with(Default::default(), KickoffOptions::new().run_id("r1"))
        .await
        .unwrap_err();
    assert!(matches!(error, CrewError::Task(_)), "{error:?}");
    let stored = journal.load("r1").await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Failed);
    assert_eq!(stored.plan.unwrap().list_of_plans_per_task.len(), 2);

    server.push_text("done two");
    let output = crew.resume("r1").await.unwrap();
    assert_eq!(output.raw, "done two");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "the resume asks no planner");
    assert!(last_user(&requests[3]).contains("Second job\n\nPlan B."));
}

#[tokio::test]
async fn the_budget_holds_for_the_planner() {
    let server = ScriptedServer::start().await;
    let writer = agent("Writer", &server);
    let crew = crew_builder(&[&writer], vec![task("one", "First job", &writer)])
        .planning(true)
        .planning_llm(crew_support::llm(&server))
        .max_tokens(5)
        .build()
        .unwrap();
    let error = crew.kickoff(Default::default()).await.unwrap_err();
    let stop = budget_stop(&error);
    assert_eq!(stop.task, Some(PLANNING_TASK_NAME));
    assert!(stop.completed.is_empty());
    assert_eq!(server.request_count(), 0, "the refused call is never sent");
}

#[tokio::test]
async fn a_planner_whose_answer_is_no_plan_fails_the_kickoff() {
    let server = ScriptedServer::start().await;
    let writer = agent("Writer", &server);
    let crew = crew_builder(&[&writer], vec![task("one", "First job", &writer)])
        .planning(true)
        .planning_llm(crew_support::llm(&server))
        .build()
        .unwrap();
    let recorder = EventRecorder::attach(crew.event_bus());
    for _ in 0..3 {
        server.push_text("I would rather not plan.");
    }
    let error = crew.kickoff(Default::default()).await.unwrap_err();
    assert!(matches!(error, CrewError::Planning { .. }), "{error:?}");
    assert!(
        crewai_llm::error_chain(&error).contains("planning the tasks failed"),
        "{}",
        crewai_llm::error_chain(&error)
    );
    assert_eq!(recorder.of_type("crew_planning_failed").len(), 1);
    assert!(recorder.of_type("task_started").is_empty());
    // The planner's structured turn is tried again, as any agent's is (max_retry_limit 2).
    assert_eq!(server.request_count(), 3);
    assert!(crewai_llm::error_chain(&error).contains("PlannerTaskPydanticOutput"));
}
