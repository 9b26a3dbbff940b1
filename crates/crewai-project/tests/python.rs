//! Projects in CrewAI's classic layout whose wiring is in crew.py and main.py.

use std::path::{Path, PathBuf};

use crewai_project::{Project, SchemaRef, ToolRegistry};
use serde_json::json;

fn classic() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/py/classic")
}

fn line_of(origin: Option<&crewai_project::Origin>) -> (String, Option<usize>) {
    let origin = origin.expect("the field has an origin");
    (origin.source.display.clone(), origin.line())
}

#[test]
fn crew_py_wires_agents_tasks_tools_and_schemas() {
    let project = Project::load(classic()).unwrap();
    let keys: Vec<&str> = project.agents.iter().map(|a| a.key.as_str()).collect();
    assert_eq!(keys, ["researcher", "reporting_analyst"]);
    let researcher = &project.agents[0].spec;
    assert_eq!(
        researcher.role.as_deref().map(str::trim),
        Some("{topic} Senior Data Researcher")
    );
    let llm = researcher.llm.as_ref().unwrap();
    assert_eq!(
        (llm.model.as_str(), llm.temperature),
        ("openai/gpt-4o-mini", Some(0.2))
    );
    assert_eq!(llm.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
    assert_eq!(
        line_of(researcher.origin("llm")),
        ("src/market_brief/crew.py".into(), Some(33))
    );
    assert_eq!(researcher.max_iter, Some(7));
    assert_eq!(researcher.allow_delegation, Some(false));
    let tools: Vec<&str> = researcher
        .tools
        .as_ref()
        .unwrap()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        tools,
        [
            "SerperDevTool",
            "python:MarketDataTool",
            "python:word_count"
        ]
    );
    assert_eq!(researcher.tools.as_ref().unwrap()[0].args["n_results"], 5);
    assert_eq!(project.agents[1].spec.max_rpm, Some(10));

    let python: Vec<(&str, &str, &str, bool)> = project
        .python_tools
        .iter()
        .map(|p| {
            (
                p.key.as_str(),
                p.module.as_str(),
                p.attr.as_str(),
                p.is_function,
            )
        })
        .collect();
    assert_eq!(
        python,
        [
            (
                "python:MarketDataTool",
                "market_brief.tools.custom_tool",
                "MarketDataTool",
                false
            ),
            (
                "python:word_count",
                "market_brief.tools.custom_tool",
                "word_count",
                true
            ),
            ("python:DallETool", "crewai_tools", "DallETool", false),
        ]
    );
    // crewai_tools' CodeInterpreterTool is crewai-rs's sandboxed one, with its arguments; a
    // crewai_tools class crewai-rs does not have goes to the Python worker.
    let analyst_tools = project.agents[1].spec.tools.as_ref().unwrap();
    let names: Vec<&str> = analyst_tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["CodeInterpreterTool", "python:DallETool"]);
    assert_eq!(analyst_tools[0].args["unsafe_mode"], false);
    assert_eq!(project.python_tools[0].kwargs["region"], "eu");
    assert!(
        project.python_tools[0]
            .module_file
            .as_ref()
            .unwrap()
            .ends_with("tools/custom_tool.py")
    );
    assert_eq!(project.python_tools[2].module_file, None);
    assert_eq!(project.python_tools[1].origin.line(), Some(31));

    let research = &project.tasks[0];
    assert_eq!(research.key, "research_task");
    assert_eq!(research.spec.agent.as_deref(), Some("researcher"));
    assert_eq!(
        line_of(research.spec.origin("agent")),
        ("src/market_brief/crew.py".into(), Some(52))
    );
    let Some(SchemaRef::Inline(schema)) = &research.spec.output_pydantic else {
        panic!("no inline schema")
    };
    assert_eq!(schema["title"], "Report");
    assert_eq!(
        schema["required"],
        json!(["headline", "sentiment", "sources"])
    );
    assert!(project.output_schema("research_task").is_some());
    let reporting = &project.tasks[1];
    assert_eq!(
        reporting.spec.context.as_deref(),
        Some(&["research_task".to_string()][..])
    );
    assert_eq!(reporting.spec.output_file.as_deref(), Some("report.md"));
    assert_eq!(reporting.spec.markdown, Some(true));
    assert_eq!(
        reporting.spec.tools.as_ref().unwrap()[0].args["website_url"],
        "https://example.com"
    );
    assert_eq!(project.crew.max_rpm, Some(30));
    assert_eq!(project.crew.verbose, Some(true));
}

