//! Skills on agents and crews against the scripted OpenAI-compatible server: the catalog in the
//! system prompt, `load_skill` and `read_skill_resource`, skills written into the prompt, crew
//! skills, the events, and a system message that stays the same bytes across steps.

mod agent_common;

use std::path::PathBuf;

use agent_common::*;
use crewai_core::AgentError;
use crewai_core::agent::AgentTaskRequest;
use crewai_core::crew::Crew;
use crewai_core::events::{EventBus, EventRecorder};
use crewai_core::skills::{DisclosureLevel, Skill, SkillSource};
use crewai_core::task::Task;
use crewai_testkit::scripted::{RecordedRequest, ScriptedServer};
use crewai_tools::{DynamicTool, ToolOutput};
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crewai-skills/tests/fixtures")
}

fn system_text(request: &RecordedRequest) -> String {
    let first = &request.messages()[0];
    assert_eq!(first["role"], "system");
    first["content"].as_str().unwrap_or_default().to_string()
}

/// The content of the last tool message `request` carries (the latest tool result).
fn tool_result(request: &RecordedRequest) -> String {
    request
        .messages()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Runs `agent` on one task; every scripted reply must have been used.
async fn run(server: &ScriptedServer, agent: crewai_core::Agent, bus: &EventBus) -> String {
    let result = agent
        .run_task(AgentTaskRequest::new("Write the release notes").with_event_bus(bus.clone()))
        .await
        .unwrap();
    assert_eq!(server.remaining(), 0);
    result.raw
}

#[tokio::test]
async fn the_catalog_is_in_the_system_prompt_and_load_skill_returns_the_instructions() {
    let server = server().await;
    server.push_tool_call("load_skill", json!({"skill_name": "release-notes"}));
    server.push_text("done");
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let agent = agent_with(openai(&server))
        .skill(SkillSource::path(fixtures().join("skills")))
        .build()
        .unwrap();
    assert_eq!(run(&server, agent, &bus).await, "done");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let system = system_text(&requests[0]);
    assert!(system.starts_with("You are test role. test backstory\nYour personal goal is: test goal\n\n<available_skills>\n<skill>\n<name>haiku-writer</name>"), "{system}");
    assert!(
        system.contains("<name>release-notes</name>\n<description>Turns a list of merged changes"),
        "{system}"
    );
    assert!(
        !system.contains("Group the changes"),
        "instructions stay out of the catalog: {system}"
    );
    // The prompt prefix is byte-stable across the execution's steps.
    assert_eq!(system_text(&requests[1]), system);
    assert_eq!(
        requests[0].tool_names(),
        ["load_skill", "read_skill_resource"]
    );

    let loaded = tool_result(&requests[1]);
    assert!(
        loaded.starts_with("## Skill: release-notes\nTurns a list"),
        "{loaded}"
    );
    assert!(
        loaded.contains("1. Group the changes under Added, Changed and Fixed."),
        "{loaded}"
    );
    assert!(loaded.contains("### Available Resources\n- **assets/**: templates/notes.md\n- **references/**: style.md\n- **scripts/**: group.py"), "{loaded}");
    assert!(loaded.contains("`read_skill_resource`"), "{loaded}");

    let types = recorder.type_names();
    let skill_types: Vec<&str> = types
        .iter()
        .copied()
        .filter(|t| t.starts_with("skill_"))
        .collect();
    assert_eq!(
        skill_types,
        [
            "skill_discovery_started",
            "skill_loaded",
            "skill_loaded",
            "skill_discovery_completed",
            "skill_activated",
            "skill_used"
        ]
    );
    let activated = recorder.of_type("skill_activated");
    let json = activated[0].to_json();
    assert_eq!(json["skill_name"], "release-notes");
    assert_eq!(json["disclosure_level"], 2);
    assert_eq!(json["agent_role"], "test role");
}

#[tokio::test]
async fn resources_are_read_through_the_tool_and_dot_dot_is_refused() {
    let server = server().await;
    server.push_tool_call(
        "read_skill_resource",
        json!({"skill_name": "release-notes", "path": "references/style.md"}),
    );
    server.push_tool_call(
        "read_skill_resource",
        json!({"skill_name": "release-notes", "path": "../haiku-writer/SKILL.md"}),
    );
    server.push_text("done");
    let agent = agent_with(openai(&server))
        .skill(SkillSource::path(fixtures().join("skills/release-notes")))
        .build()
        .unwrap();
    run(&server, agent, &EventBus::new()).await;
    let requests = server.requests();
    assert_eq!(
        tool_result(&requests[1]),
        "# Style guide\n\nKeep every line under 80 characters.\n"
    );
    let refused = tool_result(&requests[2]);
    assert!(
        refused.contains("resource '../haiku-writer/SKILL.md' is refused: '..' may not appear"),
        "{refused}"
    );
    assert!(
        !refused.contains("Answer in exactly three lines"),
        "{refused}"
    );
}

#[tokio::test]
async fn skills_at_the_instructions_level_are_written_into_the_prompt_without_a_loader() {
    let server = server().await;
    server.push_text("done");
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let inline = Skill::from_markdown(
        "---\nname: tone\ndescription: House tone.\n---\nWrite plainly.",
        "inline skill",
    )
    .unwrap()
    .with_level(DisclosureLevel::Instructions);
    let agent = agent_with(openai(&server))
        .inject_date(true)
        .skill(inline)
        .build()
        .unwrap();
    run(&server, agent, &bus).await;
    let request = &server.requests()[0];
    let system = system_text(request);
    let block = "\n\n<skills>\n<skill name=\"tone\">\nWrite plainly.\n</skill>\n</skills>\n\nCurrent Date: ";
    assert!(
        system.contains(block),
        "the skills come before the date: {system}"
    );
    assert!(!system.contains("available_skills"), "{system}");
    assert!(request.tool_names().is_empty(), "no loader is needed");
    assert_eq!(recorder.of_type("skill_used").len(), 1);
}

#[tokio::test]
async fn a_tool_named_load_skill_moves_the_loader_to_a_free_name() {
    let server = server().await;
    server.push_text("done");
    let own = DynamicTool::new(
        "load_skill",
        "The user's own tool.",
        json!({"type": "object", "properties": {}}),
        |_args: Value, _ctx| async { Ok(ToolOutput::Text("mine".into())) },
    )
    .into_handle();
    let agent = agent_with(openai(&server))
        .skill(SkillSource::path(fixtures().join("skills/haiku-writer")))
        .build()
        .unwrap();
    agent
        .run_task(AgentTaskRequest::new("Hi").with_tools(vec![own]))
        .await
        .unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.tool_names(), ["load_skill", "load_skill_2"]);
    assert!(system_text(request).contains("call the `load_skill_2` tool"));
}

