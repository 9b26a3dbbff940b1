//! The escape and abuse cases every backend must contain, shared by tests/wasi.rs and
//! tests/host.rs: each takes the loaded [`Sandbox`] and asserts what holds whatever the backend;
//! the callers add what their mechanism shows. The only network address used is a loopback
//! listener, to show it is never reached.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::net::{TcpListener, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use crewai_sandbox::{Execution, ExecutionOutcome, ExitStatus, LimitHit, Limits, Sandbox};
use tokio_util::sync::CancellationToken;

/// A variable set in the test process that the code must never see.
pub const FAKE_KEY_VAR: &str = "CREWAI_SANDBOX_TEST_FAKE_API_KEY";
pub const FAKE_KEY: &str = "sk-fake-0123456789";

/// Sets the fake key; call first in `main`, before any thread starts.
pub fn set_fake_key() {
    // SAFETY: no other thread runs yet; the variable is set before the suite starts any.
    unsafe { std::env::set_var(FAKE_KEY_VAR, FAKE_KEY) };
}

pub async fn run(sandbox: &Sandbox, execution: Execution) -> ExecutionOutcome {
    let outcome = sandbox
        .run(execution, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    eprintln!("{outcome:#?}");
    outcome
}

pub async fn run_code(sandbox: &Sandbox, code: &str) -> ExecutionOutcome {
    run(sandbox, Execution::new(code)).await
}

pub fn with_limits(code: &str, limits: Limits) -> Execution {
    Execution {
        limits,
        ..Execution::new(code)
    }
}

/// Each probe prints `blocked <name> <exception>` when the attempt raised, `LEAK <name>`
/// otherwise.
pub fn probes(attempts: &[(&str, &str)]) -> String {
    let mut code = String::new();
    for (name, statement) in attempts {
        code.push_str(&format!(
            "try:\n    {statement}\n    print('LEAK {name}')\nexcept Exception as e:\n    print('blocked {name}', type(e).__name__)\n"
        ));
    }
    code
}

pub fn assert_all_blocked(outcome: &ExecutionOutcome, names: &[&str]) {
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

/// The exception name a probe reported, to name the mechanism that stopped it.
pub fn blocked_by<'a>(outcome: &'a ExecutionOutcome, name: &str) -> &'a str {
    let prefix = format!("blocked {name} ");
    outcome
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_default()
}

pub async fn an_exception_is_a_traceback_and_exit_status_one(sandbox: &Sandbox) {
    let outcome = run_code(sandbox, "print('before')\nx = 1 / 0").await;
    assert_eq!(outcome.status, ExitStatus::Exited(1));
    // Unbuffered: what was printed before the failure is kept.
    assert_eq!(outcome.stdout, "before\n");
    assert!(
        outcome.stderr.contains("ZeroDivisionError"),
        "{}",
        outcome.stderr
    );
    assert!(outcome.stderr.contains("<code>"), "{}", outcome.stderr);
    let exited = run_code(sandbox, "import sys\nsys.exit(3)").await;
    assert_eq!(exited.status, ExitStatus::Exited(3));
}

pub async fn a_granted_input_is_readable_and_read_only(sandbox: &Sandbox) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let csv = dir.path().join("sales.csv");
    std::fs::write(&csv, "region,amount\nnorth,10\nsouth,20\nwest,36\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let code = "import csv, statistics\n\
                rows = list(csv.DictReader(open('/inputs/sales.csv')))\n\
                print(statistics.mean(float(r['amount']) for r in rows))\n\
                try:\n    open('/inputs/sales.csv', 'a').write('x')\n    print('WROTE')\n\
                except OSError as e:\n    print('read-only', type(e).__name__)";
    let outcome = run(
        sandbox,
        Execution {
            inputs: vec![csv.clone()],
            ..Execution::new(code)
        },
    )
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

/// Secret files the test writes on the host (one in a temporary folder, one in the home
/// folder), removed on drop.
pub struct HostSecrets {
    pub in_tmp: PathBuf,
    pub in_home: PathBuf,
    _dir: tempfile::TempDir,
}

impl HostSecrets {
    pub fn write() -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let in_tmp = dir.path().join("secret.txt");
        std::fs::write(&in_tmp, "host-secret").unwrap_or_else(|e| panic!("{e}"));
        let home = PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()));
        let in_home = home.join(format!(".crewai-sandbox-secret-{}", std::process::id()));
        std::fs::write(&in_home, "home-secret").unwrap_or_else(|e| panic!("{e}"));
        HostSecrets {
            in_tmp,
            in_home,
            _dir: dir,
        }
    }
}

