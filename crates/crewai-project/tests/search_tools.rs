//! crewai-tools' knowledge search tools named in a YAML project's `tools:`: made over the
//! project's store (`.crewai/memory.db`, collection `knowledge:tool:...`) and the crew's
//! `embedder:`, called by the model over the wire, their passages in the next request, and
//! their embeddings counted in the crew's usage; constructor mistakes stop the build at their
//! line.

use crewai_memory::{MemoryStore, SqliteMemoryStore};
use crewai_project::{BuildOptions, Project, ToolRegistry};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::json;

mod common;
use common::write;

/// An OpenAI-compatible `/embeddings` reply: one vector, costing `tokens` as the provider
/// reports them.
fn embedding_reply(vector: [f32; 2], tokens: u64) -> Reply {
    let body = json!({
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": vector}],
        "model": "bge-small",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    });
    Reply::raw(200, "application/json", body.to_string())
}

fn project_at(dir: &std::path::Path, chat: &str, embeddings: &str, tools: &str) -> Project {
    let agents = format!(
        "clerk:\n  role: Clerk\n  goal: Answer refund questions\n  backstory: Reads the FAQ.\n  llm: {{model: openai/gpt-4o-mini, api_key: k, base_url: '{chat}'}}\n  tools:\n{tools}"
    );
    let crew = format!(
        "embedder:\n  provider: openai\n  config: {{model: bge-small, api_key: k, base_url: '{embeddings}', dimensions: 2}}\n"
    );
    write(
        dir,
        &[
            ("config/agents.yaml", &agents),
            (
                "config/tasks.yaml",
                "answer:\n  description: How long do refunds take?\n  expected_output: The refund window\n  agent: clerk\n",
            ),
            ("config/crew.yaml", &crew),
            (
                "notes/faq.txt",
                "Refunds are paid within 30 days of the return.",
            ),
        ],
    );
    Project::load(dir).unwrap_or_else(|error| panic!("{error}"))
}

#[tokio::test]
async fn a_yaml_search_tool_searches_its_file_and_counts_its_embeddings() {
    let chat = ScriptedServer::start().await;
    let embeddings = ScriptedServer::start().await;
    chat.push(Reply::tool_call(
        "search_a_txts_content",
        json!({"search_query": "refund window"}),
    ));
    chat.push_text("Refunds are paid within 30 days.");
    // The file's one chunk when it is first searched, then the query.
    embeddings.push(embedding_reply([1.0, 0.0], 20));
    embeddings.push(embedding_reply([1.0, 0.0], 5));
    let dir = tempfile::tempdir().unwrap();
    let project = project_at(
        dir.path(),
        &chat.base_url(),
        &embeddings.base_url(),
        "    - {name: TXTSearchTool, txt: notes/faq.txt, similarity_threshold: 0.5}\n",
    );
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
    assert_eq!(output.raw, "Refunds are paid within 30 days.");

    let requests = chat.requests();
    let offered = &requests[0].body["tools"][0]["function"];
    assert_eq!(offered["name"], "search_a_txts_content");
    assert_eq!(offered["parameters"]["required"], json!(["search_query"]));
    let result = requests[1]
        .messages()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap_or_default();
    let text = result["content"].as_str().unwrap_or_default();
    assert!(
        text.contains("Refunds are paid within 30 days of the return."),
        "{text}"
    );
    assert!(text.contains("notes/faq.txt"), "{text}");
    assert_eq!(
        embeddings.requests()[0].body["input"],
        json!(["Refunds are paid within 30 days of the return."])
    );
    assert_eq!(
        embeddings.requests()[1].body["input"],
        json!(["refund window"])
    );
    // 25 embedding tokens as the provider reported them, beside the chat's 2 × 15.
    assert_eq!(crew.usage().by_model["bge-small"].total_tokens, 25);
    assert_eq!(output.token_usage.total_tokens, 30 + 25);

    let store = SqliteMemoryStore::open_project(dir.path()).unwrap();
    let collections = store.collections().await.unwrap();
    let tool_collection = collections
        .iter()
        .find(|c| c.name.starts_with("knowledge:tool:txt_search_tool-"))
        .unwrap_or_else(|| panic!("{collections:?}"));
    assert_eq!(tool_collection.model, "bge-small");
}

#[test]
fn search_tool_constructor_mistakes_stop_the_build_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let project = project_at(
        dir.path(),
        "http://127.0.0.1:9/v1",
        "http://127.0.0.1:9/v1",
        "    - PDFSearchTool\n    - {name: website_search_tool, website: 'https://x', summarize: true}\n    - {name: CSVSearchTool, pdf: x.pdf}\n    - GithubSearchTool\n",
    );
    let error = match project.build(
        &Default::default(),
        &BuildOptions::new(ToolRegistry::with_builtins(dir.path())),
    ) {
        Ok(_) => panic!("built with bad search tools"),
        Err(error) => error,
    };
    let texts: Vec<String> = error
        .diagnostics()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(texts.len(), 3, "{texts:#?}");
    assert!(
        texts[0].starts_with("config/agents.yaml:8: agent 'clerk': tool 'website_search_tool' could not be created: `summarize`"),
        "{texts:#?}"
    );
    assert!(
        texts[1].starts_with("config/agents.yaml:9: agent 'clerk': tool 'CSVSearchTool' could not be created: CSVSearchTool takes no argument `pdf`; it takes `csv`"),
        "{texts:#?}"
    );
    assert!(
        texts[2].starts_with("config/agents.yaml:10: agent 'clerk' names tool 'GithubSearchTool': GithubSearchTool is recognised (a crewai-tools knowledge search tool) but crewai-rs does not provide it yet"),
        "{texts:#?}"
    );
}
