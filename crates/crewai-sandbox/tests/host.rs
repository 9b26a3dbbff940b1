//! The host backends against the machine's own Python: bubblewrap (each escape and abuse
//! attempt of issue 21 stopped by a named mechanism: the mount, network and pid namespaces,
//! the read-only binds, the seccomp filters, the rlimits, the host's wall-clock and output-cap
//! kills) and unsafe mode (unconfined, but still under the deadline and output caps). The cases
//! shared with the WASI backend are in common/.

#[macro_use]
mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{FAKE_KEY, FAKE_KEY_VAR, blocked_by, run, run_code, with_limits};
use crewai_sandbox::{
    Backend, BackendConfig, CodeInterpreterConfig, CodeInterpreterTool, ExitStatus, HostSandbox,
    LimitHit, Limits, Sandbox,
};
use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_tools::{Tool, ToolContext};
use serde_json::json;

fn project_python() -> PathBuf {
    let here = std::env::current_dir().unwrap_or_else(|e| panic!("{e}"));
    crewai_python::find_python(None, &here, &[]).unwrap_or_else(|e| panic!("{e}"))
}

fn sandbox() -> Sandbox {
    Sandbox::load(&BackendConfig::Bubblewrap {
        python: project_python(),
    })
    .unwrap_or_else(|e| panic!("{e:?}"))
}

fn unconfined() -> Sandbox {
    Sandbox::load(&BackendConfig::Unsafe {
        python: project_python(),
    })
    .unwrap_or_else(|e| panic!("{e:?}"))
}

fn python_prerequisite() -> Prerequisite {
    Prerequisite::new(
        "python3 (the project's Python the host backends run)",
        "apt-get install python3",
        || {
            let here = std::env::current_dir().map_err(|e| e.to_string())?;
            crewai_python::find_python(None, &here, &[])
                .map(drop)
                .map_err(|e| e.to_string())
        },
    )
}

fn bubblewrap_prerequisite() -> Prerequisite {
    Prerequisite::program(
        "bubblewrap with user namespaces",
        "bwrap",
        &["--unshare-user", "--ro-bind", "/", "/", "true"],
        "apt-get install bubblewrap (and allow unprivileged user namespaces)",
    )
}

async fn the_projects_python_runs_inside() {
    let sandbox = sandbox();
    assert_eq!(sandbox.backend(), Backend::Bubblewrap);
    let outcome = run_code(&sandbox, "import os, sys\nprint(6 * 7)\nprint(os.getcwd())").await;
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{}", outcome.stderr);
    assert_eq!(outcome.stdout, "42\n/scratch\n");
    assert!(outcome.succeeded());
}

/// The kernel's view from inside: a seccomp filter installed, no capabilities, a pid namespace
/// where the sandbox's init is pid 1.
async fn seccomp_filters_are_installed_and_capabilities_dropped() {
    let code = "status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines() if ':' in l)\n\
                print(status['Seccomp'].strip(), status['Seccomp_filters'].strip(), status['CapEff'].strip())\n\
                print(sorted(int(p) for p in __import__('os').listdir('/proc') if p.isdigit())[0])";
    let outcome = run_code(&sandbox(), code).await;
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{}", outcome.stderr);
    let mut lines = outcome.stdout.lines();
    let status: Vec<&str> = lines.next().unwrap_or_default().split(' ').collect();
    // Mode 2 is "filter"; bwrap's own filters may come on top of ours.
    assert_eq!(status[0], "2", "{}", outcome.stdout);
    assert!(
        status[1].parse::<u32>().unwrap_or(0) >= 2,
        "{}",
        outcome.stdout
    );
    assert_eq!(status[2], "0000000000000000", "{}", outcome.stdout);
    assert_eq!(lines.next(), Some("1"), "{}", outcome.stdout);
}

/// `/etc/passwd`, a home-folder secret and a host temporary file are not in the mount
/// namespace at all.
async fn host_secrets_are_outside_the_mount_namespace() {
    let outcome = common::host_files_and_home_are_not_there(&sandbox()).await;
    assert_eq!(blocked_by(&outcome, "passwd"), "FileNotFoundError");
    assert_eq!(blocked_by(&outcome, "home_file"), "FileNotFoundError");
    assert_eq!(blocked_by(&outcome, "tmp_file"), "FileNotFoundError");
}

/// `/usr` and the root are read-only mounts (EROFS, an `OSError`); host folders are absent.
async fn writes_outside_scratch_hit_read_only_mounts() {
    let outcome = common::writes_outside_the_scratch_folder_fail(&sandbox()).await;
    assert_eq!(blocked_by(&outcome, "usr"), "OSError");
    assert_eq!(blocked_by(&outcome, "root"), "OSError");
    assert_eq!(blocked_by(&outcome, "host_tmp"), "FileNotFoundError");
}

