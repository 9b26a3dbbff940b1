//! The `crewai` binary, run as a user runs it, against a scripted OpenAI-compatible server.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::Value;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The binary with a clean environment: no provider keys or models leak in from the machine.
fn crewai(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crewai"));
    command.env_clear().args(args).stdin(Stdio::null());
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
}

fn with_server(mut command: Command, server: &ScriptedServer) -> Command {
    command
        .env("OPENAI_BASE_URL", server.base_url())
        .env("OPENAI_API_KEY", "test");
    command
}

fn run(mut command: Command) -> Output {
    command.output().expect("the crewai binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, body) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
}

const AGENTS: &str = "\
researcher:
  role: Researcher
  goal: Research {topic}
  backstory: Curious.
writer:
  role: Writer
  goal: Write
  backstory: Clear.
";

const TASKS: &str = "\
research:
  description: Research {topic}
  expected_output: Notes
  agent: researcher
report:
  description: Write the report
  expected_output: A report
  agent: writer
";

fn two_task_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("config/agents.yaml", AGENTS),
            ("config/tasks.yaml", TASKS),
            ("config/crew.yaml", "inputs: {topic: Rust}\n"),
        ],
    );
    dir
}

#[test]
fn every_example_dry_runs_offline() {
    for name in ["research-and-report", "trip-planner", "content-team"] {
        let project = examples().join(name);
        let out = run(crewai(&[
            "run",
            "--project",
            project.to_str().unwrap(),
            "--dry-run",
        ]));
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {}\n{stdout}",
            text(&out.stderr)
        );
        assert!(
            stdout.contains("Dry run: the project is valid"),
            "{name}: {stdout}"
        );
        assert!(stdout.contains("Tasks:"), "{name}: {stdout}");
    }
}

#[test]
fn dry_run_shows_agents_tools_context_and_prompts() {
    let project = examples().join("trip-planner");
    let out = run(crewai(&[
        "run",
        "--project",
        project.to_str().unwrap(),
        "--dry-run",
        "--inputs",
        "origin=Porto",
    ]));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("3. plan_itinerary"), "{stdout}");
    assert!(
        stdout.contains("context: identify_city, gather_city_info"),
        "{stdout}"
    );
    assert!(stdout.contains("tools: http_get"), "{stdout}");
    assert!(
        stdout.contains("Traveling from: Porto"),
        "the input overrides the crew.yaml default: {stdout}"
    );
    assert!(stdout.contains("output: json"), "{stdout}");

    let out = run(crewai(&[
        "run",
        "--project",
        project.to_str().unwrap(),
        "--dry-run",
        "--json",
    ]));
    let plan: Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(plan["tasks"][2]["name"], "plan_itinerary");
    assert_eq!(plan["process"], "sequential");

    let hierarchical = run(crewai(&[
        "run",
        "--project",
        examples().join("content-team").to_str().unwrap(),
        "--dry-run",
    ]));
    let stdout = text(&hierarchical.stdout);
    assert!(stdout.contains("Manager: editor_in_chief"), "{stdout}");
    assert!(
        stdout.contains("agent: editor_in_chief (manager), delegating to the agent it picks"),
        "{stdout}"
    );
    assert!(
        stdout.contains("tools: delegate_work_to_coworker, ask_question_to_coworker"),
        "{stdout}"
    );
}

#[test]
fn an_unknown_agent_is_reported_with_line_and_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("config/agents.yaml", AGENTS),
            (
                "config/tasks.yaml",
                &TASKS.replace("agent: writer", "agent: writter"),
            ),
        ],
    );
    let out = run(crewai(&[
        "run",
        "--project",
        dir.path().to_str().unwrap(),
        "--dry-run",
        "--inputs",
        "topic=AI",
    ]));
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("config/tasks.yaml:8: task 'report' names agent 'writter', which is not defined; did you mean 'writer'?"),
        "{stderr}"
    );
}

#[test]
fn a_missing_input_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[("config/agents.yaml", AGENTS), ("config/tasks.yaml", TASKS)],
    );
    let out = run(crewai(&[
        "run",
        "--project",
        dir.path().to_str().unwrap(),
        "--dry-run",
    ]));
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("config/agents.yaml:3: agent 'researcher' field 'goal' uses {topic}, which no input provides"), "{stderr}");
}

