//! The reader on a project in CrewAI's classic layout (crewai-project's fixture).

use std::path::PathBuf;

use crewai_pysource::{
    ArgValue, ProjectKind, Severity, find_crewai_package, read_crew_py, read_main_py,
};
use serde_json::json;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crewai-project/tests/fixtures/py/classic")
}

fn json_arg(value: &ArgValue) -> &serde_json::Value {
    match value {
        ArgValue::Json(v) => v,
        other => panic!("expected a JSON value, got {other:?}"),
    }
}

#[test]
fn reads_the_crewbase_class() {
    let root = fixture();
    let crew = read_crew_py(&root.join("src/market_brief/crew.py"), &root.join("src")).unwrap();
    assert!(crew.diagnostics.is_empty(), "{:#?}", crew.diagnostics);
    assert_eq!(crew.class_name, "MarketBrief");
    assert_eq!(crew.module, "market_brief.crew");
    assert_eq!(
        (crew.agents_config.value.as_str(), crew.agents_config.line),
        ("config/agents.yaml", 21)
    );
    assert_eq!(crew.tasks_config.value, "config/tasks.yaml");

    let names: Vec<&str> = crew.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["researcher", "reporting_analyst"]);
    let researcher = &crew.agents[0];
    assert_eq!(
        researcher
            .config_key
            .as_ref()
            .map(|k| (k.value.as_str(), k.line)),
        Some(("researcher", 27))
    );
    let llm = researcher.arg("llm").unwrap();
    assert_eq!(llm.line, 33);
    assert_eq!(
        json_arg(&llm.value),
        &json!({"model": "openai/gpt-4o-mini", "temperature": 0.2, "base_url": "http://127.0.0.1:9/v1"})
    );
    assert_eq!(
        json_arg(&researcher.arg("max_iter").unwrap().value),
        &json!(7)
    );
    assert_eq!(
        json_arg(&researcher.arg("allow_delegation").unwrap().value),
        &json!(false)
    );
    let ArgValue::Tools(tools) = &researcher.arg("tools").unwrap().value else {
        panic!()
    };
    assert_eq!(tools.len(), 3);
    assert_eq!(
        (
            tools[0].module.as_str(),
            tools[0].attr.as_str(),
            tools[0].line
        ),
        ("crewai_tools", "SerperDevTool", 29)
    );
    assert_eq!(tools[0].kwargs["n_results"], 5);
    assert_eq!(tools[0].module_file, None);
    assert_eq!(
        (tools[1].module.as_str(), tools[1].attr.as_str()),
        ("market_brief.tools.custom_tool", "MarketDataTool")
    );
    assert_eq!(tools[1].kwargs["region"], "eu");
    assert!(
        tools[1]
            .module_file
            .as_ref()
            .unwrap()
            .ends_with("src/market_brief/tools/custom_tool.py")
    );
    assert!(!tools[1].is_function);
    assert_eq!(
        (tools[2].attr.as_str(), tools[2].is_function, tools[2].line),
        ("word_count", true, 31)
    );

    let analyst = &crew.agents[1];
    assert_eq!(
        json_arg(&analyst.arg("llm").unwrap().value),
        &json!("openai/gpt-4o")
    );
    assert_eq!(json_arg(&analyst.arg("max_rpm").unwrap().value), &json!(10));

    let tasks: Vec<&str> = crew.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tasks, ["research_task", "reporting_task"]);
    let research = &crew.tasks[0];
    assert_eq!(
        json_arg(&research.arg("agent").unwrap().value),
        &json!("researcher")
    );
    let ArgValue::Schema(schema) = &research.arg("output_pydantic").unwrap().value else {
        panic!()
    };
    assert_eq!(schema.name, "Report");
    assert!(schema.path.ends_with("models.py"));
    let reporting = &crew.tasks[1];
    assert_eq!(
        json_arg(&reporting.arg("context").unwrap().value),
        &json!(["research_task"])
    );
    assert_eq!(reporting.arg("context").unwrap().line, 61);
    assert_eq!(
        json_arg(&reporting.arg("output_file").unwrap().value),
        &json!("report.md")
    );
    assert_eq!(
        json_arg(&reporting.arg("markdown").unwrap().value),
        &json!(true)
    );

    let crew_method = crew.crew.as_ref().unwrap();
    assert!(
        crew_method.arg("agents").is_none(),
        "self.agents is the default"
    );
    assert_eq!(
        json_arg(&crew_method.arg("process").unwrap().value),
        &json!("sequential")
    );
    assert_eq!(
        json_arg(&crew_method.arg("max_rpm").unwrap().value),
        &json!(30)
    );
}

