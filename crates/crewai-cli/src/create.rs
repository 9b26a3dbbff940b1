//! `crewai create crew NAME`: a Rust crew project that builds and runs (and the helpers every
//! scaffold shares).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use minijinja::{Environment, context};

use crate::outcome::Failure;

const CARGO_TOML: &str = include_str!("../templates/crew/Cargo.toml.j2");
const MAIN_RS: &str = include_str!("../templates/crew/main.rs.j2");
const TOOLS_RS: &str = include_str!("../templates/crew/tools.rs.j2");
const AGENTS_YAML: &str = include_str!("../templates/crew/agents.yaml.j2");
const TASKS_YAML: &str = include_str!("../templates/crew/tasks.yaml.j2");
const CREW_YAML: &str = include_str!("../templates/crew/crew.yaml.j2");
const ENV_EXAMPLE: &str = include_str!("../templates/crew/env.example.j2");
const README: &str = include_str!("../templates/crew/README.md.j2");
const GITIGNORE: &str = include_str!("../templates/crew/gitignore.j2");
const USER_PREFERENCE: &str = include_str!("../templates/crew/user_preference.txt.j2");

/// The crates a scaffolded project depends on.
const CREWAI_CRATES: &[&str] = &["crewai-core", "crewai-project", "crewai-tools"];

/// CrewAI's folder rule: lowercase, spaces and hyphens become `_`.
pub fn folder_name(name: &str) -> String {
    name.trim()
        .to_lowercase()
        .chars()
        .map(|c| if c == ' ' || c == '-' { '_' } else { c })
        .collect()
}

/// Where this workspace's crates are, if the binary runs on the machine it was built on.
fn workspace_crates(needed: &[&str]) -> Option<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()?
        .to_path_buf();
    needed
        .iter()
        .all(|c| crates.join(c).join("Cargo.toml").is_file())
        .then_some(crates)
}

/// The `name = spec` lines of a scaffold's dependencies on `needed`: paths into this checkout
/// when the binary runs where it was built, else the crates.io version of this binary.
pub(crate) fn dependency_lines(needed: &[&str]) -> Vec<minijinja::Value> {
    let crates = workspace_crates(needed);
    needed
        .iter()
        .map(|name| {
            let spec = match &crates {
                Some(dir) => format!("{{ path = {:?} }}", dir.join(name).to_string_lossy()),
                None => format!("\"{}\"", env!("CARGO_PKG_VERSION")),
            };
            context! { name => *name, spec => spec }
        })
        .collect()
}

/// The folder a new project named `name` gets under `parent`, checked: a valid name, not there
/// yet.
pub(crate) fn new_project_dir(name: &str, parent: &Path) -> anyhow::Result<(String, PathBuf)> {
    let folder = folder_name(name);
    if folder.is_empty() || !folder.chars().all(|c| c.is_alphanumeric() || c == '_') {
        bail!("'{name}' cannot name a project: use letters, digits, spaces, '-' or '_'");
    }
    if folder.starts_with(|c: char| c.is_ascii_digit()) {
        bail!(
            "'{name}' cannot name a project: it must not start with a digit (it becomes a crate name)"
        );
    }
    let dir = parent.join(&folder);
    if dir.exists() {
        bail!(
            "{} already exists; pick another name or remove it",
            dir.display()
        );
    }
    Ok((folder, dir))
}

/// Writes `files` (paths relative to `dir`), creating their folders.
pub(crate) fn write_files(dir: &Path, files: Vec<(&str, String)>) -> anyhow::Result<()> {
    for (relative, text) in files {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Renders a template with `vars`, ending the text with one newline (minijinja drops a
/// template's final newline; files should end with one).
pub(crate) fn render(template: &str, vars: &minijinja::Value) -> anyhow::Result<String> {
    Environment::new()
        .render_str(template, vars)
        .map(|text| format!("{}\n", text.trim_end_matches('\n')))
        .context("a project template failed to render")
}

/// Writes the project; returns its folder.
pub fn scaffold(name: &str, parent: &Path) -> anyhow::Result<PathBuf> {
    let (folder, dir) = new_project_dir(name, parent)?;
    let year = chrono_year();
    let vars = context! {
        name => name.trim(),
        crate_name => folder.replace('_', "-"),
        crewai_deps => dependency_lines(CREWAI_CRATES),
        current_year => year,
    };
    let render = |template: &str| render(template, &vars);
    let files: Vec<(&str, String)> = vec![
        ("Cargo.toml", render(CARGO_TOML)?),
        ("src/main.rs", render(MAIN_RS)?),
        ("src/tools.rs", TOOLS_RS.to_string()),
        ("config/agents.yaml", AGENTS_YAML.to_string()),
        ("config/tasks.yaml", TASKS_YAML.to_string()),
        ("config/crew.yaml", render(CREW_YAML)?),
        (".env.example", ENV_EXAMPLE.to_string()),
        ("README.md", render(README)?),
        (".gitignore", GITIGNORE.to_string()),
        ("knowledge/user_preference.txt", USER_PREFERENCE.to_string()),
    ];
    write_files(&dir, files)?;
    Ok(dir)
}

/// The scaffold's default `current_year` input, as CrewAI's main.py computes it.
pub(crate) fn chrono_year() -> String {
    chrono::Utc::now().format("%Y").to_string()
}

/// `output_dir`, else the current folder.
pub(crate) fn parent_dir(output_dir: Option<&Path>) -> Result<PathBuf, Failure> {
    match output_dir {
        Some(dir) => Ok(dir.to_path_buf()),
        None => std::env::current_dir()
            .context("cannot read the current folder")
            .map_err(Failure::config),
    }
}

pub fn create_crew(name: &str, output_dir: Option<&Path>) -> Result<(), Failure> {
    let dir = scaffold(name, &parent_dir(output_dir)?).map_err(Failure::config)?;
    print_created(
        &dir,
        &[
            "cp .env.example .env   # set your API key",
            "crewai run --dry-run",
            "crewai run",
        ],
    );
    Ok(())
}

/// Says where a scaffold was written and the commands to run next in it.
pub(crate) fn print_created(dir: &Path, next: &[&str]) {
    println!("Created {}", dir.display());
    println!("Next:\n  cd {}", dir.display());
    for command in next {
        println!("  {command}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_follow_crewai() {
        assert_eq!(folder_name("My Crew-One"), "my_crew_one");
    }

    #[test]
    fn the_year_is_plausible() {
        let year: i64 = chrono_year().parse().unwrap();
        assert!((2024..3000).contains(&year));
    }

    #[test]
    fn scaffolds_every_file_and_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let project = scaffold("demo", dir.path()).unwrap();
        for file in [
            "Cargo.toml",
            "src/main.rs",
            "src/tools.rs",
            "config/agents.yaml",
            "config/tasks.yaml",
            "config/crew.yaml",
            ".env.example",
            "README.md",
            "knowledge/user_preference.txt",
        ] {
            assert!(project.join(file).is_file(), "{file} missing");
        }
        let cargo = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
        assert!(cargo.contains("name = \"demo\""), "{cargo}");
        assert!(cargo.contains("crewai-project = { path = "), "{cargo}");
        assert!(
            scaffold("demo", dir.path())
                .unwrap_err()
                .to_string()
                .contains("already exists")
        );
        assert!(scaffold("9lives", dir.path()).is_err());
    }
}
