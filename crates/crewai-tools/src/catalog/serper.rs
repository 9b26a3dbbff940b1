//! `SerperDevTool`: web search through the Serper API (`POST https://google.serper.dev/search`).

use std::sync::OnceLock;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::builtin::http::cached_client;
use crate::tool::{EnvVar, ToolContext, ToolError};
use crate::typed::TypedTool;

/// Serper's address; tests and proxies point the tool elsewhere with [`SerperDevTool::with_base_url`].
pub const SERPER_BASE_URL: &str = "https://google.serper.dev";
/// The environment variable holding the Serper API key.
pub const SERPER_API_KEY_VAR: &str = "SERPER_API_KEY";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const TOTAL_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of an error body is quoted back.
const ERROR_BODY_CHARS: usize = 300;

/// Which Serper endpoint is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchType {
    /// Web results (`/search`).
    #[default]
    Search,
    /// News articles (`/news`).
    News,
}

impl SearchType {
    fn path(self) -> &'static str {
        match self {
            SearchType::Search => "search",
            SearchType::News => "news",
        }
    }
}

/// Searches the web with [Serper](https://serper.dev), as crewai-tools' `SerperDevTool` does: the
/// same constructor arguments (`n_results`, `country`, `locale`, `location`, `search_type`,
/// `base_url`) and the same `SERPER_API_KEY` variable. Results come back as numbered text: title,
/// link and snippet of each hit, then the knowledge graph, "people also ask" and related searches
/// when Serper has them.
///
/// ```
/// use crewai_tools::catalog::SerperDevTool;
/// let tool = SerperDevTool::new().with_n_results(5).with_country("us").with_locale("en");
/// assert_eq!(crewai_tools::Tool::name(&tool), "Search the internet with Serper");
/// ```
#[derive(Debug, Clone)]
pub struct SerperDevTool {
    base_url: String,
    api_key: Option<String>,
    n_results: u32,
    country: String,
    locale: String,
    location: String,
    search_type: SearchType,
    client: OnceLock<reqwest::Client>,
}

/// The constructor arguments a project file may give (`tools: [{name: SerperDevTool, n_results: 5}]`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SerperConfig {
    pub n_results: Option<u32>,
    pub country: Option<String>,
    pub locale: Option<String>,
    pub location: Option<String>,
    pub search_type: Option<SearchType>,
    pub base_url: Option<String>,
}

/// Arguments of the search, as the model gives them.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SerperSearchArgs {
    /// The search query to look up on the internet.
    pub search_query: String,
}

impl Default for SerperDevTool {
    fn default() -> Self {
        SerperDevTool {
            base_url: SERPER_BASE_URL.to_string(),
            api_key: None,
            n_results: 10,
            country: String::new(),
            locale: String::new(),
            location: String::new(),
            search_type: SearchType::Search,
            client: OnceLock::new(),
        }
    }
}

impl SerperDevTool {
    pub fn new() -> Self {
        SerperDevTool::default()
    }

    /// The tool as a project file's constructor arguments describe it.
    pub fn from_config(config: SerperConfig) -> Self {
        let defaults = SerperDevTool::new();
        let tool = SerperDevTool {
            n_results: config.n_results.unwrap_or(defaults.n_results),
            country: config.country.unwrap_or_default(),
            locale: config.locale.unwrap_or_default(),
            location: config.location.unwrap_or_default(),
            search_type: config.search_type.unwrap_or_default(),
            ..defaults
        };
        match config.base_url {
            Some(url) => tool.with_base_url(url),
            None => tool,
        }
    }

    crewai_llm::setters! {
        /// Where requests go instead of Serper's own address (no trailing path).
        pub fn with_base_url(base_url: impl Into<String>) => base_url = base_url.into().trim_end_matches('/').to_string();
        /// Uses this key instead of reading `SERPER_API_KEY` at each call.
        pub fn with_api_key(api_key: impl Into<String>) => api_key = Some(api_key.into());
        /// How many results to ask for and show (Serper's `num`; default 10).
        pub fn with_n_results(n_results: u32) => n_results = n_results;
        /// Serper's `gl`: the country to search from (`us`, `fr`).
        pub fn with_country(country: impl Into<String>) => country = country.into();
        /// Serper's `hl`: the language of the results (`en`, `fr`).
        pub fn with_locale(locale: impl Into<String>) => locale = locale.into();
        /// Serper's `location` (`Paris, France`).
        pub fn with_location(location: impl Into<String>) => location = location.into();
        /// Which endpoint is searched: web results or news.
        pub fn with_search_type(search_type: SearchType) => search_type = search_type;
    }