#[test]
fn pydantic_models_become_json_schemas() {
    let root = fixture();
    let crew = read_crew_py(&root.join("src/market_brief/crew.py"), &root.join("src")).unwrap();
    let ArgValue::Schema(schema) = &crew.tasks[0].arg("output_pydantic").unwrap().value else {
        panic!()
    };
    assert_eq!(schema.line, 17);
    assert_eq!(
        schema.schema,
        json!({
            "description": "A short market report.",
            "properties": {
                "headline": {"type": "string", "description": "One-line summary", "title": "Headline"},
                "sentiment": {"type": "string", "enum": ["bullish", "bearish"], "title": "Sentiment"},
                "score": {"type": "number", "default": 0.5, "minimum": 0, "maximum": 1, "title": "Score"},
                "tags": {"type": "array", "items": {"type": "string"}, "title": "Tags"},
                "sources": {"type": "array", "items": {
                    "properties": {
                        "url": {"type": "string", "title": "Url"},
                        "title": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Title"}
                    },
                    "required": ["url"], "title": "Source", "type": "object"
                }, "title": "Sources"},
                "notes": {"anyOf": [{"type": "object", "additionalProperties": {"type": "integer"}}, {"type": "null"}], "default": null, "title": "Notes"},
                "horizon": {"type": "string", "enum": ["short", "long"], "default": "short", "title": "Horizon"}
            },
            "required": ["headline", "sentiment", "sources"],
            "title": "Report",
            "type": "object"
        })
    );
}

#[test]
fn main_py_inputs_split_literal_and_computed() {
    let root = fixture();
    let main = read_main_py(&root.join("src/market_brief/main.py")).unwrap();
    let run = main.run_inputs().unwrap();
    assert_eq!(run.function, "run");
    assert_eq!(run.line, 15);
    assert_eq!(
        serde_json::Value::Object(run.values.clone()),
        json!({"topic": "AI chips", "max_words": 300})
    );
    assert_eq!(run.non_literal, vec![("current_year".to_string(), 18)]);
    assert_eq!(main.inputs[1].function, "train");
}

#[test]
fn pyproject_names_the_package() {
    let root = fixture();
    let package = find_crewai_package(&root).unwrap().unwrap();
    assert_eq!(package.kind, Some(ProjectKind::Crew));
    assert_eq!(package.name, "market_brief");
    assert!(package.crew_py().is_some() && package.main_py().is_some());
    let empty = tempfile::tempdir().unwrap();
    assert!(find_crewai_package(empty.path()).unwrap().is_none());
}

#[test]
fn constructs_that_cannot_be_followed_are_reported_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("src/odd");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("crew.py"),
        r#"import os
from crewai import Agent, Crew, Task, LLM
from crewai.project import CrewBase, agent, crew, task
from crewai_tools import SerperDevTool

class MyAgent(Agent):
    pass

@CrewBase
class Odd:
    @agent
    def a(self) -> Agent:
        return Agent(config=self.agents_config["a"], tools=[t for t in [SerperDevTool()]])

    @agent
    def b(self) -> Agent:
        return MyAgent(config=self.agents_config["b"])

    @agent
    def c(self) -> Agent:
        return Agent(config=self.agents_config["c"], llm=LLM(model=os.getenv("MODEL")))

    @agent
    def d(self) -> Agent:
        agents = []
        for i in range(3):
            agents.append(i)
        return Agent(config=self.agents_config["d"])
