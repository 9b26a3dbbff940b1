//! The two delegation tools CrewAI gives managers and delegating agents,
//! `delegate_work_to_coworker(task, context, coworker)` and
//! `ask_question_to_coworker(question, context, coworker)`, plus a guard CrewAI lacks: a
//! maximum delegation depth and no handing work back to an agent already on the chain.
//!
//! The tools only parse, match and guard; running the coworker is left to a
//! [`CoworkerRunner`] the crew provides, so the coworker's run gets the crew's events, usage,
//! limits and deadlines.

use std::sync::Arc;

use async_trait::async_trait;
use crewai_tools::{Tool, ToolContext, ToolError, ToolHandle, ToolOutput};
use serde_json::{Value, json};

use crate::prompts::crew as prompts;

/// The default maximum number of hand-offs in one delegation chain.
pub const DEFAULT_MAX_DELEGATION_DEPTH: usize = 3;

/// Which delegation tool was used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelegationKind {
    /// `delegate_work_to_coworker`
    Delegate,
    /// `ask_question_to_coworker`
    Ask,
}

impl DelegationKind {
    /// `delegate` or `ask`, as in the delegation events.
    pub fn as_str(self) -> &'static str {
        match self {
            DelegationKind::Delegate => "delegate",
            DelegationKind::Ask => "ask",
        }
    }
}

/// One hand-off the delegation tools approved.
#[derive(Debug, Clone, PartialEq)]
pub struct DelegationRequest {
    pub kind: DelegationKind,
    /// The coworker's role, as the crew spells it.
    pub coworker: String,
    /// The task or the question.
    pub work: String,
    pub context: String,
    /// The roles that handed this work on so far, the delegating agent last; the coworker's own
    /// delegation tools must be built with `chain + [coworker]`.
    pub chain: Vec<String>,
}

/// Runs a coworker on delegated work and returns its answer (the tool's observation).
#[async_trait]
pub trait CoworkerRunner: Send + Sync {
    async fn run_coworker(
        &self,
        request: DelegationRequest,
        ctx: &ToolContext,
    ) -> Result<String, String>;
}

/// Where a delegating agent stands: who it may delegate to and how it got the work.
#[derive(Clone)]
pub struct DelegationScope {
    /// Roles of the agents it may hand work to.
    pub coworkers: Vec<String>,
    /// Roles that handed the work on so far, the delegating agent last.
    pub chain: Vec<String>,
    pub max_depth: usize,
    pub runner: Arc<dyn CoworkerRunner>,
}

impl DelegationScope {
    /// The two tools, delegate first, as CrewAI orders them.
    pub fn tools(&self) -> Vec<ToolHandle> {
        [DelegationKind::Delegate, DelegationKind::Ask]
            .into_iter()
            // A delegation is work, not a pure lookup: never served from the tool cache.
            .map(|kind| {
                ToolHandle::new(Arc::new(
                    DelegationTool {
                        kind,
                        scope: self.clone(),
                        description: String::new(),
                    }
                    .described(),
                ))
                .with_cache_function(|_, _| false)
            })
            .collect()
    }
}

/// `delegate_work_to_coworker` or `ask_question_to_coworker`.
pub struct DelegationTool {
    kind: DelegationKind,
    scope: DelegationScope,
    description: String,
}

impl DelegationTool {
    /// The coworkers this tool offers: the crew's, less the roles already in the chain.
    fn listed_coworkers(&self) -> Vec<String> {
        self.scope
            .coworkers
            .iter()
            .filter(|c| !self.scope.chain.iter().any(|on| same_role(on, c)))
            .cloned()
            .collect()
    }

    fn described(mut self) -> Self {
        let listed = self.listed_coworkers();
        self.description = match self.kind {
            DelegationKind::Delegate => prompts::delegate_tool_description(&listed),
            DelegationKind::Ask => prompts::ask_tool_description(&listed),
        };
        self
    }

    fn work_argument(&self) -> &'static str {
        match self.kind {
            DelegationKind::Delegate => "task",
            DelegationKind::Ask => "question",
        }
    }
}

