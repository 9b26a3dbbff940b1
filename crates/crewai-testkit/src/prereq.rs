//! Tests that need something the repository does not hold: a downloaded model, the shared
//! conformance cases, `python3`, later an MCP server, Postgres, a sandbox artifact or a Python
//! package. Such a test must never pass because its prerequisite is missing.
//!
//! # The rule
//!
//! - **Locally** a test whose prerequisite is missing is *ignored*: the test runner lists it as
//!   ignored and reports it as skipped (`cargo nextest run` counts it under "skipped",
//!   `cargo test` prints `ignored`), never as passed. A whole-binary run also prints which
//!   prerequisite is missing and the command that provides it.
//! - **Under CI** (`CI` set to anything but empty, `0` or `false`; CI sets `CI=true`) or with
//!   `CREWAI_REQUIRE_ALL=1`, nothing is ignored: the test runs and fails with
//!   `missing prerequisite: NAME: WHAT IS WRONG; to provide it: COMMAND`.
//! - Running ignored tests on purpose (`cargo nextest run --run-ignored all`,
//!   `cargo test -- --include-ignored`) fails them the same way.
//!
//! # Why a harness of our own
//!
//! libtest's `#[ignore]` is fixed when the test is compiled, and a libtest test cannot mark
//! itself skipped while running: an early `return` reads as a pass. nextest has no run-time skip
//! either; it learns what is ignored from the binary's `--list --ignored` output. So a binary
//! that needs a prerequisite is built with `harness = false` and runs a [`Suite`] (on
//! [`libtest_mimic`]) that checks its prerequisites every time it starts — when nextest lists
//! it as much as when it runs a test — and marks the tests ignored only when a prerequisite is
//! missing and not [`required`].
//!
//! # Using it
//!
//! In the crate's `Cargo.toml`:
//!
//! ```toml
//! [[test]]
//! name = "model"
//! harness = false
//! ```
//!
//! and the test file registers every test in `main` (a `harness = false` binary compiles
//! `#[test]` and `#[tokio::test]` functions out silently, so each test is a plain `fn` or
//! `async fn` listed here; an unlisted one is caught by the dead-code warning):
//!
//! ```no_run
//! use crewai_testkit::prereq::{Prerequisite, Suite};
//!
//! fn model() -> Prerequisite {
//!     Prerequisite::file(
//!         "the embedded model SmolLM2-135M",
//!         "/path/to/SmolLM2-135M-Instruct.Q4_1.gguf",
//!         "run `cargo run -q -p crewai-cli -- models pull`",
//!     )
//! }
//!
//! fn parses_a_header() { assert_eq!(1 + 1, 2); }
//! async fn answers_a_question() { /* ... uses the model ... */ }
//!
//! fn main() -> std::process::ExitCode {
//!     let model = model();
//!     Suite::new()
//!         .test("parses_a_header", parses_a_header)
//!         .async_test_needing("answers_a_question", &[&model], answers_a_question)
//!         .run()
//! }
//! ```
//!
//! A test body fails by panicking, as under libtest. [`Suite::async_test`] runs the body on a
//! current-thread tokio runtime with every driver enabled (what `#[tokio::test]` gives);
//! [`block_on_multi_thread`] stands in for `#[tokio::test(flavor = "multi_thread")]`.
//!
//! # Adding a prerequisite
//!
//! Build a [`Prerequisite`] from a name (what is missing, in words), the command or step that
//! provides it, and a check: [`Prerequisite::file`], [`Prerequisite::dir`],
//! [`Prerequisite::program`] (a command that must run and exit 0: `python3 -c "import x"` for a
//! Python package, `pg_isready` for Postgres), or [`Prerequisite::new`] with any closure (an
//! environment variable, a port that answers). Keep checks quick: they run each time the binary
//! starts, once per process (the result is cached). Then pass it to the tests that need it.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, OnceLock};

use libtest_mimic::{Arguments, Conclusion, Failed, Trial};

/// Set to `1` to fail, not skip, tests whose prerequisites are missing (as `CI` does).
pub const REQUIRE_ALL_VAR: &str = "CREWAI_REQUIRE_ALL";

type Check = dyn Fn() -> Result<(), String> + Send + Sync;

/// Something a test needs from outside the repository, and the command that provides it.
#[derive(Clone)]
pub struct Prerequisite {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    provided_by: String,
    check: Box<Check>,
    /// The check runs once per process: every trial of a binary shares the answer.
    outcome: OnceLock<Result<(), String>>,
}

/// What a path prerequisite must be.
#[derive(Debug, Clone, Copy)]
enum PathKind {
    File,
    Dir,
}

impl fmt::Debug for Prerequisite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prerequisite")
            .field("name", &self.inner.name)
            .field("provided_by", &self.inner.provided_by)
            .finish_non_exhaustive()
    }
}

