//! `crewai create tool`: the tool it writes is wired into a crew with the lines it prints, and
//! the crew runs against the scripted model, which calls the tool and reads its answer.

mod support;

use std::path::{Path, PathBuf};

use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::json;
use support::{assert_contains, crewai, run, run_ok, text, with_server};

fn python_with_pydantic() -> Prerequisite {
    Prerequisite::program(
        "python3 with pydantic",
        "python3",
        &["-c", "import pydantic"],
        "python3 -m pip install pydantic (.ci/run does)",
    )
}

/// `crewai create crew NAME --classic` in `parent`; returns the project's root.
fn classic_crew(parent: &Path, name: &str) -> PathBuf {
    run_ok(crewai(&[
        "create",
        "crew",
        name,
        "--classic",
        "-o",
        parent.to_str().unwrap_or_default(),
    ]));
    parent.join(name)
}

/// `crewai create tool ARGS` run in `dir`; returns what it printed.
fn create_tool(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["create", "tool"];
    all.extend_from_slice(args);
    let mut command = crewai(&all);
    command.current_dir(dir);
    text(&run_ok(command).stdout)
}

/// The line printed after the one containing `heading`, trimmed: the line to paste.
fn printed_after(stdout: &str, heading: &str) -> String {
    let mut lines = stdout.lines();
    lines
        .by_ref()
        .find(|line| line.contains(heading))
        .unwrap_or_else(|| panic!("no {heading:?} in:\n{stdout}"));
    lines
        .next()
        .map(|line| line.trim().to_string())
        .unwrap_or_else(|| panic!("nothing after {heading:?} in:\n{stdout}"))
}

/// Adds the printed import and `tools=[...]` lines to the crew.py of `project` (the researcher
/// gets the tool), as a user pastes them.
fn wire_into_crew_py(project: &Path, package: &str, stdout: &str) {
    let import = printed_after(stdout, "with the other imports:");
    let tools = printed_after(stdout, "each agent that should use it:");
    let crew_py = project.join("src").join(package).join("crew.py");
    let source = std::fs::read_to_string(&crew_py).unwrap_or_else(|e| panic!("{e}"));
    let after_imports = "from crewai.project import CrewBase, agent, crew, task\n";
    let researcher = "config=self.agents_config[\"researcher\"],  # type: ignore[index]\n";
    assert_contains(&source, after_imports);
    assert_contains(&source, researcher);
    let wired = source
        .replacen(after_imports, &format!("{after_imports}{import}\n"), 1)
        .replacen(researcher, &format!("{researcher}            {tools}\n"), 1);
    std::fs::write(&crew_py, wired).unwrap_or_else(|e| panic!("{e}"));
}

/// Runs the crew at `project` against a scripted model that has the researcher call
/// `word_counter`; returns what the model was sent after the call.
fn run_calling_the_tool(project: &Path, python_path: Option<&Path>) -> String {
    let server = ScriptedServer::start_blocking();
    server.push(Reply::tool_call(
        "word_counter",
        json!({"argument": "agents plan and act"}),
    ));
    server.push_text("1. Agents plan and act.");
    server.push_text("# Report\n\nAgents plan and act.");
    let mut command = with_server(crewai(&["run", "--inputs", "current_year=2026"]), &server);
    command.current_dir(project);
    if let Some(path) = python_path {
        command.env("PYTHONPATH", path);
    }
    let out = run(command);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stderr),
        text(&out.stdout)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "the call, the research, the report");
    assert!(
        requests[0]
            .tool_names()
            .iter()
            .any(|name| name == "word_counter"),
        "the tool is offered: {:?}",
        requests[0].tool_names()
    );
    requests[1]
        .messages()
        .iter()
        .find(|message| message["role"] == "tool")
        .map(|message| message["content"].to_string())
        .unwrap_or_default()
}