"#,
    )
    .unwrap();
    let crew = read_crew_py(&pkg.join("crew.py"), &dir.path().join("src")).unwrap();
    let shown: Vec<String> = crew
        .diagnostics
        .iter()
        .map(|d| {
            // A model chosen in code falls back to the YAML's (a warning); the rest cannot.
            let expected = if d.line == 21 {
                Severity::Warning
            } else {
                Severity::Error
            };
            assert_eq!(d.severity, expected, "{}", d.message);
            format!(
                "{}: {}; {}",
                d.line,
                d.message,
                d.hint.clone().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(shown.len(), 4, "{shown:#?}");
    assert!(shown[0].starts_with("13: agent 'a' argument `tools=`: `[t for t in [SerperDevTool()]]` is a computed tool list"), "{}", shown[0]);
    assert!(
        shown[0].contains("list the tools in config/crew.yaml"),
        "{}",
        shown[0]
    );
    assert!(
        shown[1].starts_with("17: @agent method 'b' returns `MyAgent(...)`, not crewai's Agent"),
        "{}",
        shown[1]
    );
    assert!(shown[2].starts_with("21: agent 'c' argument `llm=`: LLM argument `model=` is not a literal (`os.getenv(\"MODEL\")`), so it is not read; the `llm:` of its YAML entry, or the default model, is used instead"), "{}", shown[2]);
    assert!(
        shown[2].contains("config/crew.yaml under `agents: c: llm:`"),
        "{}",
        shown[2]
    );
    assert!(shown[3].starts_with("26: @agent method 'd' runs code this reader cannot follow (`for i in range(3): agents.append(i)`)"), "{}", shown[3]);
}

#[test]
fn knowledge_sources_and_config_become_their_mapping_form() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("src/tea");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("crew.py"),
        r#"from crewai import Agent, Crew, Task
from crewai.knowledge.knowledge_config import KnowledgeConfig
from crewai.knowledge.source.pdf_knowledge_source import PDFKnowledgeSource
from crewai.knowledge.source.string_knowledge_source import StringKnowledgeSource
from crewai.project import CrewBase, agent, crew

policy = StringKnowledgeSource(content="Refunds take five days.", metadata={"kind": "policy"})

@CrewBase
class Tea:
    @agent
    def expert(self) -> Agent:
        return Agent(
            config=self.agents_config["expert"],
            knowledge_sources=[PDFKnowledgeSource(file_paths=["tea.pdf"], chunk_size=800, chunk_overlap=50)],
            knowledge_config=KnowledgeConfig(results_limit=2, score_threshold=0.4),
        )

    @agent
    def clerk(self) -> Agent:
        return Agent(config=self.agents_config["clerk"], knowledge_sources=[open("x.txt").read()])

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks, knowledge_sources=[policy])
"#,
    )
    .unwrap();
    let crew = read_crew_py(&pkg.join("crew.py"), &dir.path().join("src")).unwrap();
    let expert = &crew.agents[0];
    assert_eq!(
        json_arg(&expert.arg("knowledge_sources").unwrap().value),
        &json!([{"type": "PDFKnowledgeSource", "file_paths": ["tea.pdf"], "chunk_size": 800, "chunk_overlap": 50}])
    );
    assert_eq!(
        json_arg(&expert.arg("knowledge_config").unwrap().value),
        &json!({"results_limit": 2, "score_threshold": 0.4})
    );
    let crew_def = crew.crew.as_ref().unwrap();
    assert_eq!(
        json_arg(&crew_def.arg("knowledge_sources").unwrap().value),
        &json!([{"type": "StringKnowledgeSource", "content": "Refunds take five days.", "metadata": {"kind": "policy"}}])
    );
    assert_eq!(crew.diagnostics.len(), 1, "{:#?}", crew.diagnostics);
    let refused = &crew.diagnostics[0];
    assert_eq!(refused.line, 21);
    assert!(
        refused
            .message
            .contains("agent 'clerk' argument `knowledge_sources=`")
            && refused
                .message
                .contains("is not a call of StringKnowledgeSource"),
        "{}",
        refused.message
    );
}
