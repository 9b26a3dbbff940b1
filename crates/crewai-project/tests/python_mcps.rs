//! MCP servers written in crew.py: `Agent(mcps=[...])` in CrewAI's forms, and `@CrewBase`'s
//! `mcp_server_params` behind `tools=self.get_mcp_tools(...)`, read statically into the same
//! `mcps` the YAML takes, and run end to end against a server written with the official Python
//! SDK.

use crewai_project::{BuildOptions, Project, ToolRegistry};
use crewai_testkit::prereq::{Prerequisite, Suite};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::{Value, json};

mod common;
use common::write;

const SDK_SERVER: &str = include_str!("../../crewai-mcp/tests/fixtures/sdk_server.py");

fn python_mcp() -> Prerequisite {
    Prerequisite::program(
        "python3 with the MCP Python SDK",
        "python3",
        &["-c", "import mcp"],
        "python3 -m pip install mcp",
    )
}

const HEADER: &str = "import os\nfrom crewai import Agent, Crew, Task\nfrom crewai.mcp import MCPServerHTTP, MCPServerSSE, MCPServerStdio\nfrom crewai.mcp.filters import create_static_tool_filter\nfrom crewai.project import CrewBase, agent, crew, task\nfrom mcp import StdioServerParameters\n";

/// A classic project whose crew.py class body is `class_body` (the `clerk` agent's method
/// included); the clerk's model is at `base_url`.
fn classic(class_body: &str, base_url: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
    let crew_py = format!(
        "{HEADER}\n@CrewBase\nclass Desk:\n{class_body}\n    @task\n    def sum(self) -> Task:\n        return Task(config=self.tasks_config['sum'])\n\n    @crew\n    def crew(self) -> Crew:\n        return Crew(agents=self.agents, tasks=self.tasks)\n"
    );
    let agents = format!(
        "clerk:\n  role: Clerk\n  goal: Add numbers\n  backstory: Uses tools.\n  llm: {{model: openai/gpt-4o-mini, api_key: k, base_url: '{base_url}'}}\n"
    );
    write(
        dir.path(),
        &[
            (
                "pyproject.toml",
                "[project]\nname = \"desk\"\nversion = \"0.1.0\"\n\n[tool.crewai]\ntype = \"crew\"\n",
            ),
            ("src/desk/__init__.py", ""),
            ("src/desk/crew.py", &crew_py),
            ("src/desk/config/agents.yaml", &agents),
            (
                "src/desk/config/tasks.yaml",
                "sum:\n  description: Add 2 and 40\n  expected_output: The sum\n  agent: clerk\n",
            ),
            ("server.py", SDK_SERVER),
        ],
    );
    dir
}

fn agent_method(arguments: &str) -> String {
    format!(
        "    @agent\n    def clerk(self) -> Agent:\n        return Agent(config=self.agents_config['clerk'], {arguments})\n"
    )
}

fn mcps_of(project: &Project) -> Value {
    project.agents[0].spec.mcps.clone().unwrap_or(Value::Null)
}

fn agent_mcps_in_crewais_forms_become_the_agents_mcps() {
    let body = agent_method(
        "mcps=[\n            'https://mcp.example.com/mcp#search',\n            MCPServerStdio(command='python3', args=['server.py'], env={'TOKEN': 'abc'}, tool_filter=create_static_tool_filter(allowed_tool_names=['add']), cache_tools_list=True),\n            MCPServerHTTP(url='https://api.example.com/mcp', headers={'Authorization': 'Bearer t'}, streamable=True, tool_filter=['lookup']),\n            MCPServerSSE(url='http://127.0.0.1:8000/sse'),\n        ]",
    );
    let dir = classic(&body, "http://127.0.0.1:9/v1");
    let project = Project::load(dir.path()).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        mcps_of(&project),
        json!([
            "https://mcp.example.com/mcp#search",
            {"command": "python3", "args": ["server.py"], "env": {"TOKEN": "abc"}, "tool_filter": ["add"], "cache_tools_list": true},
            {"url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer t"}, "streamable": true, "tool_filter": ["lookup"]},
            {"url": "http://127.0.0.1:8000/sse", "transport": "sse"},
        ])
    );
    let origin = project.agents[0]
        .spec
        .origin("mcps")
        .unwrap_or_else(|| panic!("mcps has no origin"));
    assert_eq!(origin.source.display, "src/desk/crew.py");
    assert_eq!(origin.line(), Some(12));
}

