//! A project's Python tools through the worker: real python3, real processes.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crewai_python::{PythonError, PythonToolConfig, PythonToolSpec, PythonTools, find_python};
use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_testkit::process::{is_reaped, is_running, wait_until};
use crewai_tools::{ToolContext, ToolError, ToolHandle};
use serde_json::{Map, Value, json};

const TOOLS_MODULE: &str = "tool_project.tools.custom_tool";

fn python_with_pydantic() -> Prerequisite {
    Prerequisite::program(
        "python3 with pydantic",
        "python3",
        &["-c", "import pydantic"],
        "python3 -m pip install pydantic",
    )
}

fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tool_project")
}

fn class(key: &str, attr: &str) -> PythonToolSpec {
    PythonToolSpec {
        key: key.into(),
        module: TOOLS_MODULE.into(),
        module_file: None,
        attr: attr.into(),
        kwargs: Map::new(),
        is_function: false,
    }
}

fn function(key: &str, attr: &str) -> PythonToolSpec {
    PythonToolSpec {
        is_function: true,
        ..class(key, attr)
    }
}

fn config(tools: Vec<PythonToolSpec>) -> PythonToolConfig {
    let root = project_root();
    let python = match find_python(None, &root, &[]) {
        Ok(python) => python,
        Err(error) => panic!("{error}"),
    };
    PythonToolConfig {
        python,
        project_root: root,
        tools,
        start_timeout: Duration::from_secs(30),
        call_timeout: Duration::from_secs(20),
    }
}

async fn start(config: PythonToolConfig) -> PythonTools {
    match PythonTools::start(config).await {
        Ok(tools) => tools,
        Err(error) => panic!("start: {}", crewai_llm::error_chain(&error)),
    }
}

fn handle(tools: &PythonTools, key: &str) -> ToolHandle {
    match tools.handles().into_iter().find(|(k, _)| k == key) {
        Some((_, handle)) => handle,
        None => panic!("no handle for {key}"),
    }
}

async fn run(tool: &ToolHandle, args: Value) -> Result<String, ToolError> {
    tool.tool()
        .run(args, &ToolContext::new())
        .await
        .map(|output| output.to_text())
}

fn chain(error: &ToolError) -> String {
    crewai_llm::error_chain(error)
}

async fn a_base_tool_subclass_reports_its_schema_and_runs_with_its_kwargs() {
    let mut spec = class("WordCountTool", "WordCountTool");
    spec.kwargs.insert("unit".into(), json!("mots"));
    let tools = start(config(vec![spec])).await;
    let word_count = handle(&tools, "WordCountTool");
    assert_eq!(word_count.name(), "word_count_tool");
    assert_eq!(word_count.original_name(), "Word Count Tool");
    assert_eq!(word_count.description(), "Counts the words in a text.");
    let schema = word_count.parameters();
    assert_eq!(
        schema["properties"]["text"]["description"],
        "The text whose words are counted."
    );
    assert_eq!(schema["properties"]["minimum_length"]["default"], 1);
    assert_eq!(schema["required"], json!(["text"]));
    // The tool prints to stdout: that goes to stderr, not into the protocol.
    let counted = run(
        &word_count,
        json!({"text": "a bb ccc", "minimum_length": 2}),
    )
    .await;
    assert_eq!(counted.unwrap(), "2 mots");
    tools.shutdown().await;
}