impl Drop for HostSecrets {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.in_home);
    }
}

/// Reads `/etc/passwd`, the home folder, a host temporary file and the process environment of
/// the machine; every attempt must fail.
pub async fn host_files_and_home_are_not_there(sandbox: &Sandbox) -> ExecutionOutcome {
    let secrets = HostSecrets::write();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let attempts = [
        ("passwd", "open('/etc/passwd').read()".to_string()),
        ("shadow", "open('/etc/shadow').read()".to_string()),
        (
            "home_file",
            format!("open({:?}).read()", secrets.in_home.display().to_string()),
        ),
        (
            "tmp_file",
            format!("open({:?}).read()", secrets.in_tmp.display().to_string()),
        ),
        (
            "home_listing",
            format!(
                "assert os.path.basename({:?}) in os.listdir({home:?})",
                secrets.in_home.display().to_string()
            ),
        ),
        (
            "init_environ",
            format!("assert {FAKE_KEY:?} in open('/proc/1/environ').read()"),
        ),
    ];
    let attempts: Vec<(&str, &str)> = attempts.iter().map(|(n, s)| (*n, s.as_str())).collect();
    let outcome = run_code(sandbox, &format!("import os\n{}", probes(&attempts))).await;
    assert_all_blocked(
        &outcome,
        &[
            "passwd",
            "shadow",
            "home_file",
            "tmp_file",
            "home_listing",
            "init_environ",
        ],
    );
    assert!(!outcome.stdout.contains("secret"), "{}", outcome.stdout);
    outcome
}

/// Writes to the standard library, the root, the parent folder and a host temporary folder;
/// only the file written in the scratch folder comes back.
pub async fn writes_outside_the_scratch_folder_fail(sandbox: &Sandbox) -> ExecutionOutcome {
    let host_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let host_target = host_dir.path().join("evil").display().to_string();
    let host_attempt = format!("open({host_target:?}, 'w').write('x')");
    let attempts = [
        ("usr", "open('/usr/lib/evil.py', 'w').write('x')"),
        (
            "usr_local",
            "open('/usr/local/lib/evil.py', 'w').write('x')",
        ),
        ("root", "open('/evil', 'w').write('x')"),
        ("parent", "open('../evil', 'w').write('x')"),
        ("dotdot", "open('/tmp/../../etc/evil', 'w').write('x')"),
        ("host_tmp", host_attempt.as_str()),
    ];
    let code = format!(
        "{}open('kept.txt', 'w').write('inside')\n",
        probes(&attempts)
    );
    let outcome = run_code(sandbox, &code).await;
    assert_all_blocked(
        &outcome,
        &["usr", "usr_local", "root", "parent", "dotdot", "host_tmp"],
    );
    assert_eq!(outcome.artifacts.len(), 1, "{:?}", outcome.artifacts);
    assert_eq!(outcome.artifacts[0].path, "kept.txt");
    assert_eq!(outcome.artifacts[0].bytes, b"inside");
    assert!(!host_dir.path().join("evil").exists());
    assert!(!std::path::Path::new("/evil").exists());
    outcome
}

/// A TCP and a UDP listener on the host's loopback that the code tries to reach.
pub struct Loopback {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Loopback {
    pub fn open() -> Self {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        tcp.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        udp.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
        Loopback { tcp, udp }
    }

    fn ports(&self) -> (u16, u16) {
        (
            self.tcp.local_addr().map(|a| a.port()).unwrap_or_default(),
            self.udp.local_addr().map(|a| a.port()).unwrap_or_default(),
        )
    }

