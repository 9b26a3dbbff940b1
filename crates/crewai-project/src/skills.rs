//! `skills:` on agents and the crew: what each entry names, checked when the project loads.
//!
//! An entry is a path (relative to the project folder) to a skill folder or a folder of skill
//! folders, an inline `SKILL.md` text (starting with a `---` line), or a mapping
//! `{path: ..., disclosure: metadata | instructions | resources}` that also says how much of
//! the skill the system prompt carries. `@org/name` registry references are refused. Every
//! skill is loaded once here, so a broken `SKILL.md` fails `crewai run --dry-run` with its
//! `file:line` next to the YAML line that names it; the engine loads the skills again when the
//! run starts, so it sees the files as they are then.

use std::path::Path;

use crewai_core::skills::{DisclosureLevel, ResolveStep, SkillSource, resolve};
use crewai_llm::error_chain;
use serde_json::Value;

use crate::error::Diagnostic;
use crate::spec::Origin;

/// The sources a `skills:` value names, or `None` after reporting why it cannot be used.
pub(crate) fn skill_sources(
    root: &Path,
    owner: &str,
    value: &Value,
    origin: &Origin,
    errors: &mut Vec<Diagnostic>,
    warnings: &mut Vec<Diagnostic>,
) -> Option<Vec<SkillSource>> {
    let entries: Vec<&Value> = match value {
        Value::Null => return Some(Vec::new()),
        Value::Array(entries) => entries.iter().collect(),
        Value::String(_) | Value::Object(_) => vec![value],
        _ => {
            errors.push(origin.diagnostic(format!(
                "{owner} field 'skills': must be a list of skill paths (folders holding SKILL.md, or folders of them)"
            )));
            return None;
        }
    };
    let single = !value.is_array();
    let mut sources = Vec::new();
    let mut ok = true;
    for (index, entry) in entries.into_iter().enumerate() {
        let at = if single {
            origin.clone()
        } else {
            origin.child(index)
        };
        match source(root, owner, entry, &at).and_then(|source| {
            // Each entry is loaded on its own first, so a problem is reported at its own line.
            loaded(owner, &source, &at, warnings).map(|()| source)
        }) {
            Ok(source) => sources.push(source),
            Err(diagnostic) => {
                errors.push(diagnostic);
                ok = false;
            }
        }
    }
    if !ok {
        return None;
    }
    // Together, the entries must not name two different skills the same.
    match resolve(&sources) {
        Ok(_) => Some(sources),
        Err(error) => {
            errors.push(
                origin.diagnostic(format!("{owner} field 'skills': {}", error_chain(&error))),
            );
            None
        }
    }
}

/// Loads one entry's skills; a skill left out of a searched folder is a warning.
fn loaded(
    owner: &str,
    source: &SkillSource,
    at: &Origin,
    warnings: &mut Vec<Diagnostic>,
) -> Result<(), Diagnostic> {
    let resolution = resolve(std::slice::from_ref(source)).map_err(|error| {
        at.diagnostic(format!("{owner} field 'skills': {}", error_chain(&error)))
            .with_hint(Some(
                "skill paths are relative to the project folder".into(),
            ))
    })?;
    for skill in &resolution.skills {
        let allowed = &skill.frontmatter().allowed_tools;
        if !allowed.is_empty() {
            warnings.push(at.diagnostic(format!(
                "{owner} field 'skills': skill '{}' lists allowed-tools ({}), which crewai-rs does not enforce yet: the agent keeps the tools it is given",
                skill.name(),
                allowed.join(", ")
            )));
        }
    }
    for step in &resolution.steps {
        if let ResolveStep::LoadFailed { error, .. } = step {
            warnings.push(at.diagnostic(format!(
                "{owner} field 'skills': a skill is left out because it does not load: {}",
                error_chain(error.as_ref())
            )));
        }
    }
    Ok(())
}

fn source(root: &Path, owner: &str, entry: &Value, at: &Origin) -> Result<SkillSource, Diagnostic> {
    let problem = |message: String| at.diagnostic(format!("{owner} field 'skills': {message}"));
    let place = || {
        let line = at.line().map(|l| format!(":{l}")).unwrap_or_default();
        format!("{}{line}", at.source.display)
    };
    let located = |path: &str| {
        let path = Path::new(path);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            root.join(path)
        }
    };
    match entry {
        Value::String(text) => {
            match SkillSource::from_text(text, &place()).map_err(|e| problem(error_chain(&e)))? {
                SkillSource::Path { level, path } => Ok(SkillSource::Path {
                    path: located(&path.to_string_lossy()),
                    level,
                }),
                other => Ok(other),
            }
        }
        Value::Object(map) if map.len() == 1 && map.contains_key("python") => {
            let reference = map
                .get("python")
                .and_then(Value::as_str)
                .unwrap_or_default();
            Err(problem(format!(
                "the Python value `{reference}` cannot be read without running Python; write the skill folder's path as a string (\"skills/my-skill\")"
            )))
        }
        Value::Object(map) => {
            for key in map.keys() {
                if key != "path" && key != "disclosure" {
                    return Err(problem(format!(
                        "unknown key '{key}' in a skill entry (a skill entry has `path` and optionally `disclosure`)"
                    )));
                }
            }
            let Some(Value::String(path)) = map.get("path") else {
                return Err(problem(
                    "a skill entry written as a mapping needs `path: <skill folder>`".into(),
                ));
            };
            let level = match map.get("disclosure") {
                None => DisclosureLevel::default(),
                Some(Value::String(name)) => DisclosureLevel::from_name(name).ok_or_else(|| {
                    problem(format!(
                        "disclosure '{name}' is not one of metadata, instructions, resources"
                    ))
                })?,
                Some(_) => {
                    return Err(problem(
                        "`disclosure` must be metadata, instructions or resources".into(),
                    ));
                }
            };
            Ok(SkillSource::Path {
                path: located(path),
                level,
            })
        }
        _ => Err(problem(
            "each entry must be a skill path, an inline SKILL.md text, or {path, disclosure}"
                .into(),
        )),
    }
}
