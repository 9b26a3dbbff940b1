//! The host backends: the project's own Python (with its installed packages) run as a child
//! process, either confined by bubblewrap or, in unsafe mode, not at all.
//!
//! Under bubblewrap the process gets new user, mount, pid, network, IPC, UTS and cgroup
//! namespaces: no network but the namespace's own loopback, a read-only root and `/usr` (and the Python's
//! own prefix and `sys.path` folders, bound read-only where they are), no `/etc` but the loader
//! cache and the time zone, a private `/proc` and a minimal read-only `/dev`, the execution's scratch
//! folder as the only writable bind and working directory (`/scratch`), its own `/tmp`, the
//! granted inputs read-only under `/inputs`, no environment but the allow-list, no capabilities,
//! a new session (no terminal to inject into), no further user namespaces, and the seccomp
//! filters of [`crate::seccomp`]. Both modes set rlimits in the child before it runs
//! (`RLIMIT_AS`, `RLIMIT_CPU`, `RLIMIT_FSIZE`, `RLIMIT_CORE`), kill the process group at the
//! wall-clock deadline, on cancellation or when an output reaches its cap, and reap the child
//! on every path (a dropped run kills it too).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use crate::error::SandboxError;
use crate::execution::{Execution, Limits};
use crate::outcome::{self, ExecutionOutcome, ExitStatus, Stop};
use crate::prelude;
use crate::scratch::Workspace;

/// How long the readers of stdout and stderr may go on after the process group is gone: a
/// process that left the group (unsafe mode) can hold the pipes open, and is not waited for.
const READER_GRACE: Duration = Duration::from_secs(1);

/// How long asking the Python for its folders may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Printed by the project's Python, outside any sandbox: its executable and the folders it
/// reads its standard library and packages from, which the sandbox binds read-only.
const LAYOUT_PROBE: &str = "import json, sys; print(json.dumps([sys.executable, sys.prefix, \
     sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix] + sys.path))";

/// Top-level folders bound read-only (or recreated as the same symlink) when they exist; on a
/// merged-/usr system they are symlinks into `/usr`.
const SYSTEM_DIRS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// The only files of `/etc` the code sees: the dynamic loader's cache and the time zone.
const ETC_FILES: &[&str] = &["/etc/ld.so.cache", "/etc/localtime"];

/// What a code that imports a module the project's Python lacks is told.
const MISSING_MODULE_HINT: &str = "only the modules installed in the project's Python can be \
     imported, nothing can be installed";

/// The project's Python, run confined by bubblewrap or (unsafe mode) directly. Cheap to clone.
#[derive(Debug, Clone)]
pub struct HostSandbox {
    inner: Arc<HostInner>,
}

#[derive(Debug)]
struct HostInner {
    python: PathBuf,
    confinement: Confinement,
}

#[derive(Debug)]
enum Confinement {
    Bubblewrap {
        bwrap: PathBuf,
        /// The Python's own folders outside `/usr`, bound read-only at the same paths.
        python_dirs: Vec<PathBuf>,
        /// The two seccomp programs (see [`crate::seccomp::programs`]).
        seccomp: [Vec<u8>; 2],
    },
    Unconfined,
}

impl HostSandbox {
    /// The bubblewrap backend for `python` (blocking): refused, with the reason, where `bwrap`
    /// is missing, the kernel refuses a user namespace, or the platform has no seccomp filter.
    pub fn bubblewrap(python: &Path) -> Result<Self, SandboxError> {
        Self::bubblewrap_searching(python, std::env::var_os("PATH"))
    }

