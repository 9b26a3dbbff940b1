//! Interpolation gives what CrewAI gives (fixtures made by tests/fixtures/python_interpolation.py),
//! in every field CrewAI interpolates.

use crewai_core::interpolate::{Inputs, Location, interpolate};
use crewai_project::{Project, ToolRegistry};
use serde_json::Value;

#[test]
fn interpolation_matches_python() {
    let cases: Vec<Value> =
        serde_json::from_str(include_str!("fixtures/python_interpolation.json")).unwrap();
    assert!(cases.len() >= 10, "the fixture lost cases");
    let at = Location {
        owner: "task 't'".into(),
        field: "description",
    };
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let text = case["text"].as_str().unwrap();
        let inputs: Inputs = case["inputs"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let result = interpolate(text, &inputs, &at);
        match (case.get("expected"), case.get("missing")) {
            (Some(expected), _) => assert_eq!(
                result.as_deref().ok(),
                expected.as_str(),
                "case {name}: {result:?}"
            ),
            (None, Some(missing)) => {
                let error = result.expect_err(name);
                assert_eq!(
                    Some(error.placeholder.as_str()),
                    missing.as_str(),
                    "case {name}"
                );
            }
            (None, None) => panic!("case {name} has no expectation"),
        }
    }
}

#[test]
fn every_text_field_and_output_file_is_interpolated() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        (
            "config/agents.yaml",
            "writer:\n  role: '{field} writer'\n  goal: Write about {topic} for {year}\n  backstory: >\n    Knows {topic} since {year}.\n",
        ),
        (
            "config/tasks.yaml",
            "write:\n  description: >\n    Write on {topic}, {{topic}}, (}}) and {\"json\": true}\n  expected_output: '{count} paragraphs'\n  agent: writer\n  output_file: 'out/{topic}_{year}.md'\n",
        ),
    ];
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let project = Project::load(dir.path()).unwrap();
    assert_eq!(
        project.required_inputs(),
        ["field", "topic", "year", "count"]
    );
    let inputs: Inputs = [
        ("field", serde_json::json!("tech")),
        ("topic", serde_json::json!("AI")),
        ("year", serde_json::json!(2025)),
        ("count", serde_json::json!(3)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let plan = project.plan(&inputs, &ToolRegistry::new()).unwrap();
    let agent = &plan.agents[0];
    assert_eq!(agent.role, "tech writer");
    assert!(
        agent.system_prompt.contains("Write about AI for 2025"),
        "{}",
        agent.system_prompt
    );
    assert!(
        agent.system_prompt.contains("Knows AI since 2025."),
        "{}",
        agent.system_prompt
    );
    let task = &plan.tasks[0];
    assert!(
        task.prompt
            .contains("Write on AI, {AI}, (}}) and {\"json\": true}"),
        "{}",
        task.prompt
    );
    assert!(task.prompt.contains("3 paragraphs"), "{}", task.prompt);
    assert_eq!(task.output_file.as_deref(), Some("out/AI_2025.md"));

    // Inputs that are given must cover every placeholder: an empty map fails on the first one.
    let err = project
        .plan(&Inputs::new(), &ToolRegistry::new())
        .unwrap_err();
    let first = err
        .diagnostics()
        .first()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert_eq!(
        first,
        "config/agents.yaml:2: agent 'writer' field 'role' uses {field}, which no input provides; pass `--inputs field=...` or add it under `inputs:` in the crew file"
    );
}