async fn tool_functions_and_async_tools_run() {
    let tools = start(config(vec![
        function("shout", "shout"),
        function("add_numbers", "add_numbers"),
        function("final_answer", "final_answer"),
        class("AsyncOnlyTool", "AsyncOnlyTool"),
    ]))
    .await;
    let shout = handle(&tools, "shout");
    assert_eq!(shout.original_name(), "Shout Tool");
    assert_eq!(shout.description(), "Upper-cases a text.");
    assert_eq!(
        run(&shout, json!({"text": "quiet"})).await.unwrap(),
        "QUIET"
    );

    let add = handle(&tools, "add_numbers");
    assert_eq!(add.original_name(), "add_numbers");
    assert_eq!(add.parameters()["required"], json!(["a"]));
    assert_eq!(run(&add, json!({"a": 40})).await.unwrap(), r#"{"sum": 42}"#);

    let final_answer = handle(&tools, "final_answer");
    assert!(final_answer.result_as_answer());
    assert_eq!(final_answer.max_usage_count(), Some(2));
    assert!(!shout.result_as_answer());
    assert_eq!(shout.max_usage_count(), None);

    let greet = handle(&tools, "AsyncOnlyTool");
    assert_eq!(greet.parameters()["required"], json!(["name"]));
    assert_eq!(
        run(&greet, json!({"name": "Ada"})).await.unwrap(),
        "hello Ada"
    );
    tools.shutdown().await;
}

async fn an_exception_reaches_the_agent_with_its_traceback() {
    let tools = start(config(vec![class("FailingTool", "FailingTool")])).await;
    let error = run(
        &handle(&tools, "FailingTool"),
        json!({"reason": "disk full"}),
    )
    .await
    .unwrap_err();
    let ToolError::Failed(text) = &error else {
        panic!("expected a Failed tool error, got {error:?}");
    };
    assert!(
        text.starts_with("Traceback (most recent call last):"),
        "{text}"
    );
    assert!(text.contains("custom_tool.py\", line"), "{text}");
    assert!(text.contains("in _explode"), "{text}");
    assert!(
        text.ends_with("RuntimeError: the failing tool failed: disk full\n"),
        "{text}"
    );
    assert!(
        !text.contains("crewai_worker.py"),
        "the worker's own frames are left out: {text}"
    );
    tools.shutdown().await;
}

async fn arguments_that_do_not_fit_the_schema_are_a_tool_error() {
    let tools = start(config(vec![class("WordCountTool", "WordCountTool")])).await;
    let error = run(&handle(&tools, "WordCountTool"), json!({"text": 5}))
        .await
        .unwrap_err();
    let text = chain(&error);
    assert!(
        text.starts_with(
            "the arguments do not fit the tool's schema: 1 validation error for WordCountInput"
        ),
        "{text}"
    );
    tools.shutdown().await;
}

async fn a_call_past_the_timeout_fails_and_the_worker_serves_the_next_one() {
    let mut config = config(vec![
        class("SleepyTool", "SleepyTool"),
        class("PidTool", "PidTool"),
    ]);
    config.call_timeout = Duration::from_millis(800);
    let tools = start(config).await;
    let started = Instant::now();
    let error = run(&handle(&tools, "SleepyTool"), json!({"seconds": 30}))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let text = chain(&error);
    assert_eq!(
        text,
        "the tool 'Sleepy Tool' could not run: the tool 'SleepyTool' on MCP server 'python-tools' did not finish within 800ms; the call was abandoned"
    );
    let pid = tools.worker_pid().await.unwrap();
    assert_eq!(
        run(&handle(&tools, "PidTool"), json!({})).await.unwrap(),
        pid.to_string()
    );
    assert_eq!(tools.restarts().await, 0);
    tools.shutdown().await;
}

async fn calls_run_concurrently_and_a_cancelled_one_does_not_disturb_the_worker() {
    let tools = start(config(vec![
        class("SleepyTool", "SleepyTool"),
        class("PidTool", "PidTool"),
    ]))
    .await;
    let sleepy = handle(&tools, "SleepyTool");
    let started = Instant::now();
    let (first, second) = tokio::join!(
        run(&sleepy, json!({"seconds": 1.0})),
        run(&sleepy, json!({"seconds": 1.0}))
    );
    assert_eq!(first.unwrap(), "slept 1.0");
    assert_eq!(second.unwrap(), "slept 1.0");
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "took {:?}",
        started.elapsed()
    );

    let token = tokio_util::sync::CancellationToken::new();
    let ctx = ToolContext::new().with_cancellation(token.clone());
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        token.cancel();
    };
    let (cancelled, ()) = tokio::join!(sleepy.tool().run(json!({"seconds": 2.0}), &ctx), cancel);
    assert!(
        matches!(cancelled, Err(ToolError::Cancelled)),
        "{cancelled:?}"
    );
    // The abandoned call finishes in the worker and its answer is dropped there.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let pid = tools.worker_pid().await.unwrap();
    assert_eq!(
        run(&handle(&tools, "PidTool"), json!({})).await.unwrap(),
        pid.to_string()
    );
    assert_eq!(tools.restarts().await, 0);
    tools.shutdown().await;
}