#[test]
fn main_py_inputs_are_defaults_and_computed_ones_are_named() {
    let project = Project::load(classic()).unwrap();
    let inputs = project.default_inputs();
    assert_eq!(inputs.get("topic"), Some(&json!("AI chips")));
    assert_eq!(inputs.get("max_words"), Some(&json!(300)));
    assert!(!inputs.contains_key("current_year"));
    let warning = project
        .warnings
        .iter()
        .map(ToString::to_string)
        .find(|w| w.contains("current_year"))
        .expect("a warning names the computed input");
    assert_eq!(
        warning,
        "src/market_brief/main.py:18: input 'current_year' is computed in run() when CrewAI runs it, so it has no default here; pass `--inputs current_year=...`"
    );
    // `--inputs` wins over main.py.
    let given = [("topic".to_string(), json!("robots"))]
        .into_iter()
        .collect();
    assert_eq!(
        project.effective_inputs(&given).get("topic"),
        Some(&json!("robots"))
    );
}

#[test]
fn the_plan_shows_python_tools_without_a_worker_and_a_build_names_them() {
    let project = Project::load(classic()).unwrap();
    let mut registry = ToolRegistry::with_builtins(&project.root);
    let inputs: crewai_core::interpolate::Inputs = [("current_year".to_string(), json!("2025"))]
        .into_iter()
        .collect();
    // Without a CodeInterpreterTool (the CLI registers the sandboxed one), crew.py's is refused
    // at its line with what to do.
    let error = project.plan(&inputs, &registry).unwrap_err().to_string();
    assert!(
        error.contains("src/market_brief/crew.py:44")
            && error.contains("CodeInterpreterTool")
            && error.contains("run the project with the crewai CLI"),
        "{error}"
    );
    registry.register_factory(
        "CodeInterpreterTool",
        std::sync::Arc::new(|_args| {
            Ok(crewai_tools::DynamicTool::new(
                "CodeInterpreterTool",
                "stands in for the sandboxed tool",
                json!({"type": "object", "properties": {}}),
                |_, _| async { Ok("ran".into()) },
            )
            .into_handle())
        }),
    );
    let plan = project.plan(&inputs, &registry).unwrap();
    assert_eq!(
        plan.agents[0].tool_labels[1],
        "MarketDataTool (Python: market_brief.tools.custom_tool, region=eu)"
    );
    assert_eq!(plan.agents[0].tools[2], "word_count");
    let error = project.resolve_tools(&registry).unwrap_err().to_string();
    assert!(
        error.contains("src/market_brief/crew.py:30: agent 'researcher' uses the Python tool MarketDataTool (market_brief.tools.custom_tool), which runs in the project's Python worker; none is registered"),
        "{error}"
    );
}

/// A copy of the classic fixture with crew.py (and optionally crew.yaml) replaced.
fn variant(crew_py: &str, crew_yaml: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&classic(), dir.path());
    let pkg = dir.path().join("src/market_brief");
    std::fs::write(pkg.join("crew.py"), crew_py).unwrap();
    if let Some(yaml) = crew_yaml {
        std::fs::write(pkg.join("config/crew.yaml"), yaml).unwrap();
    }
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

const HEADER: &str = "from crewai import Agent, Crew, Process, Task, LLM\nfrom crewai.project import CrewBase, agent, crew, task, before_kickoff\nfrom crewai.knowledge.source.pdf_knowledge_source import PDFKnowledgeSource\n";