fn get_mcp_tools_reads_the_classs_mcp_server_params() {
    let body = format!(
        "    mcp_server_params = [StdioServerParameters(command='python3', args=['server.py'], env={{'MODE': 'test'}})]\n    mcp_connect_timeout = 45\n\n{}",
        agent_method("tools=self.get_mcp_tools('add', 'pid')")
    );
    let dir = classic(&body, "http://127.0.0.1:9/v1");
    let project = Project::load(dir.path()).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        mcps_of(&project),
        json!([{"command": "python3", "args": ["server.py"], "env": {"MODE": "test"}, "prefix_tool_names": false, "tool_filter": ["add", "pid"], "connect_timeout": 45}])
    );
    assert_eq!(
        project.agents[0].spec.tools.as_deref().map(<[_]>::len),
        Some(0)
    );

    // A dict entry, next to other tools in the list.
    let body = format!(
        "    mcp_server_params = {{'url': 'http://127.0.0.1:8001/mcp', 'transport': 'streamable-http'}}\n\n{}",
        agent_method("tools=[*self.get_mcp_tools()]")
    );
    let dir = classic(&body, "http://127.0.0.1:9/v1");
    let project = Project::load(dir.path()).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        mcps_of(&project),
        json!([{"url": "http://127.0.0.1:8001/mcp", "transport": "streamable-http", "prefix_tool_names": false}])
    );
}

fn mcps_crew_py_cannot_give_are_refused_at_their_line() {
    let cases = [
        (
            agent_method("mcps=[MCPServerStdio(command='python3', env={**os.environ})]"),
            "crew.py:12: agent 'clerk' MCP server `MCPServerStdio(command='python3', env={**os.environ})`: `env=` is computed",
        ),
        (
            agent_method(
                "mcps=[MCPServerStdio(command='python3', tool_filter=lambda ctx, tool: True)]",
            ),
            "is a filter function, which cannot run here",
        ),
        (
            agent_method("mcps=[MCPServerStdio('python3')]"),
            "MCPServerStdio() takes keyword arguments",
        ),
        (
            agent_method("mcps=[MCPServerHTTP(url='http://127.0.0.1:1/sse', streamable=False)]"),
            "crew.py:12: mcps[0]: `streamable: false` asks for the older HTTP+SSE protocol",
        ),
        (
            agent_method("mcps=[MCPServerHTTP(url='https://x/mcp', auth='oauth')]"),
            "MCPServerHTTP() argument `auth=` has no counterpart here",
        ),
        (
            agent_method("mcps=['crewai-amp:notion']"),
            "CrewAI's registry slugs",
        ),
        (
            agent_method("tools=self.get_mcp_tools()"),
            "crew.py:12: `self.get_mcp_tools()` needs the class's `mcp_server_params`",
        ),
        (
            format!(
                "    mcp_server_params = [StdioServerParameters(command='a'), StdioServerParameters(command='b')]\n\n{}",
                agent_method("tools=self.get_mcp_tools('add')")
            ),
            "picks tools by name across several servers",
        ),
    ];
    for (body, expected) in cases {
        let dir = classic(&body, "http://127.0.0.1:9/v1");
        let error = match Project::load(dir.path()) {
            Ok(project) => panic!("accepted: {}", mcps_of(&project)),
            Err(error) => error.to_string(),
        };
        assert!(error.contains(expected), "{body}\n{error}");
    }
}

/// `get_mcp_tools` offers the server's tools under their own names, as CrewAI's adapter does.
async fn get_mcp_tools_runs_the_servers_tools_under_their_own_names() {
    let model = ScriptedServer::start().await;
    model.push(Reply::tool_call("add", json!({"a": 2, "b": 40})));
    model.push_text("42");
    let body = format!(
        "    mcp_server_params = [StdioServerParameters(command='python3', args=['server.py'])]\n\n{}",
        agent_method("tools=self.get_mcp_tools('add')")
    );
    let dir = classic(&body, &model.base_url());
    let project = Project::load(dir.path()).unwrap_or_else(|error| panic!("{error}"));
    let crew = project
        .build(
            &Default::default(),
            &BuildOptions::new(ToolRegistry::with_builtins(dir.path())),
        )
        .unwrap_or_else(|error| panic!("{error}"));
    let output = crew
        .kickoff(Default::default())
        .await
        .unwrap_or_else(|error| panic!("{}", crewai_llm::error_chain(&error)));
    assert_eq!(output.raw, "42");
    let requests = model.requests();
    assert_eq!(requests[0].tool_names(), ["add"]);
    let result = requests[1]
        .messages()
        .iter()
        .rev()
        .find(|message| message["role"] == "tool")
        .cloned()
        .unwrap_or_default();
    assert_eq!(result["content"], "42");
}

fn main() -> std::process::ExitCode {
    let mcp = python_mcp();
    Suite::new()
        .test(
            "agent_mcps_in_crewais_forms_become_the_agents_mcps",
            agent_mcps_in_crewais_forms_become_the_agents_mcps,
        )
        .test(
            "get_mcp_tools_reads_the_classs_mcp_server_params",
            get_mcp_tools_reads_the_classs_mcp_server_params,
        )
        .test(
            "mcps_crew_py_cannot_give_are_refused_at_their_line",
            mcps_crew_py_cannot_give_are_refused_at_their_line,
        )
        .async_test_needing(
            "get_mcp_tools_runs_the_servers_tools_under_their_own_names",
            &[&mcp],
            get_mcp_tools_runs_the_servers_tools_under_their_own_names,
        )
        .run()
}