#[test]
fn run_json_prints_the_crew_output_as_the_last_line_then_replays() {
    let dir = two_task_project();
    let project = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("Rust notes").with_usage(100, 20));
    server.push(Reply::text("The Rust report").with_usage(50, 10));
    let out = run(with_server(
        crewai(&["run", "--project", project, "--json"]),
        &server,
    ));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    let last = stdout.lines().last().unwrap();
    let output: Value = serde_json::from_str(last).unwrap();
    assert_eq!(output["raw"], "The Rust report");
    assert_eq!(output["tasks_output"].as_array().unwrap().len(), 2);
    assert_eq!(output["tasks_output"][0]["raw"], "Rust notes");
    assert_eq!(output["token_usage"]["prompt_tokens"], 150);
    assert_eq!(output["token_usage"]["completion_tokens"], 30);
    assert_eq!(output["token_usage"]["total_tokens"], 180);
    assert_eq!(output["token_usage"]["successful_requests"], 2);
    assert!(output["token_usage"]["cached_prompt_tokens"].is_number());
    assert!(output.get("json_dict").is_some());
    // The first task's prompt was interpolated with the crew.yaml default.
    let first = server.requests()[0].body.to_string();
    assert!(first.contains("Research Rust"), "{first}");

    // The kickoff's outputs were stored.
    let log = run(crewai(&["log-tasks-outputs", "--project", project]));
    let listing = text(&log.stdout);
    assert!(log.status.success(), "{}", text(&log.stderr));
    assert!(
        listing.contains("research") && listing.contains("report"),
        "{listing}"
    );
    assert!(listing.contains("output: Rust notes"), "{listing}");

    // Replay from the second task: only it runs again, with the stored first output as context.
    server.push(Reply::text("A better report"));
    let replay = run(with_server(
        crewai(&["replay", "--project", project, "-t", "report", "--json"]),
        &server,
    ));
    let stdout = text(&replay.stdout);
    assert!(
        replay.status.success(),
        "{}\n{stdout}",
        text(&replay.stderr)
    );
    let output: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(output["raw"], "A better report");
    assert_eq!(server.request_count(), 3);
    let replayed = server.requests()[2].body.to_string();
    assert!(
        replayed.contains("Rust notes"),
        "the stored output is the context: {replayed}"
    );

    let unknown = run(crewai(&["replay", "--project", project, "-t", "nope"]));
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        text(&unknown.stderr).contains("no stored output for task 'nope'"),
        "{}",
        text(&unknown.stderr)
    );

    let reset = run(crewai(&["reset-memories", "--project", project, "-k"]));
    assert!(reset.status.success());
    let log = run(crewai(&["log-tasks-outputs", "--project", project]));
    assert!(
        text(&log.stdout).contains("No task outputs stored yet"),
        "{}",
        text(&log.stdout)
    );
}

#[test]
fn plain_run_prints_the_final_answer_and_a_failed_call_exits_1() {
    let dir = two_task_project();
    let project = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    server.push_text("notes");
    server.push_text("final answer");
    let out = run(with_server(crewai(&["run", "--project", project]), &server));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "final answer");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("[task completed] research"),
        "progress lines when not a terminal: {stderr}"
    );

    // An empty script: the provider answers 400 and the run fails.
    let failed = run(with_server(crewai(&["run", "--project", project]), &server));
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed.stderr));
}

#[test]
fn without_a_provider_the_error_names_the_variable_to_set() {
    let dir = two_task_project();
    // A named model whose key is missing (with no model named, the embedded one would run).
    let mut command = crewai(&["run", "--project", dir.path().to_str().unwrap()]);
    command.env("MODEL", "gpt-4o-mini");
    let out = run(command);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
}

