//! Hierarchical crews and delegation against a scripted OpenAI-compatible server: the manager's
//! tools, the delegation round trip, coworker matching, and the depth and cycle guards.

mod crew_support;

use crew_support::{agent, agent_with, conversation, crew, crew_builder, llm, task};
use crewai_core::agent::Agent;
use crewai_core::crew::{CrewBuilder, CrewError, Process};
use crewai_core::events::{EventBus, EventRecorder};
use crewai_core::interpolate::Inputs;
use crewai_core::task::{Task, TaskBuilder};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::json;

/// A task without an agent (a hierarchical crew's manager hands it out).
fn unassigned(name: &str, description: &str) -> TaskBuilder {
    Task::builder()
        .name(name)
        .description(description)
        .expected_output(format!("The result of {name}"))
}

/// A hierarchical crew of `agents` on `tasks`, its manager created on `manager`'s model.
fn managed(agents: &[&Agent], tasks: Vec<Task>, manager: &ScriptedServer) -> CrewBuilder {
    crew_builder(agents, tasks)
        .process(Process::Hierarchical)
        .manager_llm(llm(manager))
}

/// The model's call of `delegate_work_to_coworker`, handing `work` to `coworker`.
fn delegate(coworker: &str, work: &str) -> Reply {
    Reply::tool_call(
        "delegate_work_to_coworker",
        json!({"task": work, "context": "c", "coworker": coworker}),
    )
}

