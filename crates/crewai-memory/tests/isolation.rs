//! Attempts to read or change records outside a scope: path tricks, prefix collisions, SQL and
//! LIKE metacharacters, FTS syntax and private records.

use std::sync::Arc;

use crewai_llm::embeddings::HashEmbedder;
use crewai_memory::{
    Memory, MemoryError, RecallQuery, RecordQuery, RememberOptions, ScopePath, SqliteMemoryStore,
};

fn memory() -> Memory {
    Memory::builder(
        Arc::new(SqliteMemoryStore::in_memory().unwrap()),
        Arc::new(HashEmbedder::new(128)),
    )
    .build()
}

async fn contents(view: &Memory, query: &str) -> Vec<String> {
    let mut found: Vec<String> = view
        .recall(RecallQuery::new(query).shallow().limit(50))
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.record.content)
        .collect();
    found.sort();
    found
}

#[tokio::test]
async fn dot_dot_never_leaves_a_scope() {
    let memory = memory();
    let admin = memory.scope("/admin").unwrap();
    admin
        .remember("the admin password is hunter2", RememberOptions::default())
        .await
        .unwrap();
    let tenant = memory.scope("/tenant/1").unwrap();
    for path in ["..", "../../admin", "/x/../../admin", "./.."] {
        assert!(
            matches!(tenant.scope(path), Err(MemoryError::InvalidScope { .. })),
            "{path}"
        );
        assert!(ScopePath::parse(path).is_err());
    }
    assert!(contents(&tenant, "admin password").await.is_empty());
    // Scope strings from deserialised input go through the same parser.
    let parsed: Result<ScopePath, _> = serde_json::from_str("\"/tenant/1/../../admin\"");
    assert!(parsed.is_err());
}

#[tokio::test]
async fn a_tenant_is_not_a_prefix_of_another() {
    let memory = memory();
    for (tenant, secret) in [
        ("1", "alpha"),
        ("10", "bravo"),
        ("1_0", "charlie"),
        ("1 ", "delta"),
    ] {
        memory
            .scope(&format!("/tenant/{tenant}"))
            .unwrap()
            .remember(&format!("secret word {secret}"), RememberOptions::default())
            .await
            .unwrap();
    }
    let one = memory.scope("/tenant/1").unwrap();
    assert_eq!(contents(&one, "secret word").await, ["secret word alpha"]);
    assert_eq!(
        one.list_records(&RecordQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(one.reset(None).await.unwrap(), 1);
    let ten = memory.scope("/tenant/10").unwrap();
    assert_eq!(contents(&ten, "secret word").await, ["secret word bravo"]);
    assert_eq!(memory.info().await.unwrap().records, 3);
}

#[tokio::test]
async fn sql_and_like_metacharacters_are_plain_text() {
    let memory = memory();
    let tricky = [
        "%",
        "_",
        "a%",
        "x' OR '1'='1",
        "\"; DROP TABLE memory_records; --",
        "*",
    ];
    for (i, segment) in tricky.iter().enumerate() {
        memory
            .scope(&format!("/t/{segment}"))
            .unwrap()
            .remember(&format!("note {i} kept here"), RememberOptions::default())
            .await
            .unwrap();
    }
    memory
        .scope("/t/abc")
        .unwrap()
        .remember("note abc kept here", RememberOptions::default())
        .await
        .unwrap();
    for (i, segment) in tricky.iter().enumerate() {
        let view = memory.scope(&format!("/t/{segment}")).unwrap();
        assert_eq!(
            contents(&view, "note kept").await,
            [format!("note {i} kept here")],
            "scope {segment:?}"
        );
        let categories = view
            .list_categories(&RecordQuery::default().category("%"))
            .await
            .unwrap();
        assert!(categories.is_empty());
    }
    // FTS operators in a query are words, not syntax.
    let all = memory.scope("/t").unwrap();
    for query in [
        "note OR kept",
        "\"note",
        "note*",
        "NEAR(note kept)",
        "kept) OR (1",
        "-note",
    ] {
        assert!(
            all.recall(RecallQuery::new(query).shallow()).await.is_ok(),
            "{query}"
        );
    }
    assert_eq!(memory.info().await.unwrap().records, 7);
}

#[tokio::test]
async fn private_records_stay_with_their_source() {
    let memory = memory();
    let user = memory.scope("/users/ann").unwrap();
    user.remember(
        "Ann's diagnosis is private",
        RememberOptions::default().source("ann").private(true),
    )
    .await
    .unwrap();
    user.remember("Ann likes hiking", RememberOptions::default().source("ann"))
        .await
        .unwrap();
    let public = contents(&user, "Ann diagnosis hiking").await;
    assert_eq!(public, ["Ann likes hiking"]);
    let as_bob = user
        .recall(RecallQuery::new("Ann diagnosis").shallow().source("bob"))
        .await
        .unwrap();
    assert!(as_bob.is_empty());
    let as_ann = user
        .recall(RecallQuery::new("Ann diagnosis").shallow().source("ann"))
        .await
        .unwrap();
    assert_eq!(as_ann.len(), 2);
    let admin = user
        .recall(
            RecallQuery::new("Ann diagnosis")
                .shallow()
                .include_private(true),
        )
        .await
        .unwrap();
    assert_eq!(admin.len(), 2);
    assert_eq!(
        user.list_records(&RecordQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );
    // A public statement never merges into the private one, however similar.
    let public_copy = user
        .remember(
            "Ann's diagnosis is private",
            RememberOptions::default().source("ann"),
        )
        .await
        .unwrap();
    assert!(!public_copy.private);
    assert_eq!(
        user.list_records(&RecordQuery::default().include_private(true))
            .await
            .unwrap()
            .len(),
        3
    );
}

#[tokio::test]
async fn a_view_cannot_forget_or_update_outside_itself() {
    let memory = memory();
    let other = memory
        .scope("/tenant/2")
        .unwrap()
        .remember("tenant two data", RememberOptions::default())
        .await
        .unwrap();
    let one = memory.scope("/tenant/1").unwrap();
    assert_eq!(
        one.forget(std::slice::from_ref(&other.id)).await.unwrap(),
        0
    );
    assert!(matches!(
        one.update(&other.id, Default::default()).await,
        Err(MemoryError::NotFound { .. })
    ));
    assert_eq!(memory.info().await.unwrap().records, 1);
}
