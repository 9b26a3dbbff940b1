//! The typed model of what a project's Python declares, every value with its line.

use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::error::PyDiagnostic;

/// A value with the 1-based line it is written on (in the file of the model that holds it).
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub line: usize,
}

/// What a `@CrewBase` class in `crew.py` declares.
#[derive(Debug, Clone)]
pub struct CrewPy {
    /// The file read (`src/<pkg>/crew.py`).
    pub path: PathBuf,
    /// Its dotted module name (`<pkg>.crew`).
    pub module: String,
    pub class_name: String,
    /// The line of the `class` statement.
    pub line: usize,
    /// `agents_config`, relative to the folder of crew.py (CrewAI's default
    /// `config/agents.yaml`, at the class line, when the class does not set it).
    pub agents_config: Spanned<String>,
    pub tasks_config: Spanned<String>,
    /// The `@agent` methods, in the order the class defines them.
    pub agents: Vec<MethodDef>,
    /// The `@task` methods, in the order the class defines them (CrewAI's `self.tasks`).
    pub tasks: Vec<MethodDef>,
    /// The `@crew` method's `Crew(...)`.
    pub crew: Option<MethodDef>,
    /// The method `manager_agent=self.x()` names when it is not an `@agent` method (CrewAI
    /// keeps the manager out of the crew's agents).
    pub manager_agent: Option<MethodDef>,
    /// `@before_kickoff` methods, by name, in class order.
    pub before_kickoff: Vec<Spanned<String>>,
    /// `@after_kickoff` methods, by name, in class order.
    pub after_kickoff: Vec<Spanned<String>>,
    /// What could not be followed (errors) or was followed with a caveat (warnings).
    pub diagnostics: Vec<PyDiagnostic>,
}

/// One `@agent`, `@task` or `@crew` method: the YAML entry its `config=` reads and the
/// keyword arguments of the `Agent(...)`, `Task(...)` or `Crew(...)` it returns.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodDef {
    /// The method's name (what YAML's `agent:` and `context:` refer to).
    pub name: String,
    /// The line of the `def`.
    pub line: usize,
    /// `config=self.agents_config['researcher']` → `researcher`.
    pub config_key: Option<Spanned<String>>,
    /// Every other keyword argument, in the order written.
    pub args: Vec<Arg>,
}

impl MethodDef {
    pub fn arg(&self, name: &str) -> Option<&Arg> {
        self.args.iter().find(|a| a.name == name)
    }
}

/// One keyword argument.
#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    pub name: String,
    pub line: usize,
    pub value: ArgValue,
}

/// What a keyword argument's value means.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    /// A literal, or what CrewAI makes of a construct as a plain value: `LLM(model=...)` →
    /// a mapping of its arguments, `Process.hierarchical` → `"hierarchical"`, `self.x()` →
    /// `"x"`, `[self.a(), self.b()]` → `["a", "b"]`.
    Json(Value),
    /// `tools=[...]`.
    Tools(Vec<ToolUse>),
    /// `mcps=[...]` (and the `mcp_server_params` servers `tools=self.get_mcp_tools()` uses):
    /// each server as the entry an `mcps:` list of the YAML takes, at its line.
    Mcps(Vec<Spanned<Value>>),
    /// `output_pydantic=Model` / `output_json=Model`: the model's JSON schema.
    Schema(ModelSchema),
    /// Python that is an object, not a value (a function, a knowledge source, a variable):
    /// the dotted name it refers to (`my_pkg.guards.check`) when it is one, else its source.
    Python(String),
}

/// One tool of a `tools=[...]` list.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    pub line: usize,
    /// The module that defines it (`crewai_tools`, `my_pkg.tools.custom_tool`).
    pub module: String,
    /// The module's file when it is part of the project; `None` for an installed package.
    pub module_file: Option<PathBuf>,
    /// The class (instantiated with `kwargs`) or the tool object (`is_function`).
    pub attr: String,
    pub kwargs: Map<String, Value>,
    /// `attr` is the tool object itself (a `@tool` function, a module-level instance), not a
    /// class to instantiate.
    pub is_function: bool,
}

/// A pydantic model turned into the JSON schema its `model_json_schema()` describes.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSchema {
    /// The class name.
    pub name: String,
    /// The file that defines it, and the line of its `class` statement.
    pub path: PathBuf,
    pub line: usize,
    /// The schema, nested models inlined.
    pub schema: Value,
}

/// The `inputs = {...}` of one function of `main.py`.
#[derive(Debug, Clone, PartialEq)]
pub struct MainInputs {
    /// `run`, `train`, `test`, ...
    pub function: String,
    /// The line of the assignment.
    pub line: usize,
    /// The entries whose values are literals.
    pub values: Map<String, Value>,
    /// The entries whose values are computed (`str(datetime.now().year)`), with their lines:
    /// the inputs a user must pass.
    pub non_literal: Vec<(String, usize)>,
}

/// What `main.py` declares.
#[derive(Debug, Clone, PartialEq)]
pub struct MainPy {
    pub path: PathBuf,
    /// Each function's inputs, in file order.
    pub inputs: Vec<MainInputs>,
}

impl MainPy {
    /// The inputs `crewai run` uses: `run()`'s, else the first function's that has some.
    pub fn run_inputs(&self) -> Option<&MainInputs> {
        self.inputs
            .iter()
            .find(|i| i.function == "run")
            .or_else(|| self.inputs.first())
    }
}
