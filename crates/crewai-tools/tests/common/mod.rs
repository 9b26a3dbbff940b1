//! Helpers shared by the integration tests (not every test binary uses every one).
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use crewai_tools::catalog::build;
use crewai_tools::{Tool, ToolContext};
use serde_json::{Map, Value};
use wiremock::{Mock, MockServer};

/// A local server with `mocks` mounted.
pub async fn server_with(mocks: impl IntoIterator<Item = Mock>) -> MockServer {
    let server = MockServer::start().await;
    for mock in mocks {
        server.register(mock).await;
    }
    server
}

/// The constructor arguments written as a JSON object.
pub fn args(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

/// The catalogue's tool `name`, built from the constructor arguments `args` inside `root`.
pub fn built(name: &str, args: Value, root: &Path) -> Arc<dyn Tool> {
    build(name, &self::args(args), root)
        .unwrap_or_else(|error| panic!("{name} cannot be built: {error}"))
        .unwrap_or_else(|| panic!("no tool is named {name}"))
}

/// The text of a successful run.
pub async fn run_text(tool: &dyn Tool, args: Value) -> String {
    tool.run(args, &ToolContext::new())
        .await
        .unwrap_or_else(|error| panic!("{} failed: {error}", tool.name()))
        .to_text()
}
