//! The WASI backend: one wasmtime engine and compiled interpreter, a fresh store per execution.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wasmtime::{Config, Engine, Linker, Module, Store};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use crate::error::SandboxError;
use crate::execution::Execution;
use crate::guest::{self, GuestLimiter, GuestState, StopReason};
use crate::mpl_data;
use crate::outcome::{self, ExecutionOutcome, ExitStatus, Stop};
use crate::prelude;
use crate::scratch::Workspace;

/// The wasmtime release compiled modules are made by; part of the cache key (the workspace pins
/// it exactly).
const WASMTIME_VERSION: &str = "48.0.8";

/// What a code that imports a module the interpreter does not bundle is told.
const MISSING_MODULE_HINT: &str = "only the standard library and the bundled packages (numpy, \
     pandas, scipy, scikit-learn, matplotlib, ...) can be imported, nothing can be installed";

/// How often the engine's epoch advances: the granularity of deadlines and cancellation.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// CPython's deepest recursion needs more than wasmtime's default 512 KiB of wasm stack.
const MAX_WASM_STACK: usize = 8 << 20;

/// The native stack of the thread an execution runs on: wasm frames and the runtime's own
/// frames live on it.
const EXECUTION_THREAD_STACK: usize = 64 << 20;

/// The interpreter's two files, as `crewai models pull python-wasm` leaves them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterpreterFiles {
    pub wasm: PathBuf,
    pub stdlib_zip: PathBuf,
    /// The sha256 `python.wasm` was checked against when it was pulled: the compiled module's
    /// cache key (hashing 99 MB on every start would cost more than the execution).
    pub wasm_sha256: String,
}

impl InterpreterFiles {
    /// `python.wasm` and `python-stdlib.zip` in `dir`.
    pub fn in_dir(dir: &Path, wasm_sha256: impl Into<String>) -> Self {
        InterpreterFiles {
            wasm: dir.join("python.wasm"),
            stdlib_zip: dir.join("python-stdlib.zip"),
            wasm_sha256: wasm_sha256.into(),
        }
    }
}

/// The engine and the compiled interpreter; cheap to clone, shared by every execution.
#[derive(Clone)]
pub struct WasiSandbox {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    module: Module,
    linker: Linker<GuestState>,
    /// A folder holding only the standard library zip as `python315.zip`.
    lib_dir: PathBuf,
    /// matplotlib's unpacked data folder, when the interpreter has matplotlib.
    mpl_data: Option<PathBuf>,
    // Held for its Drop: it stops the epoch thread when the last clone goes.
    _ticker: Ticker,
}

