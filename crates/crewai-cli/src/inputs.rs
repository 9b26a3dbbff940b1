//! Kickoff inputs from the command line and input files.

use std::path::Path;

use anyhow::{Context, bail};
use crewai_core::interpolate::Inputs;
use serde_json::Value;

/// Parses each `--inputs`: a `NAME=VALUE` pair (the value stays text, as CrewAI's `main.py`
/// passes them) or, as CrewAI's own CLI takes it, a JSON object (`'{"topic": "AI", "n": 3}'`,
/// values keep their JSON types). Later ones win.
pub fn parse_pairs(pairs: &[String]) -> anyhow::Result<Inputs> {
    let mut inputs = Inputs::new();
    for pair in pairs {
        if pair.trim_start().starts_with('{') {
            let object: serde_json::Map<String, Value> =
                serde_json::from_str(pair).with_context(|| {
                    format!("--inputs '{pair}' starts like JSON but is not a JSON object")
                })?;
            inputs.extend(object);
            continue;
        }
        let Some((name, value)) = pair.split_once('=') else {
            bail!(
                "--inputs takes NAME=VALUE or a JSON object such as '{{\"topic\": \"AI\"}}', got '{pair}'"
            );
        };
        let name = name.trim();
        if name.is_empty() {
            bail!("--inputs '{pair}' has no name before '='");
        }
        inputs.insert(name.to_string(), Value::String(value.to_string()));
    }
    Ok(inputs)
}

/// Reads a JSON or YAML mapping of inputs (values keep their types).
pub fn read_file(path: &Path) -> anyhow::Result<Inputs> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the inputs file {}", path.display()))?;
    let value: Value = match path.extension().and_then(|e| e.to_str()) {
        Some("json") => serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid JSON", path.display()))?,
        _ => yaml_serde::from_str(&text)
            .with_context(|| format!("{} is not valid YAML or JSON", path.display()))?,
    };
    match value {
        Value::Object(map) => Ok(map.into_iter().collect()),
        Value::Null => Ok(Inputs::new()),
        _ => bail!(
            "{} must hold a mapping of input names to values",
            path.display()
        ),
    }
}

/// The inputs file first, then the pairs over it.
pub fn gather(pairs: &[String], file: Option<&Path>) -> anyhow::Result<Inputs> {
    let mut inputs = match file {
        Some(path) => read_file(path)?,
        None => Inputs::new(),
    };
    inputs.extend(parse_pairs(pairs)?);
    Ok(inputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_split_on_the_first_equals_sign() {
        let inputs = parse_pairs(&["topic=AI".into(), "q=a=b".into()]).unwrap();
        assert_eq!(inputs["topic"], "AI");
        assert_eq!(inputs["q"], "a=b");
        assert!(
            parse_pairs(&["novalue".into()])
                .unwrap_err()
                .to_string()
                .contains("NAME=VALUE")
        );
    }

    #[test]
    fn a_json_object_is_taken_as_crewai_takes_it_with_its_types() {
        let inputs = parse_pairs(&[
            r#"{"topic": "AI", "n": 3, "tags": ["a"]}"#.into(),
            "topic=Rust".into(),
        ])
        .unwrap();
        assert_eq!(inputs["topic"], "Rust");
        assert_eq!(inputs["n"], 3);
        assert_eq!(inputs["tags"][0], "a");
        let error = parse_pairs(&["{topic: AI}".into()]).unwrap_err();
        assert!(
            format!("{error:#}").contains("not a JSON object"),
            "{error:#}"
        );
        let error = parse_pairs(&["[1]".into()]).unwrap_err().to_string();
        assert!(error.contains("a JSON object"), "{error}");
    }

    #[test]
    fn files_are_json_or_yaml_and_pairs_win() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("in.yaml");
        std::fs::write(&file, "topic: AI\nn: 3\n").unwrap();
        let inputs = gather(&["topic=Rust".into()], Some(&file)).unwrap();
        assert_eq!(inputs["topic"], "Rust");
        assert_eq!(inputs["n"], 3);
    }
}
