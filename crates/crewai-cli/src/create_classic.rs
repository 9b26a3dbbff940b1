//! `crewai create crew NAME --classic`: CrewAI's own Python layout (`pyproject.toml`,
//! `src/<pkg>/crew.py`, `main.py`, `config/*.yaml`, `tools/custom_tool.py`), which both CrewAI
//! and `crewai run` here run as it is.

use std::path::{Path, PathBuf};

use minijinja::context;

use crate::create::{chrono_year, new_project_dir, parent_dir, print_created, render, write_files};
use crate::outcome::Failure;

const PYPROJECT: &str = include_str!("../templates/classic/pyproject.toml.j2");
const CREW_PY: &str = include_str!("../templates/classic/crew.py.j2");
const MAIN_PY: &str = include_str!("../templates/classic/main.py.j2");
const AGENTS_YAML: &str = include_str!("../templates/classic/agents.yaml.j2");
const TASKS_YAML: &str = include_str!("../templates/classic/tasks.yaml.j2");
const CUSTOM_TOOL: &str = include_str!("../templates/classic/custom_tool.py.j2");
const README: &str = include_str!("../templates/classic/README.md.j2");
const GITIGNORE: &str = include_str!("../templates/classic/gitignore.j2");
const ENV: &str = include_str!("../templates/classic/env.j2");

/// The crew class CrewAI names after the project: `my_crew` → `MyCrew`.
fn class_name(package: &str) -> String {
    heck::ToUpperCamelCase::to_upper_camel_case(package)
}

/// Writes the project; returns its folder.
pub fn scaffold_classic(name: &str, parent: &Path) -> anyhow::Result<PathBuf> {
    let (package, dir) = new_project_dir(name, parent)?;
    let vars = context! {
        name => name.trim(),
        class_name => class_name(&package),
        package => package.clone(),
        current_year => chrono_year(),
    };
    let src = format!("src/{package}");
    let files = vec![
        ("pyproject.toml", render(PYPROJECT, &vars)?),
        ("README.md", render(README, &vars)?),
        (".gitignore", GITIGNORE.to_string()),
        (".env", ENV.to_string()),
    ];
    write_files(&dir, files)?;
    let package_files = vec![
        ("__init__.py", String::new()),
        ("crew.py", render(CREW_PY, &vars)?),
        ("main.py", render(MAIN_PY, &vars)?),
        ("config/agents.yaml", AGENTS_YAML.to_string()),
        ("config/tasks.yaml", TASKS_YAML.to_string()),
        ("tools/__init__.py", String::new()),
        ("tools/custom_tool.py", CUSTOM_TOOL.to_string()),
    ];
    write_files(&dir.join(&src), package_files)?;
    write_files(&dir, vec![("knowledge/.gitkeep", String::new())])?;
    Ok(dir)
}

pub fn create_classic_crew(name: &str, output_dir: Option<&Path>) -> Result<(), Failure> {
    let dir = scaffold_classic(name, &parent_dir(output_dir)?).map_err(Failure::config)?;
    let year = chrono_year();
    print_created(
        &dir,
        &[
            "# set OPENAI_API_KEY in .env (or MODEL for another provider)",
            &format!("crewai run --dry-run --inputs current_year={year}"),
            &format!("crewai run --inputs current_year={year}"),
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_is_named_after_the_package() {
        assert_eq!(class_name("latest_ai_development"), "LatestAiDevelopment");
        assert_eq!(class_name("crew2"), "Crew2");
    }
}
