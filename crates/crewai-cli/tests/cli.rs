//! The `crewai` binary, run as a user runs it, against a scripted OpenAI-compatible server.

use std::process::Stdio;

mod support;

use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::{Value, json};
use support::{
    assert_contains, copy_dir, crewai, dry_run, examples, last_json_line, run, run_ok, succeeded,
    text, with_server, write,
};

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

/// What a run that failed as a usage error (exit code 2) printed on stderr.
fn usage_error(out: std::process::Output) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    stderr
}

#[test]
fn every_example_dry_runs_offline() {
    for name in [
        "research-and-report",
        "trip-planner",
        "content-team",
        "mcp-and-skill",
        "planned-brief",
        "consensual",
        "data-analyst",
        "plan-and-execute",
    ] {
        let out = dry_run(&examples().join(name), &[]);
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
    let stdout = text(&succeeded(dry_run(&project, &["--inputs", "origin=Porto"])).stdout);
    assert_contains(&stdout, "3. plan_itinerary");
    assert_contains(&stdout, "context: identify_city, gather_city_info");
    assert_contains(&stdout, "tools: http_get");
    assert!(
        stdout.contains("Traveling from: Porto"),
        "the input overrides the crew.yaml default: {stdout}"
    );
    assert_contains(&stdout, "output: json");

    let plan = last_json_line(&dry_run(&project, &["--json"]));
    assert_eq!(plan["tasks"][2]["name"], "plan_itinerary");
    assert_eq!(plan["process"], "sequential");

    let stdout = text(&succeeded(dry_run(&examples().join("content-team"), &[])).stdout);
    assert_contains(&stdout, "Manager: editor_in_chief");
    assert_contains(
        &stdout,
        "agent: editor_in_chief (manager), delegating to the agent it picks",
    );
    assert_contains(
        &stdout,
        "tools: delegate_work_to_coworker, ask_question_to_coworker",
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
    assert_contains(
        &usage_error(dry_run(dir.path(), &["--inputs", "topic=AI"])),
        "config/tasks.yaml:8: task 'report' names agent 'writter', which is not defined; did you mean 'writer'?",
    );
}

#[test]
fn a_missing_input_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[("config/agents.yaml", AGENTS), ("config/tasks.yaml", TASKS)],
    );
    assert_contains(
        &usage_error(dry_run(dir.path(), &[])),
        "config/agents.yaml:3: agent 'researcher' field 'goal' uses {topic}, which no input provides",
    );
}

#[test]
fn run_json_prints_the_crew_output_as_the_last_line_then_replays() {
    let dir = two_task_project();
    let project = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    server.push(Reply::text("Rust notes").with_usage(100, 20));
    server.push(Reply::text("The Rust report").with_usage(50, 10));
    let output = last_json_line(&run(with_server(
        crewai(&["run", "--project", project, "--json"]),
        &server,
    )));
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
    assert_contains(&first, "Research Rust");

    // The kickoff's outputs were stored.
    let listing = text(&run_ok(crewai(&["log-tasks-outputs", "--project", project])).stdout);
    assert!(
        listing.contains("research") && listing.contains("report"),
        "{listing}"
    );
    assert_contains(&listing, "output: Rust notes");

    // Replay from the second task: only it runs again, with the stored first output as context.
    server.push(Reply::text("A better report"));
    let output = last_json_line(&run(with_server(
        crewai(&["replay", "--project", project, "-t", "report", "--json"]),
        &server,
    )));
    assert_eq!(output["raw"], "A better report");
    assert_eq!(server.request_count(), 3);
    let replayed = server.requests()[2].body.to_string();
    assert!(
        replayed.contains("Rust notes"),
        "the stored output is the context: {replayed}"
    );

    let unknown = run(crewai(&["replay", "--project", project, "-t", "nope"]));
    assert_contains(&usage_error(unknown), "no stored output for task 'nope'");

    let reset = run(crewai(&["reset-memories", "--project", project, "-k"]));
    assert!(reset.status.success());
    let log = run(crewai(&["log-tasks-outputs", "--project", project]));
    assert_contains(&text(&log.stdout), "No task outputs stored yet");
}

#[test]
fn plain_run_prints_the_final_answer_and_a_failed_call_exits_1() {
    let dir = two_task_project();
    let project = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    server.push_text("notes");
    server.push_text("final answer");
    let out = run_ok(with_server(crewai(&["run", "--project", project]), &server));
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
    assert_contains(&usage_error(run(command)), "OPENAI_API_KEY");
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
    run_ok(crewai(&["run", "--project", dir.path().to_str().unwrap()]));
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some("Bearer from-dotenv")
    );

    server.push_text("notes");
    server.push_text("done");
    let mut command = crewai(&["run", "--project", dir.path().to_str().unwrap()]);
    command.env("OPENAI_API_KEY", "from-env");
    run_ok(command);
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
    run_ok(with_server(
        crewai(&[
            "run",
            "--project",
            dir.path().to_str().unwrap(),
            "--llm",
            "openai/gpt-4o-mini",
        ]),
        &server,
    ));
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