impl std::fmt::Debug for WasiSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasiSandbox")
            .field("lib_dir", &self.inner.lib_dir)
            .finish_non_exhaustive()
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    fn start(engine: &Engine) -> Result<Self, SandboxError> {
        let stop = Arc::new(AtomicBool::new(false));
        let engine = engine.clone();
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("crewai-sandbox-epoch".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .map_err(SandboxError::io(
                "start the epoch thread for",
                Path::new("wasmtime"),
            ))?;
        Ok(Ticker {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl WasiSandbox {
    /// Loads the interpreter (blocking): from the compiled module cached in `cache_dir`, or by
    /// compiling `files.wasm` once (about a minute) and caching the result there.
    pub fn load(files: &InterpreterFiles, cache_dir: &Path) -> Result<Self, SandboxError> {
        for path in [&files.wasm, &files.stdlib_zip] {
            if !path.is_file() {
                return Err(SandboxError::NotPulled { path: path.clone() });
            }
        }
        let mut config = Config::new();
        config
            .wasm_exceptions(true)
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK)
            // wasmtime-wasi enables wasmtime's async support, whose fibre stacks must hold the
            // wasm stack even though executions here are synchronous.
            .async_stack_size(2 * MAX_WASM_STACK);
        let engine = Engine::new(&config).map_err(SandboxError::runtime("create the engine"))?;
        std::fs::create_dir_all(cache_dir).map_err(SandboxError::io("create", cache_dir))?;
        let module = load_module(&engine, files, cache_dir)?;
        let lib_dir = stdlib_dir(files, cache_dir)?;
        let mpl_data = mpl_data::unpacked(&files.stdlib_zip, cache_dir)?;
        let mut linker: Linker<GuestState> = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |state: &mut GuestState| {
            &mut state.wasi
        })
        .map_err(SandboxError::runtime("link WASI"))?;
        // The interpreter's door to host tools; no tool is offered, so every call is refused.
        linker
            .func_wrap("host", "call", |_: i32, _: i32, _: i32, _: i32| -> i32 {
                -1
            })
            .map_err(SandboxError::runtime("link the host door"))?;
        let ticker = Ticker::start(&engine)?;
        Ok(WasiSandbox {
            inner: Arc::new(Inner {
                engine,
                module,
                linker,
                lib_dir,
                mpl_data,
                _ticker: ticker,
            }),
        })
    }

    /// Runs `execution` on its own thread; cancelling `cancellation` stops the guest at its
    /// next epoch tick.
    pub async fn run(
        &self,
        execution: Execution,
        cancellation: &CancellationToken,
    ) -> Result<ExecutionOutcome, SandboxError> {
        let cancelled = Arc::new(AtomicBool::new(false));
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let sandbox = self.clone();
        let flag = cancelled.clone();
        std::thread::Builder::new()
            .name("crewai-sandbox-run".into())
            .stack_size(EXECUTION_THREAD_STACK)
            .spawn(move || {
                let _ = sender.send(sandbox.run_blocking(&execution, &flag));
            })
            .map_err(SandboxError::io(
                "start the execution thread for",
                Path::new("wasmtime"),
            ))?;
        // The guest stops within a tick of the flag; the result is still awaited so that the
        // scratch folder is gone when this returns.
        let mut receiver = receiver;
        tokio::select! {
            result = &mut receiver => return result.map_err(|_| SandboxError::ThreadLost)?,
            () = cancellation.cancelled() => cancelled.store(true, Ordering::Relaxed),
        }
        receiver.await.map_err(|_| SandboxError::ThreadLost)?
    }

    /// Runs `execution` on the calling thread, which needs a large stack
    /// ([`WasiSandbox::run`] makes one).
    fn run_blocking(
        &self,
        execution: &Execution,
        cancelled: &Arc<AtomicBool>,
    ) -> Result<ExecutionOutcome, SandboxError> {
        let started = Instant::now();
        let workspace = Workspace::create(&execution.inputs)?;
        let (scratch_dir, tmp_dir, inputs_dir) =
            (workspace.scratch(), workspace.tmp(), workspace.inputs());

        let limits = execution.limits;
        let stdout = MemoryOutputPipe::new(limits.output_bytes);
        let stderr = MemoryOutputPipe::new(limits.output_bytes);
        let modules = execution.modules.join(",");
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .args(&[guest::GUEST_ARGV0, "-u"])
            .args(&prelude::prelude_args(
                prelude::SANDBOX_SCRATCH,
                &execution.code,
                &modules,
                MISSING_MODULE_HINT,
            ))
            .env("PYTHONTZPATH", "")
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        let base = prelude::base_env(prelude::SANDBOX_SCRATCH, prelude::SANDBOX_TMP);
        for (name, value) in &base {
            wasi.env(name, value);
        }
        for (name, value) in &execution.env {
            wasi.env(name, value);
        }
        if self.inner.mpl_data.is_some() {
            wasi.env(mpl_data::MPL_FILE_VAR, mpl_data::GUEST_MPL_FILE);
        }
        let mpl_data = self
            .inner
            .mpl_data
            .as_ref()
            .map(|data| (data, mpl_data::GUEST_MPL_DATA, FsPerms::ReadOnly));
        let preopens = [
            (&self.inner.lib_dir, guest::GUEST_LIB, FsPerms::ReadOnly),
            (&scratch_dir, prelude::SANDBOX_SCRATCH, FsPerms::ReadWrite),
            (&tmp_dir, prelude::SANDBOX_TMP, FsPerms::ReadWrite),
            (&inputs_dir, prelude::SANDBOX_INPUTS, FsPerms::ReadOnly),
        ];
        for (host, guest_path, perms) in preopens.into_iter().chain(mpl_data) {
            wasi.preopened_dir(host, guest_path, perms)
                .map_err(SandboxError::runtime("open a folder for the guest"))?;
        }
        let state = GuestState {
            wasi: wasi.build_p1(),
            limiter: GuestLimiter {
                memory_cap: limits.memory_bytes,
                memory_denied: false,
            },
            stop: StopReason::Running,
        };
        let mut store = Store::new(&self.inner.engine, state);
        store.limiter(|state| &mut state.limiter);
        let deadline = started + limits.deadline;
        let flag = cancelled.clone();
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut context| {
            Ok(guest::at_tick(context.data_mut(), deadline, &flag))
        });

        let instance = self
            .inner
            .linker
            .instantiate(&mut store, &self.inner.module)
            .map_err(SandboxError::runtime("instantiate the interpreter"))?;
        let initialize = instance
            .get_typed_func::<(), ()>(&mut store, "_initialize")
            .map_err(SandboxError::runtime("find the interpreter's _initialize"))?;
        let run = instance
            .get_typed_func::<(), i32>(&mut store, "run")
            .map_err(SandboxError::runtime("find the interpreter's run"))?;
        let result = initialize
            .call(&mut store, ())
            .and_then(|()| run.call(&mut store, ()));
        let stop = store.data().stop;
        let status = match result {
            Ok(code) => ExitStatus::Exited(code),
            Err(error) => match error.downcast_ref::<I32Exit>() {
                Some(exit) => ExitStatus::Exited(exit.0),
                None => match stop {
                    StopReason::Deadline => Stop::Deadline(limits.deadline).status(),
                    StopReason::Cancelled => Stop::Cancelled.status(),
                    StopReason::Running => ExitStatus::Stopped {
                        reason: format!("the interpreter trapped: {error:#}"),
                    },
                },
            },
        };
        let memory_denied = store.data().limiter.memory_denied;
        drop(store);

        let (stdout, stderr) = (stdout.contents(), stderr.contents());
        let limit_hit = outcome::limit_hit(
            stop == StopReason::Deadline,
            stdout.len() >= limits.output_bytes || stderr.len() >= limits.output_bytes,
            memory_denied,
        );
        let (artifacts, skipped_artifacts) = workspace.artifacts(limits.artifact_bytes)?;
        Ok(ExecutionOutcome {
            status,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            limit_hit,
            artifacts,
            skipped_artifacts,
            duration: started.elapsed(),
        })
    }
}

/// The compiled interpreter: deserialised from the cache, else compiled and cached. One process
/// compiles at a time (a lock file); the others then load its result.
fn load_module(
    engine: &Engine,
    files: &InterpreterFiles,
    cache_dir: &Path,
) -> Result<Module, SandboxError> {
    let hash: String = files.wasm_sha256.chars().take(16).collect();
    let cached = cache_dir.join(format!("python-{hash}-wasmtime-{WASMTIME_VERSION}.cwasm"));
    if let Some(module) = deserialize(engine, &cached) {
        return Ok(module);
    }
    let lock_path = cache_dir.join(".compile.lock");
    let lock = std::fs::File::create(&lock_path).map_err(SandboxError::io("create", &lock_path))?;
    lock.lock().map_err(SandboxError::io("lock", &lock_path))?;
    if let Some(module) = deserialize(engine, &cached) {
        return Ok(module);
    }
    let module = Module::from_file(engine, &files.wasm)
        .map_err(SandboxError::runtime("compile the interpreter"))?;
    let bytes = module
        .serialize()
        .map_err(SandboxError::runtime("serialise the compiled interpreter"))?;
    let partial = cached.with_extension(format!("cwasm.{}", std::process::id()));
    std::fs::write(&partial, bytes).map_err(SandboxError::io("write", &partial))?;
    std::fs::rename(&partial, &cached).map_err(SandboxError::io("write", &cached))?;
    Ok(module)
}

/// A cached compiled module, if there is a usable one.
fn deserialize(engine: &Engine, path: &Path) -> Option<Module> {
    if !path.is_file() {
        return None;
    }
    // SAFETY: wasmtime runs a deserialised module's machine code as it is. The file is one this
    // crate wrote (atomically, by rename) into the user's own cache folder from a checked
    // interpreter; wasmtime itself refuses files of another version or engine configuration,
    // and such a refusal falls back to compiling.
    unsafe { Module::deserialize_file(engine, path) }.ok()
}

/// A folder holding only the standard library zip under the name CPython looks for. A hard
/// link (a symlink would be refused by the guest's capability checks), else a copy.
fn stdlib_dir(files: &InterpreterFiles, cache_dir: &Path) -> Result<PathBuf, SandboxError> {
    let dir = cache_dir.join("lib");
    std::fs::create_dir_all(&dir).map_err(SandboxError::io("create", &dir))?;
    let zip = dir.join(guest::STDLIB_ZIP_NAME);
    let size = |path: &Path| std::fs::metadata(path).map(|m| m.len()).ok();
    if size(&zip).is_some() && size(&zip) == size(&files.stdlib_zip) {
        return Ok(dir);
    }
    let _ = std::fs::remove_file(&zip);
    if std::fs::hard_link(&files.stdlib_zip, &zip).is_err() {
        std::fs::copy(&files.stdlib_zip, &zip)
            .map_err(SandboxError::io("copy", &files.stdlib_zip))?;
    }
    Ok(dir)
}
