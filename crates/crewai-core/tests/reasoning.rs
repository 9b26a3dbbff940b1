//! An agent that plans (`planning_config`) against a scripted OpenAI-compatible server: the
//! forced plan call, refinement, steps run by their dependencies (independent ones in one
//! round), the observer, an early stop, a replan after a failed step, the synthesis in the
//! task's response format, the events under the agent's execution, and usage.

mod crew_support;

use crew_support::{agent_with, last_user, lookup_tool, run_solo, task, task_builder};
use crewai_core::AgentError;
use crewai_core::crew::Crew;
use crewai_core::crew::CrewError;
use crewai_core::events::{EventKind, EventRecorder};
use crewai_core::reasoning::{OBSERVE_FUNCTION, PLAN_FUNCTION, PlanningConfig, ReasoningEffort};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::{Value, json};

fn step(number: u32, description: &str, tool: Option<&str>, depends_on: &[u32]) -> Value {
    json!({"step_number": number, "description": description, "tool_to_use": tool, "depends_on": depends_on})
}

fn plan(summary: &str, steps: Vec<Value>, ready: bool) -> Reply {
    Reply::tool_call(
        PLAN_FUNCTION,
        json!({"plan": summary, "steps": steps, "ready": ready}),
    )
}

fn observation(goal_achieved: bool, last_is_answer: bool, replan: bool, reason: &str) -> Reply {
    Reply::tool_call(
        OBSERVE_FUNCTION,
        json!({"goal_achieved": goal_achieved, "last_result_is_answer": last_is_answer, "replan": replan, "reason": reason}),
    )
}

fn forced_function(request: &crewai_testkit::scripted::RecordedRequest) -> Option<String> {
    request.body["tool_choice"]["function"]["name"]
        .as_str()
        .map(str::to_string)
}