    fn client(&self) -> Result<reqwest::Client, ToolError> {
        cached_client(&self.client, || {
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(TOTAL_TIMEOUT)
        })
    }

    fn api_key(&self) -> Result<String, ToolError> {
        if let Some(key) = &self.api_key {
            return Ok(key.clone());
        }
        std::env::var(SERPER_API_KEY_VAR)
            .ok()
            .filter(|key| !key.is_empty())
            .ok_or_else(|| ToolError::MissingEnvVar {
                tool: TypedTool::name(self).to_string(),
                var: SERPER_API_KEY_VAR.to_string(),
                description: api_key_description(),
            })
    }

    /// The JSON body Serper expects: `q` and `num`, and `gl`/`hl`/`location` when set.
    pub fn request_body(&self, query: &str) -> Value {
        let mut body = Map::new();
        body.insert("q".into(), json!(query));
        body.insert("num".into(), json!(self.n_results));
        for (key, value) in [
            ("gl", &self.country),
            ("hl", &self.locale),
            ("location", &self.location),
        ] {
            if !value.is_empty() {
                body.insert(key.into(), json!(value));
            }
        }
        Value::Object(body)
    }

    async fn search(&self, query: &str) -> Result<String, ToolError> {
        let url = format!("{}/{}", self.base_url, self.search_type.path());
        let response = self
            .client()?
            .post(&url)
            .header("X-API-KEY", self.api_key()?)
            .json(&self.request_body(query))
            .send()
            .await
            .map_err(|error| {
                let what = if error.is_timeout() {
                    "timed out"
                } else {
                    "failed"
                };
                ToolError::caused(format!("the Serper search at {url} {what}"), error)
            })?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|error| ToolError::caused("the Serper answer could not be read", error))?;
        if !status.is_success() {
            let quoted: String = text.chars().take(ERROR_BODY_CHARS).collect();
            let hint = match status.as_u16() {
                401 | 403 => " (check SERPER_API_KEY)",
                429 => " (rate limited or out of credits)",
                _ => "",
            };
            return Err(ToolError::Failed(format!(
                "Serper answered HTTP {status}{hint}: {quoted}"
            )));
        }
        let answer: Value = serde_json::from_str(&text)
            .map_err(|error| ToolError::caused("Serper's answer is not JSON", error))?;
        Ok(format_results(
            query,
            &answer,
            self.search_type,
            self.n_results as usize,
        ))
    }
}

fn api_key_description() -> String {
    "the API key of serper.dev, used for web searches".to_string()
}

