//! Loader tests: every field, every error message, with its file and line.

use crewai_project::{
    ContextPlan, Layout, ProcessSpec, Project, ProjectError, SchemaRef, ToolRegistry,
};
use serde_json::json;

mod common;
use common::write;

fn project(files: &[(&str, &str)]) -> (tempfile::TempDir, Result<Project, ProjectError>) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), files);
    let loaded = Project::load(dir.path());
    (dir, loaded)
}

fn errors(files: &[(&str, &str)]) -> Vec<String> {
    match project(files).1 {
        Ok(_) => panic!("expected the project to be rejected"),
        Err(err) => texts(&err),
    }
}

const AGENTS: &str = "\
researcher:
  role: >
    {topic} Senior Data Researcher
  goal: Uncover developments in {topic}
  backstory: A seasoned researcher.
writer:
  role: Writer
  goal: Write clearly
  backstory: Writes reports.
";

const TASKS: &str = "\
research_task:
  description: Research {topic}
  expected_output: A list of 10 bullet points
  agent: researcher
report:
  description: Write the report
  expected_output: A markdown report
  agent: writer
  context: [research_task]
  output_file: report.md
";

fn ok(files: &[(&str, &str)]) -> (tempfile::TempDir, Project) {
    common::load(files)
}

/// The classic project with `tools` (YAML after `tools:`) added to its last agent, the writer.
fn writer_with_tools(tools: &str) -> (tempfile::TempDir, Project) {
    let agents = format!("{AGENTS}  tools:{tools}");
    ok(&[
        ("config/agents.yaml", &agents),
        ("config/tasks.yaml", TASKS),
    ])
}

