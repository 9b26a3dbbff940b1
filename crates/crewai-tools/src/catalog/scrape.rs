//! `ScrapeWebsiteTool`: a web page's readable text, for any URL or for one fixed URL.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::builtin::HttpGetTool;
use crate::builtin::http::parse_http_url;
use crate::schema::schema_for;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};
use crate::typed::parse_typed_arguments;

/// Reads a web page and returns its readable text, as crewai-tools' `ScrapeWebsiteTool` does.
/// Built with a `website_url`, it always reads that page and takes no arguments; without one, the
/// model gives `website_url`. Fetching is [`HttpGetTool`]'s: timeouts, a size limit, HTML reduced
/// to text, internal addresses refused unless allowed.
///
/// ```
/// use crewai_tools::catalog::ScrapeWebsiteTool;
/// use crewai_tools::Tool;
/// let any_page = ScrapeWebsiteTool::new();
/// assert_eq!(any_page.parameters()["required"], serde_json::json!(["website_url"]));
/// let one_page = ScrapeWebsiteTool::for_url("https://example.com/").unwrap();
/// assert_eq!(one_page.parameters()["properties"], serde_json::json!({}));
/// assert!(ScrapeWebsiteTool::for_url("ftp://example.com/").is_err());
/// ```
#[derive(Debug, Clone)]
pub struct ScrapeWebsiteTool {
    http: HttpGetTool,
    website_url: Option<String>,
    description: String,
}

/// Arguments when no URL is fixed.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ScrapeWebsiteArgs {
    /// The http or https address of the page to read.
    pub website_url: String,
}

/// The constructor arguments a project file may give.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScrapeWebsiteConfig {
    pub website_url: Option<String>,
    /// Lets the tool read loopback, private and other internal addresses (off by default; see
    /// [`HttpGetTool::allow_private_network`]).
    pub allow_private_network: Option<bool>,
}

const ANY_PAGE: &str =
    "Reads the web page at `website_url` and returns its readable text (markup removed).";

impl Default for ScrapeWebsiteTool {
    fn default() -> Self {
        ScrapeWebsiteTool {
            http: HttpGetTool::new(),
            website_url: None,
            description: ANY_PAGE.to_string(),
        }
    }
}

impl ScrapeWebsiteTool {
    /// A tool that reads whatever page the model names.
    pub fn new() -> Self {
        ScrapeWebsiteTool::default()
    }

    /// A tool that always reads `website_url`; fails if it is not an http(s) URL.
    pub fn for_url(website_url: impl Into<String>) -> Result<Self, ToolError> {
        let website_url = website_url.into();
        parse_http_url(&website_url)?;
        Ok(ScrapeWebsiteTool {
            description: format!(
                "Reads the web page {website_url} and returns its readable text (markup removed)."
            ),
            website_url: Some(website_url),
            http: HttpGetTool::new(),
        })
    }

    /// The tool as a project file's constructor arguments describe it.
    pub fn from_config(config: ScrapeWebsiteConfig) -> Result<Self, ToolError> {
        let tool = match config.website_url {
            Some(url) => ScrapeWebsiteTool::for_url(url)?,
            None => ScrapeWebsiteTool::new(),
        };
        Ok(match config.allow_private_network {
            Some(allow) => tool.allow_private_network(allow),
            None => tool,
        })
    }

    /// Replaces the fetcher (timeouts, size limit).
    pub fn with_http(mut self, http: HttpGetTool) -> Self {
        self.http = http;
        self
    }

    /// Whether the tool may read loopback, private and other internal addresses (see
    /// [`HttpGetTool::allow_private_network`]; refused by default).
    pub fn allow_private_network(mut self, allow: bool) -> Self {
        self.http = self.http.allow_private_network(allow);
        self
    }

    /// The fixed page, if there is one.
    pub fn website_url(&self) -> Option<&str> {
        self.website_url.as_deref()
    }
}

#[async_trait]
impl Tool for ScrapeWebsiteTool {
    fn name(&self) -> &str {
        "Read website content"
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        match self.website_url {
            Some(_) => json!({"type": "object", "properties": {}}),
            None => schema_for::<ScrapeWebsiteArgs>(),
        }
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let url = match &self.website_url {
            Some(fixed) => fixed.clone(),
            None => parse_typed_arguments::<ScrapeWebsiteArgs>(self.name(), args)?.website_url,
        };
        self.http.fetch_text(&url, ctx).await.map(ToolOutput::Text)
    }
}
