//! `crewai create tool NAME`: a tool that runs here as written.
//!
//! - In a CrewAI crew project (`pyproject.toml` with `[tool.crewai] type = "crew"`): a `BaseTool`
//!   module in the project's `src/<pkg>/tools/`, where CrewAI's own template keeps the project's
//!   tools, so that CrewAI and crewai-rs both import it with nothing installed.
//! - Anywhere else: CrewAI's tool package (`pyproject.toml` with `type = "tool"`,
//!   `src/<name>/tool.py`), which a crew installs into its environment.
//! - With `--rust`: a crate with one `#[tool]` function, which a Rust crew depends on.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use crewai_pysource::{CrewaiPackage, ProjectKind};
use minijinja::context;

use crate::create::{dependency_lines, folder_name, parent_dir, render, write_files};
use crate::outcome::Failure;

const TOOL_PY: &str = include_str!("../templates/tool/tool.py.j2");
const INIT_PY: &str = include_str!("../templates/tool/init.py.j2");
const PYPROJECT: &str = include_str!("../templates/tool/pyproject.toml.j2");
const README: &str = include_str!("../templates/tool/README.md.j2");
const GITIGNORE: &str = include_str!("../templates/tool/gitignore.j2");
const CARGO_TOML: &str = include_str!("../templates/tool_rust/Cargo.toml.j2");
const LIB_RS: &str = include_str!("../templates/tool_rust/lib.rs.j2");

/// Python's reserved words: none can name a module.
const PYTHON_KEYWORDS: &[&str] = &[
    "false", "none", "true", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Rust's reserved words (strict and reserved for later editions): none can name a function.
const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
    "pub", "ref", "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe",
    "use", "where", "while", "abstract", "become", "box", "do", "final", "macro", "override",
    "priv", "typeof", "unsized", "virtual", "yield", "try",
];

/// Module names a Python tool imports: a tool of that name would hide the real one.
const PYTHON_IMPORTS: &[&str] = &["crewai", "crewai_tools", "pydantic", "typing"];

/// Crate names a Rust tool crate cannot take: its dependency, and the standard library's.
const RUST_RESERVED_CRATES: &[&str] = &["crewai_tools", "std", "core", "alloc", "proc_macro"];

/// The language a tool is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolLanguage {
    Python,
    Rust,
}

/// A tool's names, derived from what the user typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolNames {
    /// The module, package, function and tool name (`Word Counter` → `word_counter`).
    pub tool_name: String,
    /// The Python class (`WordCounter`), as CrewAI names it.
    pub class_name: String,
}

/// The names of a tool called `name`, CrewAI's way (lowercase; spaces and `-` become `_`),
/// refused unless the result is an identifier the language accepts.
pub fn tool_names(name: &str, language: ToolLanguage) -> anyhow::Result<ToolNames> {
    let tool_name = folder_name(name);
    let refuse =
        |why: &str| -> anyhow::Result<ToolNames> { bail!("'{name}' cannot name a tool: {why}") };
    if tool_name.is_empty() {
        return refuse("give a name such as `word_counter` or \"word counter\"");
    }
    if !tool_name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return refuse(&format!(
            "it becomes `{tool_name}`, which must start with a letter (a-z)"
        ));
    }
    if let Some(bad) = tool_name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_'))
    {
        return refuse(&format!(
            "'{bad}' is not allowed; use letters a-z, digits, spaces, '-' or '_'"
        ));
    }
    let (keywords, language_name) = match language {
        ToolLanguage::Python => (PYTHON_KEYWORDS, "Python"),
        ToolLanguage::Rust => (RUST_KEYWORDS, "Rust"),
    };
    if keywords.contains(&tool_name.as_str()) {
        return refuse(&format!(
            "`{tool_name}` is a {language_name} keyword; pick another name"
        ));
    }
    let taken = match language {
        ToolLanguage::Python => PYTHON_IMPORTS,
        ToolLanguage::Rust => RUST_RESERVED_CRATES,
    };
    if taken.contains(&tool_name.as_str()) {
        return refuse(&format!(
            "`{tool_name}` is a module the tool itself needs; pick another name"
        ));
    }
    Ok(ToolNames {
        class_name: heck::ToUpperCamelCase::to_upper_camel_case(tool_name.as_str()),
        tool_name,
    })
}

/// What `create tool` wrote, and what the user adds to use it.
#[derive(Debug)]
pub struct CreatedTool {
    /// The file or folder written.
    pub path: PathBuf,
    /// What the scaffold is, in a few words.
    pub what: String,
    /// How to use it: the lines to add, each with where it goes.
    pub usage: Vec<String>,
}