const TWO_AGENTS: &str = "    @agent\n    def researcher(self) -> Agent:\n        return Agent(config=self.agents_config['researcher'])\n\n    @agent\n    def reporting_analyst(self) -> Agent:\n        return Agent(config=self.agents_config['reporting_analyst'])\n\n    @task\n    def research_task(self) -> Task:\n        return Task(config=self.tasks_config['research_task'])\n\n    @task\n    def reporting_task(self) -> Task:\n        return Task(config=self.tasks_config['reporting_task'])\n";

#[test]
fn hierarchical_crew_with_manager_llm_object() {
    let crew_py = format!(
        "{HEADER}\n@CrewBase\nclass MarketBrief:\n{TWO_AGENTS}\n    @crew\n    def crew(self) -> Crew:\n        return Crew(agents=self.agents, tasks=self.tasks, process=Process.hierarchical, manager_llm=LLM(model='openai/gpt-4o', temperature=0))\n"
    );
    let dir = variant(&crew_py, None);
    let project = Project::load(dir.path()).unwrap();
    assert_eq!(
        project.crew.process,
        Some(crewai_project::ProcessSpec::Hierarchical)
    );
    let manager = project.crew.manager_llm.as_ref().unwrap();
    assert_eq!(
        (manager.model.as_str(), manager.temperature),
        ("openai/gpt-4o", Some(0.0))
    );
    assert_eq!(project.crew.origin("manager_llm").unwrap().line(), Some(25));
}

#[test]
fn crew_yaml_overrides_crew_py() {
    let crew_py = format!(
        "{HEADER}\n@CrewBase\nclass MarketBrief:\n{}\n    @crew\n    def crew(self) -> Crew:\n        return Crew(agents=self.agents, tasks=self.tasks, max_rpm=5)\n",
        TWO_AGENTS.replace("return Task(config=self.tasks_config['research_task'])", "return Task(config=self.tasks_config['research_task'], agent=self.researcher(), markdown=True)")
    );
    let dir = variant(
        &crew_py,
        Some("max_rpm: 9\ntasks:\n  research_task:\n    markdown: false\n"),
    );
    let project = Project::load(dir.path()).unwrap();
    assert_eq!(project.crew.max_rpm, Some(9));
    assert_eq!(project.tasks[0].spec.markdown, Some(false));
    assert_eq!(
        project.tasks[0]
            .spec
            .origin("markdown")
            .unwrap()
            .source
            .display,
        "src/market_brief/config/crew.yaml"
    );
}

#[test]
fn kickoff_hooks_are_refused_at_their_line_and_knowledge_sources_are_read() {
    let crew_py = format!(
        "{HEADER}\n@CrewBase\nclass MarketBrief:\n    @before_kickoff\n    def prepare(self, inputs):\n        return inputs\n\n{TWO_AGENTS}\n    @crew\n    def crew(self) -> Crew:\n        return Crew(agents=self.agents, tasks=self.tasks, knowledge_sources=[PDFKnowledgeSource(file_paths=['a.pdf'], chunk_size=500)])\n"
    );
    let dir = variant(&crew_py, None);
    let error = Project::load(dir.path()).unwrap_err().to_string();
    assert!(!error.contains("knowledge_sources"), "{error}");
    assert!(
        error.contains("src/market_brief/crew.py:8: crew field 'before_kickoff_callbacks' is not supported yet: Python callbacks cannot run here"),
        "{error}"
    );
    let without_hook = crew_py.replace(
        "    @before_kickoff\n    def prepare(self, inputs):\n        return inputs\n\n",
        "",
    );
    let dir = variant(&without_hook, None);
    let project = Project::load(dir.path()).unwrap();
    assert_eq!(
        project.crew.knowledge_sources,
        Some(
            serde_json::json!([{"type": "PDFKnowledgeSource", "file_paths": ["a.pdf"], "chunk_size": 500}])
        )
    );
    assert!(project.knowledge_enabled());
}

