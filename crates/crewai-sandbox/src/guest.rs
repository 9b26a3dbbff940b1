//! The guest's side of one execution: its store state (WASI context, resource limiter, why it
//! was stopped) and the Python prelude that runs the model's code.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use wasmtime::{ResourceLimiter, UpdateDeadline};
use wasmtime_wasi::p1::WasiP1Ctx;

/// Where the guest finds the standard library zip (as `python315.zip`), its scratch folder and
/// its granted inputs.
pub(crate) const GUEST_LIB: &str = "/usr/local/lib";
pub(crate) const GUEST_SCRATCH: &str = "/scratch";
pub(crate) const GUEST_TMP: &str = "/tmp";
pub(crate) const GUEST_INPUTS: &str = "/inputs";
/// The name CPython 3.15 looks for its zipped standard library under.
pub(crate) const STDLIB_ZIP_NAME: &str = "python315.zip";
/// argv[0]: CPython derives its prefix (and so `/usr/local/lib/python315.zip`) from it.
pub(crate) const GUEST_ARGV0: &str = "/usr/local/bin/python.wasm";

/// Runs the model's code (`sys.argv[1]`) in the scratch folder as `__main__`, after checking
/// that the modules it says it needs (`sys.argv[2]`, comma-separated) are importable: a missing
/// one is a clear `ModuleNotFoundError`, not a silent pass.
pub(crate) const PRELUDE: &str = r#"import os, sys, importlib.util
os.chdir("/scratch")
_source, _needed = sys.argv[1], [n for n in sys.argv[2].split(",") if n]
del sys.argv[1:]
_missing = [n for n in _needed if importlib.util.find_spec(n.split(".")[0]) is None]
if _missing:
    raise ModuleNotFoundError("not available in the sandbox: " + ", ".join(_missing) + "; only the standard library and the bundled packages (numpy, pandas, scipy, scikit-learn, matplotlib, ...) can be imported, nothing can be installed")
del _missing, _needed
exec(compile(_source, "<code>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
"#;

/// The store's data for one execution.
pub(crate) struct GuestState {
    pub(crate) wasi: WasiP1Ctx,
    pub(crate) limiter: GuestLimiter,
    pub(crate) stop: StopReason,
}

/// Caps linear memory and remembers that the cap was reached.
pub(crate) struct GuestLimiter {
    pub(crate) memory_cap: usize,
    pub(crate) memory_denied: bool,
}

/// Tables only hold function references; this many is far past what CPython uses.
const TABLE_ELEMENTS_CAP: usize = 1 << 20;

impl ResourceLimiter for GuestLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_cap {
            self.memory_denied = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= TABLE_ELEMENTS_CAP)
    }
}

/// Why the epoch callback interrupted the guest, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum StopReason {
    #[default]
    Running,
    Deadline,
    Cancelled,
}

/// The epoch callback's decision at one tick: go on for one more tick, or stop and say why.
pub(crate) fn at_tick(
    state: &mut GuestState,
    deadline: Instant,
    cancelled: &Arc<AtomicBool>,
) -> UpdateDeadline {
    if cancelled.load(Ordering::Relaxed) {
        state.stop = StopReason::Cancelled;
        return UpdateDeadline::Interrupt;
    }
    if Instant::now() >= deadline {
        state.stop = StopReason::Deadline;
        return UpdateDeadline::Interrupt;
    }
    UpdateDeadline::Continue(1)
}