fn tool_descriptions(request: &crewai_testkit::scripted::RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["description"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_manager_has_exactly_the_two_delegation_tools_for_all_agents() {
    let workers = ScriptedServer::start().await;
    let manager = ScriptedServer::start().await;
    manager.push_text("Managed answer");
    let researcher = agent("Researcher", &workers);
    let writer = agent("Senior Writer", &workers);
    let t = unassigned("article", "Write an article").build().unwrap();
    let crew = managed(&[&researcher, &writer], vec![t], &manager)
        .build()
        .unwrap();

    let output = crew.kickoff(Inputs::new()).await.unwrap();

    assert_eq!(output.raw, "Managed answer");
    assert_eq!(output.tasks_output[0].agent, "Crew Manager");
    let request = &manager.requests()[0];
    assert_eq!(
        request.tool_names(),
        ["delegate_work_to_coworker", "ask_question_to_coworker"]
    );
    let descriptions = tool_descriptions(request);
    assert!(descriptions[0].starts_with("Delegate a specific task to one of the following coworkers: Researcher, Senior Writer\n"), "{}", descriptions[0]);
    assert!(
        descriptions[1].starts_with(
            "Ask a specific question to one of the following coworkers: Researcher, Senior Writer\n"
        ),
        "{}",
        descriptions[1]
    );
    let parameters = &request.body["tools"][0]["function"]["parameters"];
    assert_eq!(
        parameters["required"],
        json!(["task", "context", "coworker"])
    );
    assert_eq!(
        request.body["tools"][1]["function"]["parameters"]["required"],
        json!(["question", "context", "coworker"])
    );
    assert_eq!(
        crew.manager_tools()
            .iter()
            .map(|t| t.name().to_string())
            .collect::<Vec<_>>(),
        ["delegate_work_to_coworker", "ask_question_to_coworker"]
    );
    assert_eq!(workers.request_count(), 0);
}

#[tokio::test]
async fn a_task_with_an_agent_lets_the_manager_delegate_only_to_it() {
    let workers = ScriptedServer::start().await;
    let manager = ScriptedServer::start().await;
    manager.push_text("ok");
    let researcher = agent("Researcher", &workers);
    let writer = agent("Senior Writer", &workers);
    let t = task("write", "Write", &writer);
    let crew = managed(&[&researcher, &writer], vec![t], &manager);
    crew.build().unwrap().kickoff(Inputs::new()).await.unwrap();
    assert!(tool_descriptions(&manager.requests()[0])[0].starts_with(
        "Delegate a specific task to one of the following coworkers: Senior Writer\n"
    ));
}

#[tokio::test]
async fn delegation_round_trip_through_the_manager() {
    let workers = ScriptedServer::start().await;
    let manager = ScriptedServer::start().await;
    manager.push(Reply::tool_call("delegate_work_to_coworker", json!({"task": "Find three facts about bees", "context": "For a school report", "coworker": "  researcher "})));
    manager.push_text("Report: bees pollinate, dance, and make honey.");
    workers.push(Reply::text("Bees pollinate, dance and make honey.").with_usage(40, 8));
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let researcher = agent("Researcher", &workers);
    let t = unassigned("report", "Write a report on bees")
        .build()
        .unwrap();
    let crew = managed(&[&researcher], vec![t], &manager)
        .event_bus(bus)
        .build()
        .unwrap();

    let output = crew.kickoff(Inputs::new()).await.unwrap();

    assert_eq!(output.raw, "Report: bees pollinate, dance, and make honey.");
    let coworker_request = &workers.requests()[0];
    let prompt = conversation(coworker_request);
    assert!(
        prompt.contains("Find three facts about bees") && prompt.contains("For a school report"),
        "{prompt}"
    );
    assert!(
        prompt.contains("answer you can give the coworker who asked"),
        "the delegated task's expected output: {prompt}"
    );
    assert!(
        coworker_request.tool_names().is_empty(),
        "a coworker without allow_delegation gets no delegation tools"
    );
    let observation = conversation(&manager.requests()[1]);
    assert!(
        observation.contains("Bees pollinate, dance and make honey."),
        "the coworker's answer is the tool result"
    );
    let delegations = recorder.of_type("agent_delegation_started");
    assert_eq!(delegations[0].to_json()["to_agent"], "Researcher");
    assert_eq!(delegations[0].to_json()["from_agent"], "Crew Manager");
    let tool_call = &recorder.of_type("tool_usage_started")[0];
    assert_eq!(
        delegations[0].parent_event_id,
        Some(tool_call.event_id),
        "the delegation hangs under the tool call"
    );
    let coworker_run = recorder
        .of_type("agent_execution_started")
        .into_iter()
        .find(|e| e.to_json()["agent_role"] == "Researcher")
        .unwrap();
    assert_eq!(coworker_run.parent_event_id, Some(delegations[0].event_id));
    let usage = crew.usage();
    assert_eq!(usage.by_agent["Researcher"].prompt_tokens, 40);
    assert!(
        usage.by_agent.contains_key("Crew Manager"),
        "the manager's usage is included"
    );
    assert_eq!(output.token_usage.successful_requests, 3);
}

#[tokio::test]
async fn an_unknown_coworker_gets_the_list_of_coworkers() {
    let workers = ScriptedServer::start().await;
    let manager = ScriptedServer::start().await;
    manager.push(Reply::tool_call(
        "ask_question_to_coworker",
        json!({"question": "q", "context": "c", "coworker": "Designer"}),
    ));
    manager.push_text("fine");
    let team = [
        agent("Researcher", &workers),
        agent("Senior Writer", &workers),
    ];
    let t = unassigned("t", "d").build().unwrap();
    let crew = managed(&[&team[0], &team[1]], vec![t], &manager);
    crew.build().unwrap().kickoff(Inputs::new()).await.unwrap();
    let observation = conversation(&manager.requests()[1]);
    assert!(
        observation.contains("Designer")
            && observation.contains("- researcher")
            && observation.contains("- senior writer"),
        "{observation}"
    );
    assert_eq!(workers.request_count(), 0);
}

#[tokio::test]
async fn sequential_delegation_lists_only_the_other_agents() {
    let server = ScriptedServer::start().await;
    server.push(Reply::tool_call("delegate_work_to_coworker", json!({"task": "Draft a paragraph on AI agents", "context": "Audience: CTOs", "coworker": "Senior Writer"})));
    server.push_text("AI agents plan, act and learn.");
    server.push_text("Final: AI agents plan, act and learn.");
    let ceo = agent_with("CEO", &server, |b| b.allow_delegation(true));
    let writer = agent("Senior Writer", &server);
    let crew = crew(
        &[&ceo, &writer],
        vec![task("draft", "Produce a draft about AI agents", &ceo)],
    );
    let output = crew.kickoff(Inputs::new()).await.unwrap();
    assert_eq!(output.raw, "Final: AI agents plan, act and learn.");
    let requests = server.requests();
    assert_eq!(
        requests[0].tool_names(),
        ["delegate_work_to_coworker", "ask_question_to_coworker"]
    );
    assert!(tool_descriptions(&requests[0])[0].starts_with(
        "Delegate a specific task to one of the following coworkers: Senior Writer\n"
    ));
    assert!(requests[1].tool_names().is_empty());
    assert!(conversation(&requests[1]).contains("Audience: CTOs"));
}

#[tokio::test]
async fn delegating_back_up_the_chain_is_refused_with_a_reason() {
    let server = ScriptedServer::start().await;
    // CEO -> Lead, then Lead tries to hand the work back to the CEO.
    server.push(delegate("Lead", "Plan it"));
    server.push(delegate("CEO", "You plan it"));
    server.push_text("Lead's own plan").push_text("CEO final");
    let ceo = agent_with("CEO", &server, |b| b.allow_delegation(true));
    let lead = agent_with("Lead", &server, |b| b.allow_delegation(true));
    let dev = agent("Dev", &server);
    let crew = crew(
        &[&ceo, &lead, &dev],
        vec![task("plan", "Make a plan", &ceo)],
    );
    let output = crew.kickoff(Inputs::new()).await.unwrap();
    assert_eq!(output.raw, "CEO final");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "the refused delegation ran nobody");
    assert_eq!(
        requests[1].tool_names(),
        ["delegate_work_to_coworker", "ask_question_to_coworker"],
        "a delegating coworker may delegate on"
    );
    assert!(
        tool_descriptions(&requests[1])[0]
            .starts_with("Delegate a specific task to one of the following coworkers: Dev\n"),
        "agents up the chain are not offered"
    );
    let refusal = conversation(&requests[2]);
    assert!(
        refusal.contains("Delegation refused") && refusal.contains("CEO -> Lead"),
        "{refusal}"
    );
}

#[tokio::test]
async fn the_delegation_depth_is_limited() {
    let server = ScriptedServer::start().await;
    // A -> B is allowed (depth 1); B -> C would be the second hand-off with max depth 1.
    server.push(delegate("B", "t")).push(delegate("C", "t"));
    server.push_text("B did it").push_text("A final");
    let a = agent_with("A", &server, |b| b.allow_delegation(true));
    let b = agent_with("B", &server, |b| b.allow_delegation(true));
    let c = agent("C", &server);
    let crew = crew_builder(&[&a, &b, &c], vec![task("t", "Work", &a)]).max_delegation_depth(1);
    crew.build().unwrap().kickoff(Inputs::new()).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let refusal = conversation(&requests[2]);
    assert!(
        refusal.contains("the most allowed") && refusal.contains("A -> B"),
        "{refusal}"
    );
}

#[tokio::test]
async fn manager_configuration_is_checked() {
    let server = ScriptedServer::start().await;
    let worker = agent("Worker", &server);
    let t = unassigned("t", "d").build().unwrap();
    let missing = crew_builder(&[&worker], vec![t.clone()])
        .process(Process::Hierarchical)
        .build()
        .unwrap_err();
    let text = crewai_llm::error_chain(&missing);
    assert!(text.contains("manager_llm"), "{text}");
    let tooled = agent_with("Boss", &server, |b| {
        b.tools(vec![
            crewai_tools::DynamicTool::new(
                "x",
                "x",
                json!({"type": "object", "properties": {}}),
                |_a, _c| async { Ok(crewai_tools::ToolOutput::Text("x".into())) },
            )
            .into_handle(),
        ])
    });
    let error = crew_builder(&[&worker], vec![t])
        .process(Process::Hierarchical)
        .manager_agent(tooled)
        .build()
        .unwrap_err();
    assert!(
        matches!(error, CrewError::Manager { .. })
            && crewai_llm::error_chain(&error).contains("has tools"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_custom_manager_agent_runs_every_task() {
    let workers = ScriptedServer::start().await;
    let boss_server = ScriptedServer::start().await;
    boss_server.push_text("first done").push_text("second done");
    let boss = agent("Boss", &boss_server);
    let worker = agent("Worker", &workers);
    let tasks = vec![
        task("one", "One", &worker),
        unassigned("two", "Two").build().unwrap(),
    ];
    let crew = crew_builder(&[&worker], tasks)
        .process(Process::Hierarchical)
        .manager_agent(boss)
        .build()
        .unwrap();
    let output = crew.kickoff(Inputs::new()).await.unwrap();
    assert_eq!(
        output
            .tasks_output
            .iter()
            .map(|t| t.agent.as_str())
            .collect::<Vec<_>>(),
        ["Boss", "Boss"]
    );
    assert_eq!(
        boss_server.requests()[1].tool_names(),
        ["delegate_work_to_coworker", "ask_question_to_coworker"]
    );
    assert!(
        conversation(&boss_server.requests()[1]).contains("first done"),
        "the second task sees the first's output"
    );
}

#[tokio::test]
async fn in_a_hierarchical_crew_the_tasks_tools_go_to_the_coworker() {
    let workers = ScriptedServer::start().await;
    let manager = ScriptedServer::start().await;
    manager
        .push(delegate("Researcher", "Look it up"))
        .push_text("done");
    workers.push_text("looked up");
    let search = crewai_tools::DynamicTool::new(
        "Search",
        "Searches.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        |_a, _c| async { Ok(crewai_tools::ToolOutput::Text("r".into())) },
    )
    .into_handle();
    let t = unassigned("t", "Research")
        .tools(vec![search])
        .build()
        .unwrap();
    let researcher = agent("Researcher", &workers);
    let crew = managed(&[&researcher], vec![t], &manager);
    crew.build().unwrap().kickoff(Inputs::new()).await.unwrap();
    assert_eq!(
        manager.requests()[0].tool_names(),
        ["delegate_work_to_coworker", "ask_question_to_coworker"],
        "the manager only delegates"
    );
    assert_eq!(workers.requests()[0].tool_names(), ["search"]);
}