impl Prerequisite {
    /// A prerequisite checked by `check`, which says what is wrong when it is missing.
    pub fn new(
        name: impl Into<String>,
        provided_by: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        Prerequisite {
            inner: Arc::new(Inner {
                name: name.into(),
                provided_by: provided_by.into(),
                check: Box::new(check),
                outcome: OnceLock::new(),
            }),
        }
    }

    /// The embedded model's GGUF file (SmolLM2-135M) at `path`, which `crewai models pull`
    /// downloads. The tests that run the model pass
    /// `crewai_local::cache::SMOLLM2_135M.path_in(&crewai_local::models_dir())`, where the
    /// binary and the provider look for it.
    pub fn embedded_model(path: impl Into<PathBuf>) -> Self {
        Self::file(
            "the embedded model SmolLM2-135M",
            path,
            "run `cargo run -q -p crewai-cli -- models pull` (it downloads into CREWAI_MODELS_DIR, default ~/.cache/crewai/models)",
        )
    }

    /// A file that must exist.
    pub fn file(
        name: impl Into<String>,
        path: impl Into<PathBuf>,
        provided_by: impl Into<String>,
    ) -> Self {
        Self::path(name, path.into(), provided_by, PathKind::File)
    }

    /// A directory that must exist.
    pub fn dir(
        name: impl Into<String>,
        path: impl Into<PathBuf>,
        provided_by: impl Into<String>,
    ) -> Self {
        Self::path(name, path.into(), provided_by, PathKind::Dir)
    }

    /// A path that must be of `kind`.
    fn path(
        name: impl Into<String>,
        path: PathBuf,
        provided_by: impl Into<String>,
        kind: PathKind,
    ) -> Self {
        Self::new(name, provided_by, move || {
            let (present, missing) = match kind {
                PathKind::File => (path.is_file(), "is not there"),
                PathKind::Dir => (path.is_dir(), "is not a directory"),
            };
            if present {
                Ok(())
            } else {
                Err(format!("{} {missing}", path.display()))
            }
        })
    }

    /// A command that must start and exit with status 0 (its output is discarded).
    pub fn program(
        name: impl Into<String>,
        program: impl Into<String>,
        args: &[&str],
        provided_by: impl Into<String>,
    ) -> Self {
        let program = program.into();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        Self::new(name, provided_by, move || {
            let shown = std::iter::once(program.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            match Command::new(&program)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
            {
                Ok(status) if status.success() => Ok(()),
                Ok(status) => Err(format!("`{shown}` exited with {status}")),
                Err(e) => Err(format!("`{shown}` could not start: {e}")),
            }
        })
    }

    /// The program `bin` of the npm package `package` (`name@version`), installed by `.ci/run`
    /// into [`npm_dir`]; the path is [`npm_bin`]`(bin)`.
    pub fn npm_package(package: &str, bin: &str) -> Self {
        Self::file(
            format!("the npm package {package}"),
            npm_bin(bin),
            format!(
                "npm install --prefix \"{}\" {package} (.ci/run does)",
                npm_dir().display()
            ),
        )
    }

    /// What is needed, in words.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The command or step that provides it.
    pub fn provided_by(&self) -> &str {
        &self.inner.provided_by
    }

    /// Whether it is there (checked once per process).
    pub fn check(&self) -> Result<(), Missing> {
        self.inner
            .outcome
            .get_or_init(|| (self.inner.check)())
            .clone()
            .map_err(|detail| Missing {
                name: self.inner.name.clone(),
                detail,
                provided_by: self.inner.provided_by.clone(),
            })
    }
}

/// Where `.ci/run` installs the npm packages the tests use: `CREWAI_NPM_DIR`, else
/// `$HOME/.cache/crewai/npm`.
pub fn npm_dir() -> PathBuf {
    match std::env::var_os("CREWAI_NPM_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/crewai/npm")
        }
    }
}

/// The program `bin` an npm package installed in [`npm_dir`] provides.
pub fn npm_bin(bin: &str) -> PathBuf {
    npm_dir().join("node_modules/.bin").join(bin)
}

/// A prerequisite that is not there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The prerequisite's name.
    pub name: String,
    /// What the check found wrong.
    pub detail: String,
    /// The command or step that provides it.
    pub provided_by: String,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "missing prerequisite: {}: {}; to provide it: {}",
            self.name, self.detail, self.provided_by
        )
    }
}

impl std::error::Error for Missing {}

/// Whether missing prerequisites fail tests instead of skipping them: `CI` or
/// `CREWAI_REQUIRE_ALL` set to anything but empty, `0` or `false`.
pub fn required() -> bool {
    required_by(
        std::env::var("CI").ok().as_deref(),
        std::env::var(REQUIRE_ALL_VAR).ok().as_deref(),
    )
}