#[test]
fn unfollowable_python_and_missing_config_keys_are_errors() {
    let crew_py = format!(
        "import os\n{HEADER}\n@CrewBase\nclass MarketBrief:\n{}\n    @crew\n    def crew(self) -> Crew:\n        return Crew(agents=self.agents, tasks=self.tasks, max_rpm=int(os.getenv('RPM')))\n",
        TWO_AGENTS.replace(
            "agents_config['reporting_analyst']",
            "agents_config['reporter']"
        )
    );
    let dir = variant(&crew_py, None);
    let error = Project::load(dir.path()).unwrap_err().to_string();
    assert!(
        error.contains("src/market_brief/crew.py:13: @agent method 'reporting_analyst' reads agents_config['reporter'], which agents.yaml does not define"),
        "{error}"
    );
    assert!(
        error.contains("src/market_brief/crew.py:26: crew 'crew' argument `max_rpm=` is Python this reader cannot follow (`int(os.getenv('RPM'))`); write the value in `max_rpm:` in config/crew.yaml"),
        "{error}"
    );
}

/// The task and crew arguments the other tests do not use, each read into its field at its
/// crew.py line: `async_execution`, `human_input`, a guardrail in words, `output_json`,
/// `manager_agent=self.x()`, `planning`, `memory`, `output_log_file`, `function_calling_llm`
/// and a crewai-tools constructor with a file argument.
#[test]
fn the_remaining_task_and_crew_arguments_reach_their_fields() {
    let crew_py = format!(
        "{HEADER}from crewai_tools import FileReadTool\nfrom pydantic import BaseModel\n\nclass Notes(BaseModel):\n    points: list[str]\n\n@CrewBase\nclass MarketBrief:\n    @agent\n    def researcher(self) -> Agent:\n        return Agent(config=self.agents_config['researcher'], function_calling_llm='openai/gpt-4o-mini', tools=[FileReadTool(file_path='notes.txt')])\n\n    @agent\n    def reporting_analyst(self) -> Agent:\n        return Agent(config=self.agents_config['reporting_analyst'])\n\n    def lead(self) -> Agent:\n        return Agent(role='Lead', goal='Lead the crew', backstory='Leads.', allow_delegation=True)\n\n    @task\n    def research_task(self) -> Task:\n        return Task(config=self.tasks_config['research_task'], async_execution=True, output_json=Notes)\n\n    @task\n    def reporting_task(self) -> Task:\n        return Task(config=self.tasks_config['reporting_task'], human_input=True, guardrail='The report cites the research')\n\n    @crew\n    def crew(self) -> Crew:\n        return Crew(agents=self.agents, tasks=self.tasks, process=Process.hierarchical, manager_agent=self.lead(), planning=False, memory=True, output_log_file='crew_log.txt')\n"
    );
    let dir = variant(&crew_py, None);
    let project = Project::load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let research = &project.tasks[0].spec;
    assert_eq!(research.async_execution, Some(true));
    assert!(
        matches!(&research.output_json, Some(SchemaRef::Inline(schema)) if schema["properties"]["points"]["type"] == "array"),
        "{:?}",
        research.output_json
    );
    assert_eq!(line_of(research.origin("async_execution")).1, Some(25));
    let report = &project.tasks[1].spec;
    assert_eq!(report.human_input, Some(true));
    assert_eq!(
        report.guardrail,
        Some(crewai_project::GuardrailSpec::Rule(
            "The report cites the research".into()
        ))
    );
    assert_eq!(line_of(report.origin("guardrail")).1, Some(29));
    let crew = &project.crew;
    assert_eq!(crew.manager_agent.as_deref(), Some("lead"));
    assert_eq!(crew.planning, Some(false));
    assert_eq!(crew.memory, Some(true));
    assert_eq!(line_of(crew.origin("memory")).1, Some(33));
    assert!(
        format!("{:?}", crew.output_log_file).contains("crew_log.txt"),
        "{:?}",
        crew.output_log_file
    );
    let researcher = &project.agents[0].spec;
    assert_eq!(
        researcher
            .function_calling_llm
            .as_ref()
            .map(|l| l.model.as_str()),
        Some("openai/gpt-4o-mini")
    );
    let file_tool = &researcher.tools.as_ref().unwrap()[0];
    assert_eq!(
        (file_tool.name.as_str(), &file_tool.args["file_path"]),
        ("FileReadTool", &json!("notes.txt"))
    );
    // The manager is an agent of its own, read from the undecorated method.
    assert!(project.agents.iter().any(|a| a.key == "lead"));
}