/// The classic project's files with `crew` as its `config/crew.yaml`.
fn with_crew(crew: &str) -> [(&'static str, &str); 3] {
    [
        ("config/agents.yaml", AGENTS),
        ("config/tasks.yaml", TASKS),
        ("config/crew.yaml", crew),
    ]
}

/// The diagnostics of a rejected project, one text each.
fn texts(err: &ProjectError) -> Vec<String> {
    err.diagnostics().iter().map(ToString::to_string).collect()
}

fn inputs(pairs: &[(&str, &str)]) -> crewai_core::interpolate::Inputs {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect()
}

#[test]
fn loads_the_classic_layout_in_file_order() {
    let (_dir, p) = ok(&[("config/agents.yaml", AGENTS), ("config/tasks.yaml", TASKS)]);
    assert_eq!(p.layout, Layout::Classic);
    assert_eq!(
        p.agents.iter().map(|a| a.key.as_str()).collect::<Vec<_>>(),
        ["researcher", "writer"]
    );
    assert_eq!(
        p.tasks.iter().map(|t| t.name()).collect::<Vec<_>>(),
        ["research_task", "report"]
    );
    // Folded scalars keep their trailing newline, as PyYAML gives them.
    assert_eq!(
        p.agents[0].spec.role.as_deref(),
        Some("{topic} Senior Data Researcher\n")
    );
    assert_eq!(
        p.tasks[1].spec.context.as_deref(),
        Some(&["research_task".to_string()][..])
    );
    assert_eq!(p.required_inputs(), ["topic"]);
}

#[test]
fn finds_config_under_src_as_crewai_create_lays_it_out() {
    let (_dir, p) = ok(&[
        ("src/demo/config/agents.yaml", AGENTS),
        ("src/demo/config/tasks.yaml", TASKS),
    ]);
    assert!(p.config_dir.ends_with("src/demo/config"));
    assert_eq!(
        p.files.tasks.as_ref().unwrap().display,
        "src/demo/config/tasks.yaml"
    );
}

#[test]
fn a_task_naming_an_unknown_agent_is_reported_with_line_and_suggestion() {
    let tasks = TASKS.replace("agent: writer", "agent: writter");
    let errs = errors(&[
        ("config/agents.yaml", AGENTS),
        ("config/tasks.yaml", &tasks),
    ]);
    assert_eq!(
        errs,
        [
            "config/tasks.yaml:8: task 'report' names agent 'writter', which is not defined; did you mean 'writer'?"
        ]
    );
}

#[test]
fn unknown_fields_are_errors_with_the_nearest_field() {
    let agents = AGENTS.replace("  goal: Write clearly", "  gaol: Write clearly");
    let tasks = TASKS.replace("  output_file: report.md", "  output_fle: report.md");
    let errs = errors(&[
        ("config/agents.yaml", &agents),
        ("config/tasks.yaml", &tasks),
    ]);
    assert!(errs.contains(&"config/agents.yaml:8: agent 'writer' has an unknown field 'gaol'; did you mean 'goal'?".to_string()), "{errs:#?}");
    assert!(errs.contains(&"config/agents.yaml:6: agent 'writer' has no `goal`; every agent needs role, goal and backstory".to_string()), "{errs:#?}");
    assert!(errs.contains(&"config/tasks.yaml:10: task 'report' has an unknown field 'output_fle'; did you mean 'output_file'?".to_string()), "{errs:#?}");
}

#[test]
fn wrong_types_name_the_field_and_line() {
    let agents = format!("{AGENTS}  max_iter: lots\n  allow_delegation: maybe\n");
    let errs = errors(&[
        ("config/agents.yaml", &agents),
        ("config/tasks.yaml", TASKS),
    ]);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(errs[0].starts_with("config/agents.yaml:10: agent 'writer' field 'max_iter': invalid type: string \"lots\", expected a whole number"), "{errs:#?}");
    assert!(
        errs[1].starts_with(
            "config/agents.yaml:11: agent 'writer' field 'allow_delegation': invalid type"
        ),
        "{errs:#?}"
    );
}

#[test]
fn yaml_syntax_errors_have_file_and_line() {
    let errs = errors(&[
        ("config/agents.yaml", "a:\n  role: x\n  goal: y: z\n"),
        ("config/tasks.yaml", TASKS),
    ]);
    assert!(
        errs[0].starts_with("config/agents.yaml:3: invalid YAML: mapping values are not allowed"),
        "{errs:#?}"
    );
    assert!(errs[0].contains("must be quoted"), "{errs:#?}");
}

#[test]
fn context_must_name_earlier_existing_tasks() {
    let tasks = "\
first:
  description: d
  expected_output: e
  agent: writer
  context: [secnd, first, second]
second:
  description: d
  expected_output: e
  agent: writer
";
    let errs = errors(&[("config/agents.yaml", AGENTS), ("config/tasks.yaml", tasks)]);
    assert_eq!(
        errs,
        [
            "config/tasks.yaml:5: task 'first' lists 'secnd' in its context, which is not a task; did you mean 'second'?",
            "config/tasks.yaml:5: task 'first' lists itself in its context",
            "config/tasks.yaml:5: task 'first' lists 'second' in its context, which runs after it; context may only name earlier tasks; move it later in the file",
        ]
    );
}

#[test]
fn a_missing_placeholder_is_an_error_naming_it_and_where() {
    let (_dir, p) = ok(&[("config/agents.yaml", AGENTS), ("config/tasks.yaml", TASKS)]);
    let err = p
        .plan(&inputs(&[("topc", "AI")]), &ToolRegistry::new())
        .unwrap_err();
    let errs = texts(&err);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert_eq!(
        errs[0],
        "config/agents.yaml:2: agent 'researcher' field 'role' uses {topic}, which no input provides; did you mean 'topc'? (inputs given: topc)"
    );
    assert!(
        errs[2].starts_with(
            "config/tasks.yaml:2: task 'research_task' field 'description' uses {topic}"
        ),
        "{errs:#?}"
    );
}

#[test]
fn the_plan_renders_prompts_agents_tools_and_context() {
    let crew = "inputs:\n  topic: AI agents\n";
    let (_dir, p) = ok(&with_crew(crew));
    let plan = p.plan(&Default::default(), &ToolRegistry::new()).unwrap();
    assert_eq!(plan.process, "sequential");
    assert_eq!(plan.agents[0].role, "AI agents Senior Data Researcher\n");
    assert!(
        plan.agents[0]
            .system_prompt
            .starts_with("You are AI agents Senior Data Researcher\n.")
    );
    assert!(
        plan.tasks[0]
            .prompt
            .contains("Current Task: Research AI agents"),
        "{}",
        plan.tasks[0].prompt
    );
    assert_eq!(plan.tasks[0].context, ContextPlan::AllPrevious);
    assert_eq!(
        plan.tasks[1].context,
        ContextPlan::Tasks(vec!["research_task".into()])
    );
    assert_eq!(plan.tasks[1].output_file.as_deref(), Some("report.md"));
    let shown = plan.to_string();
    assert!(shown.contains("1. research_task"), "{shown}");
    assert!(shown.contains("context: research_task"), "{shown}");
    // Inputs given by the caller win over the defaults.
    let plan = p
        .plan(&inputs(&[("topic", "Rust")]), &ToolRegistry::new())
        .unwrap();
    assert!(plan.tasks[0].prompt.contains("Research Rust"));
}

#[test]
fn every_agent_field_is_read() {
    let agents = "\
full:
  role: R
  goal: G
  backstory: B
  llm:
    model: openai/gpt-4o-mini
    temperature: 0.2
  function_calling_llm: openai/gpt-4o-mini
  tools: [file_read, {name: http_get}]
  max_iter: 5
  max_rpm: 10
  max_execution_time: 30
  max_retry_limit: 1
  max_tokens: 500
  allow_delegation: true
  verbose: true
  cache: false
  use_system_prompt: false
  system_template: 'S {{ .System }}'
  prompt_template: 'P {{ .Prompt }}'
  response_template: 'R {{ .Response }}'
  respect_context_window: false
  inject_date: true
  date_format: '%d/%m/%Y'
  guardrail: Answer in English
  guardrail_max_retries: 2
  tool_failure_policy: raise
  allow_code_execution: false
  multimodal: false
";
    let tasks = "t:\n  description: d\n  expected_output: e\n  agent: full\n";
    let (_dir, p) = ok(&[("config/agents.yaml", agents), ("config/tasks.yaml", tasks)]);
    let s = &p.agents[0].spec;
    assert_eq!(s.llm.as_ref().unwrap().model, "openai/gpt-4o-mini");
    assert_eq!(s.llm.as_ref().unwrap().temperature, Some(0.2));
    assert_eq!(
        s.function_calling_llm.as_ref().unwrap().model,
        "openai/gpt-4o-mini"
    );
    assert_eq!(
        s.tools
            .as_ref()
            .unwrap()
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["file_read", "http_get"]
    );
    assert_eq!(
        (
            s.max_iter,
            s.max_rpm,
            s.max_execution_time.map(|t| t.as_secs_f64()),
            s.max_retry_limit,
            s.max_tokens
        ),
        (Some(5), Some(10), Some(30.0), Some(1), Some(500))
    );
    assert_eq!(
        (s.allow_delegation, s.verbose, s.cache, s.use_system_prompt),
        (Some(true), Some(true), Some(false), Some(false))
    );
    assert_eq!(s.system_template.as_deref(), Some("S {{ .System }}"));
    assert_eq!(s.prompt_template.as_deref(), Some("P {{ .Prompt }}"));
    assert_eq!(s.response_template.as_deref(), Some("R {{ .Response }}"));
    assert_eq!(
        (s.respect_context_window, s.inject_date),
        (Some(false), Some(true))
    );
    assert_eq!(s.date_format.as_deref(), Some("%d/%m/%Y"));
    assert_eq!(
        s.guardrail,
        Some(crewai_project::GuardrailSpec::Rule(
            "Answer in English".into()
        ))
    );
    assert_eq!(s.guardrail_max_retries, Some(2));
    assert_eq!(
        s.tool_failure_policy,
        Some(crewai_project::ToolFailurePolicySpec::Raise)
    );
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn every_task_field_is_read() {
    let tasks = "\
a:
  name: first
  description: d
  expected_output: e
  agent: writer
  async_execution: true
  tools: [file_read]
  context: []
b:
  description: d
  expected_output: e
  agent: writer
  context:
  output_json:
    type: object
    properties: {score: {type: integer}}
  output_file: out/{topic}.md
  create_directory: false
  human_input: true
  markdown: true
  guardrails: [Be short, Be kind]
  max_retries: 4
  tool_failure_policy: ignore
c:
  description: d
  expected_output: e
  agent: writer
  output_pydantic: schemas/report.json
  guardrail: Cite sources
  type: Task
";
    let (_dir, p) = ok(&[
        ("config/agents.yaml", AGENTS),
        ("config/tasks.yaml", tasks),
        (
            "schemas/report.json",
            "{\"type\": \"object\", \"properties\": {\"title\": {\"type\": \"string\"}}}",
        ),
    ]);
    let [a, b, c] = &p.tasks[..] else { panic!() };
    assert_eq!(a.name(), "first");
    assert_eq!(a.spec.async_execution, Some(true));
    assert_eq!(a.spec.context.as_deref(), Some(&[][..]));
    assert_eq!(
        b.spec.context.as_deref(),
        Some(&[][..]),
        "an empty `context:` means none"
    );
    assert!(matches!(b.spec.output_json, Some(SchemaRef::Inline(_))));
    assert_eq!(
        p.output_schema("b").unwrap().schema["properties"]["score"]["type"],
        "integer"
    );
    assert_eq!(
        (b.spec.create_directory, b.spec.human_input, b.spec.markdown),
        (Some(false), Some(true), Some(true))
    );
    assert_eq!(b.spec.guardrails.as_ref().unwrap().to_vec().len(), 2);
    assert_eq!(b.spec.guardrail_max_retries, Some(4));
    assert_eq!(
        p.output_schema("c").unwrap().kind,
        crewai_project::OutputKind::Pydantic
    );
    assert_eq!(
        p.output_schema("c").unwrap().schema["properties"]["title"]["type"],
        "string"
    );
    assert_eq!(
        c.spec.guardrail,
        Some(crewai_project::GuardrailSpec::Rule("Cite sources".into()))
    );
    assert_eq!(p.required_inputs(), ["topic"]);
}

#[test]
fn output_rules_are_checked() {
    let tasks = "\
a:
  description: d
  expected_output: e
  agent: writer
  output_json: {type: object}
  output_pydantic: {type: object}
  output_file: ../escape.md
b:
  description: d
  expected_output: e
  agent: writer
  output_pydantic: ReportModel
";
    let errs = errors(&[("config/agents.yaml", AGENTS), ("config/tasks.yaml", tasks)]);
    assert_eq!(
        errs,
        [
            "config/tasks.yaml:6: task 'a' sets output_json and output_pydantic; only one output type can be set",
            "config/tasks.yaml:7: task 'a' field 'output_file' (../escape.md) may not contain '..'",
            "config/tasks.yaml:12: task 'b' field 'output_pydantic': no schema file 'ReportModel'; a Python class name cannot be read from a project file; give an inline JSON schema or the path of a .json schema file",
        ]
    );
}

#[test]
fn unsupported_fields_that_change_behaviour_are_errors_others_warnings() {
    let agents =
        format!("{AGENTS}  knowledge_storage: {{provider: qdrant}}\n  executor_class: Custom\n");
    let errs = errors(&[
        ("config/agents.yaml", &agents),
        ("config/tasks.yaml", TASKS),
    ]);
    assert_eq!(
        errs,
        [
            "config/agents.yaml:10: agent 'writer' field 'knowledge_storage' is not supported yet: custom knowledge storage is not supported yet; knowledge is stored in the project's .crewai/memory.db; remove `knowledge_storage` to run without it"
        ]
    );
    let agents = format!("{AGENTS}  executor_class: Custom\n");
    let (_dir, p) = ok(&[
        ("config/agents.yaml", &agents),
        ("config/tasks.yaml", TASKS),
    ]);
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].to_string().starts_with(
        "config/agents.yaml:10: agent 'writer' field 'executor_class' is not supported yet"
    ));
}

