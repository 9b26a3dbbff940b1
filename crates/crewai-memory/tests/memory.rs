//! Memory end to end on the SQLite store, with the hashing embedder (a real, deterministic one)
//! and scripted models.

use std::sync::{Arc, Mutex};

use crewai_llm::ScriptedLlm;
use crewai_llm::embeddings::HashEmbedder;
use crewai_memory::{
    MatchReason, Memory, MemoryConfig, MemoryError, MemoryEvent, MemoryStore, MemoryUpdate,
    RecallQuery, RecordQuery, RememberOptions, ScopePath, SqliteMemoryStore,
};

fn memory_on(store: SqliteMemoryStore) -> Memory {
    Memory::builder(Arc::new(store), Arc::new(HashEmbedder::new(256))).build()
}

fn memory() -> Memory {
    memory_on(SqliteMemoryStore::in_memory().unwrap())
}

fn scope(path: &str) -> ScopePath {
    ScopePath::parse(path).unwrap()
}

#[tokio::test]
async fn remembers_and_recalls_by_meaning_and_words() {
    let memory = memory();
    memory
        .remember(
            "The deployment runs on Kubernetes in eu-west-1",
            RememberOptions::default().category("infra").importance(0.9),
        )
        .await
        .unwrap();
    memory
        .remember("Alice prefers tea over coffee", RememberOptions::default())
        .await
        .unwrap();
    let found = memory
        .recall(RecallQuery::new("where does the deployment run").shallow())
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    let best = &found[0];
    assert_eq!(
        best.record.content,
        "The deployment runs on Kubernetes in eu-west-1"
    );
    assert_eq!(best.record.categories, ["infra"]);
    assert!(best.match_reasons.contains(&MatchReason::Keyword));
    assert!(best.match_reasons.contains(&MatchReason::Importance));
    assert!(best.match_reasons.contains(&MatchReason::Recency));
    let expected = 0.5 * best.semantic + 0.3 * 1.0 + 0.2 * 0.9;
    assert!((best.score - expected).abs() < 1e-3, "{best:?}");
    assert!(found[0].score > found[1].score);
    // Categories narrow a recall.
    let tea = memory
        .recall(RecallQuery::new("deployment").category("drinks").shallow())
        .await
        .unwrap();
    assert!(tea.is_empty());
}