fn required_by(ci: Option<&str>, require_all: Option<&str>) -> bool {
    let on = |value: Option<&str>| {
        value
            .map(str::trim)
            .is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
    };
    on(ci) || on(require_all)
}

/// Runs `future` to completion on a current-thread tokio runtime with the IO and time drivers
/// (the runtime `#[tokio::test]` builds).
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("a tokio runtime for the test: {e}"))
        .block_on(future)
}

/// Runs `future` on a multi-thread tokio runtime with `worker_threads` workers (the runtime
/// `#[tokio::test(flavor = "multi_thread", worker_threads = N)]` builds).
pub fn block_on_multi_thread<F: Future>(worker_threads: usize, future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("a tokio runtime for the test: {e}"))
        .block_on(future)
}

/// The tests of one `harness = false` test binary.
pub struct Suite {
    trials: Vec<Trial>,
    required: bool,
    /// Each missing prerequisite with the tests it made ignored, for the note a whole-binary run
    /// prints.
    skipped: Vec<(Missing, Vec<String>)>,
}

impl Default for Suite {
    fn default() -> Self {
        Self::new()
    }
}

impl Suite {
    /// An empty suite; whether missing prerequisites fail is read from the environment
    /// ([`required`]).
    pub fn new() -> Self {
        Self::with_required(required())
    }

    fn with_required(required: bool) -> Self {
        Suite {
            trials: Vec::new(),
            required,
            skipped: Vec::new(),
        }
    }

    /// A test that needs nothing from outside; it fails by panicking.
    pub fn test(self, name: impl Into<String>, body: impl FnOnce() + Send + 'static) -> Self {
        self.test_needing(name, &[], body)
    }

    /// A test that needs every one of `needs`: ignored when one is missing (unless
    /// [`required`]), failing with the missing ones' commands when run without them.
    pub fn test_needing(
        mut self,
        name: impl Into<String>,
        needs: &[&Prerequisite],
        body: impl FnOnce() + Send + 'static,
    ) -> Self {
        let name = name.into();
        let missing: Vec<Missing> = needs.iter().filter_map(|p| p.check().err()).collect();
        let ignored = !missing.is_empty() && !self.required;
        if ignored {
            for gap in &missing {
                match self.skipped.iter_mut().find(|(known, _)| known == gap) {
                    Some((_, tests)) => tests.push(name.clone()),
                    None => self.skipped.push((gap.clone(), vec![name.clone()])),
                }
            }
        }
        let trial = Trial::test(name, move || {
            if !missing.is_empty() {
                let lines: Vec<String> = missing.iter().map(ToString::to_string).collect();
                return Err(Failed::from(lines.join("\n")));
            }
            body();
            Ok(())
        })
        .with_ignored_flag(ignored);
        self.trials.push(trial);
        self
    }

    /// An async test that needs nothing from outside, on a current-thread runtime.
    pub fn async_test<F, Fut>(self, name: impl Into<String>, body: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        self.test_needing(name, &[], move || block_on(body()))
    }