async fn a_worker_killed_mid_call_is_restarted_once() {
    let tools = start(config(vec![
        class("SleepyTool", "SleepyTool"),
        class("PidTool", "PidTool"),
    ]))
    .await;
    let first = tools.worker_pid().await.unwrap();
    let sleepy = handle(&tools, "SleepyTool");
    let call = tokio::spawn(async move { run(&sleepy, json!({"seconds": 30})).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = std::process::Command::new("kill")
        .args(["-9", &first.to_string()])
        .status();
    assert!(killed.is_ok_and(|status| status.success()));

    let error = call.await.unwrap().unwrap_err();
    assert!(
        chain(&error).contains("MCP server 'python-tools' stopped during the call to 'SleepyTool'"),
        "{}",
        chain(&error)
    );
    let second: u32 = run(&handle(&tools, "PidTool"), json!({}))
        .await
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(second, first);
    assert_eq!(tools.restarts().await, 1);
    tools.shutdown().await;
}

async fn a_worker_that_dies_twice_is_an_error_naming_its_stderr() {
    let tools = start(config(vec![
        class("CrashTool", "CrashTool"),
        class("PidTool", "PidTool"),
    ]))
    .await;
    let (crash, pid) = (handle(&tools, "CrashTool"), handle(&tools, "PidTool"));
    let error = run(&crash, json!({})).await.unwrap_err();
    assert!(
        chain(&error).contains("crash tool: giving up now"),
        "{}",
        chain(&error)
    );
    assert!(run(&pid, json!({})).await.is_ok(), "restarted once");
    let _ = run(&crash, json!({})).await.unwrap_err();
    let error = run(&pid, json!({})).await.unwrap_err();
    let text = chain(&error);
    assert!(
        text.contains("MCP server 'python-tools' stopped and has already been restarted 1 time(s), so it is not started again; its stderr ended with:"),
        "{text}"
    );
    assert!(text.contains("crash tool: giving up now"), "{text}");
    tools.shutdown().await;
}

async fn dropping_the_tools_leaves_no_process_behind() {
    let tools = start(config(vec![class("SpawnTool", "SpawnTool")])).await;
    let worker = tools.worker_pid().await.unwrap();
    let spawn = handle(&tools, "SpawnTool");
    let grandchild: u32 = run(&spawn, json!({})).await.unwrap().parse().unwrap();
    assert!(is_running(grandchild));
    drop(spawn);
    drop(tools);
    wait_until("the worker is still there", Duration::from_secs(10), || {
        is_reaped(worker)
    })
    .await;
    wait_until(
        "the tool's own child is still running",
        Duration::from_secs(10),
        || !is_running(grandchild),
    )
    .await;
}

async fn a_tool_that_does_not_import_is_an_error_naming_module_class_and_cause() {
    let broken = PythonToolSpec {
        module: "tool_project.tools.broken_tool".into(),
        ..class("BrokenTool", "BrokenTool")
    };
    let error = PythonTools::start(config(vec![class("PidTool", "PidTool"), broken]))
        .await
        .err()
        .unwrap();
    let PythonError::ToolLoad { failures } = &error else {
        panic!("expected ToolLoad, got {error:?}");
    };
    assert_eq!(failures.len(), 1);
    let text = error.to_string();
    assert!(
        text.starts_with("the Python tool 'BrokenTool' (`BrokenTool` from module `tool_project.tools.broken_tool`) could not be loaded:\nTraceback (most recent call last):"),
        "{text}"
    );
    assert!(
        text.contains("broken_tool.py\", line 3, in <module>"),
        "{text}"
    );
    assert!(
        text.contains("ModuleNotFoundError: No module named 'a_module_that_does_not_exist'\nthe module 'a_module_that_does_not_exist' is not installed for "),
        "{text}"
    );
    assert!(
        text.ends_with("-m pip install a_module_that_does_not_exist`), or pass --python with the interpreter that has it"),
        "{text}"
    );
}

/// An interpreter without CrewAI and pydantic: `python3 -S` (no site-packages) behind a script.
async fn without_crewai_and_pydantic_the_load_error_says_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join("bare-python");
    let real = config(Vec::new()).python;
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec '{}' -S \"$@\"\n", real.display()),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut config = config(vec![class("WordCountTool", "WordCountTool")]);
    config.python = wrapper;
    let error = PythonTools::start(config).await.err().unwrap();
    let text = error.to_string();
    assert!(
        text.contains("ModuleNotFoundError: No module named 'crewai'"),
        "{text}"
    );
    assert!(
        text.contains("and the stand-in for crewai.tools that crewai-rs provides needs pydantic, which is not either"),
        "{text}"
    );
    assert!(
        text.contains("-m pip install pydantic`, or install crewai"),
        "{text}"
    );
}