#[test]
fn crew_yaml_sets_the_crew_fields() {
    let crew = "\
name: Research crew
process: hierarchical
verbose: true
manager_llm: openai/gpt-4o
max_rpm: 30
memory: false
cache: true
planning: false
output_log_file: logs/run.txt
stream: false
inputs: {topic: AI}
";
    let (_dir, p) = ok(&with_crew(crew));
    let c = &p.crew;
    assert_eq!(c.name.as_deref(), Some("Research crew"));
    assert_eq!(c.process, Some(ProcessSpec::Hierarchical));
    assert_eq!(c.manager_llm.as_ref().unwrap().model, "openai/gpt-4o");
    assert_eq!(
        (c.verbose, c.max_rpm, c.cache, c.memory),
        (Some(true), Some(30), Some(true), Some(false))
    );
    assert_eq!(
        c.output_log_file,
        Some(crewai_project::LogFileSpec::Path("logs/run.txt".into()))
    );
    assert_eq!(p.default_inputs()["topic"], "AI");
}

#[test]
fn crew_yaml_errors_point_at_the_crew_file() {
    let crew = "process: hierarchcal\nmanagr_llm: x\n";
    let errs = errors(&with_crew(crew));
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(
        errs[0]
            .starts_with("config/crew.yaml:1: crew field 'process': unknown variant `hierarchcal`"),
        "{errs:#?}"
    );
    assert_eq!(
        errs[1],
        "config/crew.yaml:2: crew has an unknown field 'managr_llm'; did you mean 'manager_llm'?"
    );
}