/// Writes the tool `name` into `parent`: into the crew project there, or as a package (or
/// crate, for Rust) of its own.
pub fn scaffold_tool(
    name: &str,
    parent: &Path,
    language: ToolLanguage,
) -> anyhow::Result<CreatedTool> {
    let names = tool_names(name, language)?;
    match language {
        ToolLanguage::Rust => scaffold_rust_crate(&names, parent),
        ToolLanguage::Python => match crew_project(parent)? {
            Some(package) => scaffold_into_project(&names, parent, &package),
            None => scaffold_package(&names, parent),
        },
    }
}

/// The CrewAI crew project whose root is `dir`, if it is one.
fn crew_project(dir: &Path) -> anyhow::Result<Option<CrewaiPackage>> {
    let package = crewai_pysource::find_crewai_package(dir)
        .map_err(|error| anyhow::anyhow!(crewai_llm::error_chain(&error)))
        .context("cannot tell where this project keeps its tools")?;
    Ok(package.filter(|p| p.kind == Some(ProjectKind::Crew)))
}

/// `src/<pkg>/tools/<name>.py` of the crew project at `root`.
fn scaffold_into_project(
    names: &ToolNames,
    root: &Path,
    package: &CrewaiPackage,
) -> anyhow::Result<CreatedTool> {
    let tools_dir = package.dir.join("tools");
    let file = tools_dir.join(format!("{}.py", names.tool_name));
    if file.exists() {
        bail!(
            "{} already exists; pick another name or remove it",
            file.display()
        );
    }
    let vars = context! { tool_name => &names.tool_name, class_name => &names.class_name };
    let module = format!("{}.py", names.tool_name);
    let mut files = vec![(module.as_str(), render(TOOL_PY, &vars)?)];
    // `tools/` must be a package for `from <pkg>.tools.<name> import ...`.
    if !tools_dir.join("__init__.py").exists() {
        files.push(("__init__.py", String::new()));
    }
    write_files(&tools_dir, files)?;
    let crew_py = display_relative(&package.dir.join("crew.py"), root);
    Ok(CreatedTool {
        what: format!(
            "{}, a BaseTool the model calls as `{}`",
            names.class_name, names.tool_name
        ),
        path: file,
        usage: vec![
            format!("in {crew_py}, with the other imports:"),
            format!(
                "    from {}.tools.{} import {}",
                package.name, names.tool_name, names.class_name
            ),
            "and in the Agent(...) of each agent that should use it:".to_string(),
            format!("    tools=[{}()],", names.class_name),
            "then check it: crewai run --dry-run".to_string(),
        ],
    })
}

/// CrewAI's tool package: `<parent>/<name>/` with `pyproject.toml` and `src/<name>/tool.py`.
fn scaffold_package(names: &ToolNames, parent: &Path) -> anyhow::Result<CreatedTool> {
    let dir = new_dir(parent, &names.tool_name)?;
    let path = absolute(&dir);
    let vars = context! {
        tool_name => &names.tool_name,
        class_name => &names.class_name,
        path => path.to_string_lossy(),
    };
    write_files(
        &dir,
        vec![
            ("pyproject.toml", render(PYPROJECT, &vars)?),
            ("README.md", render(README, &vars)?),
            (".gitignore", GITIGNORE.to_string()),
        ],
    )?;
    write_files(
        &dir.join("src").join(&names.tool_name),
        vec![
            ("__init__.py", render(INIT_PY, &vars)?),
            ("tool.py", render(TOOL_PY, &vars)?),
        ],
    )?;
    Ok(CreatedTool {
        what: format!(
            "the CrewAI tool package {} ({}, a BaseTool the model calls as `{}`, in src/{}/tool.py)",
            names.tool_name, names.class_name, names.tool_name, names.tool_name
        ),
        path: dir,
        usage: vec![
            "install it into the crew project's environment, from that project's folder:"
                .to_string(),
            format!("    uv add --editable {}", path.display()),
            format!("    (or: .venv/bin/pip install -e {})", path.display()),
            "then in the crew's src/<package>/crew.py, with the other imports:".to_string(),
            format!("    from {} import {}", names.tool_name, names.class_name),
            "and in the Agent(...) of each agent that should use it:".to_string(),
            format!("    tools=[{}()],", names.class_name),
        ],
    })
}

/// A crate with one `#[tool]` function: `<parent>/<name>/` with `Cargo.toml` and `src/lib.rs`.
fn scaffold_rust_crate(names: &ToolNames, parent: &Path) -> anyhow::Result<CreatedTool> {
    let dir = new_dir(parent, &names.tool_name)?;
    let path = absolute(&dir);
    let crate_name = names.tool_name.replace('_', "-");
    let vars = context! {
        tool_name => &names.tool_name,
        crate_name => &crate_name,
        crewai_deps => dependency_lines(&["crewai-tools"]),
    };
    write_files(
        &dir,
        vec![
            ("Cargo.toml", render(CARGO_TOML, &vars)?),
            ("src/lib.rs", render(LIB_RS, &vars)?),
            (".gitignore", "/target\n".to_string()),
        ],
    )?;
    Ok(CreatedTool {
        what: format!(
            "the crate {crate_name} (the #[tool] function {} in src/lib.rs)",
            names.tool_name
        ),
        path: dir,
        usage: vec![
            "in the crew's Cargo.toml, under [dependencies]:".to_string(),
            format!(
                "    {crate_name} = {{ path = {:?} }}",
                path.to_string_lossy()
            ),
            "in its src/main.rs, after the registry is made:".to_string(),
            format!(
                "    registry.register_handle({}::{}_tool());",
                names.tool_name, names.tool_name
            ),
            "and on the agent in config/agents.yaml:".to_string(),
            format!("    tools: [{}]", names.tool_name),
        ],
    })
}