/// The network namespace has only its own loopback: the host's listener is not there
/// (connection refused), a datagram goes nowhere, and there is no resolver.
async fn sockets_stay_in_an_empty_network_namespace() {
    let outcome = common::no_socket_reaches_a_loopback_listener(&sandbox()).await;
    assert_eq!(blocked_by(&outcome, "tcp"), "ConnectionRefusedError");
    assert_eq!(blocked_by(&outcome, "dns"), "gaierror");
}

/// fork, vfork and `clone` without `CLONE_THREAD` are refused by seccomp (EPERM); threads are
/// allowed but their stacks hit the address-space rlimit.
async fn process_bombs_hit_seccomp_and_thread_bombs_the_address_space_cap() {
    let outcome = common::process_and_thread_bombs_fail(&sandbox()).await;
    assert_eq!(blocked_by(&outcome, "fork"), "PermissionError");
    assert_eq!(blocked_by(&outcome, "subprocess"), "PermissionError");
    assert_eq!(blocked_by(&outcome, "threads"), "RuntimeError");
}

/// The calls to kernel attack surface, through the C library: each returns -1 with EPERM.
async fn namespaces_mounts_and_ptrace_are_refused_by_seccomp() {
    let code = "import ctypes, os\n\
                libc = ctypes.CDLL(None, use_errno=True)\n\
                calls = {'unshare': lambda: libc.unshare(0x10000000), \
                'mount': lambda: libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), \
                'ptrace': lambda: libc.ptrace(16, 1, None, None), \
                'keyctl': lambda: libc.syscall(250, 0, 0, 0, 0)}\n\
                for name, call in calls.items():\n    \
                result = call()\n    \
                print(name, result, os.strerror(ctypes.get_errno()))";
    let outcome = run_code(&sandbox(), code).await;
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{}", outcome.stderr);
    for name in ["unshare", "mount", "ptrace"] {
        assert!(
            outcome
                .stdout
                .contains(&format!("{name} -1 Operation not permitted")),
            "{name}: {}",
            outcome.stdout
        );
    }
}

async fn the_environment_is_cleared_to_the_allow_list() {
    let outcome = common::only_allowed_environment_variables_are_seen(&sandbox()).await;
    let first = outcome.stdout.lines().next().unwrap_or_default();
    assert!(
        !first.contains(FAKE_KEY_VAR) && first.contains("'GRANTED'") && first.contains("'HOME'"),
        "{first}"
    );
}

/// A file over the artifact budget is cut by `RLIMIT_FSIZE` (`EFBIG`, File too large).
async fn a_huge_file_is_cut_by_the_file_size_rlimit() {
    let limits = Limits {
        artifact_bytes: 1 << 20,
        ..Limits::default()
    };
    let code = "try:\n    open('big.bin', 'wb').write(b'x' * (4 << 20))\n    print('WROTE')\nexcept OSError as e:\n    print('cut', e.errno)";
    let outcome = run(&sandbox(), with_limits(code, limits)).await;
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{}", outcome.stderr);
    assert_eq!(outcome.stdout, format!("cut {}\n", libc::EFBIG));
}

async fn the_tool_runs_on_bubblewrap_and_saves_artifacts() {
    let output = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let tool = CodeInterpreterTool::new(CodeInterpreterConfig {
        backend: BackendConfig::Bubblewrap {
            python: project_python(),
        },
        artifacts_dir: output.path().to_path_buf(),
        inputs: Vec::new(),
        env_allow: vec![FAKE_KEY_VAR.into()],
        limits: Limits::default(),
    });
    assert_eq!(tool.backend(), Backend::Bubblewrap);
    assert!(tool.description().contains("project's installed packages"));
    let context = ToolContext::new().with_task("t1", "report");
    let code = format!(
        "import os\nopen('out.txt', 'w').write(os.environ[{FAKE_KEY_VAR:?}][:7])\nprint('saved')"
    );
    let observation = tool
        .run(json!({"code": code, "libraries_used": ["json"]}), &context)
        .await
        .unwrap_or_else(|e| panic!("{e:?}"))
        .to_text();
    assert!(
        observation.starts_with("The code ran to its end"),
        "{observation}"
    );
    let saved = output.path().join("report").join("out.txt");
    assert_eq!(
        std::fs::read_to_string(&saved).unwrap_or_else(|e| panic!("{e}")),
        "sk-fake"
    );
}