fn in_a_crew_project_the_tool_joins_its_tools_folder_and_runs() {
    let parent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let project = classic_crew(parent.path(), "demo");
    let stdout = create_tool(&project, &["Word Counter"]);
    assert_contains(&stdout, "src/demo/tools/word_counter.py");
    assert_contains(&stdout, "from demo.tools.word_counter import WordCounter");
    assert!(project.join("src/demo/tools/word_counter.py").is_file());

    wire_into_crew_py(&project, "demo", &stdout);
    let tool_result = run_calling_the_tool(&project, None);
    assert_contains(&tool_result, "word_counter received: agents plan and act");

    // A second tool of the same name is refused, and the first is left as it was.
    let mut again = crewai(&["create", "tool", "word_counter"]);
    again.current_dir(&project);
    let out = run(again);
    assert_eq!(out.status.code(), Some(2));
    assert_contains(&text(&out.stderr), "word_counter.py already exists");
}

fn elsewhere_it_is_crewai_s_tool_package_which_a_crew_imports_once_installed() {
    let parent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let stdout = create_tool(parent.path(), &["word-counter"]);
    let package = parent.path().join("word_counter");
    for file in [
        "pyproject.toml",
        "README.md",
        "src/word_counter/__init__.py",
        "src/word_counter/tool.py",
    ] {
        assert!(package.join(file).is_file(), "{file} was not written");
    }
    assert_contains(&stdout, "uv add --editable");
    let project = classic_crew(parent.path(), "demo");
    wire_into_crew_py(&project, "demo", &stdout);
    // An installed package is on the interpreter's path; PYTHONPATH puts it there the same way
    // without building it (which would need its build backend from the network).
    let tool_result = run_calling_the_tool(&project, Some(&package.join("src")));
    assert_contains(&tool_result, "word_counter received: agents plan and act");
}

fn bad_names_and_existing_folders_are_refused_saying_why() {
    let parent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for (args, says) in [
        (vec!["9lives"], "must start with a letter"),
        (vec!["import"], "is a Python keyword"),
        (vec!["fn", "--rust"], "is a Rust keyword"),
        (vec!["hello world!"], "'!' is not allowed"),
    ] {
        let mut all = vec!["create", "tool"];
        all.extend_from_slice(&args);
        let mut command = crewai(&all);
        command.current_dir(parent.path());
        let out = run(command);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_contains(&text(&out.stderr), says);
    }
    std::fs::create_dir(parent.path().join("taken")).unwrap_or_else(|e| panic!("{e}"));
    let mut command = crewai(&["create", "tool", "taken", "--rust"]);
    command.current_dir(parent.path());
    let out = run(command);
    assert_eq!(out.status.code(), Some(2));
    assert_contains(&text(&out.stderr), "taken already exists");
}

fn a_rust_tool_prints_the_lines_that_wire_it_into_a_rust_crew() {
    let parent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let stdout = create_tool(parent.path(), &["word counter", "--rust"]);
    let lib = std::fs::read_to_string(parent.path().join("word_counter/src/lib.rs"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_contains(&lib, "pub fn word_counter(argument: String) -> String");
    assert_contains(
        &printed_after(&stdout, "under [dependencies]:"),
        "word-counter = { path = ",
    );
    assert_eq!(
        printed_after(&stdout, "after the registry is made:"),
        "registry.register_handle(word_counter::word_counter_tool());"
    );
    assert_eq!(
        printed_after(&stdout, "config/agents.yaml:"),
        "tools: [word_counter]"
    );
}

fn main() -> std::process::ExitCode {
    let python = python_with_pydantic();
    Suite::new()
        .test_needing(
            "in_a_crew_project_the_tool_joins_its_tools_folder_and_runs",
            &[&python],
            in_a_crew_project_the_tool_joins_its_tools_folder_and_runs,
        )
        .test_needing(
            "elsewhere_it_is_crewai_s_tool_package_which_a_crew_imports_once_installed",
            &[&python],
            elsewhere_it_is_crewai_s_tool_package_which_a_crew_imports_once_installed,
        )
        .test(
            "bad_names_and_existing_folders_are_refused_saying_why",
            bad_names_and_existing_folders_are_refused_saying_why,
        )
        .test(
            "a_rust_tool_prints_the_lines_that_wire_it_into_a_rust_crew",
            a_rust_tool_prints_the_lines_that_wire_it_into_a_rust_crew,
        )
        .run()
}