fn text_of<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Serper's answer as numbered text a model can read and cite.
fn format_results(query: &str, answer: &Value, kind: SearchType, limit: usize) -> String {
    let list_key = match kind {
        SearchType::Search => "organic",
        SearchType::News => "news",
    };
    let hits: &[Value] = answer
        .get(list_key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = String::new();
    if let Some(graph) = answer.get("knowledgeGraph").filter(|g| g.is_object()) {
        let title = text_of(graph, "title");
        let kind = text_of(graph, "type");
        let description = text_of(graph, "description");
        out.push_str(&format!("Knowledge graph: {title}"));
        if !kind.is_empty() {
            out.push_str(&format!(" ({kind})"));
        }
        if !description.is_empty() {
            out.push_str(&format!(": {description}"));
        }
        out.push_str("\n\n");
    }
    if hits.is_empty() {
        out.push_str(&format!("No results found for '{query}'.\n"));
    } else {
        out.push_str(&format!("Search results for '{query}':\n"));
    }
    for (i, hit) in hits.iter().take(limit).enumerate() {
        out.push_str(&format!(
            "\n{}. {}\n   Link: {}\n",
            i + 1,
            text_of(hit, "title"),
            text_of(hit, "link")
        ));
        let date = text_of(hit, "date");
        let source = text_of(hit, "source");
        if !date.is_empty() || !source.is_empty() {
            let parts: Vec<&str> = [source, date]
                .into_iter()
                .filter(|p| !p.is_empty())
                .collect();
            out.push_str(&format!("   {}\n", parts.join(", ")));
        }
        let snippet = text_of(hit, "snippet");
        if !snippet.is_empty() {
            out.push_str(&format!("   {snippet}\n"));
        }
        if let Some(links) = hit.get("sitelinks").and_then(Value::as_array) {
            let shown: Vec<String> = links
                .iter()
                .map(|l| format!("{} ({})", text_of(l, "title"), text_of(l, "link")))
                .collect();
            if !shown.is_empty() {
                out.push_str(&format!("   Sitelinks: {}\n", shown.join("; ")));
            }
        }
    }
    if let Some(questions) = answer.get("peopleAlsoAsk").and_then(Value::as_array)
        && !questions.is_empty()
    {
        out.push_str("\nPeople also ask:\n");
        for q in questions.iter().take(limit) {
            out.push_str(&format!("- {}", text_of(q, "question")));
            let snippet = text_of(q, "snippet");
            if !snippet.is_empty() {
                out.push_str(&format!(" {snippet}"));
            }
            let link = text_of(q, "link");
            if !link.is_empty() {
                out.push_str(&format!(" ({link})"));
            }
            out.push('\n');
        }
    }
    if let Some(related) = answer.get("relatedSearches").and_then(Value::as_array) {
        let queries: Vec<&str> = related
            .iter()
            .map(|r| text_of(r, "query"))
            .filter(|q| !q.is_empty())
            .take(limit)
            .collect();
        if !queries.is_empty() {
            out.push_str(&format!("\nRelated searches: {}\n", queries.join("; ")));
        }
    }
    out.trim_end().to_string()
}

#[async_trait]
impl TypedTool for SerperDevTool {
    type Args = SerperSearchArgs;
    type Output = String;

    fn name(&self) -> &str {
        "Search the internet with Serper"
    }

    fn description(&self) -> &str {
        "Searches the internet for `search_query` and returns the top results, each with its \
         title, link and a snippet."
    }

    fn env_vars(&self) -> Vec<EnvVar> {
        vec![EnvVar {
            name: SERPER_API_KEY_VAR.to_string(),
            description: api_key_description(),
            required: self.api_key.is_none(),
            default: None,
        }]
    }

    async fn call(&self, args: SerperSearchArgs, ctx: &ToolContext) -> Result<String, ToolError> {
        let query = args.search_query.trim();
        if query.is_empty() {
            return Err(ToolError::InvalidArguments(
                "search_query is empty: give the words to search for".into(),
            ));
        }
        tokio::select! {
            result = self.search(query) => result,
            () = ctx.cancellation.cancelled() => Err(ToolError::Cancelled),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_has_only_the_set_fields() {
        let tool = SerperDevTool::new();
        assert_eq!(tool.request_body("rust"), json!({"q": "rust", "num": 10}));
        let tool = tool.with_country("fr").with_locale("fr").with_n_results(3);
        assert_eq!(
            tool.request_body("rust"),
            json!({"q": "rust", "num": 3, "gl": "fr", "hl": "fr"})
        );
    }

    #[test]
    fn results_are_numbered_and_cut_to_the_limit() {
        let answer = json!({
            "organic": [
                {"title": "A", "link": "https://a", "snippet": "about a", "position": 1},
                {"title": "B", "link": "https://b", "position": 2}
            ]
        });
        assert_eq!(
            format_results("q", &answer, SearchType::Search, 1),
            "Search results for 'q':\n\n1. A\n   Link: https://a\n   about a"
        );
        assert_eq!(
            format_results("q", &json!({}), SearchType::Search, 5),
            "No results found for 'q'."
        );
    }
}