#[test]
fn hierarchical_crews_need_a_manager_and_a_manager_has_no_tools() {
    let errs = errors(&[
        ("config/agents.yaml", AGENTS),
        ("config/tasks.yaml", TASKS),
        ("config/crew.yaml", "process: hierarchical\n"),
    ]);
    assert_eq!(
        errs,
        [
            "config/crew.yaml:1: a hierarchical crew needs `manager_llm` or `manager_agent`; add `manager_llm: openai/gpt-4o` (or the key of a manager in agents.yaml as `manager_agent:`)"
        ]
    );
    let agents = format!(
        "{AGENTS}boss:\n  role: Boss\n  goal: Lead\n  backstory: Leads.\n  tools: [file_read]\n"
    );
    let errs = errors(&[
        ("config/agents.yaml", &agents),
        ("config/tasks.yaml", TASKS),
        (
            "config/crew.yaml",
            "process: hierarchical\nmanager_agent: bos\n",
        ),
    ]);
    assert_eq!(
        errs,
        ["config/crew.yaml:2: manager_agent 'bos' is not defined; did you mean 'boss'?"]
    );
    let errs = errors(&[
        ("config/agents.yaml", &agents),
        ("config/tasks.yaml", TASKS),
        (
            "config/crew.yaml",
            "process: hierarchical\nmanager_agent: boss\n",
        ),
    ]);
    assert_eq!(
        errs,
        [
            "config/agents.yaml:14: agent 'boss' manages the crew and may not have tools; a manager only delegates; give the tools to its coworkers"
        ]
    );
}

#[test]
fn a_hierarchical_manager_is_not_a_member_and_tasks_may_skip_agents() {
    let agents = format!("{AGENTS}boss:\n  role: Boss\n  goal: Lead\n  backstory: Leads.\n");
    let tasks = "t:\n  description: d\n  expected_output: e\n";
    let (_dir, p) = ok(&[
        ("config/agents.yaml", &agents),
        ("config/tasks.yaml", tasks),
        (
            "config/crew.yaml",
            "process: hierarchical\nmanager_agent: boss\n",
        ),
    ]);
    assert_eq!(
        p.members().map(|a| a.key.as_str()).collect::<Vec<_>>(),
        ["researcher", "writer"]
    );
    assert_eq!(p.manager_key(), Some("boss"));
}

