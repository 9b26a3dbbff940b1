//! crewai-tools' classes against local servers that answer like the real services.

use std::sync::Arc;

use crewai_tools::catalog::{SearchType, SerperConfig, SerperDevTool};
use crewai_tools::{Tool, ToolContext, ToolError, ToolHandle, check_env_vars};
use serde_json::{Value, json};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, ResponseTemplate};

mod common;
use common::{built, run_text, server_with};

/// An answer in the shape serper.dev sends for `/search`.
fn serper_answer() -> Value {
    json!({
        "searchParameters": {"q": "rust async", "gl": "us", "hl": "en", "type": "search", "num": 2, "engine": "google"},
        "knowledgeGraph": {"title": "Rust", "type": "Programming language", "description": "A systems language."},
        "organic": [
            {"title": "Async in Rust", "link": "https://rust-lang.github.io/async-book/", "snippet": "The async book.", "position": 1,
             "sitelinks": [{"title": "Getting started", "link": "https://rust-lang.github.io/async-book/01.html"}]},
            {"title": "Tokio", "link": "https://tokio.rs", "snippet": "An async runtime.", "position": 2},
            {"title": "Cut by n_results", "link": "https://example.com", "snippet": "not shown", "position": 3}
        ],
        "peopleAlsoAsk": [{"question": "Is Rust async fast?", "snippet": "Yes.", "title": "Q", "link": "https://q.example"}],
        "relatedSearches": [{"query": "rust futures"}, {"query": "tokio tutorial"}],
        "credits": 1
    })
}