    /// [`HostSandbox::bubblewrap`] with `bwrap` looked up in the folders of `search_path` (a
    /// `PATH` value).
    fn bubblewrap_searching(
        python: &Path,
        search_path: Option<OsString>,
    ) -> Result<Self, SandboxError> {
        if !cfg!(target_os = "linux") {
            return Err(SandboxError::UnsupportedPlatform(
                std::env::consts::OS.to_string(),
            ));
        }
        let seccomp = seccomp_programs()?;
        let bwrap = on_path("bwrap", search_path).ok_or(SandboxError::BubblewrapMissing)?;
        check_user_namespaces(&bwrap)?;
        let (executable, python_dirs) = python_layout(python)?;
        Ok(HostSandbox {
            inner: Arc::new(HostInner {
                python: executable,
                confinement: Confinement::Bubblewrap {
                    bwrap,
                    python_dirs,
                    seccomp,
                },
            }),
        })
    }

    /// Unsafe mode: `python` runs the code directly, with the same access as the crewai process
    /// itself (files, network, processes); only the deadline, the output caps, the rlimits and
    /// the environment allow-list still apply.
    pub fn unconfined(python: &Path) -> Self {
        HostSandbox {
            inner: Arc::new(HostInner {
                python: python.to_path_buf(),
                confinement: Confinement::Unconfined,
            }),
        }
    }

    /// False in unsafe mode.
    pub fn is_confined(&self) -> bool {
        matches!(self.inner.confinement, Confinement::Bubblewrap { .. })
    }

    /// The Python that runs the code (inside the sandbox, under bubblewrap).
    pub fn python(&self) -> &Path {
        &self.inner.python
    }