#[test]
fn sequential_tasks_need_an_agent() {
    let tasks = "t:\n  description: d\n  expected_output: e\n";
    let errs = errors(&[("config/agents.yaml", AGENTS), ("config/tasks.yaml", tasks)]);
    assert_eq!(
        errs,
        [
            "config/tasks.yaml:1: task 't' has no agent; in a sequential crew every task needs `agent:`; add `agent: <name>` (one of: researcher, writer)"
        ]
    );
}

#[test]
fn async_rules_follow_crewai() {
    let tasks = "\
a:
  description: d
  expected_output: e
  agent: writer
  async_execution: true
b:
  description: d
  expected_output: e
  agent: writer
  async_execution: true
  context: [a]
";
    let errs = errors(&[("config/agents.yaml", AGENTS), ("config/tasks.yaml", tasks)]);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(
        errs[0].starts_with("config/tasks.yaml:10: the crew ends with 2 asynchronous tasks"),
        "{errs:#?}"
    );
    assert_eq!(
        errs[1],
        "config/tasks.yaml:11: asynchronous task 'b' cannot take 'a' as context: that task is asynchronous too and still running"
    );
}

#[test]
fn crew_yaml_overlays_merge_onto_entries_and_report_unknown_names() {
    let crew = "\
agents:
  researcher:
    tools: [file_read]
    llm: openai/gpt-4o
tasks:
  report:
    agent: researcher
    output_file: final.md
";
    let (_dir, p) = ok(&with_crew(crew));
    assert_eq!(
        p.agent("researcher")
            .unwrap()
            .spec
            .llm
            .as_ref()
            .unwrap()
            .model,
        "openai/gpt-4o"
    );
    assert_eq!(
        p.task("report").unwrap().spec.agent.as_deref(),
        Some("researcher")
    );
    assert_eq!(
        p.task("report").unwrap().spec.output_file.as_deref(),
        Some("final.md")
    );
    // The origin of an overlaid field is the overlay's line.
    assert_eq!(
        p.task("report")
            .unwrap()
            .spec
            .origin("agent")
            .unwrap()
            .line(),
        Some(7)
    );

    let crew = "agents:\n  reseacher:\n    verbose: true\ntasks:\n  report:\n    agent: nobody\n";
    let errs = errors(&with_crew(crew));
    assert_eq!(
        errs,
        [
            "config/crew.yaml:2: `agents:` names agent 'reseacher', which agents.yaml does not define; did you mean 'researcher'?",
            "config/crew.yaml:6: task 'report' names agent 'nobody', which is not defined; defined agents: researcher, writer",
        ]
    );
}

#[test]
fn unknown_tools_are_reported_with_the_nearest_names() {
    let (_dir, p) = writer_with_tools("\n    - file_read\n    - file_raed\n");
    let mut registry = ToolRegistry::new();
    registry.register(std::sync::Arc::new(Named("file_read")));
    let err = p.plan(&inputs(&[("topic", "AI")]), &registry).unwrap_err();
    let errs = texts(&err);
    assert_eq!(
        errs,
        [
            "config/agents.yaml:12: agent 'writer' names tool 'file_raed', which no one provides; did you mean 'file_read'?"
        ]
    );
    // CrewAI class names find our tools.
    let (_dir, p) = writer_with_tools(" [FileReadTool]\n");
    let plan = p.plan(&inputs(&[("topic", "AI")]), &registry).unwrap();
    assert_eq!(plan.agents[1].tools, ["file_read"]);
    assert_eq!(
        plan.tasks[1].tools,
        ["file_read"],
        "a task without tools uses its agent's"
    );
}

struct Named(&'static str);

#[crewai_tools::async_trait]
impl crewai_tools::Tool for Named {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "a test tool"
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object", "properties": {}})
    }
    async fn run(
        &self,
        _: serde_json::Value,
        _: &crewai_tools::ToolContext,
    ) -> Result<crewai_tools::ToolOutput, crewai_tools::ToolError> {
        Ok("ok".into())
    }
}

#[test]
fn loads_the_json_layout_with_comments_settings_and_trailing_commas() {
    let crew = r#"{
  // the crew
  "name": "json crew",
  "agents": ["researcher"],
  "tasks": [
    {
      "name": "research",
      "description": "Research {topic}",
      "expected_output": "notes",
      "agent": "researcher", /* trailing comma next */
    },
  ],
  "process": "sequential",
  "verbose": true,
  "memory": false,
  "inputs": {"topic": "AI"},
}
"#;
    let agent = r#"{
  "role": "Researcher",
  "goal": "Find things",
  "backstory": "Curious",
  "llm": "openai/gpt-4o-mini",
  "tools": [],
  "settings": {
    "verbose": false,
    "allow_delegation": false,
    "max_iter": 7,
  }
}"#;
    let (_dir, p) = ok(&[("crew.jsonc", crew), ("agents/researcher.jsonc", agent)]);
    assert_eq!(p.layout, Layout::Json);
    assert_eq!(p.name(), "json crew");
    assert_eq!(p.agents[0].spec.max_iter, Some(7));
    assert_eq!(p.tasks[0].name(), "research");
    assert!(p.plan(&Default::default(), &ToolRegistry::new()).is_ok());
}

