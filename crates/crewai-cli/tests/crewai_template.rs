//! A project in CrewAI's classic template shape, whose crew.py wiring (agents of tasks, tools by
//! crewai-tools class name) lives only in config/crew.yaml, dry-runs and runs unchanged.

use std::path::PathBuf;

mod support;

use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::json;
use support::{
    assert_contains, copy_dir, crewai_at, dry_run, examples, run, run_ok, succeeded, text,
};

fn example() -> PathBuf {
    examples().join("crewai-template")
}

const CREW_YAML: &str = "src/latest_ai_development/config/crew.yaml";

#[test]
fn the_dry_run_shows_every_task_with_its_agent_and_tools() {
    let stdout = text(&succeeded(dry_run(&example(), &[])).stdout);
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
    assert_contains(
        &stdout,
        "crew.yaml:21: agent 'researcher': tool 'search_the_internet_with_serper' needs the environment variable SERPER_API_KEY",
    );
}

#[test]
fn a_knowledge_tool_crewai_rs_lacks_stops_the_run_before_any_model_call() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&example(), dir.path());
    let crew = dir.path().join(CREW_YAML);
    let yaml = std::fs::read_to_string(&crew).unwrap();
    std::fs::write(
        &crew,
        yaml.replace(
            "      - ScrapeWebsiteTool\n",
            "      - YoutubeVideoSearchTool\n",
        ),
    )
    .unwrap();
    let server = ScriptedServer::start_blocking();
    let mut command = crewai_at(&["run", "--project", dir.path().to_str().unwrap()], &server);
    command.env("SERPER_API_KEY", "test");
    let out = run(command);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert_contains(
        &stderr,
        "crew.yaml:22: agent 'researcher' names tool 'YoutubeVideoSearchTool': YoutubeVideoSearchTool is recognised (a crewai-tools knowledge search tool) but crewai-rs does not provide it yet",
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
    let yaml = std::fs::read_to_string(&crew).unwrap();
    std::fs::write(
        &crew,
        yaml.replace(
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
    let mut command = crewai_at(&["run", "--project", dir.path().to_str().unwrap()], &llm);
    command.env("SERPER_API_KEY", "serper-test-key");
    run_ok(command);
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
    assert_contains(&observation, "LLM news");
    assert_eq!(requests[2].tool_names(), ["file_read"]);
}