    fn assert_untouched(&self) {
        assert!(
            self.tcp.accept().is_err(),
            "the code reached the TCP listener"
        );
        let mut buffer = [0u8; 8];
        assert!(
            self.udp.recv_from(&mut buffer).is_err(),
            "the code reached the UDP socket"
        );
    }
}

/// TCP, UDP, a DNS lookup and an HTTP request to the host's loopback listeners: TCP, DNS and
/// HTTP fail in the code, and neither listener hears anything (a UDP datagram can be "sent"
/// into an empty network namespace, so the caller judges `udp`).
pub async fn no_socket_reaches_a_loopback_listener(sandbox: &Sandbox) -> ExecutionOutcome {
    let loopback = Loopback::open();
    let (tcp_port, udp_port) = loopback.ports();
    let tcp_attempt = format!("socket.create_connection(('127.0.0.1', {tcp_port}), timeout=2)");
    let udp_attempt = format!(
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp_port}))"
    );
    let http_attempt = format!("urllib.request.urlopen('http://127.0.0.1:{tcp_port}/', timeout=2)");
    let attempts = [
        ("tcp", tcp_attempt.as_str()),
        ("udp", udp_attempt.as_str()),
        ("dns", "socket.getaddrinfo('localhost', 80)"),
        ("urllib", http_attempt.as_str()),
    ];
    let code = format!("import socket, urllib.request\n{}", probes(&attempts));
    let outcome = run_code(sandbox, &code).await;
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{}", outcome.stderr);
    for name in ["tcp", "dns", "urllib"] {
        assert!(
            outcome.stdout.contains(&format!("blocked {name} ")),
            "{name}: {}",
            outcome.stdout
        );
    }
    loopback.assert_untouched();
    outcome
}

/// A thousand forks, a thousand threads, a shell through subprocess and `os.system`: each must
/// fail in the code.
pub async fn process_and_thread_bombs_fail(sandbox: &Sandbox) -> ExecutionOutcome {
    let attempts = [
        ("fork", "[os.fork() for _ in range(1000)]"),
        (
            "threads",
            "[threading.Thread(target=time.sleep, args=(10,), daemon=True).start() for _ in range(1000)]",
        ),
        ("subprocess", "subprocess.run(['/bin/sh', '-c', 'echo hi'])"),
        ("system", "assert os.system('echo hi') == 0"),
    ];
    let code = format!(
        "import os, threading, time, subprocess\n{}os._exit(0)\n",
        probes(&attempts)
    );
    let limits = Limits {
        deadline: Duration::from_secs(20),
        ..Limits::default()
    };
    let outcome = run(sandbox, with_limits(&code, limits)).await;
    assert_all_blocked(&outcome, &["fork", "threads", "subprocess", "system"]);
    outcome
}

/// Half a gigabyte under a 256 MiB cap: an uncaught `MemoryError`, reported as the memory
/// limit.
pub async fn memory_past_the_cap_is_a_memory_error(sandbox: &Sandbox) {
    let limits = Limits {
        memory_bytes: 256 << 20,
        ..Limits::default()
    };
    let code = "print('start')\nb = bytearray(512 * 1024 * 1024)\nprint('ALLOCATED')";
    let outcome = run(sandbox, with_limits(code, limits)).await;
    assert_eq!(outcome.status, ExitStatus::Exited(1), "{}", outcome.stderr);
    assert_eq!(outcome.stdout, "start\n");
    assert!(outcome.stderr.contains("MemoryError"), "{}", outcome.stderr);
    assert_eq!(outcome.limit_hit, Some(LimitHit::Memory));
}

pub async fn an_infinite_loop_stops_at_the_deadline(sandbox: &Sandbox) {
    let limits = Limits {
        deadline: Duration::from_secs(2),
        ..Limits::default()
    };
    let outcome = run(
        sandbox,
        with_limits("print('start')\nwhile True:\n    pass", limits),
    )
    .await;
    assert_eq!(outcome.limit_hit, Some(LimitHit::Deadline));
    assert_eq!(
        outcome.status,
        ExitStatus::Stopped {
            reason: "the deadline of 2s passed".into()
        }
    );
    assert_eq!(outcome.stdout, "start\n");
    assert!(
        outcome.duration < Duration::from_secs(6),
        "{:?}",
        outcome.duration
    );
}

