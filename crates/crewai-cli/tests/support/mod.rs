//! Test support shared by the CLI's integration tests: the binary run as a user runs it, the
//! project files it runs on, and an OTLP collector ([`collector::Collector`]).
//!
//! Every test binary compiles this module and uses a part of it.
#![allow(dead_code)]

pub mod collector;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crewai_testkit::scripted::ScriptedServer;
use serde_json::Value;

/// The repository's `examples/` folder.
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The binary with a clean environment: no provider keys or models leak in from the machine
/// (only `PATH` is kept), and no terminal to read from.
pub fn crewai(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crewai"));
    command.env_clear().args(args).stdin(Stdio::null());
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
}

/// [`crewai`] pointed at `server` as its OpenAI provider.
pub fn crewai_at(args: &[&str], server: &ScriptedServer) -> Command {
    with_server(crewai(args), server)
}

/// `command` pointed at `server` as its OpenAI provider.
pub fn with_server(mut command: Command, server: &ScriptedServer) -> Command {
    command
        .env("OPENAI_BASE_URL", server.base_url())
        .env("OPENAI_API_KEY", "test");
    command
}

/// Runs the binary to its end.
pub fn run(mut command: Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("the crewai binary runs: {e}"))
}

/// Runs the binary, which must succeed (see [`succeeded`]).
pub fn run_ok(command: Command) -> Output {
    succeeded(run(command))
}

/// `out`, of a run that must have succeeded (the panic shows what it printed otherwise).
pub fn succeeded(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stderr),
        text(&out.stdout)
    );
    out
}

/// `crewai run --project <project> --dry-run <extra…>`.
pub fn dry_run(project: &Path, extra: &[&str]) -> Output {
    let project = project.to_string_lossy();
    let mut args = vec!["run", "--project", &project, "--dry-run"];
    args.extend_from_slice(extra);
    run(crewai(&args))
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The last line of a successful run's stdout, as JSON (what `--json` prints).
pub fn last_json_line(out: &Output) -> Value {
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Asserts that `text` (what a run printed or wrote) contains `part`, showing it otherwise.
#[track_caller]
pub fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "no {part:?} in:\n{text}");
}

/// Writes `files` (paths relative to `dir`), creating their folders.
pub fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, body) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap_or(dir)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, body).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// A project of `files` in a new temporary folder.
pub fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(dir.path(), files);
    dir
}

/// Copies the folder `from` into `to`, recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The events of the trace files in `traces` that are not in `before`.
pub fn new_trace_events(traces: &Path, before: &[PathBuf]) -> Vec<Value> {
    trace_files(traces)
        .into_iter()
        .filter(|path| !before.contains(path))
        .flat_map(|path| {
            std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

pub fn trace_files(traces: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(traces)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default()
}