#[test]
fn dot_env_is_loaded_without_overriding_the_environment() {
    let dir = two_task_project();
    let server = ScriptedServer::start_blocking();
    write(
        dir.path(),
        &[(
            ".env",
            &format!(
                "OPENAI_API_KEY=from-dotenv\nOPENAI_BASE_URL={}\n",
                server.base_url()
            ),
        )],
    );
    server.push_text("notes");
    server.push_text("done");
    let out = run(crewai(&["run", "--project", dir.path().to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some("Bearer from-dotenv")
    );

    server.push_text("notes");
    server.push_text("done");
    let mut command = crewai(&["run", "--project", dir.path().to_str().unwrap()]);
    command.env("OPENAI_API_KEY", "from-env");
    let out = run(command);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        server.requests()[2].header("authorization"),
        Some("Bearer from-env")
    );
}

#[test]
fn llm_flag_replaces_every_agents_model() {
    let dir = two_task_project();
    let server = ScriptedServer::start_blocking();
    server.push_text("notes");
    server.push_text("done");
    let out = run(with_server(
        crewai(&[
            "run",
            "--project",
            dir.path().to_str().unwrap(),
            "--llm",
            "openai/gpt-4o-mini",
        ]),
        &server,
    ));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(server.requests()[0].body["model"], "gpt-4o-mini");
}

#[test]
fn chat_asks_for_inputs_then_runs() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[("config/agents.yaml", AGENTS), ("config/tasks.yaml", TASKS)],
    );
    let server = ScriptedServer::start_blocking();
    server.push_text("notes");
    server.push_text("chat done");
    let mut command = with_server(
        crewai(&["chat", "--project", dir.path().to_str().unwrap()]),
        &server,
    );
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"Zig\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "chat done");
    assert!(
        server.requests()[0]
            .body
            .to_string()
            .contains("Research Zig")
    );
}

#[test]
fn create_crew_scaffolds_a_project_that_dry_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(crewai(&[
        "create",
        "crew",
        "demo",
        "-o",
        dir.path().to_str().unwrap(),
    ]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let project = dir.path().join("demo");
    assert!(project.join("Cargo.toml").is_file());
    assert!(project.join("config/agents.yaml").is_file());
    assert!(project.join("src/tools.rs").is_file());
    let dry = run(crewai(&[
        "run",
        "--project",
        project.to_str().unwrap(),
        "--dry-run",
    ]));
    let stdout = text(&dry.stdout);
    assert!(dry.status.success(), "{}\n{stdout}", text(&dry.stderr));
    assert!(stdout.contains("tools: word_count"), "{stdout}");
}

#[test]
fn version_and_unsupported_commands() {
    let out = run(crewai(&["version"]));
    assert!(out.status.success());
    assert!(text(&out.stdout).starts_with("crewai "));
    for command in [&["train"][..], &["test"][..]] {
        let out = run(crewai(command));
        assert_eq!(out.status.code(), Some(2));
        assert!(
            text(&out.stderr).contains("is not supported yet"),
            "{}",
            text(&out.stderr)
        );
    }
    let out = run(crewai(&["run", "--bogus"]));
    assert_eq!(out.status.code(), Some(2));
    let out = run(crewai(&["reset-memories"]));
    assert_eq!(out.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let out = run(crewai(&[
        "reset-memories",
        "--project",
        dir.path().to_str().unwrap(),
        "-kn",
        "-akn",
        "-m",
    ]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Knowledge: nothing is stored yet"),
        "{}",
        text(&out.stdout)
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn the_research_example_runs_and_writes_its_report_inside_the_project() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&examples().join("research-and-report"), dir.path());
    let server = ScriptedServer::start_blocking();
    server.push_text("- point one\n- point two");
    server.push_text("# AI Agents report\n\nFull sections.");
    // Run from another folder: outputs still land in the project.
    let mut command = with_server(
        crewai(&["run", "--project", dir.path().to_str().unwrap()]),
        &server,
    );
    command.current_dir(std::env::temp_dir());
    let out = run(command);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = std::fs::read_to_string(dir.path().join("output/report.md")).unwrap();
    assert_eq!(report, "# AI Agents report\n\nFull sections.");
    let first = &server.requests()[0];
    assert!(
        first.tool_names().contains(&"http_get".to_string()),
        "{:?}",
        first.tool_names()
    );
}

#[test]
fn the_hierarchical_content_team_runs_through_its_manager() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&examples().join("content-team"), dir.path());
    let server = ScriptedServer::start_blocking();
    let delegate = |coworker: &str, task: &str| {
        Reply::tool_call(
            "delegate_work_to_coworker",
            serde_json::json!({"task": task, "context": "the brief", "coworker": coworker}),
        )
    };
    server.push(delegate("Content Strategist", "Write the outline"));
    server.push_text("Outline: 1. Why 2. How");
    server.push_text("Outline: 1. Why 2. How");
    server.push(delegate("Senior Writer", "Write the article"));
    server.push_text("# Composting\n\nDraft.");
    server.push_text("# Composting\n\nDraft.");
    server.push(delegate("SEO Specialist", "Optimise the article"));
    server.push_text("SEO title: Composting\n\n# Composting\n\nFinal.");
    server.push_text("SEO title: Composting\n\n# Composting\n\nFinal.");
    // The LLM guardrail of seo_task asks the manager's model for a verdict.
    server.push_text("{\"valid\": true, \"feedback\": null}");
    let out = run(with_server(
        crewai(&["run", "--project", dir.path().to_str().unwrap(), "--json"]),
        &server,
    ));
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}\nrequests: {}",
        text(&out.stderr),
        server.request_count()
    );
    let output: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert!(
        output["raw"].as_str().unwrap().contains("Final."),
        "{output}"
    );
    assert_eq!(output["tasks_output"].as_array().unwrap().len(), 3);
    let first = &server.requests()[0];
    assert!(
        first
            .tool_names()
            .contains(&"delegate_work_to_coworker".to_string()),
        "{:?}",
        first.tool_names()
    );
    assert!(
        first.body.to_string().contains("Editor-in-Chief"),
        "the custom manager leads: {}",
        first.body
    );
    assert_eq!(server.remaining(), 0, "every scripted reply was used");
}

