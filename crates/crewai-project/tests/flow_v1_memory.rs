//! `config.memory` of a declarative flow: the flow's memory, which every crew it runs without a
//! `memory:` of its own uses, so a later method's crew (and the next kickoff) recalls what an
//! earlier one learned. Run against a scripted OpenAI-compatible server; the memory lives in
//! the flow folder's `.crewai/memory.db`.

mod common;

use std::sync::Arc;

use crewai_llm::embeddings::HashEmbedder;
use crewai_memory::{Memory, RecordQuery, SqliteMemoryStore};
use crewai_project::flow_v1::FlowDeclaration;
use crewai_project::{BuildOptions, ProjectError, ToolRegistry};
use crewai_testkit::scripted::{RecordedRequest, Reply, ScriptedServer};
use serde_json::Value;

use common::{declaration, write};

fn crew_method(name: &str, listen: Option<&str>, task: &str, llm: &str, memory: &str) -> String {
    let trigger = match listen {
        Some(method) => format!("listen: {method}"),
        None => "start: true".to_string(),
    };
    format!(
        "  {name}:
    {trigger}
    do:
      call: crew
      with:
        name: {name}{memory}
        agents:
          planner: {{role: Planner, goal: Plan launches, backstory: Careful., llm: {llm}}}
        tasks:
          - {{name: {name}, description: {task}, expected_output: A plan, agent: planner}}
"
    )
}

fn launch_flow(server: &ScriptedServer, second_crew_memory: &str) -> String {
    let llm = format!(
        "{{model: openai/gpt-4o-mini, api_key: test, base_url: '{}'}}",
        server.base_url()
    );
    format!(
        "schema: crewai.flow/v1
name: Launch Flow
config:
  memory:
    embedder: {{provider: hash, config: {{dimensions: 64}}}}
methods:
{}{}",
        crew_method("learn", None, "Find the launch date", &llm, ""),
        crew_method(
            "apply",
            Some("learn"),
            "Plan the product launch",
            &llm,
            second_crew_memory
        ),
    )
}

/// The first crew's answer, what memory extracts from it, and how it files it.
fn push_learning(server: &ScriptedServer) {
    server.push(Reply::text("The launch is on May 4 in Lisbon."));
    server.push(Reply::text(
        "{\"memories\": [\"The product launches on May 4 in Lisbon\"]}",
    ));
    server.push(Reply::text(
        r#"{"memories": [{"scope": "/", "categories": ["launch"], "importance": 0.8}]}"#,
    ));
}

/// Runs the launch flow (its second crew with `second_crew_memory`) once, the first crew's
/// learning and then `then` scripted; every scripted reply must be used.
async fn run_launch_flow(
    second_crew_memory: &str,
    then: &[&str],
) -> (tempfile::TempDir, Vec<RecordedRequest>) {
    let server = ScriptedServer::start().await;
    let (dir, flow) = declaration(&launch_flow(&server, second_crew_memory));
    push_learning(&server);
    for reply in then {
        server.push(Reply::text(*reply));
    }
    flow.build(&BuildOptions::new(ToolRegistry::new()))
        .unwrap()
        .kickoff(Vec::<(String, Value)>::new())
        .await
        .unwrap();
    assert_eq!(server.remaining(), 0);
    (dir, server.requests())
}

#[tokio::test]
async fn a_later_crew_recalls_what_an_earlier_method_learned() {
    let (dir, requests) =
        run_launch_flow("", &["Book the venue for May 4.", "{\"memories\": []}"]).await;
    assert!(!requests[0].body.to_string().contains("May 4"));
    let planning = requests[3].body.to_string();
    assert!(planning.contains("Plan the product launch"), "{planning}");
    assert!(
        planning.contains("The product launches on May 4 in Lisbon"),
        "the second crew's prompt lacks the first's memory: {planning}"
    );

    // Kept in the flow folder's store, under the flow's scope.
    let store = SqliteMemoryStore::open_project(dir.path()).unwrap();
    let memory = Memory::builder(Arc::new(store), Arc::new(HashEmbedder::new(64))).build();
    let records = memory.list_records(&RecordQuery::default()).await.unwrap();
    let scopes: Vec<String> = records.iter().map(|r| r.scope.to_string()).collect();
    assert_eq!(scopes, ["/flow/launch_flow/agent/planner"]);
}

#[tokio::test]
async fn a_crew_with_memory_false_in_a_flow_with_memory_has_none() {
    let (_dir, requests) = run_launch_flow("\n        memory: false", &["Book a venue."]).await;
    // No recall into its prompt and no extraction after its task.
    assert_eq!(requests.len(), 4);
    assert!(!requests[3].body.to_string().contains("Lisbon"));
}

#[test]
fn a_memory_that_is_not_true_or_an_embedder_is_refused_at_its_line() {
    for (memory, expected) in [
        ("memory: 3", "`memory` must be true, false, or {enabled"),
        ("memory: {enabled: 1}", "`enabled` must be true or false"),
        ("memory: {embedder: {provider: 42}}", "`embedder` must be"),
        ("memory: {store: lancedb}", "store"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let yaml = format!(
            "schema: crewai.flow/v1\nname: F\nconfig:\n  {memory}\nmethods:\n  a:\n    start: true\n    do: {{call: expression, expr: \"'x'\"}}\n"
        );
        write(dir.path(), &[("flow.yaml", &yaml)]);
        let error = FlowDeclaration::load(dir.path().join("flow.yaml")).unwrap_err();
        let shown = error.to_string();
        assert!(matches!(error, ProjectError::Invalid(_)), "{shown}");
        assert!(shown.contains(expected), "{memory}: {shown}");
        assert!(shown.contains("flow.yaml:4"), "{memory}: {shown}");
    }
}
