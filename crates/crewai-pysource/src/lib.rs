//! # crewai-pysource
//!
//! Reads what a CrewAI project declares in Python — `crew.py`'s `@CrewBase` class, the
//! pydantic models and tools it imports, `main.py`'s inputs, `pyproject.toml` — with a real
//! Python parser and without running Python. Every value keeps its file and line; whatever
//! cannot be followed statically (a computed tool list, a custom `Agent` subclass, a
//! non-literal argument) is a [`PyDiagnostic`] at its line saying what to do, never dropped.
//!
//! ```
//! # let dir = tempfile::tempdir()?;
//! # let pkg = dir.path().join("src/demo");
//! # std::fs::create_dir_all(&pkg)?;
//! std::fs::write(pkg.join("crew.py"), r#"
//! from crewai import Agent, Crew, Process, Task
//! from crewai.project import CrewBase, agent, crew, task
//!
//! @CrewBase
//! class Demo:
//!     @agent
//!     def writer(self) -> Agent:
//!         return Agent(config=self.agents_config["writer"], max_iter=3)
//!
//!     @task
//!     def draft(self) -> Task:
//!         return Task(config=self.tasks_config["draft"], agent=self.writer())
//!
//!     @crew
//!     def crew(self) -> Crew:
//!         return Crew(agents=self.agents, tasks=self.tasks, process=Process.sequential)
//! "#)?;
//! let crew = crewai_pysource::read_crew_py(&pkg.join("crew.py"), &dir.path().join("src"))?;
//! assert_eq!(crew.agents[0].name, "writer");
//! assert_eq!(crew.tasks[0].arg("agent").unwrap().line, 13);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod crew;
mod error;
mod eval;
mod knowledge;
mod main_py;
mod mcps;
mod model;
mod module;
mod pyproject;
mod schema;
mod tools;

use std::path::Path;

pub use error::{PyDiagnostic, PySourceError, Severity};
pub use model::{
    Arg, ArgValue, CrewPy, MainInputs, MainPy, MethodDef, ModelSchema, Spanned, ToolUse,
};
pub use pyproject::{CrewaiPackage, ProjectKind, find_crewai_package};

/// Reads the `@CrewBase` class of `crew_py`. `source_root` is the folder holding the project's
/// top-level packages (`src/`), against which `from my_pkg.tools import X` and relative
/// imports are resolved to files. A file that does not parse is an `Err`; everything else that
/// cannot be followed is in [`CrewPy::diagnostics`].
pub fn read_crew_py(crew_py: &Path, source_root: &Path) -> Result<CrewPy, PySourceError> {
    crew::read(crew_py, source_root)
}

/// Reads the `inputs = {...}` literal of each top-level function of `main_py`.
pub fn read_main_py(main_py: &Path) -> Result<MainPy, PySourceError> {
    main_py::read(main_py)
}