/// `parent/<folder>`, refused when it exists.
fn new_dir(parent: &Path, folder: &str) -> anyhow::Result<PathBuf> {
    let dir = parent.join(folder);
    if dir.exists() {
        bail!(
            "{} already exists; pick another name or remove it",
            dir.display()
        );
    }
    Ok(dir)
}

/// `path` made absolute against the current folder, for lines meant to be pasted elsewhere.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn display_relative(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

pub fn create_tool(name: &str, output_dir: Option<&Path>, rust: bool) -> Result<(), Failure> {
    let language = match rust {
        true => ToolLanguage::Rust,
        false => ToolLanguage::Python,
    };
    let created =
        scaffold_tool(name, &parent_dir(output_dir)?, language).map_err(Failure::config)?;
    println!("Created {}: {}", created.path.display(), created.what);
    println!("To use it:");
    for line in &created.usage {
        println!("  {line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_crewai_and_bad_ones_say_why() {
        let names = tool_names("Word Counter", ToolLanguage::Python).unwrap();
        assert_eq!(names.tool_name, "word_counter");
        assert_eq!(names.class_name, "WordCounter");
        assert_eq!(
            tool_names("page-fetcher2", ToolLanguage::Rust)
                .unwrap()
                .class_name,
            "PageFetcher2"
        );
        for (bad, why) in [
            ("", "give a name"),
            ("9lives", "must start with a letter"),
            ("_private", "must start with a letter"),
            ("naïve", "'ï' is not allowed"),
            ("a.b", "'.' is not allowed"),
            ("class", "Python keyword"),
            ("pydantic", "the tool itself needs"),
        ] {
            let error = tool_names(bad, ToolLanguage::Python)
                .unwrap_err()
                .to_string();
            assert!(error.contains(why), "{bad}: {error}");
        }
        // `type` names a Python module well enough, but no Rust function.
        assert!(tool_names("type", ToolLanguage::Python).is_ok());
        let error = tool_names("type", ToolLanguage::Rust)
            .unwrap_err()
            .to_string();
        assert!(error.contains("Rust keyword"), "{error}");
    }

    #[test]
    fn outside_a_project_it_is_crewai_s_package_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let created = scaffold_tool("word counter", dir.path(), ToolLanguage::Python).unwrap();
        let root = dir.path().join("word_counter");
        assert_eq!(created.path, root);
        let pyproject = std::fs::read_to_string(root.join("pyproject.toml")).unwrap();
        assert!(pyproject.contains("type = \"tool\""), "{pyproject}");
        let tool = std::fs::read_to_string(root.join("src/word_counter/tool.py")).unwrap();
        assert!(tool.contains("class WordCounter(BaseTool):"), "{tool}");
        assert!(tool.contains("args_schema: Type[BaseModel] = WordCounterInput"));
        let init = std::fs::read_to_string(root.join("src/word_counter/__init__.py")).unwrap();
        assert!(init.contains("from .tool import WordCounter"), "{init}");
        assert!(
            created
                .usage
                .iter()
                .any(|line| line.trim() == "from word_counter import WordCounter"),
            "{:?}",
            created.usage
        );
        let again = scaffold_tool("word_counter", dir.path(), ToolLanguage::Python)
            .unwrap_err()
            .to_string();
        assert!(again.contains("already exists"), "{again}");
    }

    #[test]
    fn a_rust_tool_is_a_crate_with_one_tool_function() {
        let dir = tempfile::tempdir().unwrap();
        let created = scaffold_tool("page fetcher", dir.path(), ToolLanguage::Rust).unwrap();
        let cargo = std::fs::read_to_string(created.path.join("Cargo.toml")).unwrap();
        assert!(cargo.contains("name = \"page-fetcher\""), "{cargo}");
        assert!(cargo.contains("crewai-tools = "), "{cargo}");
        let lib = std::fs::read_to_string(created.path.join("src/lib.rs")).unwrap();
        assert!(
            lib.contains("#[tool]\npub fn page_fetcher(argument: String)"),
            "{lib}"
        );
        assert!(
            created.usage.iter().any(|line| line.trim()
                == "registry.register_handle(page_fetcher::page_fetcher_tool());"),
            "{:?}",
            created.usage
        );
    }
}
