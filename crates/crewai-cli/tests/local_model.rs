//! A crew on the embedded model, through the binary, with no key, no server and no network.
//! The runs need the SmolLM2 file (`crewai models pull`): without it they are reported as
//! skipped, and fail under `CI=true` (see `crewai_testkit::prereq`). `harness = false`: every
//! test is registered in `main`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output, Stdio};

use crewai_testkit::prereq::{Prerequisite, Suite};

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

/// Where the model is, the way the binary looks for it.
fn models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CREWAI_MODELS_DIR").filter(|d| !d.is_empty()) {
        return dir.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("crewai").join("models")
}

/// The binary with a clean environment; nothing listens on the Ollama address it gets.
fn crewai(args: &[&str], models: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crewai"));
    command
        .env_clear()
        .args(args)
        .stdin(Stdio::null())
        .env("CREWAI_MODELS_DIR", models)
        .env("OLLAMA_HOST", "127.0.0.1:9");
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
}

fn run(mut command: Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("the crewai binary runs: {e}"))
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

/// The trip planner's structured task on its own: `output_json` with the itinerary schema.
const ITINERARY_SCHEMA: &str = r#"{
  "title": "Itinerary",
  "type": "object",
  "properties": {
    "city": {"type": "string"},
    "days": {"type": "array", "items": {
      "type": "object",
      "properties": {"date": {"type": "string"}, "plan": {"type": "string"}, "weather": {"type": "string"}},
      "required": ["date", "plan"]
    }},
    "budget_total": {"type": "number"},
    "packing": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["city", "days", "budget_total"]
}"#;

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
        ("schemas/itinerary.json", ITINERARY_SCHEMA),
    ])
}

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for (name, body) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap_or(dir.path()))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(path, body).unwrap_or_else(|e| panic!("{e}"));
    }
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The embedded model's file in the models folder.
fn model() -> Prerequisite {
    Prerequisite::file(
        "the embedded model SmolLM2-135M",
        models_dir().join("SmolLM2-135M-Instruct.Q4_1.gguf"),
        "run `cargo run -q -p crewai-cli -- models pull` (it downloads into CREWAI_MODELS_DIR, default ~/.cache/crewai/models)",
    )
}

fn a_crew_runs_on_the_embedded_model_when_no_provider_is_configured() {
    let models = models_dir();
    let project = one_task_project();
    let project_dir = project.path().to_string_lossy().into_owned();
    let out = run(crewai(
        &[
            "run",
            "--project",
            &project_dir,
            "--inputs",
            "topic=the Moon",
            "--json",
        ],
        &models,
    ));
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("model: local/smollm2-135m (no provider is configured"),
        "{stderr}"
    );
    let stdout = text(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let output: serde_json::Value =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"));
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
    let out = run(crewai(
        &[
            "run",
            "--project",
            &project_dir,
            "--inputs",
            "topic=the Moon",
            "--llm",
            "local/smollm2-135m",
        ],
        &models,
    ));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("model: local/smollm2-135m (from --llm"));
}

fn an_output_json_task_gets_schema_valid_json_from_the_embedded_model() {
    let models = models_dir();
    let project = structured_task_project();
    let project_dir = project.path().to_string_lossy().into_owned();
    let out = run(crewai(
        &[
            "run",
            "--project",
            &project_dir,
            "--inputs",
            "city=Kyoto",
            "--llm",
            "local/smollm2-135m",
            "--json",
        ],
        &models,
    ));
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = text(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let output: serde_json::Value =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"));
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
    let out = run(crewai(&["models", "list"], empty.path()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&empty.path().display().to_string()),
        "{stdout}"
    );
    assert!(
        stdout.contains("local/smollm2-135m") && stdout.contains("not downloaded"),
        "{stdout}"
    );
}

fn pulling_an_unknown_model_is_a_usage_error() {
    let empty = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = run(crewai(&["models", "pull", "gpt-9000"], empty.path()));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("smollm2-135m"),
        "{}",
        text(&out.stderr)
    );
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
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
}