#[tokio::test]
async fn a_missing_skill_path_fails_the_run_and_is_reported() {
    let server = server().await;
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let agent = agent_with(openai(&server))
        .skill(SkillSource::path(fixtures().join("no-such-skills")))
        .build()
        .unwrap();
    let error = agent
        .run_task(AgentTaskRequest::new("Hi").with_event_bus(bus))
        .await
        .unwrap_err();
    assert!(matches!(error, AgentError::Skills { .. }), "{error:?}");
    let chain = crewai_llm::error_chain(&error);
    assert!(
        chain.starts_with("agent 'test role': its skills could not be loaded: "),
        "{chain}"
    );
    assert!(chain.ends_with("no-such-skills: no such skill folder (give a folder holding SKILL.md, or a folder of such folders)"), "{chain}");
    assert_eq!(recorder.of_type("skill_load_failed").len(), 1);
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn a_broken_skill_in_a_searched_folder_is_reported_and_the_others_load() {
    let server = server().await;
    server.push_text("done");
    let bus = EventBus::new();
    let recorder = EventRecorder::attach(&bus);
    let agent = agent_with(openai(&server))
        .skill(SkillSource::path(fixtures().join("mixed")))
        .build()
        .unwrap();
    run(&server, agent, &bus).await;
    let failed = recorder.of_type("skill_load_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].to_json()["skill_name"], "wrong-folder");
    let system = system_text(&server.requests()[0]);
    assert!(
        system.contains("<name>good-skill</name>") && !system.contains("other-name"),
        "{system}"
    );
}

#[tokio::test]
async fn crew_skills_apply_to_every_agent_after_its_own() {
    let server = server().await;
    server.push_text("first");
    server.push_text("second");
    let writer = agent_with(openai(&server))
        .role("Writer")
        .skill(SkillSource::path(fixtures().join("skills/haiku-writer")))
        .build()
        .unwrap();
    let editor = agent_with(openai(&server)).role("Editor").build().unwrap();
    let task = |name: &str, agent: &crewai_core::Agent| {
        Task::builder()
            .name(name)
            .description("Do it")
            .expected_output("It done")
            .agent(agent.clone())
            .build()
            .unwrap()
    };
    let crew = Crew::builder()
        .agents(vec![writer.clone(), editor.clone()])
        .tasks(vec![task("write", &writer), task("edit", &editor)])
        .skill(SkillSource::path(fixtures().join("skills/release-notes")))
        .build()
        .unwrap();
    crew.kickoff(Default::default()).await.unwrap();
    let requests = server.requests();
    let writer_system = system_text(&requests[0]);
    let editor_system = system_text(&requests[1]);
    let position = |text: &str, name: &str| text.find(&format!("<name>{name}</name>"));
    assert!(position(&writer_system, "haiku-writer") < position(&writer_system, "release-notes"));
    assert!(position(&writer_system, "haiku-writer").is_some());
    assert!(
        position(&editor_system, "release-notes").is_some(),
        "{editor_system}"
    );
    assert!(
        position(&editor_system, "haiku-writer").is_none(),
        "{editor_system}"
    );
}
