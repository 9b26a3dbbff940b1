//! The WASI guest's side of one execution: its store state (WASI context, resource limiter, why
//! it was stopped) and where it finds the standard library.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use wasmtime::{ResourceLimiter, UpdateDeadline};
use wasmtime_wasi::p1::WasiP1Ctx;

/// Where the guest finds the standard library zip (as `python315.zip`).
pub(crate) const GUEST_LIB: &str = "/usr/local/lib";
/// The name CPython 3.15 looks for its zipped standard library under.
pub(crate) const STDLIB_ZIP_NAME: &str = "python315.zip";
/// argv[0]: CPython derives its prefix (and so `/usr/local/lib/python315.zip`) from it.
pub(crate) const GUEST_ARGV0: &str = "/usr/local/bin/python.wasm";

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
