//! A CrewAI project in its standard layout, as it is: `crewai run` from its root reads
//! `crew.py` and `main.py`, runs the custom `BaseTool` through the Python worker, and checks the
//! output against the pydantic model (`examples/crewai-classic`).

mod support;

use std::path::{Path, PathBuf};

use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::{Value, json};
use support::{assert_contains, copy_dir, crewai, dry_run, examples, run, text, with_server};

fn python_with_pydantic() -> Prerequisite {
    Prerequisite::program(
        "python3 with pydantic",
        "python3",
        &["-c", "import pydantic"],
        "python3 -m pip install pydantic (.ci/run does)",
    )
}

fn example() -> PathBuf {
    examples().join("crewai-classic")
}

/// A copy of the example, so a run's files (`brief.json`, `.crewai/`) stay out of the tree.
fn copied_example() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    copy_dir(&example(), dir.path());
    dir
}

fn the_dry_run_shows_the_crew_as_crew_py_wires_it() {
    let out = dry_run(&example(), &["--inputs", "current_year=2026"]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    for part in [
        "1. research_task",
        "agent: researcher",
        "WordCounterTool (Python: tech_brief.tools.custom_tool)",
        "2. brief_task",
        "agent: editor",
        "context: research_task",
        "output_file: brief.json",
    ] {
        assert_contains(&stdout, part);
    }
    // current_year is computed in main.py, so it is asked for by name.
    assert_contains(&stderr, "main.py");
    assert_contains(&stderr, "current_year");
    // Without it, the run says which input is missing before any model is called.
    let out = dry_run(&example(), &[]);
    assert!(!out.status.success());
    assert_contains(&text(&out.stderr), "current_year");
}

/// What the model answered and was asked, in order: the researcher calls the custom tool, then
/// answers; the editor answers with the brief as JSON.
fn script(server: &ScriptedServer) {
    server.push(Reply::tool_call(
        "word_counter",
        json!({"text": "agents plan call tools and check results"}),
    ));
    server.push(Reply::text(
        "Notes: agents plan, call tools and check results.",
    ));
    server.push(Reply::text(
        json!({
            "title": "AI agents in brief",
            "key_points": ["They plan", "They call tools", "They check results"],
            "notes_word_count": 7
        })
        .to_string(),
    ));
}

fn crewai_run_at_the_project_root_uses_main_py_inputs_the_python_tool_and_the_model() {
    let dir = copied_example();
    let server = ScriptedServer::start_blocking();
    script(&server);
    let mut command = with_server(
        crewai(&["run", "--json", "--inputs", "current_year=2026"]),
        &server,
    );
    command.current_dir(dir.path());
    let out = run(command);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));

    let requests = server.requests();
    assert_eq!(requests.len(), 3, "tool call, notes, brief");
    // The topic came from main.py's inputs.
    assert_contains(&requests[0].body.to_string(), "AI agents Researcher");
    assert!(
        requests[0]
            .tool_names()
            .iter()
            .any(|name| name == "word_counter"),
        "the custom tool is offered: {:?}",
        requests[0].tool_names()
    );
    // The tool ran in Python: its answer is what `_run` returns.
    let tool_result = requests[1]
        .messages()
        .iter()
        .find(|message| message["role"] == "tool")
        .map(|message| message["content"].to_string())
        .unwrap_or_default();
    assert_contains(&tool_result, "7 words");

    let output: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let brief = &output["tasks_output"][1]["pydantic"];
    assert_eq!(brief["title"], "AI agents in brief", "{output}");
    assert_eq!(brief["notes_word_count"], 7);
    let written = std::fs::read_to_string(dir.path().join("brief.json"))
        .unwrap_or_else(|e| panic!("brief.json: {e}"));
    assert_contains(&written, "AI agents in brief");
}

fn a_missing_python_is_an_error_naming_the_tools_that_need_it() {
    let dir = copied_example();
    let server = ScriptedServer::start_blocking();
    let missing = Path::new("/nonexistent/python3");
    let mut command = with_server(
        crewai(&[
            "run",
            "--inputs",
            "current_year=2026",
            "--python",
            missing.to_str().unwrap_or_default(),
        ]),
        &server,
    );
    command.current_dir(dir.path());
    let out = run(command);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_contains(&stderr, "/nonexistent/python3");
    assert_eq!(server.request_count(), 0, "no model was called");
}

fn a_python_flow_project_is_refused_with_what_runs_instead() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    support::write(
        dir.path(),
        &[
            (
                "pyproject.toml",
                "[project]\nname = \"poem_flow\"\n\n[tool.crewai]\ntype = \"flow\"\n",
            ),
            (
                "src/poem_flow/main.py",
                "from crewai.flow import Flow, start\n\nclass PoemFlow(Flow):\n    @start()\n    def begin(self):\n        return 1\n",
            ),
        ],
    );
    let mut command = crewai(&["run"]);
    command.current_dir(dir.path());
    let out = run(command);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_contains(
        &stderr,
        "pyproject.toml says this is a CrewAI flow (`[tool.crewai] type = \"flow\"`), written in Python (src/poem_flow/main.py)",
    );
    assert_contains(&stderr, "schema: crewai.flow/v1");
}

fn the_classic_template_runs_as_crewai_writes_it() {
    let parent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = run(crewai(&[
        "create",
        "crew",
        "Latest AI",
        "--classic",
        "--output-dir",
        parent.path().to_str().unwrap_or_default(),
    ]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let root = parent.path().join("latest_ai");
    for file in [
        "pyproject.toml",
        "src/latest_ai/crew.py",
        "src/latest_ai/main.py",
        "src/latest_ai/config/agents.yaml",
        "src/latest_ai/config/tasks.yaml",
        "src/latest_ai/tools/custom_tool.py",
    ] {
        assert!(root.join(file).is_file(), "{file} was not written");
    }
    let crew_py = std::fs::read_to_string(root.join("src/latest_ai/crew.py")).unwrap_or_default();
    assert_contains(&crew_py, "class LatestAi:");

    let server = ScriptedServer::start_blocking();
    server.push_text("1. Agents got better at tools.");
    server.push_text("# Report\n\nAgents got better at tools.");
    let mut command = with_server(crewai(&["run", "--inputs", "current_year=2026"]), &server);
    command.current_dir(&root);
    let out = run(command);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_contains(&text(&out.stdout), "Agents got better at tools.");
    // main.py's topic reached the prompt, and the task's output_file was written.
    assert_contains(
        &server.requests()[0].body.to_string(),
        "AI LLMs Senior Data Researcher",
    );
    let report = std::fs::read_to_string(root.join("report.md")).unwrap_or_default();
    assert_contains(&report, "# Report");
}

fn main() -> std::process::ExitCode {
    let python = python_with_pydantic();
    Suite::new()
        .test(
            "the_dry_run_shows_the_crew_as_crew_py_wires_it",
            the_dry_run_shows_the_crew_as_crew_py_wires_it,
        )
        .test_needing(
            "crewai_run_at_the_project_root_uses_main_py_inputs_the_python_tool_and_the_model",
            &[&python],
            crewai_run_at_the_project_root_uses_main_py_inputs_the_python_tool_and_the_model,
        )
        .test(
            "the_classic_template_runs_as_crewai_writes_it",
            the_classic_template_runs_as_crewai_writes_it,
        )
        .test(
            "a_python_flow_project_is_refused_with_what_runs_instead",
            a_python_flow_project_is_refused_with_what_runs_instead,
        )
        .test(
            "a_missing_python_is_an_error_naming_the_tools_that_need_it",
            a_missing_python_is_an_error_naming_the_tools_that_need_it,
        )
        .run()
}