    /// An async test that needs every one of `needs` (see [`Suite::test_needing`]).
    pub fn async_test_needing<F, Fut>(
        self,
        name: impl Into<String>,
        needs: &[&Prerequisite],
        body: F,
    ) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        self.test_needing(name, needs, move || block_on(body()))
    }

    /// Parses the command line the way libtest does (nextest's `--list`, `--exact`, `--ignored`
    /// included) and runs or lists the tests.
    pub fn run(self) -> ExitCode {
        let args = Arguments::from_args();
        self.run_with(&args).exit_code()
    }

    fn run_with(self, args: &Arguments) -> Conclusion {
        // nextest lists with `--list` and runs one test per process with `--exact`: the note is
        // for a person running the whole binary (`cargo test`), where it says what to do.
        if !args.list && !args.exact {
            for (missing, tests) in &self.skipped {
                eprintln!(
                    "note: {} test(s) ignored ({missing}); set CI=true or {REQUIRE_ALL_VAR}=1 to fail them instead: {}",
                    tests.len(),
                    tests.join(", ")
                );
            }
        }
        libtest_mimic::run(args, self.trials)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn absent() -> Prerequisite {
        let path = std::env::temp_dir().join(format!(
            "crewai-prereq-absent-{}/model.gguf",
            std::process::id()
        ));
        Prerequisite::file("a model", path, "run `make model`")
    }

    fn present() -> Prerequisite {
        let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
        Prerequisite::file("this test binary", exe, "build it")
    }

    /// Runs the suite quietly (its report goes to a file) and returns (passed, failed, ignored).
    fn run(suite: Suite, extra: &[&str]) -> (u64, u64, u64) {
        let log = std::env::temp_dir().join(format!(
            "crewai-prereq-log-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let mut argv = vec!["harness", "--test-threads", "1", "--logfile"];
        let log_arg = log.to_string_lossy().into_owned();
        argv.push(&log_arg);
        argv.extend_from_slice(extra);
        let conclusion = suite.run_with(&Arguments::from_iter(argv));
        let _ = std::fs::remove_file(&log);
        (
            conclusion.num_passed,
            conclusion.num_failed,
            conclusion.num_ignored,
        )
    }

    #[test]
    fn ci_and_require_all_make_prerequisites_required() {
        assert!(required_by(Some("true"), None));
        assert!(required_by(Some("1"), None));
        assert!(required_by(None, Some("1")));
        assert!(required_by(Some("false"), Some("yes")));
        assert!(!required_by(None, None));
        assert!(!required_by(Some(""), Some("0")));
        assert!(!required_by(Some("FALSE"), None));
    }

    #[test]
    fn a_missing_file_names_itself_and_the_command() {
        let missing = absent().check().expect_err("the file is absent");
        let text = missing.to_string();
        assert!(
            text.starts_with("missing prerequisite: a model: ")
                && text.contains("crewai-prereq-absent-")
                && text.ends_with("; to provide it: run `make model`"),
            "{text}"
        );
        assert_eq!(present().check(), Ok(()));
    }

    #[test]
    fn a_program_that_cannot_start_or_fails_is_missing() {
        let gone = Prerequisite::program(
            "a tool",
            "crewai-no-such-program-anywhere",
            &["--version"],
            "install it",
        );
        let detail = gone.check().expect_err("no such program").detail;
        assert!(
            detail.contains("`crewai-no-such-program-anywhere --version` could not start"),
            "{detail}"
        );
        #[cfg(unix)]
        {
            let failing = Prerequisite::program("a shell", "sh", &["-c", "exit 3"], "fix it");
            let detail = failing.check().expect_err("exit 3").detail;
            assert!(detail.contains("`sh -c exit 3` exited with"), "{detail}");
            let fine = Prerequisite::program("a shell", "sh", &["-c", "exit 0"], "fix it");
            assert_eq!(fine.check(), Ok(()));
        }
    }

    #[test]
    fn the_check_runs_once_per_process() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let prerequisite = Prerequisite::new("counted", "nothing", move || {
            counted.fetch_add(1, Ordering::SeqCst);
            Err("never there".into())
        });
        let copy = prerequisite.clone();
        assert!(prerequisite.check().is_err() && copy.check().is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    fn suite(required: bool, body_runs: &Arc<AtomicUsize>) -> Suite {
        let (a, b) = (body_runs.clone(), body_runs.clone());
        let (absent, present) = (absent(), present());
        Suite::with_required(required)
            .test_needing("needs_the_absent", &[&present, &absent], move || {
                a.fetch_add(1, Ordering::SeqCst);
            })
            .test_needing("needs_the_present", &[&present], move || {
                b.fetch_add(1, Ordering::SeqCst);
            })
            .test("fails", || panic!("a plain failure"))
    }

    #[test]
    fn locally_a_missing_prerequisite_ignores_the_test_and_never_passes_it() {
        let body_runs = Arc::new(AtomicUsize::new(0));
        let built = suite(false, &body_runs);
        let ignored: Vec<bool> = built.trials.iter().map(Trial::has_ignored_flag).collect();
        assert_eq!(ignored, [true, false, false]);
        assert_eq!(built.skipped.len(), 1);
        assert_eq!(run(built, &[]), (1, 1, 1));
        assert_eq!(
            body_runs.load(Ordering::SeqCst),
            1,
            "only the present one ran"
        );

        // Asked for on purpose, the ignored test runs and fails naming the command.
        let body_runs = Arc::new(AtomicUsize::new(0));
        assert_eq!(
            run(suite(false, &body_runs), &["--include-ignored"]),
            (1, 2, 0)
        );
        assert_eq!(body_runs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn when_required_a_missing_prerequisite_fails_the_test_without_running_it() {
        let body_runs = Arc::new(AtomicUsize::new(0));
        let built = suite(true, &body_runs);
        assert!(built.trials.iter().all(|t| !t.has_ignored_flag()));
        assert!(built.skipped.is_empty());
        assert_eq!(run(built, &[]), (1, 2, 0));
        assert_eq!(body_runs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn async_tests_run_on_a_runtime_with_timers() {
        let done = Arc::new(AtomicUsize::new(0));
        let seen = done.clone();
        let built = Suite::with_required(false).async_test("sleeps", move || async move {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            seen.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(run(built, &[]), (1, 0, 0));
        assert_eq!(done.load(Ordering::SeqCst), 1);
        assert_eq!(block_on_multi_thread(2, async { 7 }), 7);
    }
}
