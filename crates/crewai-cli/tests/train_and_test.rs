//! `crewai train` and `crewai test` on the `planned-brief` example, run as a user runs them
//! against a scripted OpenAI-compatible server with scripted feedback on stdin: the requests
//! sent (the planner's, the judge's, the training evaluator's), the parsed scores in the table
//! and the JSON report, the trained-agents file, and the suggestions in a later run's prompt.

use std::io::Write;
use std::process::Stdio;

mod support;

use crewai_testkit::scripted::{RecordedRequest, ScriptedServer};
use serde_json::{Value, json};
use support::{assert_contains, copy_dir, crewai_at, examples, last_json_line, run, run_ok, text};

fn example() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&examples().join("planned-brief"), dir.path());
    dir
}

fn plan() -> String {
    json!({"list_of_plans_per_task": [
        {"task_number": 1, "task": "research_task", "plan": "Step 1: list what is known."},
        {"task_number": 2, "task": "brief_task", "plan": "Step 1: keep it short."}
    ]})
    .to_string()
}

fn format_name(request: &RecordedRequest) -> &str {
    request.body["response_format"]["json_schema"]["name"]
        .as_str()
        .unwrap_or_default()
}

fn user_text(request: &RecordedRequest) -> String {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn train_keeps_the_feedback_and_a_later_run_follows_the_suggestions() {
    let dir = example();
    let project = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    // Iteration 1: the plan, the research, feedback on it and the improved research, the brief.
    server.push_text(plan());
    server.push_text("1. Bees dance.");
    server.push_text("1. Bees dance (von Frisch).");
    server.push_text("Bees dance to share where food is.");
    // Iteration 2: both answers accepted.
    server.push_text(plan());
    server.push_text("1. Bees hum.");
    server.push_text("Bees hum.");
    // One evaluator call per agent, in role order.
    server.push_text(
        json!({"suggestions": ["Keep the brief under three sentences."], "quality": 8.0, "final_summary": "Fine."})
            .to_string(),
    );
    server.push_text(
        json!({"suggestions": ["Name a source for every fact."], "quality": 6.0, "final_summary": "Cite sources."})
            .to_string(),
    );
    let mut child = crewai_at(&["train", "-n", "2", "--project", project], &server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Feedback on the first answer only; the closed input accepts every other answer.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Name a source.\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));

    let requests = server.requests();
    assert_eq!(requests.len(), 9);
    assert_eq!(format_name(&requests[0]), "PlannerTaskPydanticOutput");
    assert_contains(&user_text(&requests[2]), "Name a source.");
    let evaluator = &requests[8];
    assert_eq!(format_name(evaluator), "TrainingTaskEvaluation");
    let asked = user_text(evaluator);
    assert_contains(&asked, "First answer:\n1. Bees dance.");
    assert_contains(&asked, "Feedback from the person:\nName a source.");
    assert_contains(&asked, "Improved answer:\n1. Bees dance (von Frisch).");
    assert_contains(&stdout, "Kept 4 iteration(s)");
    assert_contains(&stdout, "  - Name a source for every fact.");

    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("trained_agents_data.json")).unwrap(),
    )
    .unwrap();
    let researcher = file
        .as_object()
        .unwrap()
        .iter()
        .find(|(role, _)| role.contains("Researcher"))
        .map(|(_, agent)| agent)
        .unwrap();
    assert_eq!(
        researcher["suggestions"],
        json!(["Name a source for every fact."])
    );
    assert_eq!(researcher["quality"], 6.0);

    // A later run: the researcher's prompt ends its task with the suggestions.
    server.push_text(plan());
    server.push_text("1. Bees dance (von Frisch).");
    server.push_text("Bees dance.");
    let later = run_ok(crewai_at(&["run", "--project", project], &server));
    assert_contains(&text(&later.stderr), "Trained agents");
    let requests = server.requests();
    let research = user_text(&requests[10]);
    assert_contains(
        &research,
        "Always follow these instructions:\n - Name a source for every fact.",
    );
    assert!(!research.contains("under three sentences"));
    assert_contains(
        &user_text(&requests[11]),
        "Always follow these instructions:\n - Keep the brief under three sentences.",
    );
}