#[test]
fn json_layout_errors_have_file_and_line() {
    let crew = "{\n  \"agents\": [\"reseacher\"],\n  \"tasks\": [\n    {\"name\": \"t\", \"description\": \"d\", \"expected_output\": \"e\",\n     \"agnt\": \"x\"}\n  ]\n}\n";
    let agent = "{\"role\": \"R\", \"goal\": \"G\", \"backstory\": \"B\",\n \"settings\": {\"max_itr\": 3}}";
    let errs = errors(&[("crew.jsonc", crew), ("agents/researcher.jsonc", agent)]);
    assert_eq!(
        errs,
        [
            "crew.jsonc:2: agent 'reseacher' has no file agents/reseacher.jsonc; did you mean 'researcher'?",
            "crew.jsonc:5: task 't' has an unknown field 'agnt'; did you mean 'agent'?",
            "crew.jsonc:4: task 't' has no agent; in a sequential crew every task needs `agent:`; define an agent and name it with `agent:`",
        ]
    );
}

#[test]
fn a_folder_without_a_project_says_what_it_expected() {
    let dir = tempfile::tempdir().unwrap();
    let err = Project::load(dir.path()).unwrap_err();
    assert!(
        err.to_string()
            .contains("expected config/agents.yaml and config/tasks.yaml"),
        "{err}"
    );
}

#[test]
fn crewai_tool_class_names_resolve_with_their_constructor_arguments() {
    let (_dir, p) = writer_with_tools(
        "\n    - FileReadTool\n    - FileWriterTool\n    - directory_read_tool\n    - {name: SerperDevTool, n_results: 5, country: us, locale: en}\n    - {name: ScrapeWebsiteTool, website_url: 'https://example.com/about'}\n    - {name: FileReadTool, file_path: notes.md}\n    - {name: DirectoryReadTool, directory: docs}\n",
    );
    let registry = ToolRegistry::with_builtins(&p.root);
    let resolved = p.resolve_tools(&registry).unwrap();
    let writer = &resolved.agents["writer"];
    let names: Vec<&str> = writer.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "file_read",
            "file_write",
            "directory_read",
            "search_the_internet_with_serper",
            "read_website_content",
            "file_read",
            "directory_read"
        ]
    );
    assert!(
        writer[4]
            .description()
            .contains("https://example.com/about")
    );
    assert_eq!(writer[4].definition().parameters["properties"], json!({}));
    assert!(writer[5].description().contains("notes.md"));
    assert!(writer[6].description().contains("docs"));
}

#[test]
fn knowledge_tools_and_missing_tools_fail_before_the_crew_starts() {
    // A search tool embeds with the crew's embedder, so the crew names one.
    let agents = format!(
        "{AGENTS}  tools:\n    - GithubSearchTool\n    - {{name: website_search_tool, website: 'https://x', config: {{llm: {{}}}}}}\n    - TavilySearchTool\n    - {{name: ScrapeWebsiteTool, website_url: 'ftp://x', headers: {{}}}}\n"
    );
    let (_dir, p) = ok(&[
        ("config/agents.yaml", &agents),
        ("config/tasks.yaml", TASKS),
        (
            "config/crew.yaml",
            "embedder: {provider: ollama, config: {model: nomic-embed-text}}\n",
        ),
    ]);
    let registry = ToolRegistry::with_builtins(&p.root);
    let err = p.plan(&inputs(&[("topic", "AI")]), &registry).unwrap_err();
    let errs = texts(&err);
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert!(
        errs[0].starts_with("config/agents.yaml:11: agent 'writer' names tool 'GithubSearchTool': GithubSearchTool is recognised (a crewai-tools knowledge search tool) but crewai-rs does not provide it yet"),
        "{errs:#?}"
    );
    assert!(
        errs[1].starts_with("config/agents.yaml:12: agent 'writer': tool 'website_search_tool' could not be created: a search tool's own `config`"),
        "{errs:#?}"
    );
    assert!(
        errs[2].starts_with("config/agents.yaml:13: agent 'writer' names tool 'TavilySearchTool', which no one provides; TavilySearchTool is a crewai-tools tool that crewai-rs does not provide yet; available: ScrapeWebsiteTool, SerperDevTool, directory_read, file_read, file_write, http_get"),
        "{errs:#?}"
    );
    assert_eq!(
        errs[3],
        "config/agents.yaml:14: agent 'writer': tool 'ScrapeWebsiteTool' could not be created: bad constructor arguments: unknown field `headers`, expected `website_url` or `allow_private_network`"
    );
    // A build (what `crewai run` does) stops at the same problems, before any model is called.
    let options = crewai_project::BuildOptions::new(registry);
    let err = p.build(&inputs(&[("topic", "AI")]), &options).unwrap_err();
    assert_eq!(err.diagnostics().len(), 4, "{err}");
}