pub async fn a_cancelled_run_stops_promptly(sandbox: &Sandbox) {
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

/// Four gigabytes of output under a 64 KiB cap.
pub async fn printing_gigabytes_stops_at_the_output_cap(sandbox: &Sandbox) -> ExecutionOutcome {
    let limits = Limits {
        output_bytes: 64 << 10,
        deadline: Duration::from_secs(20),
        ..Limits::default()
    };
    let code = "line = 'x' * 1023\nfor _ in range(1024 * 1024 * 4):\n    print(line)";
    let outcome = run(sandbox, with_limits(code, limits)).await;
    assert_eq!(outcome.limit_hit, Some(LimitHit::Output));
    assert!(outcome.stdout.len() <= 64 << 10, "{}", outcome.stdout.len());
    assert_ne!(outcome.status, ExitStatus::Exited(0));
    assert!(
        outcome.duration < Duration::from_secs(15),
        "{:?}",
        outcome.duration
    );
    outcome
}

/// Links to `/etc/passwd`, to a host secret and up the tree: reading through them fails, and
/// the host never reads a link back as an artifact.
pub async fn symlinks_do_not_lead_out_of_the_scratch_folder(sandbox: &Sandbox) {
    let secrets = HostSecrets::write();
    let secret = secrets.in_tmp.display().to_string();
    let make_secret = format!("os.symlink({secret:?}, 'secret')");
    let secret_dir = secrets
        .in_tmp
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let list_up = format!("print(os.listdir('up' + {secret_dir:?}))");
    let attempts = [
        ("make_passwd_link", "os.symlink('/etc/passwd', 'passwd')"),
        ("read_passwd_link", "open('passwd').read()"),
        ("make_secret_link", make_secret.as_str()),
        ("read_secret_link", "open('secret').read()"),
        ("make_up_link", "os.symlink('../../../../..', 'up')"),
        ("list_up_link", list_up.as_str()),
    ];
    let code = format!("import os\n{}", probes(&attempts));
    let outcome = run_code(sandbox, &code).await;
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{}", outcome.stderr);
    for name in ["read_passwd_link", "read_secret_link", "list_up_link"] {
        assert!(
            outcome.stdout.contains(&format!("blocked {name} ")),
            "{name}: {}",
            outcome.stdout
        );
    }
    assert!(
        !outcome.stdout.contains("host-secret"),
        "{}",
        outcome.stdout
    );
    // A link the code made is never read by the host either.
    assert!(
        outcome
            .artifacts
            .iter()
            .all(|a| !a.bytes.starts_with(b"root:") && a.bytes != b"host-secret")
    );
}

/// Only the granted variable is seen; the fake key set in this process is not.
pub async fn only_allowed_environment_variables_are_seen(sandbox: &Sandbox) -> ExecutionOutcome {
    let code = format!(
        "import os\nprint(sorted(os.environ))\nprint(os.environ.get({FAKE_KEY_VAR:?}, 'absent'))\nprint(os.environ.get('GRANTED'))"
    );
    let outcome = run(
        sandbox,
        Execution {
            env: vec![("GRANTED".into(), "yes".into())],
            ..Execution::new(code)
        },
    )
    .await;
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{}", outcome.stderr);
    assert!(!outcome.stdout.contains(FAKE_KEY), "{}", outcome.stdout);
    assert!(
        outcome.stdout.ends_with("absent\nyes\n"),
        "{}",
        outcome.stdout
    );
    outcome
}

/// A module the interpreter lacks, named in `libraries_used`: the code does not run.
pub async fn a_missing_declared_module_is_refused_before_the_code_runs(sandbox: &Sandbox) {
    let declared = run(
        sandbox,
        Execution {
            modules: vec!["json".into(), "tensorflow_not_installed".into()],
            ..Execution::new("print('RAN')")
        },
    )
    .await;
    assert_eq!(declared.status, ExitStatus::Exited(1));
    assert_eq!(declared.stdout, "");
    assert!(
        declared
            .stderr
            .contains("not available in the sandbox: tensorflow_not_installed;"),
        "{}",
        declared.stderr
    );
}

/// Adds the shared cases to a suite, each run on a freshly loaded backend (`$sandbox()`).
macro_rules! shared_cases {
    ($suite:expr, $needs:expr, $sandbox:path, [$($case:ident),* $(,)?]) => {
        $suite $(.async_test_needing(stringify!($case), $needs, || async {
            let _ = common::$case(&$sandbox()).await;
        }))*
    };
}