#[test]
fn a_crewai_pickle_is_refused_before_any_call() {
    let dir = example();
    let project = dir.path().to_str().unwrap();
    let pickle = dir.path().join("trained_agents_data.pkl");
    std::fs::write(&pickle, [0x80, 0x04, 0x95]).unwrap();
    let server = ScriptedServer::start_blocking();
    let out = run(crewai_at(
        &[
            "train",
            "-n",
            "1",
            "--project",
            project,
            "-f",
            pickle.to_str().unwrap(),
        ],
        &server,
    ));
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert_contains(&stderr, "is a Python pickle");
    assert_contains(&stderr, "pickle.load");
    assert_eq!(server.request_count(), 0);
    // `crewai run` refuses it too when the environment names it.
    let mut later = crewai_at(&["run", "--project", project], &server);
    later.env("CREWAI_TRAINED_AGENTS_FILE", &pickle);
    let out = run(later);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_contains(&text(&out.stderr), "is a Python pickle");
    assert_eq!(server.request_count(), 0);
}

fn push_test_run(server: &ScriptedServer, scores: [f64; 2]) {
    server.push_text(plan());
    server.push_text("1. Bees dance.");
    server.push_text("Bees dance to share where food is.");
    for score in scores {
        server.push_text(json!({ "quality": score }).to_string());
    }
}

#[test]
fn test_scores_every_task_of_every_run() {
    let dir = example();
    let project = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    push_test_run(&server, [8.0, 6.0]);
    push_test_run(&server, [9.0, 7.0]);
    let out = run_ok(crewai_at(
        &[
            "test",
            "-n",
            "2",
            "-m",
            "openai/gpt-4o-mini",
            "--project",
            project,
        ],
        &server,
    ));
    let stdout = text(&out.stdout);
    let requests = server.requests();
    assert_eq!(requests.len(), 10);
    let judge = &requests[3];
    assert_eq!(format_name(judge), "TaskEvaluationPydanticOutput");
    assert_eq!(judge.body["model"], "gpt-4o-mini");
    let asked = user_text(judge);
    assert_contains(&asked, "Find three facts about Honey bees");
    assert_contains(&asked, "Three numbered facts, one sentence each.");
    assert_contains(&asked, "Output delivered:\n1. Bees dance.");

    assert_contains(&stdout, "Tasks Scores");
    assert_contains(&stdout, "Execution Time (s)");
    let row = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("│ {name} ")))
            .unwrap_or_else(|| panic!("no {name} row in\n{stdout}"))
            .to_string()
    };
    let task1 = row("Task 1");
    assert!(
        task1.contains("8.0") && task1.contains("9.0") && task1.contains("8.5"),
        "{task1}"
    );
    assert_contains(&row("Task 2"), "6.5");
    assert_contains(&row("Crew"), "7.5");

    push_test_run(&server, [10.0, 4.0]);
    push_test_run(&server, [6.0, 2.0]);
    let json = last_json_line(&run_ok(crewai_at(
        &[
            "test",
            "-n",
            "2",
            "-m",
            "openai/gpt-4o-mini",
            "--project",
            project,
            "--json",
        ],
        &server,
    )));
    assert_eq!(json["tasks"][0]["scores"], json!([10.0, 6.0]));
    assert_eq!(json["tasks"][0]["average"], 8.0);
    assert_eq!(json["crew_scores"], json!([7.0, 4.0]));
    assert_eq!(json["crew_average"], 5.5);
    assert_eq!(json["model"], "gpt-4o-mini");
    let metrics = &json["metrics"];
    assert_eq!(metrics["tasks"].as_array().unwrap().len(), 4);
    assert_eq!(metrics["tasks"][0]["quality"], 10.0);
    assert_eq!(metrics["tasks"][0]["work"]["llm_calls"], 1);
    assert_eq!(metrics["agents"]["Brief Writer\n"]["tasks"], 2);
    assert_eq!(metrics["agents"]["Brief Writer\n"]["quality"], 3.0);
}