#[tokio::test]
async fn near_identical_statements_are_stored_once() {
    let memory = memory();
    let first = memory
        .remember(
            "The API key rotates every 90 days",
            RememberOptions::default(),
        )
        .await
        .unwrap();
    let again = memory
        .remember(
            "The API key rotates every 90 days.",
            RememberOptions::default().importance(0.8),
        )
        .await
        .unwrap();
    assert_eq!(again.id, first.id);
    assert_eq!(again.importance, 0.8);
    let batch = memory
        .remember_many(
            &[
                "Invoices are sent on Fridays".into(),
                "invoices are sent on fridays".into(),
                "Refunds take five days".into(),
            ],
            RememberOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(batch.len(), 2);
    assert_eq!(memory.info().await.unwrap().records, 3);
}

#[tokio::test]
async fn consolidation_follows_the_models_plan() {
    let store = SqliteMemoryStore::in_memory().unwrap();
    let plain = memory_on(store.clone());
    let old = plain
        .remember(
            "The team meets on Monday mornings",
            RememberOptions::default(),
        )
        .await
        .unwrap();
    // The save's analysis (it keeps the root), then the consolidation plan.
    let llm = ScriptedLlm::new("memory-model")
        .then_text(r#"{"memories":[{"scope":"/","categories":["meetings"],"importance":0.5}]}"#)
        .then_text(format!(
            r#"{{"actions":[{{"id":"{}","action":"update","content":"The team meets on Tuesday mornings"}},{{"id":"not-shown","action":"delete"}}],"insert_new":false}}"#,
            old.id
        ));
    let memory = Memory::builder(Arc::new(store), Arc::new(HashEmbedder::new(256)))
        .llm(Arc::new(llm.clone()))
        .config(MemoryConfig::default().consolidation_threshold(0.5))
        .build();
    let merged = memory
        .remember(
            "The team meets on Tuesday mornings now",
            RememberOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(merged.id, old.id);
    assert_eq!(merged.content, "The team meets on Tuesday mornings");
    let all = memory.list_records(&RecordQuery::default()).await.unwrap();
    assert_eq!(all.len(), 1);
    let request = &llm.requests()[1];
    assert!(request.messages[1].text().contains(&old.id));
    assert_eq!(
        request.response_format.as_ref().map(|f| f.name.as_str()),
        Some("memory_consolidation")
    );
}

#[tokio::test]
async fn the_model_files_what_a_save_leaves_open_below_the_views_root() {
    let store = SqliteMemoryStore::in_memory().unwrap();
    let plain = memory_on(store.clone());
    plain
        .remember(
            "The staging server runs Debian",
            RememberOptions::default()
                .scope(scope("/tenant/1/infra"))
                .category("servers"),
        )
        .await
        .unwrap();
    let llm = ScriptedLlm::new("m").then_text(
        r#"{"memories":[
            {"scope":"/infra","categories":["Servers","Deploys"],"importance":0.9},
            {"scope":"/../../tenant/2","categories":[],"importance":7}
        ]}"#,
    );
    let memory = Memory::builder(Arc::new(store), Arc::new(HashEmbedder::new(256)))
        .llm(Arc::new(llm.clone()))
        .build();
    let tenant = memory.scope("/tenant/1").unwrap();
    let saved = tenant
        .remember_many(
            &[
                "Deploys to staging happen at noon".to_string(),
                "Coffee is in the kitchen".to_string(),
            ],
            RememberOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(saved[0].scope.to_string(), "/infra");
    assert_eq!(saved[0].categories, ["servers", "deploys"]);
    assert_eq!(saved[0].importance, 0.9);
    // A scope that does not parse stays at the view's root; importance is kept in 0..1.
    assert_eq!(saved[1].scope.to_string(), "/");
    assert_eq!(saved[1].importance, 1.0);
    let request = &llm.requests()[0];
    assert_eq!(
        request.response_format.as_ref().map(|f| f.name.as_str()),
        Some("memory_save_analysis")
    );
    // The model saw the tenant's scopes and categories, from the tenant's root.
    let asked = request.messages[1].text();
    assert!(
        asked.contains("\"/infra\"") && asked.contains("servers"),
        "{asked}"
    );
    assert!(!asked.contains("tenant"), "{asked}");

    // Everything given: no model call.
    tenant
        .remember(
            "Backups run at midnight",
            RememberOptions::default()
                .scope(scope("/infra"))
                .category("backups")
                .importance(0.4),
        )
        .await
        .unwrap();
    assert_eq!(llm.requests().len(), 1);
    // A failed analysis files with the defaults.
    let failing = Memory::builder(
        Arc::new(SqliteMemoryStore::in_memory().unwrap()),
        Arc::new(HashEmbedder::new(64)),
    )
    .llm(Arc::new(ScriptedLlm::new("m").then_text("not json")))
    .build();
    let kept = failing
        .remember("A plain fact", RememberOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (kept.scope.to_string().as_str(), kept.importance),
        ("/", 0.5)
    );
}

#[tokio::test]
async fn a_slice_recalls_across_its_scopes_and_writes_only_inside_them() {
    let memory = memory();
    let at = |path: &str| RememberOptions::default().scope(scope(path));
    for (path, text) in [
        ("/agent/writer", "The writer prefers short sentences"),
        ("/team/docs", "Docs use British spelling"),
        ("/team/docsecret", "The docs budget is secret"),
        ("/hr", "Salaries are reviewed in June"),
    ] {
        memory.remember(text, at(path)).await.unwrap();
    }
    let view = memory
        .slice(&["/agent/writer", "/team/docs"], Vec::new(), true)
        .unwrap();
    let found = view
        .recall(
            RecallQuery::new("how should the docs be written: sentences spelling budget salaries")
                .shallow(),
        )
        .await
        .unwrap();
    let mut scopes: Vec<String> = found.iter().map(|m| m.record.scope.to_string()).collect();
    scopes.sort();
    assert_eq!(scopes, ["/agent/writer", "/team/docs"]);
    assert_eq!(
        view.list_scopes().await.unwrap().len(),
        0,
        "no scopes below them"
    );
    let refused = view
        .remember("Use Oxford commas", at("/team/docs"))
        .await
        .unwrap_err();
    assert!(matches!(refused, MemoryError::ReadOnly { .. }), "{refused}");

    let writable = memory
        .slice(
            &["/agent/writer", "/team/docs"],
            vec!["style".into()],
            false,
        )
        .unwrap();
    let saved = writable
        .remember(
            "Use Oxford commas",
            at("/team/docs/style").category("style"),
        )
        .await
        .unwrap();
    assert_eq!(saved.scope.to_string(), "/team/docs/style");
    let outside = writable
        .remember("Leak", at("/team/docsecret"))
        .await
        .unwrap_err();
    assert!(
        outside.to_string().contains("outside the slice"),
        "{outside}"
    );
    // Its recalls keep to its categories.
    let styled = writable
        .recall(RecallQuery::new("writing style commas").shallow())
        .await
        .unwrap();
    assert_eq!(styled.len(), 1);
    assert_eq!(styled[0].record.content, "Use Oxford commas");
    assert_eq!(
        writable.list_categories().await.unwrap(),
        [("style".to_string(), 1)]
    );
    assert_eq!(
        writable.list_scopes().await.unwrap(),
        [scope("/team/docs/style")]
    );
    assert!(memory.slice(&["/a/../b"], Vec::new(), true).is_err());
}

#[tokio::test]
async fn extracts_statements_with_the_model() {
    let llm = ScriptedLlm::new("m").then_text(
        "```json\n{\"memories\": [\"Bob owns the billing service\", \"  \", \"Billing runs nightly\"]}\n```",
    );
    let memory = Memory::builder(
        Arc::new(SqliteMemoryStore::in_memory().unwrap()),
        Arc::new(HashEmbedder::new(64)),
    )
    .llm(Arc::new(llm))
    .build();
    let statements = memory
        .extract_memories("Task: ...\nResult: Bob owns billing; it runs nightly.")
        .await
        .unwrap();
    assert_eq!(
        statements,
        ["Bob owns the billing service", "Billing runs nightly"]
    );
    let no_model = memory_on(SqliteMemoryStore::in_memory().unwrap());
    let err = no_model.extract_memories("text").await.unwrap_err();
    assert!(matches!(err, MemoryError::NoLlm { .. }), "{err}");
}

#[tokio::test]
async fn deep_recall_uses_the_analysis_within_the_scope() {
    let store = SqliteMemoryStore::in_memory().unwrap();
    let plain = memory_on(store.clone());
    for (path, text) in [
        ("/project/notes", "The launch date moved to March"),
        ("/project/chat", "Lunch is at noon"),
        ("/other", "The launch date of the other project is May"),
    ] {
        plain
            .remember(text, RememberOptions::default().scope(scope(path)))
            .await
            .unwrap();
    }
    let llm = ScriptedLlm::new("m").then_text(
        r#"{"keywords":["launch"],"suggested_scopes":["/notes","/../other"],"complexity":"complex","recall_queries":["launch date"],"time_filter":null}"#,
    );
    let memory = Memory::builder(Arc::new(store), Arc::new(HashEmbedder::new(256)))
        .llm(Arc::new(llm.clone()))
        .config(MemoryConfig::default().query_analysis_threshold(10))
        .build();
    let project = memory.scope("/project").unwrap();
    let found = project
        .recall(RecallQuery::new("when is the launch happening?"))
        .await
        .unwrap();
    let contents: Vec<&str> = found.iter().map(|m| m.record.content.as_str()).collect();
    assert_eq!(contents, ["The launch date moved to March"]);
    assert_eq!(found[0].record.scope.to_string(), "/notes");
    // The model saw only the scopes below the recall's.
    let asked = llm.requests()[0].messages[1].text();
    assert!(
        asked.contains("/notes") && !asked.contains("other"),
        "{asked}"
    );
    // A short query needs no analysis, so no model call.
    let short = project.recall(RecallQuery::new("launch")).await.unwrap();
    assert_eq!(short[0].record.content, "The launch date moved to March");
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn update_forget_and_reset() {
    let memory = memory();
    let record = memory
        .remember("Staging uses Postgres 15", RememberOptions::default())
        .await
        .unwrap();
    let updated = memory
        .update(
            &record.id,
            MemoryUpdate {
                content: Some("Staging uses Postgres 16".into()),
                importance: Some(0.7),
                ..MemoryUpdate::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(updated.content, "Staging uses Postgres 16");
    let found = memory
        .recall(RecallQuery::new("postgres 16").shallow())
        .await
        .unwrap();
    assert_eq!(found[0].record.importance, 0.7);
    assert!(found[0].match_reasons.contains(&MatchReason::Keyword));
    let bad = memory
        .update(
            &record.id,
            MemoryUpdate {
                importance: Some(3.0),
                ..MemoryUpdate::default()
            },
        )
        .await;
    assert!(matches!(bad, Err(MemoryError::InvalidInput { .. })));
    assert_eq!(
        memory
            .forget(std::slice::from_ref(&record.id))
            .await
            .unwrap(),
        1
    );
    assert!(matches!(
        memory.update(&record.id, MemoryUpdate::default()).await,
        Err(MemoryError::NotFound { .. })
    ));
    memory
        .remember("a", RememberOptions::default().scope(scope("/x")))
        .await
        .unwrap();
    memory
        .remember("b", RememberOptions::default().scope(scope("/y")))
        .await
        .unwrap();
    assert_eq!(memory.reset(Some(&scope("/x"))).await.unwrap(), 1);
    assert_eq!(memory.reset(None).await.unwrap(), 1);
    assert_eq!(memory.info().await.unwrap().collection, None);
    // The collection opens again after a full reset.
    memory
        .remember("c", RememberOptions::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn another_embedding_size_is_refused_with_the_reset_command() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteMemoryStore::open_project(dir.path()).unwrap();
    assert!(store.path().unwrap().ends_with(".crewai/memory.db"));
    memory_on(store)
        .remember("kept across processes", RememberOptions::default())
        .await
        .unwrap();
    let reopened = SqliteMemoryStore::open_project(dir.path()).unwrap();
    let same = memory_on(reopened.clone());
    let found = same
        .recall(RecallQuery::new("kept").shallow())
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    let other = Memory::builder(Arc::new(reopened), Arc::new(HashEmbedder::new(32))).build();
    let err = other
        .remember("x", RememberOptions::default())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(
        err,
        MemoryError::DimensionMismatch {
            stored: 256,
            found: 32,
            ..
        }
    ));
    assert!(text.contains("crewai reset-memories"), "{text}");
}

#[tokio::test]
async fn background_writes_are_drained_and_report_failures() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let memory = Memory::builder(
        Arc::new(SqliteMemoryStore::in_memory().unwrap()),
        Arc::new(HashEmbedder::new(64)),
    )
    .observer(Arc::new(move |event: &MemoryEvent| {
        seen.lock().unwrap().push(event.clone())
    }))
    .build();
    for i in 0..5 {
        memory
            .remember_background(
                vec![format!("fact number {i} about topic {i}")],
                RememberOptions::default(),
            )
            .unwrap();
    }
    assert_eq!(memory.drain_writes().await.unwrap(), 5);
    assert_eq!(memory.info().await.unwrap().records, 5);
    memory
        .remember_background(vec!["   ".into()], RememberOptions::default())
        .unwrap();
    let err = memory.drain_writes().await.unwrap_err();
    assert!(matches!(err, MemoryError::BackgroundWrite(_)), "{err}");
    assert_eq!(memory.drain_writes().await.unwrap(), 0);
    let saves = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, MemoryEvent::SaveCompleted { .. }))
        .count();
    assert_eq!(saves, 5);
}

#[tokio::test]
async fn read_only_memory_refuses_writes() {
    let memory = Memory::builder(
        Arc::new(SqliteMemoryStore::in_memory().unwrap()),
        Arc::new(HashEmbedder::new(64)),
    )
    .config(MemoryConfig::default().read_only(true))
    .build();
    let err = memory
        .remember("x", RememberOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        MemoryError::ReadOnly {
            operation: "remember"
        }
    ));
    assert!(memory.reset(None).await.is_err());
}

#[tokio::test]
async fn lists_scopes_categories_and_the_tree() {
    let memory = memory();
    for (path, category) in [
        ("/crew/a/agent/writer", "style"),
        ("/crew/a/agent/writer", "facts"),
        ("/crew/a/agent/editor", "facts"),
        ("/crew/b", "facts"),
    ] {
        memory
            .remember(
                &format!("{path} knows {category} {}", path.len()),
                RememberOptions::default()
                    .scope(scope(path))
                    .category(category),
            )
            .await
            .unwrap();
    }
    let crew_a = memory.scope("/crew/a").unwrap();
    assert_eq!(
        crew_a.list_scopes(&scope("/agent")).await.unwrap(),
        [scope("/agent/editor"), scope("/agent/writer")]
    );
    assert_eq!(
        crew_a
            .list_categories(&RecordQuery::default())
            .await
            .unwrap(),
        [("facts".to_string(), 2), ("style".to_string(), 1)]
    );
    let tree = memory.tree().await.unwrap();
    assert_eq!(tree.total, 4);
    let crew = &tree.children[0];
    assert_eq!(crew.scope, scope("/crew"));
    assert_eq!(crew.children.len(), 2);
    assert_eq!(crew.children[0].total, 3);
    assert_eq!(crew.children[1].records, 1);
    let listed = crew_a
        .list_records(&RecordQuery::default().limit(2))
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|r| r.scope.is_within(&scope("/agent"))));
    let info = crew_a.info().await.unwrap();
    assert_eq!((info.records, info.scopes, info.categories), (3, 2, 2));
    let store_view: Arc<dyn MemoryStore> = Arc::new(SqliteMemoryStore::in_memory().unwrap());
    assert!(store_view.collections().await.unwrap().is_empty());
}