async fn a_missing_class_and_misused_kwargs_are_load_errors() {
    let mut shout = function("shout", "shout");
    shout.kwargs.insert("loud".into(), json!(true));
    let error = PythonTools::start(config(vec![class("Nope", "NoSuchTool"), shout]))
        .await
        .err()
        .unwrap();
    assert_eq!(
        error.to_string(),
        "the Python tool 'Nope' (`NoSuchTool` from module `tool_project.tools.custom_tool`) could not be loaded:\nAttributeError: module 'tool_project.tools.custom_tool' has no attribute 'NoSuchTool'\n\
         the Python tool 'shout' (`shout` from module `tool_project.tools.custom_tool`) could not be loaded:\nTypeError: shout is not a class, so it cannot take the arguments loud"
    );
}

async fn a_module_level_tool_object_and_a_module_loaded_from_its_file_run() {
    let loose = PythonToolSpec {
        module: "loose_tool".into(),
        module_file: Some(project_root().join("scripts/loose_tool.py")),
        ..function("reverse", "reverse")
    };
    let tools = start(config(vec![
        function("token_counter", "token_counter"),
        loose,
    ]))
    .await;
    let counter = handle(&tools, "token_counter");
    assert_eq!(counter.original_name(), "Token Counter");
    assert_eq!(
        run(&counter, json!({"text": "one two"})).await.unwrap(),
        "2 tokens"
    );
    let reverse = handle(&tools, "reverse");
    assert_eq!(reverse.original_name(), "Reverse Tool");
    assert_eq!(run(&reverse, json!({"text": "abc"})).await.unwrap(), "cba");
    tools.shutdown().await;
}

fn main() -> std::process::ExitCode {
    let python = python_with_pydantic();
    let needs = [&python];
    Suite::new()
        .async_test_needing(
            "a_base_tool_subclass_reports_its_schema_and_runs_with_its_kwargs",
            &needs,
            a_base_tool_subclass_reports_its_schema_and_runs_with_its_kwargs,
        )
        .async_test_needing(
            "tool_functions_and_async_tools_run",
            &needs,
            tool_functions_and_async_tools_run,
        )
        .async_test_needing(
            "an_exception_reaches_the_agent_with_its_traceback",
            &needs,
            an_exception_reaches_the_agent_with_its_traceback,
        )
        .async_test_needing(
            "arguments_that_do_not_fit_the_schema_are_a_tool_error",
            &needs,
            arguments_that_do_not_fit_the_schema_are_a_tool_error,
        )
        .async_test_needing(
            "a_call_past_the_timeout_fails_and_the_worker_serves_the_next_one",
            &needs,
            a_call_past_the_timeout_fails_and_the_worker_serves_the_next_one,
        )
        .async_test_needing(
            "calls_run_concurrently_and_a_cancelled_one_does_not_disturb_the_worker",
            &needs,
            calls_run_concurrently_and_a_cancelled_one_does_not_disturb_the_worker,
        )
        .async_test_needing(
            "a_worker_killed_mid_call_is_restarted_once",
            &needs,
            a_worker_killed_mid_call_is_restarted_once,
        )
        .async_test_needing(
            "a_worker_that_dies_twice_is_an_error_naming_its_stderr",
            &needs,
            a_worker_that_dies_twice_is_an_error_naming_its_stderr,
        )
        .async_test_needing(
            "dropping_the_tools_leaves_no_process_behind",
            &needs,
            dropping_the_tools_leaves_no_process_behind,
        )
        .async_test_needing(
            "a_tool_that_does_not_import_is_an_error_naming_module_class_and_cause",
            &needs,
            a_tool_that_does_not_import_is_an_error_naming_module_class_and_cause,
        )
        .async_test_needing(
            "a_module_level_tool_object_and_a_module_loaded_from_its_file_run",
            &needs,
            a_module_level_tool_object_and_a_module_loaded_from_its_file_run,
        )
        .async_test_needing(
            "without_crewai_and_pydantic_the_load_error_says_what_to_install",
            &needs,
            without_crewai_and_pydantic_the_load_error_says_what_to_install,
        )
        .async_test_needing(
            "a_missing_class_and_misused_kwargs_are_load_errors",
            &needs,
            a_missing_class_and_misused_kwargs_are_load_errors,
        )
        .run()
}