/// Normalises a coworker name the way CrewAI does: quotes removed, a `[a, b]` list reduced to
/// its first entry, whitespace collapsed, case folded.
pub fn normalize_coworker(name: &str) -> String {
    let mut text = name.trim().to_string();
    if let Some(inner) = text
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
    {
        text = inner.split(',').next().unwrap_or_default().to_string();
    }
    let text = text.replace(['"', '\''], "");
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

fn same_role(a: &str, b: &str) -> bool {
    normalize_coworker(a) == normalize_coworker(b)
}

/// A string argument; models sometimes send objects or lists for context, which are kept as JSON.
fn text_argument(args: &Value, name: &str) -> Option<String> {
    match args.get(name)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Array(items) if name == "coworker" => items.first().map(|first| {
            first
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| first.to_string())
        }),
        other => Some(other.to_string()),
    }
}

#[async_trait]
impl Tool for DelegationTool {
    fn name(&self) -> &str {
        match self.kind {
            DelegationKind::Delegate => "Delegate work to coworker",
            DelegationKind::Ask => "Ask question to coworker",
        }
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        let (work, work_description) = match self.kind {
            DelegationKind::Delegate => ("task", prompts::DELEGATE_TASK_ARG),
            DelegationKind::Ask => ("question", prompts::ASK_QUESTION_ARG),
        };
        json!({
            "type": "object",
            "properties": {
                work: {"type": "string", "description": work_description},
                "context": {"type": "string", "description": prompts::CONTEXT_ARG},
                "coworker": {"type": "string", "description": prompts::COWORKER_ARG},
            },
            "required": [work, "context", "coworker"],
        })
    }