#[test]
fn tool_mappings_take_usage_options() {
    let (_dir, p) = writer_with_tools(
        "\n    - {name: file_read, result_as_answer: true, max_usage_count: 2}\n    - {name: file_write, path: x}\n",
    );
    let registry = ToolRegistry::with_builtins(&p.root);
    let err = p.resolve_tools(&registry).unwrap_err();
    let errs = texts(&err);
    assert_eq!(
        errs,
        [
            "config/agents.yaml:12: agent 'writer': tool 'file_write' could not be created: takes no constructor arguments (given: path)"
        ]
    );
    let (_dir, p) = writer_with_tools(
        "\n    - {name: file_read, result_as_answer: true, max_usage_count: 2}\n",
    );
    let resolved = p.resolve_tools(&registry).unwrap();
    let tool = &resolved.agents["writer"][0];
    assert!(tool.result_as_answer());
    assert_eq!(tool.max_usage_count(), Some(2));
}

/// Text fields come out exactly as PyYAML reads them (fixtures made by tests/fixtures/pyyaml_text.py).
/// Each case is the whole tasks.yaml; the agent comes from a crew.yaml overlay so the case's
/// indentation and line endings stay exactly as PyYAML saw them.
#[test]
fn text_fields_match_pyyaml() {
    let fixtures: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(include_str!("fixtures/pyyaml_text.json")).unwrap();
    assert!(fixtures.len() >= 26, "the fixture lost cases");
    for (name, case) in fixtures {
        let tasks = case["yaml"].as_str().unwrap();
        let (_dir, p) = ok(&[
            ("config/agents.yaml", AGENTS),
            ("config/tasks.yaml", tasks),
            ("config/crew.yaml", "tasks:\n  t:\n    agent: writer\n"),
        ]);
        let spec = &p.tasks[0].spec;
        assert_eq!(
            spec.description.as_deref(),
            case["description"].as_str(),
            "case {name}"
        );
        assert_eq!(
            spec.expected_output.as_deref(),
            case["expected_output"].as_str(),
            "case {name}"
        );
    }
}

/// CrewAI looks agents and tasks up by their YAML keys as written, whatever their case.
#[test]
fn keys_of_any_case_work_everywhere() {
    let agents = "Requirements_Manager:\n  role: Manager of {Project_Name}\n  goal: g\n  backstory: b\nQA:\n  role: QA\n  goal: g\n  backstory: b\n";
    let tasks = "Gather_Requirements:\n  description: Gather them for {Project_Name}\n  expected_output: A list\n  agent: Requirements_Manager\nReviewTask:\n  description: Review\n  expected_output: Notes\n  context: [Gather_Requirements]\n";
    let crew =
        "agents:\n  QA:\n    allow_delegation: false\ntasks:\n  ReviewTask:\n    agent: QA\n";
    let (_dir, p) = ok(&[
        ("config/agents.yaml", agents),
        ("config/tasks.yaml", tasks),
        ("config/crew.yaml", crew),
    ]);
    let plan = p
        .plan(&inputs(&[("Project_Name", "Atlas")]), &ToolRegistry::new())
        .unwrap();
    assert_eq!(plan.agents[0].key, "Requirements_Manager");
    assert_eq!(plan.agents[0].role, "Manager of Atlas");
    assert_eq!(plan.tasks[0].name, "Gather_Requirements");
    assert_eq!(plan.tasks[1].agent.as_deref(), Some("QA"));
    assert_eq!(
        plan.tasks[1].context,
        ContextPlan::Tasks(vec!["Gather_Requirements".into()])
    );
    // A key differing only by case is a different key, with a suggestion.
    let crew = "tasks:\n  reviewtask:\n    agent: QA\n";
    let errs = errors(&[
        ("config/agents.yaml", agents),
        ("config/tasks.yaml", tasks),
        ("config/crew.yaml", crew),
    ]);
    assert_eq!(
        errs,
        [
            "config/crew.yaml:2: `tasks:` names task 'reviewtask', which tasks.yaml does not define; did you mean 'ReviewTask'?",
            "config/tasks.yaml:5: task 'ReviewTask' has no agent; in a sequential crew every task needs `agent:`; add `agent: <name>` (one of: Requirements_Manager, QA)",
        ]
    );
}

#[test]
fn other_yaml_files_in_config_are_ignored_and_unused_agents_are_allowed() {
    let (_dir, p) = ok(&[
        ("config/agents.yaml", AGENTS),
        (
            "config/tasks.yaml",
            "only:\n  description: d\n  expected_output: e\n  agent: writer\n",
        ),
        ("config/crew.yaml", "process: sequential\n"),
        // Files CrewAI projects keep beside the two it reads; not ours to parse.
        ("config/llm.yaml", "not: [valid: yaml"),
        ("config/knowledge.yml", "sources:\n  - a.pdf\n"),
        ("config/notes.md", "# notes"),
    ]);
    assert_eq!(
        p.agents.len(),
        2,
        "researcher stays, though no task uses it"
    );
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let plan = p
        .plan(&inputs(&[("topic", "AI")]), &ToolRegistry::new())
        .unwrap();
    assert_eq!(plan.tasks.len(), 1);
    assert_eq!(plan.agents.len(), 2);
}

