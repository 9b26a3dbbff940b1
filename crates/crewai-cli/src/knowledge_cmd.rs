//! The knowledge part of `crewai reset-memories` (`-kn` the crew's, `-akn` the agents') and
//! `crewai memory collections`, which lists memory's and knowledge's collections of the
//! project's `.crewai/memory.db`.

use std::path::Path;

use anyhow::Context;
use crewai_knowledge::{CollectionKind, collection_kind};
use crewai_memory::{MemoryStore, RecordFilter, ScopePath, SqliteMemoryStore};
use serde::Serialize;

use crate::memory_cmd::{database, open_existing, print_json};
use crate::outcome::{Failure, print_out};

/// One stored collection, as `crewai memory collections` shows it.
#[derive(Debug, Serialize)]
struct CollectionRow {
    name: String,
    /// `memory`, or the owner of the knowledge: `crew`, `agent` or `tool`.
    kind: &'static str,
    model: String,
    dimensions: usize,
    records: usize,
}

fn kind_name(collection: &str) -> &'static str {
    match collection_kind(collection) {
        None => "memory",
        Some(CollectionKind::Crew) => "crew knowledge",
        Some(CollectionKind::Agent) => "agent knowledge",
        Some(CollectionKind::Tool) => "tool knowledge",
    }
}

/// `crewai memory collections`.
pub async fn collections(store: &SqliteMemoryStore, json: bool) -> Result<(), Failure> {
    let infos = store
        .collections()
        .await
        .context("cannot read the collections")
        .map_err(Failure::run)?;
    let mut rows = Vec::new();
    for info in infos {
        let records = store
            .count(&info.name, &RecordFilter::everything_in(ScopePath::root()))
            .await
            .with_context(|| format!("cannot count the records of {}", info.name))
            .map_err(Failure::run)?;
        rows.push(CollectionRow {
            kind: kind_name(&info.name),
            name: info.name,
            model: info.model,
            dimensions: info.dimensions,
            records,
        });
    }
    if json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        return print_out("No collections stored yet.");
    }
    let lines: Vec<String> = rows
        .iter()
        .map(|row| {
            format!(
                "{}  ({}: {} records, {} × {} dimensions)",
                row.name, row.kind, row.records, row.model, row.dimensions
            )
        })
        .collect();
    print_out(&lines.join("\n"))
}

/// The knowledge part of `crewai reset-memories`: drops the crew's knowledge collections (and
/// those of search tools) with `crew`, the agents' with `agents`.
pub async fn reset(project: &Path, crew: bool, agents: bool) -> Result<(), Failure> {
    let path = database(project, None);
    let Some(store) = open_existing(&path)? else {
        println!("Knowledge: nothing stored.");
        return Ok(());
    };
    let collections = store
        .collections()
        .await
        .context("cannot read the knowledge collections")
        .map_err(Failure::run)?;
    let (mut crew_chunks, mut agent_chunks) = (0, 0);
    for collection in collections {
        let counter = match collection_kind(&collection.name) {
            Some(CollectionKind::Crew | CollectionKind::Tool) if crew => &mut crew_chunks,
            Some(CollectionKind::Agent) if agents => &mut agent_chunks,
            _ => continue,
        };
        *counter += store
            .drop_collection(&collection.name)
            .await
            .with_context(|| format!("cannot clear the collection {}", collection.name))
            .map_err(Failure::run)?;
    }
    if crew {
        println!("Crew knowledge reset ({crew_chunks} chunks deleted).");
    }
    if agents {
        println!("Agent knowledge reset ({agent_chunks} chunks deleted).");
    }
    Ok(())
}