    /// Runs `execution`; the deadline, a cancellation or a full output kills the process group.
    pub async fn run(
        &self,
        execution: Execution,
        cancellation: &CancellationToken,
    ) -> Result<ExecutionOutcome, SandboxError> {
        let started = Instant::now();
        let inputs = execution.inputs.clone();
        let workspace = tokio::task::spawn_blocking(move || Workspace::create(&inputs))
            .await
            .map_err(|_| SandboxError::ThreadLost)??;
        let limits = execution.limits;
        let (mut command, program) = self.command(&execution, &workspace)?;
        let seccomp_files = match &self.inner.confinement {
            Confinement::Bubblewrap { seccomp, .. } => Some(write_seccomp(seccomp, &workspace)?),
            Confinement::Unconfined => None,
        };
        let seccomp_fds = seccomp_files.as_ref().map(|[a, b]| {
            use std::os::fd::AsRawFd as _;
            [a.as_raw_fd(), b.as_raw_fd()]
        });
        let rlimits = Rlimits::for_limits(&limits);
        // SAFETY: the closure runs in the forked child before exec and only makes
        // async-signal-safe calls (setrlimit, fcntl, dup2, close) on values copied into it.
        unsafe {
            command.pre_exec(move || {
                rlimits.apply()?;
                if let Some(fds) = seccomp_fds {
                    place_fds(fds)?;
                }
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(|source| SandboxError::Spawn {
            program: program.clone(),
            source,
        })?;
        drop(seccomp_files);
        let mut group = GroupGuard(child.id().and_then(|id| libc::pid_t::try_from(id).ok()));
        let full = CancellationToken::new();
        let stdout = Captured::start(child.stdout.take(), limits.output_bytes, &full);
        let stderr = Captured::start(child.stderr.take(), limits.output_bytes, &full);
        let deadline = tokio::time::Instant::from_std(started + limits.deadline);
        let stop = tokio::select! {
            status = child.wait() => Err(status),
            () = full.cancelled() => Ok(Stop::OutputCap(limits.output_bytes)),
            () = tokio::time::sleep_until(deadline) => Ok(Stop::Deadline(limits.deadline)),
            () = cancellation.cancelled() => Ok(Stop::Cancelled),
        };
        let stopped = stop.as_ref().ok().copied();
        // Whatever ended the run, nothing the code started outlives it.
        group.kill();
        let status = match stop {
            Err(waited) => {
                let waited = waited.map_err(|source| SandboxError::Spawn {
                    program: program.clone(),
                    source,
                })?;
                exit_status(waited)
            }
            Ok(stop) => {
                // SIGKILL and reap.
                let _ = child.kill().await;
                stop.status()
            }
        };
        let (stdout, stdout_full) = stdout.finish().await;
        let (stderr, stderr_full) = stderr.finish().await;
        let stderr = String::from_utf8_lossy(&stderr).into_owned();
        let memory = status == ExitStatus::Exited(1) && ended_in_memory_error(&stderr);
        let limit_hit = outcome::limit_hit(
            matches!(stopped, Some(Stop::Deadline(_))),
            stdout_full || stderr_full,
            memory,
        );
        let budget = limits.artifact_bytes;
        let (artifacts, skipped_artifacts) =
            tokio::task::spawn_blocking(move || workspace.artifacts(budget))
                .await
                .map_err(|_| SandboxError::ThreadLost)??;
        Ok(ExecutionOutcome {
            status,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr,
            limit_hit,
            artifacts,
            skipped_artifacts,
            duration: started.elapsed(),
        })
    }

    /// The command line of one execution, and the program it starts.
    fn command(
        &self,
        execution: &Execution,
        workspace: &Workspace,
    ) -> Result<(Command, PathBuf), SandboxError> {
        let modules = execution.modules.join(",");
        let python = &self.inner.python;
        let (program, mut command) = match &self.inner.confinement {
            Confinement::Bubblewrap {
                bwrap, python_dirs, ..
            } => {
                let mut command = Command::new(bwrap);
                command.args(bwrap_args(workspace, python_dirs, &execution.env));
                command.arg("--").arg(python).args(["-I", "-u"]);
                command.args(prelude::prelude_args(
                    prelude::SANDBOX_SCRATCH,
                    &execution.code,
                    &modules,
                    MISSING_MODULE_HINT,
                ));
                // bwrap's own environment is emptied too: `--clearenv` governs the child only.
                command.env_clear();
                (bwrap.clone(), command)
            }
            Confinement::Unconfined => {
                let scratch = workspace.scratch();
                let tmp = workspace.tmp();
                let (scratch_text, tmp_text) = (path_text(&scratch)?, path_text(&tmp)?);
                let mut command = Command::new(python);
                command.args(["-I", "-u"]).args(prelude::prelude_args(
                    &scratch_text,
                    &execution.code,
                    &modules,
                    MISSING_MODULE_HINT,
                ));
                command.env_clear().current_dir(&scratch);
                if let Some(path) = std::env::var_os("PATH") {
                    command.env("PATH", path);
                }
                command.envs(prelude::base_env(&scratch_text, &tmp_text));
                command.envs(execution.env.iter().map(|(k, v)| (k, v)));
                (python.clone(), command)
            }
        };
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        Ok((command, program))
    }
}

/// bubblewrap's arguments before the program: the namespaces, the binds, the environment and
/// the seccomp filters (read from fds 3 and 4).
fn bwrap_args(
    workspace: &Workspace,
    python_dirs: &[PathBuf],
    env: &[(String, String)],
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |items: &[&std::ffi::OsStr]| args.extend(items.iter().map(|s| s.to_os_string()));
    push(&[
        "--unshare-all".as_ref(),
        // `--unshare-all` only tries for a user namespace; without one root stays root.
        "--unshare-user".as_ref(),
        "--disable-userns".as_ref(),
        "--die-with-parent".as_ref(),
        "--new-session".as_ref(),
        "--cap-drop".as_ref(),
        "ALL".as_ref(),
        "--ro-bind".as_ref(),
        "/usr".as_ref(),
        "/usr".as_ref(),
    ]);
    for dir in SYSTEM_DIRS {
        let path = Path::new(dir);
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    push(&["--symlink".as_ref(), target.as_os_str(), path.as_os_str()]);
                }
            }
            Ok(meta) if meta.is_dir() => {
                push(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
            }
            _ => {}
        }
    }
    for file in ETC_FILES {
        push(&["--ro-bind-try".as_ref(), file.as_ref(), file.as_ref()]);
    }
    push(&[
        "--proc".as_ref(),
        "/proc".as_ref(),
        "--dev".as_ref(),
        "/dev".as_ref(),
    ]);
    for dir in python_dirs {
        push(&["--ro-bind".as_ref(), dir.as_os_str(), dir.as_os_str()]);
    }
    let (scratch, tmp, inputs) = (workspace.scratch(), workspace.tmp(), workspace.inputs());
    push(&[
        "--bind".as_ref(),
        scratch.as_os_str(),
        prelude::SANDBOX_SCRATCH.as_ref(),
        "--bind".as_ref(),
        tmp.as_os_str(),
        prelude::SANDBOX_TMP.as_ref(),
        "--ro-bind".as_ref(),
        inputs.as_os_str(),
        prelude::SANDBOX_INPUTS.as_ref(),
        // The root and /dev are bwrap's own tmpfs: read-only once the binds are in place, so
        // that nothing can be written (or fill memory) but the scratch folder and /tmp.
        "--remount-ro".as_ref(),
        "/dev".as_ref(),
        "--remount-ro".as_ref(),
        "/".as_ref(),
        "--chdir".as_ref(),
        prelude::SANDBOX_SCRATCH.as_ref(),
        "--clearenv".as_ref(),
        "--setenv".as_ref(),
        "PATH".as_ref(),
        "/usr/local/bin:/usr/bin:/bin".as_ref(),
    ]);
    let base = prelude::base_env(prelude::SANDBOX_SCRATCH, prelude::SANDBOX_TMP);
    let base = base.iter().map(|(k, v)| (*k, v.as_str()));
    for (name, value) in base.chain(env.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
        push(&["--setenv".as_ref(), name.as_ref(), value.as_ref()]);
    }
    push(&[
        "--add-seccomp-fd".as_ref(),
        "3".as_ref(),
        "--add-seccomp-fd".as_ref(),
        "4".as_ref(),
    ]);
    args
}

#[cfg(target_os = "linux")]
fn seccomp_programs() -> Result<[Vec<u8>; 2], SandboxError> {
    crate::seccomp::programs()
}

#[cfg(not(target_os = "linux"))]
fn seccomp_programs() -> Result<[Vec<u8>; 2], SandboxError> {
    Err(SandboxError::UnsupportedPlatform(
        std::env::consts::OS.to_string(),
    ))
}

/// The seccomp programs as files in the runner's private folder, open for the child to read.
fn write_seccomp(
    programs: &[Vec<u8>; 2],
    workspace: &Workspace,
) -> Result<[std::fs::File; 2], SandboxError> {
    let open = |index: usize| {
        let path = workspace.private().join(format!("seccomp-{index}.bpf"));
        std::fs::write(&path, &programs[index]).map_err(SandboxError::io("write", &path))?;
        std::fs::File::open(&path).map_err(SandboxError::io("read", &path))
    };
    Ok([open(0)?, open(1)?])
}

/// In the child: the two seccomp files become fds 3 and 4 (bwrap's `--add-seccomp-fd`). They
/// are first moved above 10 (close-on-exec) so that neither can be overwritten by the other.
fn place_fds(fds: [libc::c_int; 2]) -> std::io::Result<()> {
    let mut high = [0; 2];
    for (slot, fd) in high.iter_mut().zip(fds) {
        // SAFETY: plain fd syscalls on fds this process owns.
        *slot = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
        if *slot < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    for (fd, target) in high.into_iter().zip([3, 4]) {
        // SAFETY: as above; dup2 leaves the target without close-on-exec.
        if unsafe { libc::dup2(fd, target) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The rlimits of one execution, applied in the child before it runs bwrap or Python (and so
/// inherited by everything the code starts).
#[derive(Debug, Clone, Copy)]
struct Rlimits {
    address_space: u64,
    cpu_seconds: u64,
    file_bytes: u64,
}

impl Rlimits {
    fn for_limits(limits: &Limits) -> Self {
        // A backstop behind the wall-clock kill: CPU time can outrun wall time by the number
        // of cores, so this is never reached first.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        Rlimits {
            address_space: limits.memory_bytes as u64,
            cpu_seconds: limits
                .deadline
                .as_secs()
                .saturating_add(1)
                .saturating_mul(cores),
            file_bytes: limits.artifact_bytes,
        }
    }

    fn apply(self) -> std::io::Result<()> {
        let set = |resource, soft: u64, hard: u64| {
            let limit = libc::rlimit {
                rlim_cur: soft as libc::rlim_t,
                rlim_max: hard as libc::rlim_t,
            };
            // SAFETY: setrlimit reads the struct passed by reference and nothing else.
            if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        };
        set(libc::RLIMIT_AS, self.address_space, self.address_space)?;
        set(libc::RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + 1)?;
        set(libc::RLIMIT_FSIZE, self.file_bytes, self.file_bytes)?;
        set(libc::RLIMIT_CORE, 0, 0)
    }
}

/// Kills the process group once: when asked, or on drop (a dropped run).
struct GroupGuard(Option<libc::pid_t>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: killpg takes plain integers; the group is the child's own (it was started
            // as its leader) and Linux does not reuse a pid while its group exists.
            let _ = unsafe { libc::killpg(pgid, libc::SIGKILL) };
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One output stream read into memory up to its cap; reaching the cap cancels `full`.
struct Captured {
    bytes: Arc<Mutex<Vec<u8>>>,
    reached_cap: Arc<std::sync::atomic::AtomicBool>,
    reader: Option<tokio::task::JoinHandle<()>>,
}

impl Captured {
    fn start(
        pipe: Option<impl AsyncRead + Unpin + Send + 'static>,
        cap: usize,
        full: &CancellationToken,
    ) -> Self {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let reached_cap = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = pipe.map(|mut pipe| {
            let (bytes, reached_cap, full) = (bytes.clone(), reached_cap.clone(), full.clone());
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 16 << 10];
                while let Ok(read) = pipe.read(&mut buffer).await {
                    if read == 0 {
                        break;
                    }
                    let Ok(mut kept) = bytes.lock() else { break };
                    let room = cap.saturating_sub(kept.len());
                    kept.extend_from_slice(&buffer[..read.min(room)]);
                    if kept.len() >= cap {
                        reached_cap.store(true, std::sync::atomic::Ordering::Relaxed);
                        full.cancel();
                        break;
                    }
                }
            })
        });
        Captured {
            bytes,
            reached_cap,
            reader,
        }
    }

    /// What was read, and whether it reached the cap, once the pipe closed (or the grace ran
    /// out).
    async fn finish(mut self) -> (Vec<u8>, bool) {
        if let Some(mut reader) = self.reader.take()
            && tokio::time::timeout(READER_GRACE, &mut reader)
                .await
                .is_err()
        {
            reader.abort();
        }
        let bytes = self
            .bytes
            .lock()
            .map(|mut kept| std::mem::take(&mut *kept))
            .unwrap_or_default();
        (
            bytes,
            self.reached_cap.load(std::sync::atomic::Ordering::Relaxed),
        )
    }
}

/// bubblewrap reports a child killed by signal `n` as exit status `128 + n`, like a shell;
/// the process itself (unsafe mode) is reported with its signal.
fn exit_status(status: std::process::ExitStatus) -> ExitStatus {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitStatus::Exited(code),
        (None, Some(signal)) => ExitStatus::Stopped {
            reason: format!("ended by signal {signal}"),
        },
        (None, None) => ExitStatus::Stopped {
            reason: "ended without an exit status".into(),
        },
    }
}

/// Whether the traceback that ended the code is a `MemoryError` (the address-space cap).
fn ended_in_memory_error(stderr: &str) -> bool {
    stderr
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .is_some_and(|line| line.starts_with("MemoryError"))
}

fn path_text(path: &Path) -> Result<String, SandboxError> {
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| SandboxError::Io {
            action: "use",
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"),
        })
}

fn on_path(program: &str, search_path: Option<OsString>) -> Option<PathBuf> {
    std::env::split_paths(&search_path?)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// The trial bubblewrap run: a user namespace over a read-only view of `/`, running `true`.
fn check_user_namespaces(bwrap: &Path) -> Result<(), SandboxError> {
    let output = std::process::Command::new(bwrap)
        .args([
            "--unshare-user",
            "--ro-bind",
            "/",
            "/",
            "--die-with-parent",
            "true",
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| SandboxError::Spawn {
            program: bwrap.to_path_buf(),
            source,
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(SandboxError::NoUserNamespaces {
        bwrap: bwrap.to_path_buf(),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
    })
}

/// The Python's real executable (a pyenv shim or a venv's symlink resolved by Python itself)
/// and its folders outside `/usr`, asked of it once, outside the sandbox, with a timeout.
fn python_layout(python: &Path) -> Result<(PathBuf, Vec<PathBuf>), SandboxError> {
    let problem = |problem: String| SandboxError::Python {
        python: python.to_path_buf(),
        problem,
    };
    let mut child = std::process::Command::new(python)
        .args(["-I", "-c", LAYOUT_PROBE])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| problem(format!("it does not start ({error})")))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > PROBE_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(problem(format!(
                    "it did not answer within {PROBE_TIMEOUT:?}"
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(error) => return Err(problem(format!("waiting for it failed ({error})"))),
        }
    };
    let mut stdout = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        use std::io::Read as _;
        let _ = pipe.read_to_string(&mut stdout);
    }
    if !status.success() {
        return Err(problem(format!(
            "asking it for sys.prefix failed ({status})"
        )));
    }
    let paths: Vec<String> = serde_json::from_str(stdout.trim())
        .map_err(|error| problem(format!("its answer is not a list of paths ({error})")))?;
    let Some((executable, folders)) = paths.split_first() else {
        return Err(problem("it named no executable".into()));
    };
    Ok((PathBuf::from(executable), bind_roots(folders)))
}

/// The folders to bind for the Python: existing absolute paths outside `/usr` (bound already),
/// never `/` itself, each only once and none inside another.
fn bind_roots(folders: &[String]) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = folders
        .iter()
        .map(PathBuf::from)
        .filter(|path| path.is_absolute() && path.exists())
        .filter(|path| path != Path::new("/") && !path.starts_with("/usr"))
        .collect();
    roots.sort();
    roots.dedup();
    let mut kept: Vec<PathBuf> = Vec::new();
    for root in roots {
        if !kept.iter().any(|outer| root.starts_with(outer)) {
            kept.push(root);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_roots_keep_outermost_folders_outside_usr() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        let site = venv.join("lib").join("site-packages");
        std::fs::create_dir_all(&site).unwrap();
        let folders = [
            venv.display().to_string(),
            site.display().to_string(),
            "/usr/lib/python3".into(),
            "/".into(),
            "relative".into(),
            dir.path().join("missing").display().to_string(),
        ];
        assert_eq!(bind_roots(&folders), vec![venv]);
    }

    #[test]
    fn without_bwrap_on_the_path_the_backend_refuses_with_how_to_install_it() {
        let empty = tempfile::tempdir().unwrap();
        for search_path in [None, Some(empty.path().as_os_str().to_owned())] {
            let error = HostSandbox::bubblewrap_searching(Path::new("python3"), search_path)
                .err()
                .map(|error| error.to_string())
                .unwrap_or_default();
            assert!(
                error.contains("needs `bwrap` on PATH")
                    && error.contains("apt-get install bubblewrap"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_memory_error_is_recognised_by_the_last_traceback_line() {
        assert!(ended_in_memory_error(
            "Traceback (most recent call last):\n  File \"<code>\", line 1\nMemoryError\n\n"
        ));
        assert!(!ended_in_memory_error("MemoryError\nValueError: no\n"));
    }
}