/// Unsafe mode reaches what the sandbox hides (it is unconfined), says so in the tool's
/// description and every observation, and still stops at the deadline and the output cap.
async fn unsafe_mode_is_unconfined_but_still_stopped_by_the_deadline_and_caps() {
    let secrets = common::HostSecrets::write();
    let sandbox = unconfined();
    assert_eq!(sandbox.backend(), Backend::Unsafe);
    let read = run_code(
        &sandbox,
        &format!(
            "print(open({:?}).read())",
            secrets.in_tmp.display().to_string()
        ),
    )
    .await;
    assert_eq!(read.stdout, "host-secret\n", "{}", read.stderr);
    let looping = run(
        &sandbox,
        with_limits(
            "import subprocess\nsubprocess.Popen(['sleep', '60'])\nwhile True:\n    pass",
            Limits {
                deadline: Duration::from_secs(2),
                ..Limits::default()
            },
        ),
    )
    .await;
    assert_eq!(looping.limit_hit, Some(LimitHit::Deadline));
    assert!(looping.duration < Duration::from_secs(6));
    let flooding = common::printing_gigabytes_stops_at_the_output_cap(&sandbox).await;
    assert_eq!(flooding.limit_hit, Some(LimitHit::Output));
    let env = common::only_allowed_environment_variables_are_seen(&sandbox).await;
    assert!(!env.stdout.contains(FAKE_KEY));

    let output = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let tool = CodeInterpreterTool::new(CodeInterpreterConfig {
        backend: BackendConfig::Unsafe {
            python: project_python(),
        },
        artifacts_dir: output.path().to_path_buf(),
        inputs: vec![secrets.in_tmp.clone()],
        env_allow: Vec::new(),
        limits: Limits::default(),
    });
    assert!(tool.description().starts_with("WARNING: unsafe mode"));
    assert!(
        tool.description()
            .contains(&secrets.in_tmp.display().to_string())
    );
    let observation = tool
        .run(json!({"code": "print(1)"}), &ToolContext::new())
        .await
        .unwrap_or_else(|e| panic!("{e:?}"))
        .to_text();
    assert!(
        observation.starts_with("UNSAFE MODE: this code ran directly on the host"),
        "{observation}"
    );
}

/// The unconfined runner, asked for as bubblewrap with a missing Python, is a clear error.
fn a_python_that_does_not_start_is_a_clear_error() {
    let error = HostSandbox::bubblewrap(std::path::Path::new("/nonexistent/python3"))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        error.contains("/nonexistent/python3") || error.contains("bwrap"),
        "{error}"
    );
}

fn main() -> std::process::ExitCode {
    common::set_fake_key();
    let python = python_prerequisite();
    let bwrap = bubblewrap_prerequisite();
    let needs = [&python, &bwrap];
    let unsafe_needs = [&python];
    let suite = Suite::new()
        .test(
            "a_python_that_does_not_start_is_a_clear_error",
            a_python_that_does_not_start_is_a_clear_error,
        )
        .async_test_needing(
            "the_projects_python_runs_inside",
            &needs,
            the_projects_python_runs_inside,
        )
        .async_test_needing(
            "seccomp_filters_are_installed_and_capabilities_dropped",
            &needs,
            seccomp_filters_are_installed_and_capabilities_dropped,
        )
        .async_test_needing(
            "host_secrets_are_outside_the_mount_namespace",
            &needs,
            host_secrets_are_outside_the_mount_namespace,
        )
        .async_test_needing(
            "writes_outside_scratch_hit_read_only_mounts",
            &needs,
            writes_outside_scratch_hit_read_only_mounts,
        )
        .async_test_needing(
            "sockets_stay_in_an_empty_network_namespace",
            &needs,
            sockets_stay_in_an_empty_network_namespace,
        )
        .async_test_needing(
            "process_bombs_hit_seccomp_and_thread_bombs_the_address_space_cap",
            &needs,
            process_bombs_hit_seccomp_and_thread_bombs_the_address_space_cap,
        )
        .async_test_needing(
            "namespaces_mounts_and_ptrace_are_refused_by_seccomp",
            &needs,
            namespaces_mounts_and_ptrace_are_refused_by_seccomp,
        )
        .async_test_needing(
            "the_environment_is_cleared_to_the_allow_list",
            &needs,
            the_environment_is_cleared_to_the_allow_list,
        )
        .async_test_needing(
            "a_huge_file_is_cut_by_the_file_size_rlimit",
            &needs,
            a_huge_file_is_cut_by_the_file_size_rlimit,
        )
        .async_test_needing(
            "the_tool_runs_on_bubblewrap_and_saves_artifacts",
            &needs,
            the_tool_runs_on_bubblewrap_and_saves_artifacts,
        )
        .async_test_needing(
            "unsafe_mode_is_unconfined_but_still_stopped_by_the_deadline_and_caps",
            &unsafe_needs,
            unsafe_mode_is_unconfined_but_still_stopped_by_the_deadline_and_caps,
        );
    // The shared cases, each stopped here by: the mount namespace and read-only binds (input,
    // symlinks), RLIMIT_AS (memory), the wall-clock kill of the process group (loop, cancel),
    // the output-cap kill (gigabytes), the prelude's import check (missing module).
    shared_cases!(
        suite,
        &needs,
        sandbox,
        [
            an_exception_is_a_traceback_and_exit_status_one,
            a_granted_input_is_readable_and_read_only,
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
