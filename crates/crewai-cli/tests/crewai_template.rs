//! A project in CrewAI's classic template shape, whose crew.py wiring (agents of tasks, tools by
//! crewai-tools class name) lives only in config/crew.yaml, dry-runs and runs unchanged.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::json;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/crewai-template")
}

/// The binary with a clean environment, so no key or model of the machine leaks in.
fn crewai(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crewai"));
    command.env_clear().args(args).stdin(Stdio::null());
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
}

fn output(mut command: Command) -> (Output, String, String) {
    let out = command.output().expect("the crewai binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
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

const CREW_YAML: &str = "src/latest_ai_development/config/crew.yaml";

#[test]
fn the_dry_run_shows_every_task_with_its_agent_and_tools() {
    let project = example();
    let (out, stdout, stderr) = output(crewai(&[
        "run",
        "--project",
        project.to_str().unwrap(),
        "--dry-run",
    ]));
    assert!(out.status.success(), "{stderr}\n{stdout}");
    for expected in [
        "  1. research_task\n     agent: researcher\n     tools: search_the_internet_with_serper (SerperDevTool, n_results=5), read_website_content (ScrapeWebsiteTool)\n",
        "  2. reporting_task\n     agent: reporting_analyst\n     tools: file_read (FileReadTool, file_path=notes/style-guide.md)\n     context: research_task\n     output_file: report.md\n",
        "Dry run: the project is valid; no model was called.",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    // Without SERPER_API_KEY the dry run warns; a real run would stop before the crew starts.
    assert!(
        stdout.contains("crew.yaml:21: agent 'researcher': tool 'search_the_internet_with_serper' needs the environment variable SERPER_API_KEY"),
        "{stdout}"
    );
}

#[test]
fn a_knowledge_tool_stops_the_run_before_any_model_call() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&example(), dir.path());
    let crew = dir.path().join(CREW_YAML);
    let text = std::fs::read_to_string(&crew).unwrap();
    std::fs::write(
        &crew,
        text.replace("      - ScrapeWebsiteTool\n", "      - PDFSearchTool\n"),
    )
    .unwrap();
    let server = ScriptedServer::start_blocking();
    let mut command = crewai(&["run", "--project", dir.path().to_str().unwrap()]);
    command
        .env("OPENAI_BASE_URL", server.base_url())
        .env("OPENAI_API_KEY", "test")
        .env("SERPER_API_KEY", "test");
    let (out, stdout, stderr) = output(command);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stderr.contains("crew.yaml:22: agent 'researcher' names tool 'PDFSearchTool': PDFSearchTool is recognised (a crewai-tools knowledge search tool) but needs the knowledge feature"),
        "{stderr}"
    );
    assert_eq!(server.request_count(), 0);
}

#[test]
fn the_template_runs_with_serper_and_writes_its_report() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&example(), dir.path());
    // Serper's answer, from a local server in its place.
    let serper = ScriptedServer::start_blocking();
    serper.push(Reply::raw(
        200,
        "application/json",
        json!({
            "searchParameters": {"q": "AI LLMs 2026", "type": "search"},
            "organic": [{"title": "LLM news", "link": "https://news.example/llm", "snippet": "Models got faster.", "position": 1}]
        })
        .to_string(),
    ));
    let crew = dir.path().join(CREW_YAML);
    let text = std::fs::read_to_string(&crew).unwrap();
    std::fs::write(
        &crew,
        text.replace(
            "{name: SerperDevTool, n_results: 5}",
            &format!(
                "{{name: SerperDevTool, n_results: 5, base_url: '{}'}}",
                serper.root_url()
            ),
        ),
    )
    .unwrap();
    let llm = ScriptedServer::start_blocking();
    llm.push_tool_call(
        "search_the_internet_with_serper",
        json!({"search_query": "AI LLMs 2026"}),
    );
    llm.push_text("- Models got faster (https://news.example/llm)");
    llm.push_text("# AI LLMs in 2026\n\nModels got faster.");
    let mut command = crewai(&["run", "--project", dir.path().to_str().unwrap()]);
    command
        .env("OPENAI_BASE_URL", llm.base_url())
        .env("OPENAI_API_KEY", "test")
        .env("SERPER_API_KEY", "serper-test-key");
    let (out, stdout, stderr) = output(command);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("report.md")).unwrap(),
        "# AI LLMs in 2026\n\nModels got faster."
    );
    let searches = serper.requests();
    assert_eq!(searches.len(), 1);
    assert_eq!(searches[0].method, "POST");
    assert_eq!(searches[0].path, "/search");
    assert_eq!(searches[0].header("x-api-key"), Some("serper-test-key"));
    assert_eq!(searches[0].body, json!({"q": "AI LLMs 2026", "num": 5}));
    let requests = llm.requests();
    assert_eq!(
        requests[0].tool_names(),
        ["search_the_internet_with_serper", "read_website_content"]
    );
    let observation = requests[1].body.to_string();
    assert!(observation.contains("LLM news"), "{observation}");
    assert_eq!(requests[2].tool_names(), ["file_read"]);
}