/// Compiles the scaffold (a minute or more on a cold cache), so it runs only when asked:
/// `cargo test -p crewai-cli --test cli -- --ignored`.
#[test]
#[ignore = "compiles a scaffolded project with cargo"]
fn a_scaffolded_rust_project_runs_through_cargo() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(crewai(&[
        "create",
        "crew",
        "demo",
        "-o",
        dir.path().to_str().unwrap(),
    ]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let project = dir.path().join("demo");
    let server = ScriptedServer::start_blocking();
    server.push_text("ten bullet points");
    // The reporting analyst calls the project's own #[tool] before answering.
    server.push(Reply::tool_call(
        "word_count",
        serde_json::json!({"text": "ten bullet points"}),
    ));
    server.push_text("A report of 3 words");
    let mut command = with_server(
        crewai(&["run", "--project", project.to_str().unwrap(), "--json"]),
        &server,
    );
    for var in [
        "HOME",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "CARGO_TARGET_DIR",
        "RUSTUP_TOOLCHAIN",
    ] {
        if let Some(value) = std::env::var_os(var) {
            command.env(var, value);
        }
    }
    let out = run(command);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    let output: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(output["raw"], "A report of 3 words");
    let tool_result = server.requests()[2].body.to_string();
    assert!(
        tool_result.contains("\"content\":\"3\""),
        "the tool ran in the compiled project: {tool_result}"
    );
}

#[test]
fn a_json_layout_project_dry_runs() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            (
                "crew.jsonc",
                "{\n  // CrewAI's newer layout\n  \"name\": \"poems\",\n  \"agents\": [\"poet\"],\n  \"tasks\": [\n    {\"name\": \"poem\", \"description\": \"A poem on {topic}\", \"expected_output\": \"A poem\", \"agent\": \"poet\",},\n  ],\n  \"inputs\": {\"topic\": \"rain\"},\n}\n",
            ),
            (
                "agents/poet.jsonc",
                "{\"role\": \"Poet\", \"goal\": \"Write\", \"backstory\": \"Writes.\", \"tools\": [\"FileReadTool\"], \"settings\": {\"max_iter\": 3}}",
            ),
        ],
    );
    let out = run(crewai(&[
        "run",
        "--project",
        dir.path().to_str().unwrap(),
        "--dry-run",
    ]));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("Crew 'poems'"), "{stdout}");
    assert!(stdout.contains("A poem on rain"), "{stdout}");
    assert!(stdout.contains("tools: file_read"), "{stdout}");
}
