//! `SKILL.md` split into its YAML frontmatter and Markdown body, and the frontmatter checked
//! against the Agent Skills format: `name` (1–64 characters of lowercase letters, digits and
//! single hyphens, neither first nor last), `description` (1–1024 characters), `license`,
//! `compatibility` (at most 500 characters), `metadata` (strings to strings) and
//! `allowed-tools` (space-separated, or a list). Any other key is an error, as the format's
//! reference validator has it: a misspelt `descripton` must not pass as an empty skill.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use yaml_serde::{Mapping, Value};

use crate::error::SkillError;

pub const MAX_NAME_LENGTH: usize = 64;
pub const MAX_DESCRIPTION_LENGTH: usize = 1024;
pub const MAX_COMPATIBILITY_LENGTH: usize = 500;

/// The keys a `SKILL.md` frontmatter may hold.
pub const ALLOWED_FIELDS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

static NAME_PATTERN: LazyLock<Regex> = LazyLock::new(|| {
    // A constant pattern: it compiles (the unit tests run it).
    Regex::new(r"^[a-z0-9]+(?:-[a-z0-9]+)*$").unwrap_or_else(|_| unreachable!())
});

/// A skill's validated frontmatter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontmatter {
    pub name: String,
    pub description: String,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub allowed_tools: Vec<String>,
}

/// A parsed `SKILL.md`: the frontmatter and the body (the full instructions, trimmed).
#[derive(Debug, Clone)]
pub(crate) struct SkillFile {
    pub(crate) frontmatter: Frontmatter,
    pub(crate) body: String,
    /// The file line of the `name:` key (1 when absent), for errors found later (the folder
    /// name check).
    pub(crate) name_line: usize,
}