    /// A model held to the schema can only name a coworker it may hand work to.
    fn decoding_parameters(&self) -> Value {
        let mut parameters = self.parameters();
        let listed = self.listed_coworkers();
        if !listed.is_empty() {
            parameters["properties"]["coworker"]["enum"] = json!(listed);
        }
        parameters
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let work_name = self.work_argument();
        let work = text_argument(&args, work_name).ok_or_else(|| {
            ToolError::InvalidArguments(format!(
                "missing the `{work_name}` argument: say what the coworker should do"
            ))
        })?;
        let context = text_argument(&args, "context").unwrap_or_default();
        let named = text_argument(&args, "coworker")
            .or_else(|| text_argument(&args, "co_worker"))
            .ok_or_else(|| {
                ToolError::InvalidArguments(
                    "missing the `coworker` argument: name one of the listed coworkers".into(),
                )
            })?;

        let wanted = normalize_coworker(&named);
        let Some(coworker) = self
            .scope
            .coworkers
            .iter()
            .find(|role| normalize_coworker(role) == wanted)
        else {
            let listed: Vec<String> = self
                .scope
                .coworkers
                .iter()
                .map(|role| normalize_coworker(role))
                .collect();
            return Ok(ToolOutput::Text(prompts::unknown_coworker(&named, &listed)));
        };
        if self.scope.chain.iter().any(|on| same_role(on, coworker)) {
            return Ok(ToolOutput::Text(prompts::delegation_cycle(
                coworker,
                &self.scope.chain,
            )));
        }
        // A chain of n roles has made n - 1 hand-offs; this one would be the n-th.
        if self.scope.chain.len() > self.scope.max_depth {
            return Ok(ToolOutput::Text(prompts::delegation_too_deep(
                self.scope.max_depth,
                &self.scope.chain,
            )));
        }

        let request = DelegationRequest {
            kind: self.kind,
            coworker: coworker.clone(),
            work,
            context,
            chain: self.scope.chain.clone(),
        };
        match self.scope.runner.run_coworker(request, ctx).await {
            Ok(answer) => Ok(ToolOutput::Text(answer)),
            Err(error) => Ok(ToolOutput::Text(prompts::coworker_failed(coworker, &error))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Recorder {
        seen: Mutex<Vec<DelegationRequest>>,
    }

    #[async_trait]
    impl CoworkerRunner for Recorder {
        async fn run_coworker(
            &self,
            request: DelegationRequest,
            _ctx: &ToolContext,
        ) -> Result<String, String> {
            let answer = format!("{} did it", request.coworker);
            self.seen.lock().unwrap().push(request);
            Ok(answer)
        }
    }

    fn scope(chain: &[&str], runner: Arc<Recorder>) -> DelegationScope {
        DelegationScope {
            coworkers: vec!["Senior Writer".into(), "Researcher".into(), "CEO".into()],
            chain: chain.iter().map(|s| s.to_string()).collect(),
            max_depth: 2,
            runner,
        }
    }

    async fn call(tool: &ToolHandle, args: Value) -> String {
        tool.tool()
            .run(args, &ToolContext::default())
            .await
            .unwrap()
            .to_text()
    }

    #[tokio::test]
    async fn names_schema_and_description_match_crewai() {
        let tools = scope(&["CEO"], Arc::default()).tools();
        assert_eq!(
            tools
                .iter()
                .map(|t| t.name().to_string())
                .collect::<Vec<_>>(),
            ["delegate_work_to_coworker", "ask_question_to_coworker"]
        );
        assert!(tools[0].description().starts_with("Delegate a specific task to one of the following coworkers: Senior Writer, Researcher\n"));
        let params = tools[1].parameters();
        assert_eq!(
            params["required"],
            json!(["question", "context", "coworker"])
        );
    }

    #[tokio::test]
    async fn only_constrained_decoding_sees_the_coworkers_as_an_enum() {
        let tools = scope(&["CEO"], Arc::default()).tools();
        let coworker = |definition: crewai_llm::ToolDefinition| {
            definition.parameters["properties"]["coworker"].clone()
        };
        assert_eq!(
            coworker(tools[0].decoding_definition())["enum"],
            json!(["Senior Writer", "Researcher"])
        );
        assert!(coworker(tools[0].definition()).get("enum").is_none());
    }

    #[tokio::test]
    async fn coworker_matching_ignores_case_space_and_lists() {
        let runner = Arc::new(Recorder::default());
        let tools = scope(&["CEO"], runner.clone()).tools();
        let answer = call(
            &tools[0],
            json!({"task": "write", "context": "ctx", "coworker": "  senior   WRITER "}),
        )
        .await;
        assert_eq!(answer, "Senior Writer did it");
        call(
            &tools[1],
            json!({"question": "q", "context": "c", "co_worker": "[Researcher, CEO]"}),
        )
        .await;
        let seen = runner.seen.lock().unwrap();
        assert_eq!(seen[1].coworker, "Researcher");
        assert_eq!(seen[1].kind, DelegationKind::Ask);
        assert_eq!(seen[0].chain, vec!["CEO".to_string()]);
    }

    #[tokio::test]
    async fn unknown_coworker_lists_the_options() {
        let tools = scope(&["CEO"], Arc::default()).tools();
        let answer = call(
            &tools[0],
            json!({"task": "t", "context": "c", "coworker": "Designer"}),
        )
        .await;
        assert!(
            answer.contains("Designer")
                && answer.contains("- senior writer")
                && answer.contains("- researcher"),
            "{answer}"
        );
    }

    #[tokio::test]
    async fn cycles_and_depth_are_refused_with_a_reason() {
        let runner = Arc::new(Recorder::default());
        let tools = scope(&["CEO", "Researcher"], runner.clone()).tools();
        let answer = call(
            &tools[0],
            json!({"task": "t", "context": "c", "coworker": "ceo"}),
        )
        .await;
        assert!(
            answer.contains("already working on this request")
                && answer.contains("CEO -> Researcher"),
            "{answer}"
        );
        let mut scope_deep = scope(&["A", "B", "C"], runner.clone());
        scope_deep.coworkers.push("D".into());
        let answer = call(
            &scope_deep.tools()[0],
            json!({"task": "t", "context": "c", "coworker": "D"}),
        )
        .await;
        assert!(answer.contains("the most allowed"), "{answer}");
        assert!(runner.seen.lock().unwrap().is_empty());
    }
}
