//! `crewai memory list|search` and `crewai reset-memories -m` on a memory database written by
//! crewai-memory, as a crew run writes it.

mod support;

use std::sync::Arc;

use crewai_llm::embeddings::HashEmbedder;
use crewai_memory::{Memory, RememberOptions, ScopePath, SqliteMemoryStore};
use crewai_testkit::scripted::ScriptedServer;
use serde_json::Value;
use support::{assert_contains, crewai, project, run, run_ok, text, with_server};

fn remember_all(project: &std::path::Path, items: &[(&str, &str, bool)]) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = SqliteMemoryStore::open_project(project).unwrap();
        let memory = Memory::builder(Arc::new(store), Arc::new(HashEmbedder::new(128))).build();
        for (scope, content, private) in items {
            memory
                .remember(
                    content,
                    RememberOptions::default()
                        .scope(ScopePath::parse(scope).unwrap())
                        .private(*private),
                )
                .await
                .unwrap();
        }
    });
}

#[test]
fn lists_searches_and_resets_memory() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().to_str().unwrap();
    let empty = run_ok(crewai(&["memory", "list", "--project", project]));
    assert_contains(&text(&empty.stdout), "No memory stored yet");
    assert!(!dir.path().join(".crewai/memory.db").exists());

    remember_all(
        dir.path(),
        &[
            (
                "/crew/demo/agent/researcher",
                "The survey closes on Friday",
                false,
            ),
            (
                "/crew/demo/agent/writer",
                "Reports use British spelling",
                false,
            ),
            ("/crew/other", "Other crew secret plan", true),
        ],
    );
    let listed: Value = serde_json::from_slice(
        &run_ok(crewai(&["memory", "list", "--project", project, "--json"])).stdout,
    )
    .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    let with_private: Value = serde_json::from_slice(
        &run_ok(crewai(&[
            "memory",
            "list",
            "--project",
            project,
            "--json",
            "--include-private",
        ]))
        .stdout,
    )
    .unwrap();
    assert_eq!(with_private.as_array().unwrap().len(), 3);
    let scoped = text(
        &run_ok(crewai(&[
            "memory",
            "list",
            "--project",
            project,
            "--scope",
            "/crew/demo/agent/writer",
        ]))
        .stdout,
    );
    assert_contains(&scoped, "Reports use British spelling");
    assert!(!scoped.contains("survey"), "{scoped}");

    let found: Value = serde_json::from_slice(
        &run_ok(crewai(&[
            "memory",
            "search",
            "when does the survey close",
            "--project",
            project,
            "--json",
            "--limit",
            "1",
        ]))
        .stdout,
    )
    .unwrap();
    assert_eq!(found[0]["record"]["content"], "The survey closes on Friday");
    assert!(found[0]["score"].as_f64().unwrap() > 0.0);
    assert_eq!(found[0]["match_reasons"][0], "semantic");
    let shown = text(
        &run_ok(crewai(&[
            "memory",
            "search",
            "British spelling",
            "--project",
            project,
        ]))
        .stdout,
    );
    assert_contains(&shown, "- (score=");
    assert_contains(&shown, "scope: /crew/demo/agent/writer");

    // Another collection by name: an agent's own memory, written with its own embedder.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = SqliteMemoryStore::open_project(dir.path()).unwrap();
        Memory::builder(Arc::new(store), Arc::new(HashEmbedder::new(64)))
            .collection("memory-agent-writer")
            .build()
            .remember(
                "The writer's own note on tone",
                RememberOptions::default().scope(ScopePath::parse("/agent/writer").unwrap()),
            )
            .await
            .unwrap();
    });
    for action in [&["list"][..], &["search", "tone"][..]] {
        let mut args = vec!["memory"];
        args.extend_from_slice(action);
        args.extend_from_slice(&[
            "--project",
            project,
            "--collection",
            "memory-agent-writer",
            "--json",
        ]);
        let own: Value = serde_json::from_slice(&run_ok(crewai(&args)).stdout).unwrap();
        let own = own.as_array().unwrap();
        assert_eq!(own.len(), 1, "{action:?}: {own:?}");
        let content = own[0].get("record").unwrap_or(&own[0])["content"].clone();
        assert_eq!(content, "The writer's own note on tone", "{action:?}");
    }
    let missing = run(crewai(&[
        "memory",
        "list",
        "--project",
        project,
        "--collection",
        "nope",
    ]));
    assert!(!missing.status.success());
    assert_contains(&text(&missing.stderr), "no collection \"nope\"");

    let bad_scope = run(crewai(&[
        "memory",
        "list",
        "--project",
        project,
        "--scope",
        "/a/../b",
    ]));
    assert!(!bad_scope.status.success());
    assert_contains(&text(&bad_scope.stderr), "`..`");

    let reset = run_ok(crewai(&["reset-memories", "--project", project, "-m"]));
    assert_contains(&text(&reset.stdout), "Memory reset (4 records deleted)");
    let after: Value = serde_json::from_slice(
        &run_ok(crewai(&[
            "memory",
            "list",
            "--project",
            project,
            "--json",
            "--include-private",
        ]))
        .stdout,
    )
    .unwrap();
    assert_eq!(after, serde_json::json!([]));
}

/// A crew with `memory: true`, run twice: the first run saves what its task's result is worth
/// remembering (the model's extraction), the second run's task prompt carries it.
#[test]
fn a_memory_crew_recalls_in_its_second_run_what_the_first_saved() {
    let dir = project(&[
        (
            "config/agents.yaml",
            "planner:\n  role: Planner\n  goal: Plan launches\n  backstory: Careful.\n",
        ),
        (
            "config/tasks.yaml",
            "plan:\n  description: Plan the product launch\n  expected_output: A plan\n  agent: planner\n",
        ),
        (
            "config/crew.yaml",
            "name: launch\nmemory: true\nembedder:\n  provider: hash\n  config: {dimensions: 256}\n",
        ),
    ]);
    let path = dir.path().to_str().unwrap();
    let server = ScriptedServer::start_blocking();
    server.push_text("Launch on May 4 in Lisbon.");
    server.push_text("{\"memories\": [\"The product launches on May 4 in Lisbon\"]}");
    server.push_text(
        r#"{"memories": [{"scope": "/", "categories": ["launch"], "importance": 0.8}]}"#,
    );
    let first = run_ok(with_server(crewai(&["run", "--project", path]), &server));
    assert_contains(
        &text(&first.stderr),
        "Memory: on, embedding with hash (its default model) — the crew's `embedder:`",
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(!requests[0].body.to_string().contains("May 4"));

    server.push_text("Same plan.");
    server.push_text("{\"memories\": []}");
    run_ok(with_server(crewai(&["run", "--project", path]), &server));
    assert_eq!(server.remaining(), 0);
    let second = server.requests()[3].body.to_string();
    assert_contains(&second, "Plan the product launch");
    assert_contains(&second, "The product launches on May 4 in Lisbon");

    // What the first run saved is under the crew's scope, the agent's part of it.
    let listed: Value = serde_json::from_slice(
        &run_ok(crewai(&["memory", "list", "--project", path, "--json"])).stdout,
    )
    .unwrap();
    let records = listed.as_array().unwrap();
    assert_eq!(records.len(), 1, "{listed}");
    assert_eq!(
        records[0]["scope"], "/crew/launch/agent/planner",
        "{listed}"
    );
}