/// Where the text came from, for error messages (`skills/x/SKILL.md`, or `inline skill`).
pub(crate) fn parse(text: &str, origin: &str) -> Result<SkillFile, SkillError> {
    let invalid = |line: usize, field: &str, message: String| SkillError::Invalid {
        origin: origin.to_string(),
        line,
        field: field.to_string(),
        message,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "---" {
        return Err(invalid(
            1,
            "frontmatter",
            "SKILL.md must start with a '---' line, then the YAML frontmatter (name, description), then another '---' line".into(),
        ));
    }
    // Find the closing delimiter: a line that is `---` (trailing blanks allowed).
    let mut yaml_len = 0;
    let mut closed = false;
    for line in lines.by_ref() {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml_len += line.len();
    }
    if !closed {
        return Err(invalid(
            1,
            "frontmatter",
            "the frontmatter is not closed: add a '---' line after the last frontmatter field"
                .into(),
        ));
    }
    let yaml = &text[first.len()..first.len() + yaml_len];
    let body: String = lines.collect();
    let key_line = |key: &str| key_line(yaml, key).map_or(1, |l| l + 1);

    let value: Value = yaml_serde::from_str(yaml).map_err(|source| SkillError::Yaml {
        origin: origin.to_string(),
        line: source.location().map_or(2, |l| l.line() + 1),
        source,
    })?;
    let mapping = match value {
        Value::Mapping(mapping) => mapping,
        Value::Null => Mapping::new(),
        _ => {
            return Err(invalid(
                2,
                "frontmatter",
                "the frontmatter must be a mapping of fields (name: ..., description: ...)".into(),
            ));
        }
    };

    for key in mapping.keys() {
        let Some(key) = key.as_str() else {
            return Err(invalid(
                2,
                "frontmatter",
                "every frontmatter key must be a plain name".into(),
            ));
        };
        if !ALLOWED_FIELDS.contains(&key) {
            let hint = closest_field(key)
                .map(|f| format!("did you mean '{f}'? "))
                .unwrap_or_default();
            return Err(invalid(
                key_line(key),
                key,
                format!(
                    "unknown frontmatter field; {hint}the fields a skill may have are {} (put anything else under metadata:)",
                    ALLOWED_FIELDS.join(", ")
                ),
            ));
        }
    }

    let text_field = |key: &str| -> Result<Option<String>, SkillError> {
        match mapping.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(invalid(
                key_line(key),
                key,
                "must be text (quote it)".into(),
            )),
        }
    };

    let name = text_field("name")?.ok_or_else(|| {
        invalid(
            1,
            "name",
            "missing: add 'name: <lowercase-name>' (the skill folder's name)".into(),
        )
    })?;
    let name_line = key_line("name");
    check_name(&name).map_err(|message| invalid(name_line, "name", message))?;

    let description = text_field("description")?.ok_or_else(|| {
        invalid(
            1,
            "description",
            "missing: add 'description: <what the skill does and when to use it>'".into(),
        )
    })?;
    let description_length = description.chars().count();
    if description.trim().is_empty() {
        return Err(invalid(
            key_line("description"),
            "description",
            "must not be empty: say what the skill does and when to use it".into(),
        ));
    }
    if description_length > MAX_DESCRIPTION_LENGTH {
        return Err(invalid(
            key_line("description"),
            "description",
            format!(
                "is {description_length} characters long; shorten it to at most {MAX_DESCRIPTION_LENGTH} (move details into the body)"
            ),
        ));
    }

    let license = text_field("license")?;
    let compatibility = text_field("compatibility")?;
    if let Some(compatibility) = &compatibility {
        let length = compatibility.chars().count();
        if compatibility.trim().is_empty() || length > MAX_COMPATIBILITY_LENGTH {
            return Err(invalid(
                key_line("compatibility"),
                "compatibility",
                format!(
                    "must be 1 to {MAX_COMPATIBILITY_LENGTH} characters (it is {length}); leave it out when there is nothing to say"
                ),
            ));
        }
    }

    let metadata = match mapping.get("metadata") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Mapping(entries)) => {
            let mut metadata = BTreeMap::new();
            for (key, value) in entries {
                match (key.as_str(), value) {
                    (Some(key), Value::String(value)) => {
                        metadata.insert(key.to_string(), value.clone());
                    }
                    (Some(key), _) => {
                        return Err(invalid(
                            key_line("metadata"),
                            "metadata",
                            format!("the value of '{key}' must be text (quote it: {key}: \"...\")"),
                        ));
                    }
                    (None, _) => {
                        return Err(invalid(
                            key_line("metadata"),
                            "metadata",
                            "every key must be text".into(),
                        ));
                    }
                }
            }
            metadata
        }
        Some(_) => {
            return Err(invalid(
                key_line("metadata"),
                "metadata",
                "must be a mapping of text keys to text values".into(),
            ));
        }
    };

    let allowed_tools = match mapping.get("allowed-tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(list)) => list.split_whitespace().map(str::to_string).collect(),
        Some(Value::Sequence(items)) => items
            .iter()
            .map(|item| {
                item.as_str().map(str::to_string).ok_or_else(|| {
                    invalid(
                        key_line("allowed-tools"),
                        "allowed-tools",
                        "every entry must be a tool name".into(),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(invalid(
                key_line("allowed-tools"),
                "allowed-tools",
                "must be tool names separated by spaces, or a list of them".into(),
            ));
        }
    };

    Ok(SkillFile {
        frontmatter: Frontmatter {
            name,
            description,
            license,
            compatibility,
            metadata,
            allowed_tools,
        },
        body: body.trim().to_string(),
        name_line,
    })
}

/// Checks a skill name against the format's rule; the message says what is wrong.
pub fn check_name(name: &str) -> Result<(), String> {
    let length = name.chars().count();
    if length == 0 {
        return Err("must not be empty".into());
    }
    if length > MAX_NAME_LENGTH {
        return Err(format!(
            "'{name}' is {length} characters long; use at most {MAX_NAME_LENGTH}"
        ));
    }
    if !NAME_PATTERN.is_match(name) {
        return Err(format!(
            "'{name}' is not a valid skill name: use lowercase letters, digits and single hyphens, not at the start or end (for example 'pdf-tools')"
        ));
    }
    Ok(())
}

/// The 0-based line of the frontmatter (1-based file lines start after the opening `---`) where
/// the top-level `key:` is written.
fn key_line(yaml: &str, key: &str) -> Option<usize> {
    yaml.lines()
        .position(|line| {
            let rest = line
                .strip_prefix(key)
                .or_else(|| line.strip_prefix(&format!("\"{key}\"")))
                .or_else(|| line.strip_prefix(&format!("'{key}'")));
            rest.is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        // The frontmatter's first line is the file's second.
        .map(|index| index + 1)
}

fn closest_field(key: &str) -> Option<&'static str> {
    let normalised = key.replace('_', "-").to_lowercase();
    ALLOWED_FIELDS
        .iter()
        .copied()
        .map(|field| (field, strsim::levenshtein(&normalised, field)))
        .filter(|(_, distance)| *distance <= 3)
        .min_by_key(|(_, distance)| *distance)
        .map(|(field, _)| field)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        match parse(text, "s/SKILL.md") {
            Ok(_) => panic!("expected an error for {text:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_full_frontmatter_parses() {
        let file = parse(
            "---\nname: pdf-tools\ndescription: Works with PDFs.\nlicense: MIT\ncompatibility: needs poppler\nmetadata:\n  author: me\n  version: \"1.0\"\nallowed-tools: file_read  http_get\n---\n\n# PDF\nDo things.\n",
            "s/SKILL.md",
        )
        .unwrap();
        let f = file.frontmatter;
        assert_eq!(f.name, "pdf-tools");
        assert_eq!(f.description, "Works with PDFs.");
        assert_eq!(f.license.as_deref(), Some("MIT"));
        assert_eq!(f.compatibility.as_deref(), Some("needs poppler"));
        assert_eq!(f.metadata["version"], "1.0");
        assert_eq!(f.allowed_tools, ["file_read", "http_get"]);
        assert_eq!(file.body, "# PDF\nDo things.");
        assert_eq!(file.name_line, 2);
    }

    #[test]
    fn allowed_tools_may_be_a_list() {
        let file = parse(
            "---\nname: a\ndescription: d\nallowed-tools: [x, y]\n---\nbody",
            "s",
        )
        .unwrap();
        assert_eq!(file.frontmatter.allowed_tools, ["x", "y"]);
    }

    #[test]
    fn names_follow_the_pattern() {
        for bad in ["Pdf", "-a", "a-", "a--b", "a_b", "a b", ""] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(check_name(&"a".repeat(65)).is_err());
        for good in ["a", "pdf-tools", "v2", &"a".repeat(64)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn errors_name_the_line_and_the_field() {
        assert_eq!(
            error("---\ndescription: d\nname: Bad_Name\n---\n"),
            "s/SKILL.md:3: name: 'Bad_Name' is not a valid skill name: use lowercase letters, digits and single hyphens, not at the start or end (for example 'pdf-tools')"
        );
        assert_eq!(
            error("---\nname: a\n---\n"),
            "s/SKILL.md:1: description: missing: add 'description: <what the skill does and when to use it>'"
        );
        assert!(
            error("---\nname: a\ndescription: d\ndescripton: x\n---\n").starts_with(
                "s/SKILL.md:4: descripton: unknown frontmatter field; did you mean 'description'?"
            )
        );
        assert!(
            error("---\nname: a\ndescription: d\nallowed_tools: x\n---\n")
                .contains("did you mean 'allowed-tools'?")
        );
        let long = format!("---\nname: a\ndescription: {}\n---\n", "x".repeat(1025));
        assert_eq!(
            error(&long),
            "s/SKILL.md:3: description: is 1025 characters long; shorten it to at most 1024 (move details into the body)"
        );
        assert!(
            error("---\nname: a\ndescription: d\nmetadata:\n  version: 1.0\n---\n")
                .starts_with("s/SKILL.md:4: metadata: the value of 'version' must be text")
        );
        assert!(
            error("# no frontmatter")
                .starts_with("s/SKILL.md:1: frontmatter: SKILL.md must start with a '---' line")
        );
        assert!(error("---\nname: a\n").contains("is not closed"));
        let yaml = error("---\nname: a\ndescription: d\n  license: x\n---\n");
        assert!(
            yaml.starts_with("s/SKILL.md:4: the frontmatter is not valid YAML"),
            "{yaml}"
        );
        assert!(error("---\nname: a\ndescription: \"  \"\n---\n").contains("must not be empty"));
        assert!(error("---\nname: 5\ndescription: d\n---\n").contains("name: must be text"));
    }
}