#[tokio::test]
async fn independent_steps_run_in_one_round_and_the_observer_can_end_with_the_last_result() {
    let server = ScriptedServer::start().await;
    let analyst = agent_with("Analyst", &server, |b| {
        b.tools(vec![lookup_tool("a fact")])
            .planning_config(PlanningConfig::default())
    });
    let crew = Crew::builder()
        .agents(vec![analyst.clone()])
        .tasks(vec![task("compare", "Compare bees and ants", &analyst)])
        .build()
        .unwrap();
    let recorder = EventRecorder::attach(crew.event_bus());
    server.push(
        plan(
            "Look both up, then compare.",
            vec![
                step(1, "Look up bees", Some("lookup"), &[]),
                step(2, "Look up ants", Some("lookup"), &[]),
                step(3, "Compare the two", None, &[1, 2]),
            ],
            true,
        )
        .with_usage(30, 10),
    );
    // Steps 1 and 2 run at once, so either may get either reply.
    server.push_text("Bees make honey.");
    server.push_text("Ants farm fungus.");
    server.push(observation(
        false,
        false,
        false,
        "Both looked up; compare next.",
    ));
    server.push_text("Bees make honey while ants farm fungus.");
    server.push(observation(
        true,
        true,
        false,
        "The comparison answers the task.",
    ));

    let output = crew.kickoff(Default::default()).await.unwrap();
    assert_eq!(output.raw, "Bees make honey while ants farm fungus.");

    let requests = server.requests();
    assert_eq!(requests.len(), 6, "plan, 2 steps, observe, step, observe");
    let planner = &requests[0];
    assert_eq!(planner.tool_names(), vec![PLAN_FUNCTION]);
    assert_eq!(forced_function(planner).as_deref(), Some(PLAN_FUNCTION));
    assert_eq!(planner.body["tool_choice"]["type"], "function");
    let asked = last_user(planner);
    assert!(asked.contains("Compare bees and ants"), "{asked}");
    assert!(asked.contains("- lookup: Looks something up."), "{asked}");

    for step_request in &requests[1..3] {
        assert_eq!(step_request.tool_names(), vec!["lookup"]);
        assert!(
            step_request
                .body
                .get("tool_choice")
                .is_none_or(|c| c == "auto")
        );
    }
    let first_round: Vec<String> = requests[1..3].iter().map(last_user).collect();
    assert!(first_round.iter().any(|p| p.contains("Look up bees")));
    assert!(first_round.iter().any(|p| p.contains("Look up ants")));
    assert_eq!(
        forced_function(&requests[3]).as_deref(),
        Some(OBSERVE_FUNCTION)
    );
    let compare = last_user(&requests[4]);
    assert!(compare.contains("Compare the two"), "{compare}");
    assert!(
        compare.contains("Bees make honey.") && compare.contains("Ants farm fungus."),
        "step 3 is given the results of the steps it depends on: {compare}"
    );
    assert_eq!(
        forced_function(&requests[5]).as_deref(),
        Some(OBSERVE_FUNCTION)
    );
    assert!(last_user(&requests[5]).contains("Bees make honey while ants farm fungus."));

    let events = recorder.events();
    let started = &recorder.of_type("agent_execution_started")[0];
    let reasoned = &recorder.of_type("agent_reasoning_completed")[0];
    assert_eq!(reasoned.parent_event_id, Some(started.event_id));
    assert!(matches!(
        &reasoned.kind,
        EventKind::AgentReasoningCompleted { steps, ready: true, attempts: 1, .. } if steps.len() == 3
    ));
    let observed: Vec<Vec<u32>> = recorder
        .of_type("plan_step_observed")
        .iter()
        .map(|e| match &e.kind {
            EventKind::PlanStepObserved { step_numbers, .. } => step_numbers.clone(),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(observed, vec![vec![1, 2], vec![3]]);
    // Each step's model call hangs under its step.
    let steps = recorder.of_type("plan_step_started");
    assert_eq!(steps.len(), 3);
    for step in &steps {
        assert_eq!(step.parent_event_id, Some(started.event_id));
        let calls = events
            .iter()
            .filter(|e| e.type_name() == "llm_call_started")
            .filter(|e| e.parent_event_id == Some(step.event_id))
            .count();
        assert_eq!(calls, 1, "one model call under {:?}", step.kind);
    }
    assert_eq!(recorder.of_type("plan_step_completed").len(), 3);
    let usage = crew.usage();
    assert_eq!(usage.total.successful_requests, 6);
    assert_eq!(usage.by_agent["Analyst"].successful_requests, 6);
}

#[tokio::test]
async fn a_plan_not_ready_is_refined_and_the_answer_is_written_in_the_tasks_format() {
    let server = ScriptedServer::start().await;
    let config = PlanningConfig {
        reasoning_effort: ReasoningEffort::Low,
        max_attempts: Some(2),
        ..PlanningConfig::default()
    };
    let writer = agent_with("Writer", &server, |b| b.planning_config(config));
    let schema = json!({"title": "Summary", "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    let summary = task_builder("summary", "Summarise the bee year", &writer)
        .output_json(schema)
        .build()
        .unwrap();
    server.push(plan(
        "Write it.",
        vec![step(1, "Write everything", None, &[])],
        false,
    ));
    server.push(plan(
        "Spring first, then the rest.",
        vec![
            step(1, "Describe spring", None, &[]),
            step(2, "Describe the rest of the year", None, &[1]),
        ],
        true,
    ));
    server.push_text("Spring: swarms.");
    server.push_text("Summer to winter: honey, then the cluster.");
    server.push_text(r#"{"text": "Swarms in spring, honey in summer, a cluster in winter."}"#);

    let output = run_solo(&writer, vec![summary]).await.unwrap();
    assert_eq!(
        output.tasks_output[0].json_dict.as_ref().unwrap()["text"],
        "Swarms in spring, honey in summer, a cluster in winter."
    );
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        5,
        "two plan calls, two steps, one answer; no observer"
    );
    let refine = &requests[1];
    assert_eq!(forced_function(refine).as_deref(), Some(PLAN_FUNCTION));
    assert!(
        refine.messages().iter().any(|m| m["role"] == "assistant"
            && m["content"]
                .as_str()
                .is_some_and(|c| c.contains("Write everything"))),
        "the refinement sees the plan it improves"
    );
    for step_request in &requests[2..4] {
        assert!(step_request.body.get("response_format").is_none());
        assert!(step_request.body.get("tools").is_none());
    }
    assert!(last_user(&requests[3]).contains("Spring: swarms."));
    let answer = &requests[4];
    assert_eq!(answer.body["response_format"]["type"], "json_schema");
    let asked = last_user(answer);
    assert!(asked.contains("Spring: swarms.") && asked.contains("honey, then the cluster"));
}

#[tokio::test]
async fn a_failed_step_is_planned_around_and_without_replans_the_task_fails() {
    let server = ScriptedServer::start().await;
    let config = PlanningConfig {
        reasoning_effort: ReasoningEffort::Low,
        max_replans: 1,
        system_prompt: Some("Plan like a beekeeper.".into()),
        ..PlanningConfig::default()
    };
    let agent = agent_with("Fixer", &server, |b| {
        b.planning_config(config).max_retry_limit(0)
    });
    let crew = Crew::builder()
        .agents(vec![agent.clone()])
        .tasks(vec![task("fix", "Fix the hive", &agent)])
        .build()
        .unwrap();
    let recorder = EventRecorder::attach(crew.event_bus());
    server.push(plan(
        "One go.",
        vec![step(1, "Open the hive", None, &[])],
        true,
    ));
    server.push(Reply::error(400, "the request was refused"));
    server.push(plan(
        "Try the side.",
        vec![step(2, "Open the side door", None, &[])],
        true,
    ));
    server.push_text("Side door open.");
    server.push_text("The hive is fixed through the side door.");
    let output = crew.kickoff(Default::default()).await.unwrap();
    assert_eq!(output.raw, "The hive is fixed through the side door.");
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    let replan = last_user(&requests[2]);
    assert!(
        replan.contains("Open the hive") && replan.contains("failed"),
        "{replan}"
    );
    assert!(replan.contains("numbered from 2"), "{replan}");
    for planner_call in [&requests[0], &requests[2]] {
        assert_eq!(
            planner_call.messages()[0]["content"],
            "Plan like a beekeeper.",
            "the custom system prompt is the planner's for the plan and the replan"
        );
    }
    assert_eq!(recorder.of_type("plan_step_failed").len(), 1);
    let replanned = recorder.of_type("plan_replanned");
    assert!(matches!(
        &replanned[0].kind,
        EventKind::PlanReplanned { replan_count: 1, steps, .. } if steps == &vec!["2. Open the side door".to_string()]
    ));

    // The same failure with a step waiting on it and no replan left fails the task.
    let server = ScriptedServer::start().await;
    let config = PlanningConfig {
        reasoning_effort: ReasoningEffort::Low,
        max_replans: 0,
        ..PlanningConfig::default()
    };
    let agent = agent_with("Fixer", &server, |b| {
        b.planning_config(config).max_retry_limit(0)
    });
    server.push(plan(
        "Open, then fix.",
        vec![
            step(1, "Open the hive", None, &[]),
            step(2, "Fix the frame", None, &[1]),
        ],
        true,
    ));
    server.push(Reply::error(400, "the request was refused"));
    let error = run_solo(&agent, vec![task("fix", "Fix the hive", &agent)])
        .await
        .unwrap_err();
    let CrewError::Task(task_error) = &error else {
        panic!("a task error: {error:?}");
    };
    let text = crewai_llm::error_chain(task_error);
    assert!(
        text.contains("step 1 of its plan failed") && text.contains("max_replans 0"),
        "{text}"
    );
    assert_eq!(server.requests().len(), 2, "step 2 never ran");
}

#[test]
fn planning_settings_map_onto_a_config_and_bad_ones_are_refused() {
    let llm = || {
        crewai_llm::build_llm(&crewai_llm::LlmConfig::new("openai/gpt-4o-mini").with_api_key("k"))
            .unwrap()
    };
    let base = || {
        crewai_core::Agent::builder()
            .role("R")
            .goal("G")
            .backstory("B")
            .llm(llm())
    };
    let quick = base().planning(true).build().unwrap();
    let config = quick.planning_config().unwrap();
    assert_eq!(config.reasoning_effort, ReasoningEffort::Low);
    assert_eq!(config.plan_attempts(), 1);
    assert!(!config.observes());
    let reasoning = base()
        .reasoning(true)
        .max_reasoning_attempts(4)
        .build()
        .unwrap();
    assert_eq!(reasoning.planning_config().unwrap().plan_attempts(), 4);
    assert!(base().build().unwrap().planning_config().is_none());
    let zero = PlanningConfig {
        max_steps: 0,
        ..PlanningConfig::default()
    };
    let error = base().planning_config(zero).build().unwrap_err();
    assert!(matches!(error, AgentError::Config { .. }));
    assert!(error.to_string().contains("max_steps") || format!("{error:?}").contains("max_steps"));
}

#[tokio::test]
async fn the_budget_stops_a_plan_between_steps() {
    let server = ScriptedServer::start().await;
    let config = PlanningConfig {
        reasoning_effort: ReasoningEffort::High,
        ..PlanningConfig::default()
    };
    let agent = agent_with("Counter", &server, |b| b.planning_config(config));
    server.push(
        plan(
            "Count twice.",
            vec![
                step(1, "Count once", None, &[]),
                step(2, "Count again", None, &[1]),
            ],
            true,
        )
        .with_usage(3000, 100),
    );
    server.push_text("One.");
    let error = crew_support::run_solo_with(&agent, vec![task("count", "Count", &agent)], |c| {
        c.max_tokens(3150)
    })
    .await
    .unwrap_err();
    let stop = crew_support::budget_stop(&error);
    assert_eq!(stop.task, Some("count"));
    assert_eq!(
        server.request_count(),
        1,
        "the plan's call is made; the first step's would go over the budget"
    );
}

#[tokio::test]
async fn a_step_past_its_timeout_fails_and_a_plan_with_no_result_fails_the_task() {
    let server = ScriptedServer::start().await;
    let config = PlanningConfig {
        reasoning_effort: ReasoningEffort::Low,
        max_replans: 0,
        step_timeout: Some(std::time::Duration::from_millis(200)),
        ..PlanningConfig::default()
    };
    let agent = agent_with("Slow", &server, |b| b.planning_config(config));
    let crew = Crew::builder()
        .agents(vec![agent.clone()])
        .tasks(vec![task("wait", "Wait", &agent)])
        .build()
        .unwrap();
    let recorder = EventRecorder::attach(crew.event_bus());
    server.push(plan(
        "Wait.",
        vec![step(1, "Wait a long time", None, &[])],
        true,
    ));
    server.push(Reply::text("Too late.").delayed(std::time::Duration::from_secs(5)));
    let started = std::time::Instant::now();
    let error = crew.kickoff(Default::default()).await.unwrap_err();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "the step was cut off"
    );
    let text = crewai_llm::error_chain(&error);
    assert!(
        text.contains("step 1 of its plan failed") && text.contains("timed out"),
        "{text}"
    );
    let failed = recorder.of_type("plan_step_failed");
    assert!(
        matches!(&failed[0].kind, EventKind::PlanStepFailed { step_number: 1, error, .. } if error.contains("timed out"))
    );
}
