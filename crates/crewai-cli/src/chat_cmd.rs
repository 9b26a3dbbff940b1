//! `crewai chat`: a conversation with the crew's `chat_llm` (or `--llm`), as CrewAI's chat: the
//! model is told what the crew does and which inputs it needs, talks with the user until it has
//! them, then calls the crew as a tool; the crew's kickoff (journaled like `crewai run`'s, the
//! conversation so far passed as its `crew_chat_messages` input) is the tool's result, which the
//! model relays. `exit`, `quit` or the end of input ends it. A crew without `chat_llm` is asked
//! for its inputs at the prompt instead, then run.
//!
//! Unlike CrewAI, the crew's and the inputs' descriptions are taken from the project's tasks, not
//! written by an extra model call: the first reply comes one call sooner and costs nothing more.

use std::io::{BufRead, Write};

use anyhow::anyhow;
use crewai_core::interpolate::{CHAT_MESSAGES_INPUT, Inputs};
use crewai_llm::{Llm, LlmConfig, LlmRequest, Message, ToolCall, ToolDefinition};
use crewai_project::Project;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::cli::ChatArgs;
use crate::outcome::Failure;
use crate::run::{self, Start};

/// Model turns (each a call) allowed between two user lines: a reply may call the crew, then
/// answer; a model that keeps calling is stopped here rather than looping.
const MAX_CALLS_PER_TURN: usize = 4;

pub async fn chat(args: ChatArgs) -> Result<(), Failure> {
    let dir = args.common.project.clone();
    run::load_env(&dir)?;
    let project = run::load(&dir)?;
    let config = match (&args.common.llm, &project.crew.chat_llm) {
        (Some(model), _) => LlmConfig::new(model.clone()),
        (None, Some(config)) => config.clone(),
        (None, None) => {
            eprintln!(
                "No `chat_llm` in the crew's files (nor `--llm`): asking for the inputs instead of a conversation."
            );
            return run::ask_and_run(&project, &args.common).await;
        }
    };
    let llm = crewai_llm::build_llm_with(&config, &crate::models::llm_build_options())
        .map_err(|e| Failure::config(anyhow!(e).context("cannot set up the chat model")))?;
    let crew_tool = CrewTool::for_project(&project);
    let stdin = std::io::stdin();
    let mut conversation = Conversation::new(&project, crew_tool);
    let runner = CrewRunner {
        project: &project,
        args: &args,
    };
    conversation
        .run(
            llm.as_ref(),
            &runner,
            &mut stdin.lock(),
            &mut std::io::stdout(),
        )
        .await
}

/// The crew offered to the chat model as one function whose parameters are the crew's inputs.
struct CrewTool {
    definition: ToolDefinition,
    inputs: Vec<String>,
}

impl CrewTool {
    fn for_project(project: &Project) -> Self {
        let defaults = project.default_inputs();
        let inputs = project.required_inputs();
        let mut properties = Map::new();
        for name in &inputs {
            let description = match defaults.get(name) {
                Some(default) => format!("The crew's `{name}` input (default: {default})"),
                None => format!("The crew's `{name}` input"),
            };
            properties.insert(
                name.clone(),
                json!({"type": "string", "description": description}),
            );
        }
        let required: Vec<&String> = inputs
            .iter()
            .filter(|name| !defaults.contains_key(*name))
            .collect();
        let tasks: Vec<String> = project
            .tasks
            .iter()
            .map(|task| first_sentence(&task.spec.description.clone().unwrap_or_default()))
            .filter(|sentence| !sentence.is_empty())
            .collect();
        let definition = ToolDefinition {
            name: function_name(&project.name()),
            description: format!(
                "Runs the crew '{}' with the given inputs and returns its final answer. Its tasks: {}",
                project.name(),
                tasks.join(" ")
            ),
            parameters: json!({
                "type": "object",
                "properties": properties,
                "required": required,
            }),
            strict: false,
        };
        CrewTool { definition, inputs }
    }
}

/// Runs the crew when the model calls it.
struct CrewRunner<'a> {
    project: &'a Project,
    args: &'a ChatArgs,
}

impl CrewRunner<'_> {
    /// The crew's final answer, or what stopped it, as the model reads it.
    async fn run_crew(&self, inputs: Inputs) -> String {
        let registry = run::registry_for(self.project, &self.args.common.project);
        let run_id = uuid::Uuid::new_v4().to_string();
        eprintln!("Running the crew (run {run_id})...");
        let result = run::journaled_kickoff(
            self.project,
            &inputs,
            registry,
            &self.args.common,
            &run_id,
            Start::Kickoff(self.project.effective_inputs(&inputs)),
            CancellationToken::new(),
        )
        .await;
        match result {
            Ok((_store, Ok(output))) => output.raw,
            Ok((_store, Err(error))) => {
                format!("The crew failed: {}", crewai_llm::error_chain(&error))
            }
            Err(failure) => format!("The crew could not start: {:#}", failure.error),
        }
    }
}

struct Conversation {
    messages: Vec<Message>,
    tool: CrewTool,
}