#[tokio::test]
async fn agent_tools_save_and_search() {
    let memory = memory().scope("/crew/demo").unwrap();
    let tools = crewai_memory::memory_tools(&memory, Some("Researcher".into()));
    let names: Vec<String> = tools.iter().map(|t| t.name().to_string()).collect();
    assert_eq!(names, ["search_memory", "save_to_memory"]);
    let ctx = crewai_tools::ToolContext::default();
    let saved = tools[1]
        .run(
            serde_json::json!({"memories": ["The Q3 report is due on October 3", ""]}),
            &ctx,
        )
        .await
        .unwrap();
    assert_eq!(saved.to_text(), "Saved 1 memory.");
    let listed = memory.list_records(&RecordQuery::default()).await.unwrap();
    assert_eq!(listed[0].source.as_deref(), Some("Researcher"));
    let found = tools[0]
        .run(
            serde_json::json!({"queries": "when is the Q3 report due"}),
            &ctx,
        )
        .await
        .unwrap()
        .to_text();
    assert!(
        found.starts_with("Query: when is the Q3 report due\n- (score="),
        "{found}"
    );
    assert!(
        found.contains("The Q3 report is due on October 3"),
        "{found}"
    );
    let refused = tools[0]
        .run(serde_json::json!({"queries": []}), &ctx)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("queries"), "{refused}");
}