/// With `chat_llm`, `crewai chat` is a conversation: the chat model greets, learns the input,
/// calls the crew as a function; the crew runs with the conversation appended to its tasks, and
/// its answer is the function's result the chat model relays.
#[test]
fn chat_with_a_chat_llm_runs_the_crew_when_the_model_calls_it() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("config/agents.yaml", AGENTS),
            ("config/tasks.yaml", TASKS),
            (
                "config/crew.yaml",
                "name: Research Crew\nchat_llm: openai/gpt-4o-mini\n",
            ),
        ],
    );
    let server = ScriptedServer::start_blocking();
    server.push_text("Hello! Which topic should the crew research?");
    server.push_tool_call("research_crew", json!({"topic": "Zig"}));
    server.push_text("notes on Zig");
    server.push_text("the report on Zig");
    server.push_text("The crew wrote: the report on Zig");
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
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Zig, please\nexit\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    assert_contains(
        &stdout,
        "Assistant: Hello! Which topic should the crew research?",
    );
    assert_contains(&stdout, "Assistant: The crew wrote: the report on Zig");

    let requests = server.requests();
    assert_eq!(requests.len(), 5, "greeting, call, two tasks, relay");
    assert_eq!(requests[0].body["model"], "gpt-4o-mini");
    assert_eq!(requests[0].tool_names(), ["research_crew"]);
    let parameters = &requests[0].body["tools"][0]["function"]["parameters"];
    assert_eq!(parameters["required"], json!(["topic"]), "{parameters}");
    // The crew's first task: the input from the call, and the conversation appended.
    let task = requests[2].body.to_string();
    assert_contains(&task, "Research Zig");
    assert_contains(&task, "user: Zig, please");
    // The relay sees the crew's final answer as the function's result.
    let result = requests[4]
        .messages()
        .iter()
        .find(|message| message["role"] == "tool")
        .map(|message| message["content"].to_string())
        .unwrap_or_default();
    assert_contains(&result, "the report on Zig");
}

/// `crewai create crew demo` in a new temporary folder: the folder and the project in it.
fn scaffold_crew() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    run_ok(crewai(&[
        "create",
        "crew",
        "demo",
        "-o",
        dir.path().to_str().unwrap(),
    ]));
    let project = dir.path().join("demo");
    (dir, project)
}

#[test]
fn create_crew_scaffolds_a_project_that_dry_runs() {
    let (_dir, project) = scaffold_crew();
    assert!(project.join("Cargo.toml").is_file());
    assert!(project.join("config/agents.yaml").is_file());
    assert!(project.join("src/tools.rs").is_file());
    let stdout = text(&succeeded(dry_run(&project, &[])).stdout);
    assert_contains(&stdout, "tools: word_count");
}

#[test]
fn version_and_usage_errors() {
    let out = run(crewai(&["version"]));
    assert!(out.status.success());
    assert!(text(&out.stdout).starts_with("crewai "));
    let empty = tempfile::tempdir().unwrap();
    let empty = empty.path().to_str().unwrap();
    for command in ["train", "test"] {
        usage_error(run(crewai(&[command, "--project", empty])));
        assert_contains(
            &usage_error(run(crewai(&[command, "-n", "0", "--project", empty]))),
            "-n must be at least 1",
        );
    }
    usage_error(run(crewai(&["run", "--bogus"])));
    usage_error(run(crewai(&["reset-memories"])));
    let dir = tempfile::tempdir().unwrap();
    let out = run_ok(crewai(&[
        "reset-memories",
        "--project",
        dir.path().to_str().unwrap(),
        "-kn",
        "-akn",
        "-m",
    ]));
    assert_contains(&text(&out.stdout), "Knowledge: nothing stored.");
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
    run_ok(command);
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
            json!({"task": task, "context": "the brief", "coworker": coworker}),
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
    let (_dir, project) = scaffold_crew();
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
    let output = last_json_line(&run(command));
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
    let stdout = text(&succeeded(dry_run(dir.path(), &[])).stdout);
    assert_contains(&stdout, "Crew 'poems'");
    assert_contains(&stdout, "A poem on rain");
    assert_contains(&stdout, "tools: file_read");
}