/// Everything a crew.py typically wires, said in crew.yaml: the overlay wins over the YAML entry.
#[test]
fn overlays_carry_what_crew_py_wires() {
    let crew = "\
process: sequential
agents:
  researcher:
    tools:
      - {name: SerperDevTool, n_results: 3}
      - {name: ScrapeWebsiteTool, website_url: 'https://example.com/'}
    llm: openai/gpt-4o
    allow_delegation: true
  writer:
    max_iter: 4
tasks:
  report:
    agent: researcher
    context: []
    output_pydantic: schemas/report.json
";
    let (_dir, p) = ok(&[
        ("config/agents.yaml", AGENTS),
        ("config/tasks.yaml", TASKS),
        ("config/crew.yaml", crew),
        (
            "schemas/report.json",
            r#"{"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}"#,
        ),
    ]);
    let registry = ToolRegistry::with_builtins(&p.root);
    let plan = p.plan(&inputs(&[("topic", "AI")]), &registry).unwrap();
    let researcher = &plan.agents[0];
    assert_eq!(researcher.llm.as_deref(), Some("openai/gpt-4o"));
    assert!(researcher.allow_delegation);
    assert_eq!(
        researcher.tool_labels,
        [
            "search_the_internet_with_serper (SerperDevTool, n_results=3)",
            "read_website_content (ScrapeWebsiteTool, website_url=https://example.com/)"
        ]
    );
    assert_eq!(p.agent("writer").unwrap().spec.max_iter, Some(4));
    let report = &plan.tasks[1];
    assert_eq!(report.agent.as_deref(), Some("researcher"));
    assert_eq!(report.context, ContextPlan::Tasks(vec![]));
    assert_eq!(report.output, Some("pydantic"));
    // The task keeps its own output_file from tasks.yaml; the overlay only adds.
    assert_eq!(report.output_file.as_deref(), Some("report.md"));
    assert_eq!(
        report.tools,
        [
            "search_the_internet_with_serper",
            "read_website_content",
            "delegate_work_to_coworker",
            "ask_question_to_coworker"
        ]
    );

    // Overlay problems point at crew.yaml lines.
    let crew = "agents:\n  researcher:\n    max_iter: many\n    tool: [file_read]\ntasks:\n  report:\n    contxt: []\n";
    let errs = errors(&with_crew(crew));
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(
        errs[0].starts_with("config/crew.yaml:3: agent 'researcher' field 'max_iter': "),
        "{errs:#?}"
    );
    assert_eq!(
        errs[1],
        "config/crew.yaml:4: agent 'researcher' has an unknown field 'tool'; did you mean 'tools'?"
    );
    assert_eq!(
        errs[2],
        "config/crew.yaml:7: task 'report' has an unknown field 'contxt'; did you mean 'context'?"
    );
}

/// `code_execution_mode` becomes the arguments the registry's `CodeInterpreterTool` is made
/// with: `safe` none, `bubblewrap` `backend: bubblewrap`, `unsafe` `unsafe_mode: true`.
#[test]
fn code_execution_modes_become_the_code_tools_arguments() {
    use std::sync::{Arc, Mutex};
    let made: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let mut registry = ToolRegistry::new();
    let seen = made.clone();
    registry.register_factory(
        "CodeInterpreterTool",
        Arc::new(move |args| {
            if let Ok(mut seen) = seen.lock() {
                seen.push(serde_json::Value::Object(args.clone()));
            }
            Ok(crewai_tools::ToolHandle::new(Arc::new(Named(
                "CodeInterpreterTool",
            ))))
        }),
    );
    for (mode, expected) in [
        ("", json!({})),
        ("\n  code_execution_mode: safe", json!({})),
        (
            "\n  code_execution_mode: bubblewrap",
            json!({"backend": "bubblewrap"}),
        ),
        (
            "\n  code_execution_mode: unsafe",
            json!({"unsafe_mode": true}),
        ),
    ] {
        let agents = format!("{AGENTS}  allow_code_execution: true{mode}\n");
        let (_dir, p) = ok(&[
            ("config/agents.yaml", &agents),
            ("config/tasks.yaml", TASKS),
        ]);
        p.resolve_tools(&registry).unwrap();
        let last = made.lock().unwrap().pop();
        assert_eq!(last, Some(expected), "{mode}");
    }
    let agents = format!("{AGENTS}  allow_code_execution: true\n  code_execution_mode: docker\n");
    let (_dir, p) = ok(&[
        ("config/agents.yaml", &agents),
        ("config/tasks.yaml", TASKS),
    ]);
    let err = p.resolve_tools(&registry).unwrap_err();
    assert!(
        texts(&err)[0].contains("`code_execution_mode` is 'docker'; it must be `safe`"),
        "{:?}",
        texts(&err)
    );
}
