//! `crewai memory list|search|collections` and the memory part of `crewai reset-memories`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use crewai_llm::embeddings::{EmbedderConfig, EmbedderSettings, HASH_DEFAULT_DIMENSIONS};
use crewai_memory::{
    DEFAULT_COLLECTION, Memory, MemoryRecord, MemoryStore, RecallQuery, RecordFilter, ScopePath,
    SqliteMemoryStore,
};

use crate::cli::{MemoryAction, MemoryArgs};
use crate::outcome::{Failure, print_out};

/// The embedding model name the hashing embedder records (it needs no settings to rebuild).
const HASH_MODEL: &str = "feature-hash";

pub(crate) fn database(project: &Path, storage_path: Option<&Path>) -> PathBuf {
    storage_path.map_or_else(
        || {
            project
                .join(crewai_memory::MEMORY_DIR)
                .join(crewai_memory::MEMORY_DB_FILE)
        },
        Path::to_path_buf,
    )
}

/// The memory database, when there is one (a project that never used memory has none, and
/// listing it should not create one).
pub(crate) fn open_existing(path: &Path) -> Result<Option<SqliteMemoryStore>, Failure> {
    if !path.exists() {
        return Ok(None);
    }
    SqliteMemoryStore::open(path)
        .with_context(|| format!("cannot open the memory database {}", path.display()))
        .map(Some)
        .map_err(Failure::config)
}

/// `crewai memory ...`.
pub async fn memory(args: &MemoryArgs) -> Result<(), Failure> {
    let path = database(&args.project, args.storage_path.as_deref());
    let scope = ScopePath::parse(&args.scope)
        .context("--scope")
        .map_err(Failure::config)?;
    let Some(store) = open_existing(&path)? else {
        return if args.json {
            print_out("[]")
        } else {
            print_out(&format!(
                "No memory stored yet ({} does not exist).",
                path.display()
            ))
        };
    };
    let collection = args.collection.as_str();
    if !matches!(args.action, MemoryAction::Collections) && collection != DEFAULT_COLLECTION {
        let known = store
            .collection(collection)
            .await
            .context("cannot read the memory collections")
            .map_err(Failure::run)?;
        if known.is_none() {
            return Err(Failure::config(anyhow::anyhow!(
                "{} has no collection {collection:?}; `crewai memory collections` lists them",
                path.display()
            )));
        }
    }
    match &args.action {
        MemoryAction::Collections => crate::knowledge_cmd::collections(&store, args.json).await,
        MemoryAction::List => {
            let filter = RecordFilter {
                include_private: args.include_private,
                ..RecordFilter::scope(scope)
            };
            let records = store
                .list(collection, &filter, args.limit, 0)
                .await
                .context("cannot list the memory records")
                .map_err(Failure::run)?;
            if args.json {
                return print_json(&records);
            }
            if records.is_empty() {
                return print_out("No memory records in this scope.");
            }
            let lines: Vec<String> = records.iter().map(record_line).collect();
            print_out(&lines.join("\n"))
        }
        MemoryAction::Search {
            query,
            embedder_provider,
            embedder_model,
            embedder_config,
        } => {
            let embedder = search_embedder(
                &store,
                collection,
                embedder_provider.as_deref(),
                embedder_model.as_deref(),
                embedder_config.as_deref(),
            )
            .await?;
            let memory = Memory::builder(Arc::new(store), embedder)
                .collection(collection)
                .build();
            let found = memory
                .recall(
                    RecallQuery::new(query.clone())
                        .shallow()
                        .scope(scope)
                        .limit(args.limit)
                        .include_private(args.include_private),
                )
                .await
                .context("cannot search memory")
                .map_err(Failure::run)?;
            if args.json {
                return print_json(&found);
            }
            if found.is_empty() {
                return print_out("No memory matches.");
            }
            let lines: Vec<String> = found
                .iter()
                .map(|m| {
                    format!(
                        "{}\n  scope: {}  id: {}",
                        m.format(),
                        m.record.scope,
                        m.record.id
                    )
                })
                .collect();
            print_out(&lines.join("\n"))
        }
    }
}

fn record_line(record: &MemoryRecord) -> String {
    let mut line = format!(
        "{}  {}  {}{}\n  {}",
        record.created_at.format("%Y-%m-%d %H:%M"),
        record.scope,
        record.id,
        if record.private { "  (private)" } else { "" },
        record.content
    );
    if !record.categories.is_empty() {
        line.push_str(&format!("\n  categories: {}", record.categories.join(", ")));
    }
    line
}

pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string(value)
        .context("cannot encode the memory records")
        .map_err(Failure::run)?;
    print_out(&text)
}

/// The embedder to search with: the one the flags describe, else the collection's own when it
/// needs no settings (the hashing embedder); anything else must be named, since a query
/// embedded by another model would be compared with vectors it does not share a space with.
async fn search_embedder(
    store: &SqliteMemoryStore,
    collection: &str,
    provider: Option<&str>,
    model: Option<&str>,
    config: Option<&str>,
) -> Result<Arc<dyn crewai_llm::embeddings::Embedder>, Failure> {
    let recorded = store
        .collection(collection)
        .await
        .context("cannot read the memory collection")
        .map_err(Failure::run)?;
    let mut settings: EmbedderSettings = match config {
        Some(json) => serde_json::from_str(json)
            .context("--embedder-config is not an embedder settings object")
            .map_err(Failure::config)?,
        None => EmbedderSettings::default(),
    };
    if let Some(model) = model {
        settings.model = Some(model.to_string());
    }
    let provider = match (provider, &recorded) {
        (Some(provider), _) => provider.to_string(),
        (None, Some(info)) if info.model == HASH_MODEL => {
            settings.dimensions = settings.dimensions.or(Some(info.dimensions));
            "hash".to_string()
        }
        (None, Some(info)) => {
            return Err(Failure::config(anyhow::anyhow!(
                "collection {collection:?} was written with the embedding model {:?}; name its \
                 provider with --embedder-provider (and --embedder-model {:?})",
                info.model,
                info.model
            )));
        }
        (None, None) => {
            settings.dimensions = settings.dimensions.or(Some(HASH_DEFAULT_DIMENSIONS));
            "hash".to_string()
        }
    };
    EmbedderConfig {
        provider,
        config: settings,
    }
    .build()
    .context("cannot build the embedder")
    .map_err(Failure::config)
}

/// The memory part of `crewai reset-memories`: drops every memory collection of the database
/// (knowledge's are `-kn`'s and `-akn`'s).
pub async fn reset(project: &Path) -> Result<(), Failure> {
    let path = database(project, None);
    let Some(store) = open_existing(&path)? else {
        println!("Memory: nothing stored.");
        return Ok(());
    };
    let collections = store
        .collections()
        .await
        .context("cannot read the memory collections")
        .map_err(Failure::run)?;
    let mut deleted = 0;
    for collection in collections {
        if crewai_knowledge::collection_kind(&collection.name).is_some() {
            continue;
        }
        deleted += store
            .drop_collection(&collection.name)
            .await
            .with_context(|| format!("cannot clear the memory collection {}", collection.name))
            .map_err(Failure::run)?;
    }
    println!("Memory reset ({deleted} records deleted).");
    Ok(())
}
