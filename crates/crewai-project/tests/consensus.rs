//! `process: consensual` and its `consensus:` mapping in `config/crew.yaml`: a good one builds a
//! consensual crew (voters by agent key, the judge on `judge_llm`), and every bad key is an
//! error at its own line, so nothing written is silently dropped.

use crewai_core::crew::Process;
use crewai_project::{BuildOptions, Project, ProjectError, ToolRegistry};

mod common;
use common::write;

const LLM: &str =
    "  llm: {model: openai/gpt-4o-mini, api_key: k, base_url: 'http://127.0.0.1:9/v1'}\n";

fn agents() -> String {
    ["analyst", "critic", "editor", "outsider"]
        .iter()
        .map(|key| {
            let role = format!("{}{}", key[..1].to_uppercase(), &key[1..]);
            format!("{key}:\n  role: {role}\n  goal: Answer well\n  backstory: Careful.\n{LLM}")
        })
        .collect()
}

const TASKS: &str = "\
fact:
  description: Give one fact about bees
  expected_output: One sentence
";

fn project_with(crew: &str, tasks: &str) -> (tempfile::TempDir, Result<Project, ProjectError>) {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("config/agents.yaml", &agents()),
            ("config/tasks.yaml", tasks),
            ("config/crew.yaml", crew),
        ],
    );
    let project = Project::load(dir.path());
    (dir, project)
}

/// The problems of a project that must not load, one line each.
fn errors(crew: &str) -> String {
    errors_with(crew, TASKS)
}

fn errors_with(crew: &str, tasks: &str) -> String {
    match project_with(crew, tasks).1 {
        Ok(_) => panic!("the project should be refused:\n{crew}"),
        Err(error) => error.to_string(),
    }
}

#[track_caller]
fn assert_has(text: &str, part: &str) {
    assert!(text.contains(part), "no {part:?} in:\n{text}");
}

#[test]
fn a_consensual_crew_builds_with_its_voters_and_judge() {
    let crew_yaml = "\
name: panel
process: consensual
consensus:
  voters: [analyst, critic]
  revisions: 2
  decision: judge
  judge_llm: {model: openai/gpt-4o, api_key: k, base_url: 'http://127.0.0.1:9/v1'}
";
    let (dir, project) = project_with(crew_yaml, TASKS);
    let project = project.unwrap_or_else(|e| panic!("{e}"));
    let options = BuildOptions::new(ToolRegistry::with_builtins(dir.path()));
    let crew = project.build(&Default::default(), &options).unwrap();
    assert_eq!(crew.process(), Process::Consensual);
    let plan = project.plan_with(&Default::default(), &options).unwrap();
    let consensus = plan
        .consensus
        .as_ref()
        .expect("the plan shows the consensus");
    assert_eq!(consensus.voters, ["analyst", "critic"]);
    assert_eq!(consensus.calls_per_task, 2 * 3 + 1);
    let shown = plan.to_string();
    assert_has(&shown, "Crew 'panel' (consensual process");
    assert_has(
        &shown,
        "Consensus: voters analyst, critic; 2 revision round(s); decided by a judge [llm: openai/gpt-4o]; at least 7 model calls per task",
    );
}

#[test]
fn by_default_every_agent_votes_once_after_one_revision() {
    let (dir, project) = project_with("process: consensual\n", TASKS);
    let project = project.unwrap_or_else(|e| panic!("{e}"));
    let options = BuildOptions::new(ToolRegistry::with_builtins(dir.path()));
    project.build(&Default::default(), &options).unwrap();
    let plan = project.plan_with(&Default::default(), &options).unwrap();
    let consensus = plan.consensus.unwrap();
    assert_eq!(consensus.voters.len(), 4);
    assert_eq!((consensus.revisions, consensus.decision), (1, "vote"));
    assert_eq!(consensus.calls_per_task, 4 * 2 + 4);
}

#[test]
fn every_bad_consensus_key_is_an_error_at_its_line() {
    let crew = |body: &str| format!("name: panel\nprocess: consensual\nconsensus:\n{body}");
    assert_has(
        &errors(&crew("  voters: [analyst, critc, editor]\n")),
        "config/crew.yaml:4: consensus voter 'critc' is not defined; did you mean 'critic'?",
    );
    assert_has(
        &errors(&crew("  voters: [analyst, analyst, critic]\n")),
        "config/crew.yaml:4: consensus voter 'analyst' is listed twice",
    );
    assert_has(
        &errors(&crew("  voters: analyst\n")),
        "config/crew.yaml:4: consensus `voters` must be a list of agent keys, not text",
    );
    assert_has(
        &errors(&crew("  revisions: 1\n  decision: majority\n")),
        "config/crew.yaml:5: consensus `decision` must be `vote` or `judge`, not 'majority'",
    );
    assert_has(
        &errors(&crew("  revisions: -1\n")),
        "config/crew.yaml:4: consensus `revisions`:",
    );
    assert_has(
        &errors(&crew("  revisions: 8\n")),
        "config/crew.yaml:4: consensus `revisions` is 8, more than the 5 allowed",
    );
    assert_has(
        &errors(&crew("  rounds: 2\n")),
        "config/crew.yaml:4: consensus has an unknown key 'rounds'",
    );
    assert_has(
        &errors(&crew("  judge_llm: openai/gpt-4o\n")),
        "config/crew.yaml:4: consensus `judge_llm` has no effect unless `decision: judge`",
    );
    assert_has(
        &errors(&crew("  voters: [analyst, critic]\n")),
        "config/crew.yaml:3: deciding by vote needs at least 3 voters",
    );
    assert_has(
        &errors(&crew("  voters: [analyst]\n  decision: judge\n")),
        "config/crew.yaml:3: a consensual crew needs at least 2 voters, and this crew has 1",
    );
    assert_has(
        &errors("process: consensual\nconsensus: yes please\n"),
        "config/crew.yaml:2: crew field 'consensus' must be a mapping",
    );
    assert_has(
        &errors("process: consensual\nmanager_llm: openai/gpt-4o\n"),
        "config/crew.yaml:2: `manager_llm` has no effect in a consensual crew",
    );
}

#[test]
fn consensus_without_the_consensual_process_is_refused() {
    assert_has(
        &errors("name: panel\nconsensus:\n  revisions: 1\n"),
        "config/crew.yaml:2: crew field 'consensus' has no effect unless `process: consensual`",
    );
    assert_has(&errors("process: unanimous\n"), "config/crew.yaml:1");
}

#[test]
fn a_task_of_an_agent_who_does_not_vote_is_refused() {
    let tasks = "fact:\n  description: Give a fact\n  expected_output: A line\n  agent: outsider\n";
    assert_has(
        &errors_with(
            "process: consensual\nconsensus:\n  voters: [analyst, critic, editor]\n",
            tasks,
        ),
        "config/tasks.yaml:4: task 'fact' is assigned to 'outsider', who is not a consensus voter",
    );
}