/// `Agent(memory=True, embedder={...})` in crew.py: the agent's own memory, as in YAML.
#[test]
fn an_agents_memory_and_embedder_in_crew_py_reach_its_fields() {
    let crew_py = format!(
        "{HEADER}\n@CrewBase\nclass MarketBrief:\n{}\n    @crew\n    def crew(self) -> Crew:\n        return Crew(agents=self.agents, tasks=self.tasks)\n",
        TWO_AGENTS.replace(
            "return Agent(config=self.agents_config['researcher'])",
            "return Agent(config=self.agents_config['researcher'], memory=True, embedder={'provider': 'hash', 'config': {'dimensions': 64}})"
        )
    );
    let dir = variant(&crew_py, None);
    let project = Project::load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let researcher = &project.agents[0].spec;
    assert_eq!(researcher.memory, Some(serde_json::Value::Bool(true)));
    assert_eq!(
        researcher.embedder.as_ref().map(|e| e["provider"].clone()),
        Some(serde_json::json!("hash"))
    );
}

/// crewai-tools' knowledge search tools in crew.py become the crewai-rs search tools with their
/// constructor arguments (not Python tools for the worker).
#[test]
fn crew_py_search_tools_are_read_as_crewai_rs_search_tools() {
    let crew_py = format!(
        "{HEADER}from crewai_tools import PDFSearchTool, CSVSearchTool\n\n@CrewBase\nclass MarketBrief:\n    @agent\n    def researcher(self) -> Agent:\n        return Agent(config=self.agents_config['researcher'], tools=[PDFSearchTool(pdf='manual.pdf'), CSVSearchTool(limit=3)])\n\n    @agent\n    def reporting_analyst(self) -> Agent:\n        return Agent(config=self.agents_config['reporting_analyst'])\n\n    @task\n    def research_task(self) -> Task:\n        return Task(config=self.tasks_config['research_task'])\n\n    @task\n    def reporting_task(self) -> Task:\n        return Task(config=self.tasks_config['reporting_task'])\n\n    @crew\n    def crew(self) -> Crew:\n        return Crew(agents=self.agents, tasks=self.tasks)\n"
    );
    let dir = variant(&crew_py, None);
    let project = Project::load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let tools = project.agents[0].spec.tools.as_ref().unwrap();
    let written: Vec<(&str, serde_json::Value)> = tools
        .iter()
        .map(|t| (t.name.as_str(), json!(t.args)))
        .collect();
    assert_eq!(
        written,
        [
            ("PDFSearchTool", json!({"pdf": "manual.pdf"})),
            ("CSVSearchTool", json!({"limit": 3})),
        ]
    );
    assert!(
        project.python_tools.is_empty(),
        "{:?}",
        project.python_tools
    );
    assert!(project.names_search_tools());
}

/// An agent's `planning_config=PlanningConfig(...)` in crew.py reaches its field, and the agent
/// plans with it.
#[test]
fn a_planning_config_in_crew_py_reaches_its_field() {
    let crew_py = format!(
        "{HEADER}from crewai.agent.planning_config import PlanningConfig\n\n@CrewBase\nclass MarketBrief:\n{}\n    @crew\n    def crew(self) -> Crew:\n        return Crew(agents=self.agents, tasks=self.tasks)\n",
        TWO_AGENTS.replace(
            "return Agent(config=self.agents_config['researcher'])",
            "return Agent(config=self.agents_config['researcher'], planning_config=PlanningConfig(reasoning_effort='high', max_replans=1))"
        )
    );
    let dir = variant(&crew_py, None);
    let project = Project::load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        project.agents[0].spec.planning_config,
        Some(json!({"reasoning_effort": "high", "max_replans": 1}))
    );
}