impl Conversation {
    fn new(project: &Project, tool: CrewTool) -> Self {
        let inputs = match tool.inputs.is_empty() {
            true => "It needs no inputs.".to_string(),
            false => format!("It needs these inputs: {}.", tool.inputs.join(", ")),
        };
        let system = format!(
            "You are the assistant of the crew '{}', a team of AI agents. {} {inputs} Talk with \
             the user to learn what they want and the value of each input; when you know them \
             all, call the function `{}` with them. When it returns, tell the user its result. \
             Keep your replies short.",
            project.name(),
            tool.definition.description,
            tool.definition.name,
        );
        Conversation {
            messages: vec![Message::system(system)],
            tool,
        }
    }

    /// The model's greeting, then one model turn per line of `input` until `exit`, `quit` or
    /// the end of input.
    async fn run(
        &mut self,
        llm: &dyn Llm,
        crew: &CrewRunner<'_>,
        input: &mut impl BufRead,
        out: &mut impl Write,
    ) -> Result<(), Failure> {
        self.reply(llm, crew, out).await?;
        loop {
            write!(out, "\nYou: ")
                .and_then(|()| out.flush())
                .map_err(write_failed)?;
            let mut line = String::new();
            let read = input
                .read_line(&mut line)
                .map_err(|e| Failure::run(anyhow!(e).context("cannot read the conversation")))?;
            let line = line.trim();
            if read == 0 || matches!(line.to_ascii_lowercase().as_str(), "exit" | "quit") {
                writeln!(out).map_err(write_failed)?;
                return Ok(());
            }
            if line.is_empty() {
                continue;
            }
            self.messages.push(Message::user(line));
            self.reply(llm, crew, out).await?;
        }
    }

    /// Calls the model until it answers in text, running the crew for each call of it.
    async fn reply(
        &mut self,
        llm: &dyn Llm,
        crew: &CrewRunner<'_>,
        out: &mut impl Write,
    ) -> Result<(), Failure> {
        for _ in 0..MAX_CALLS_PER_TURN {
            let mut request = LlmRequest::new(self.messages.clone());
            request.tools = vec![self.tool.definition.clone()];
            let response = llm
                .call(request)
                .await
                .map_err(|e| Failure::run(anyhow!(e).context("the chat model failed")))?;
            if response.tool_calls.is_empty() {
                let text = response.content.unwrap_or_default();
                writeln!(out, "\nAssistant: {}", text.trim()).map_err(write_failed)?;
                self.messages.push(Message::assistant(text));
                return Ok(());
            }
            let history = self.history();
            self.messages.push(Message::assistant_tool_calls(
                response.content.clone(),
                response.tool_calls.clone(),
            ));
            for call in &response.tool_calls {
                let result = match self.inputs_of(call) {
                    Ok(mut inputs) => {
                        inputs.insert(CHAT_MESSAGES_INPUT.into(), Value::String(history.clone()));
                        crew.run_crew(inputs).await
                    }
                    Err(problem) => problem,
                };
                self.messages
                    .push(Message::tool_result(&call.id, &call.name, result));
            }
        }
        Err(Failure::run(anyhow!(
            "the chat model called the crew {MAX_CALLS_PER_TURN} times without answering"
        )))
    }

    /// The crew's inputs from a call of it, or the observation telling the model what is wrong.
    fn inputs_of(&self, call: &ToolCall) -> Result<Inputs, String> {
        if call.name != self.tool.definition.name {
            return Err(format!(
                "There is no function `{}`; call `{}`.",
                call.name, self.tool.definition.name
            ));
        }
        let Value::Object(arguments) = &call.arguments else {
            return Err("The arguments must be a JSON object of the inputs.".into());
        };
        Ok(arguments
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect())
    }

    /// The user's and the assistant's turns so far as JSON, CrewAI's `crew_chat_messages`.
    fn history(&self) -> String {
        let turns: Vec<Value> = self
            .messages
            .iter()
            .filter(|message| {
                matches!(
                    message.role,
                    crewai_llm::Role::User | crewai_llm::Role::Assistant
                )
            })
            .filter_map(|message| {
                let text = message.text();
                (!text.trim().is_empty()).then(|| {
                    let role = match message.role {
                        crewai_llm::Role::User => "user",
                        _ => "assistant",
                    };
                    json!({"role": role, "content": text})
                })
            })
            .collect();
        Value::Array(turns).to_string()
    }
}

fn write_failed(error: std::io::Error) -> Failure {
    Failure::run(anyhow!(error).context("cannot write the conversation"))
}

/// A crew name as a function name: lower case letters, digits and `_`.
fn function_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_string();
    if out.is_empty() {
        "run_crew".into()
    } else {
        out
    }
}

/// The first sentence of a task's description, on one line.
fn first_sentence(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.find(". ") {
        Some(end) => flat[..=end].to_string(),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sentences() {
        assert_eq!(
            function_name("Research & Report crew"),
            "research_report_crew"
        );
        assert_eq!(function_name("***"), "run_crew");
        assert_eq!(
            first_sentence("Find facts\n about {topic}. Then more."),
            "Find facts about {topic}."
        );
    }
}
