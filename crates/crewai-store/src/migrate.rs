//! The schema, and bringing a database from before the run journal up to it.

use rusqlite::Connection;

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS latest_kickoff_task_outputs (
    task_id TEXT PRIMARY KEY,
    expected_output TEXT,
    output JSON,
    task_index INTEGER,
    inputs JSON,
    was_replayed BOOLEAN,
    timestamp DATETIME DEFAULT CURRENT_TIMESTAMP,
    task_name TEXT
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    crew TEXT NOT NULL,
    inputs JSON NOT NULL,
    status TEXT NOT NULL,
    output TEXT,
    error TEXT,
    token_usage JSON,
    replay BOOLEAN NOT NULL DEFAULT 0,
    started_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE TABLE IF NOT EXISTS run_task_outputs (
    run_id TEXT NOT NULL,
    task_index INTEGER NOT NULL,
    task_id TEXT NOT NULL,
    task_name TEXT,
    output JSON NOT NULL,
    inputs JSON NOT NULL,
    was_replayed BOOLEAN NOT NULL DEFAULT 0,
    finished_at TEXT NOT NULL,
    PRIMARY KEY (run_id, task_index)
);
CREATE TABLE IF NOT EXISTS training_examples (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    crew TEXT NOT NULL,
    iteration INTEGER NOT NULL,
    agent_role TEXT NOT NULL,
    task TEXT NOT NULL,
    initial_output TEXT NOT NULL,
    human_feedback TEXT NOT NULL,
    improved_output TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
";

/// Columns the run journal added to `runs`, with their types (added to older databases).
const RUN_JOURNAL_COLUMNS: [(&str, &str); 9] = [
    ("run_id", "TEXT"),
    ("task_keys", "JSON"),
    ("parent_run_id", "TEXT"),
    ("fork_task_index", "INTEGER"),
    // The attempt running the run (NULL once it ended): see `RunOwner`.
    ("owner_pid", "INTEGER"),
    ("owner_token", "TEXT"),
    ("owner_since", "TEXT"),
    ("owner_heartbeat", "TEXT"),
    // The crew planner's answer (`planning: true`), so a resume does not plan again.
    ("plan", "JSON"),
];

/// Adds the run journal's columns to a `runs` table made before them.
pub(crate) fn migrate_runs(conn: &Connection) -> rusqlite::Result<()> {
    let mut statement = conn.prepare("SELECT name FROM pragma_table_info('runs')")?;
    let existing = statement
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    for (column, kind) in RUN_JOURNAL_COLUMNS {
        if !existing.iter().any(|name| name == column) {
            conn.execute_batch(&format!("ALTER TABLE runs ADD COLUMN {column} {kind}"))?;
        }
    }
    conn.execute_batch("CREATE UNIQUE INDEX IF NOT EXISTS runs_by_run_id ON runs (run_id)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use crate::test_support::start;

    #[test]
    fn opens_a_database_from_before_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, crew TEXT NOT NULL,
                 inputs JSON NOT NULL, status TEXT NOT NULL, output TEXT, error TEXT,
                 token_usage JSON, replay BOOLEAN NOT NULL DEFAULT 0, started_at TEXT NOT NULL,
                 finished_at TEXT);
                 INSERT INTO runs (crew, inputs, status, output, started_at)
                 VALUES ('old', '{}', 'completed', 'done', '2025-01-01T00:00:00+00:00');",
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        store.start_run(&start("new", Vec::new())).unwrap();
        let runs = store.runs(10).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[1].id, "1");
        assert_eq!(runs[1].output.as_deref(), Some("done"));
        assert_eq!(runs[1].task_count, 0);
        // Opening again finds the columns already there.
        assert_eq!(Store::open(&path).unwrap().runs(10).unwrap().len(), 2);
    }
}