#[tokio::test]
async fn serper_posts_query_country_locale_and_count_with_the_key_header() {
    let server = server_with([Mock::given(method("POST"))
        .and(path("/search"))
        .and(header("X-API-KEY", "test-key"))
        .and(header("content-type", "application/json"))
        .and(body_json(
            json!({"q": "rust async", "num": 2, "gl": "us", "hl": "en"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(serper_answer()))
        .expect(1)])
    .await;
    let config: SerperConfig = serde_json::from_value(json!({
        "n_results": 2, "country": "us", "locale": "en", "base_url": server.uri()
    }))
    .unwrap();
    let tool = SerperDevTool::from_config(config).with_api_key("test-key");
    let handle = ToolHandle::from_tool(tool);
    assert_eq!(handle.name(), "search_the_internet_with_serper");
    assert_eq!(
        handle.definition().parameters["required"],
        json!(["search_query"])
    );
    let output = run_text(
        handle.tool().as_ref(),
        json!({"search_query": "rust async"}),
    )
    .await;
    assert_eq!(
        output,
        "Knowledge graph: Rust (Programming language): A systems language.\n\n\
         Search results for 'rust async':\n\n\
         1. Async in Rust\n   Link: https://rust-lang.github.io/async-book/\n   The async book.\n   \
         Sitelinks: Getting started (https://rust-lang.github.io/async-book/01.html)\n\n\
         2. Tokio\n   Link: https://tokio.rs\n   An async runtime.\n\n\
         People also ask:\n- Is Rust async fast? Yes. (https://q.example)\n\n\
         Related searches: rust futures; tokio tutorial"
    );
}

#[tokio::test]
async fn serper_news_searches_the_news_endpoint() {
    let server = server_with([Mock::given(method("POST"))
        .and(path("/news"))
        .and(body_json(json!({"q": "crewai", "num": 10, "location": "Paris, France"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "searchParameters": {"q": "crewai", "type": "news"},
            "news": [{"title": "CrewAI ships", "link": "https://news.example/1", "snippet": "A release.",
                      "date": "2 hours ago", "source": "Example News", "position": 1}]
        })))
        .expect(1)])
    .await;
    let tool = SerperDevTool::new()
        .with_base_url(format!("{}/", server.uri()))
        .with_search_type(SearchType::News)
        .with_location("Paris, France")
        .with_api_key("k");
    let output = run_text(&tool, json!({"search_query": "crewai"})).await;
    assert_eq!(
        output,
        "Search results for 'crewai':\n\n1. CrewAI ships\n   Link: https://news.example/1\n   Example News, 2 hours ago\n   A release."
    );
}

#[tokio::test]
async fn serper_errors_say_what_went_wrong() {
    let server = server_with([Mock::given(method("POST"))
        .and(path("/search"))
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_json(json!({"message": "Unauthorized.", "statusCode": 403})),
        )])
    .await;
    let tool = SerperDevTool::new()
        .with_base_url(server.uri())
        .with_api_key("wrong");
    let error = tool
        .run(json!({"search_query": "x"}), &ToolContext::new())
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.starts_with("Serper answered HTTP 403 Forbidden (check SERPER_API_KEY): {\"message\":\"Unauthorized.\""),
        "{text}"
    );
    // A key given in code needs no variable; without one the variable is declared required.
    assert!(check_env_vars(&[ToolHandle::from_tool(tool)]).is_ok());
    let declared = SerperDevTool::new().env_vars();
    assert_eq!(declared[0].name, "SERPER_API_KEY");
    assert!(declared[0].required);
}

const PAGE: &str = "<!DOCTYPE html><html><head><title>Example</title><script>x()</script></head>\
    <body><h1>Hello</h1><p>Readable &amp; plain.</p></body></html>";

#[tokio::test]
async fn scrape_reads_the_fixed_page_or_the_one_the_model_names() {
    let server = server_with([Mock::given(method("GET"))
        .and(path("/page"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(PAGE, "text/html; charset=utf-8"))
        .expect(2)])
    .await;
    let url = format!("{}/page", server.uri());
    let root = std::env::temp_dir();
    let fixed = built(
        "ScrapeWebsiteTool",
        json!({"website_url": url, "allow_private_network": true}),
        &root,
    );
    assert_eq!(fixed.parameters()["properties"], json!({}));
    assert!(fixed.description().contains(&url));
    let text = run_text(fixed.as_ref(), json!({})).await;
    assert_eq!(text, "Example\n\n# Hello\nReadable & plain.");

    let any = built(
        "scrape_website_tool",
        json!({"allow_private_network": true}),
        &root,
    );
    let handle = ToolHandle::new(Arc::clone(&any));
    assert_eq!(handle.name(), "read_website_content");
    assert_eq!(
        handle.definition().parameters["required"],
        json!(["website_url"])
    );
    let text = run_text(any.as_ref(), json!({"website_url": url})).await;
    assert_eq!(text, "Example\n\n# Hello\nReadable & plain.");
}

#[tokio::test]
async fn scrape_reports_http_errors() {
    let server =
        server_with([Mock::given(method("GET")).respond_with(ResponseTemplate::new(404))]).await;
    let tool = built(
        "ScrapeWebsiteTool",
        json!({"website_url": format!("{}/gone", server.uri()), "allow_private_network": true}),
        &std::env::temp_dir(),
    );
    let error = tool.run(json!({}), &ToolContext::new()).await.unwrap_err();
    assert!(
        matches!(error, ToolError::Failed(ref m) if m.contains("HTTP 404")),
        "{error}"
    );
}

#[tokio::test]
async fn scrape_refuses_internal_addresses_unless_allowed() {
    let root = std::env::temp_dir();
    let any = built("ScrapeWebsiteTool", json!({}), &root);
    let error = any
        .run(
            json!({"website_url": "http://169.254.169.254/latest/meta-data/"}),
            &ToolContext::new(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error, ToolError::Failed(ref m) if m.contains("link-local") && m.contains("allow_private_network")),
        "{error}"
    );
    let fixed = built(
        "ScrapeWebsiteTool",
        json!({"website_url": "http://localhost:9/admin"}),
        &root,
    );
    let error = fixed.run(json!({}), &ToolContext::new()).await.unwrap_err();
    assert!(error.to_string().contains("loopback"), "{error}");
}

#[tokio::test]
async fn file_read_with_a_file_path_reads_it_by_default_and_another_on_request() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "default file\n").unwrap();
    std::fs::write(dir.path().join("other.md"), "one\ntwo\n").unwrap();
    let tool = built("FileReadTool", json!({"file_path": "notes.md"}), dir.path());
    assert_eq!(tool.name(), "file_read");
    assert!(tool.description().contains("notes.md"));
    let handle = ToolHandle::new(Arc::clone(&tool));
    let schema = handle.definition().parameters;
    assert_eq!(
        schema["properties"]["file_path"]["type"],
        json!(["string", "null"])
    );
    let ctx = ToolContext::new();
    assert_eq!(
        tool.run(json!({}), &ctx).await.unwrap().to_text(),
        "default file\n"
    );
    assert_eq!(
        tool.run(
            json!({"file_path": null, "start_line": null, "line_count": null}),
            &ctx
        )
        .await
        .unwrap()
        .to_text(),
        "default file\n"
    );
    assert_eq!(
        tool.run(json!({"file_path": "other.md", "start_line": 2}), &ctx)
            .await
            .unwrap()
            .to_text(),
        "two\n"
    );
}

#[tokio::test]
async fn directory_read_with_a_directory_lists_only_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/a.md"), "").unwrap();
    std::fs::write(dir.path().join("top.md"), "").unwrap();
    let tool = built(
        "DirectoryReadTool",
        json!({"directory": "docs"}),
        dir.path(),
    );
    assert_eq!(tool.parameters()["properties"], json!({}));
    let listing = run_text(tool.as_ref(), json!({"directory": "."})).await;
    assert!(listing.contains("- docs/a.md"), "{listing}");
    assert!(
        !listing.contains("top.md"),
        "the fixed directory wins: {listing}"
    );
}
