//! The opening messages of an execution, laid out as CrewAI lays them out.

use crewai_llm::{Message, Role};

use super::{Execution, LoopMode};
use crate::agent::KickoffInput;
use crate::prompts::agent as prompts;

impl Execution {
    /// The system prompt: role, goal and backstory; the ReAct instructions in text mode; the
    /// skills; the date. Nothing in it changes between the steps of an execution.
    pub(crate) fn system_prompt(&self) -> String {
        let agent = &self.agent;
        let mut system = prompts::role_playing(agent.role(), agent.backstory(), agent.goal());
        if self.mode == LoopMode::React {
            system.push_str(&self.react_instructions());
        }
        if let Some(skills) = &self.skills {
            system.push_str(&skills.system_block());
        }
        if agent.config.inject_date {
            let date = chrono::Local::now()
                .format(&agent.config.date_format)
                .to_string();
            system.push_str(&prompts::date_block(&date));
        }
        system
    }

    /// The ReAct tool list and reply format.
    pub(crate) fn react_instructions(&self) -> String {
        let entries: Vec<String> = self
            .tools
            .iter()
            .map(|tool| {
                let schema = serde_json::to_string_pretty(&tool.parameters())
                    .unwrap_or_else(|_| tool.parameters().to_string());
                prompts::react_tool_entry(tool.name(), &schema, tool.description())
            })
            .collect();
        prompts::react_instructions(&entries, &self.tools.names())
    }

    /// The user message that carries `task_text` in this execution's loop.
    fn task_message(&self, task_text: &str) -> String {
        match self.mode {
            LoopMode::Native => prompts::task_message_native(task_text),
            LoopMode::React => prompts::task_message_react(task_text),
            LoopMode::Direct => prompts::task_message_no_tools(task_text),
        }
    }

    /// The conversation an execution starts from: system + user message, one user message when
    /// `use_system_prompt` is off or templates are set, or the system message followed by the
    /// caller's own messages.
    pub(crate) fn opening_messages(&self, input: &KickoffInput) -> Vec<Message> {
        let system = self.system_prompt();
        let config = &self.agent.config;
        match input {
            KickoffInput::Text(task_text) => {
                let user = self.task_message(task_text);
                if let (Some(system_template), Some(prompt_template)) =
                    (&config.system_template, &config.prompt_template)
                {
                    let prompt = prompts::render_templates(
                        system_template,
                        prompt_template,
                        config.response_template.as_deref(),
                        &system,
                        &user,
                    );
                    vec![Message::user(prompt)]
                } else if !config.use_system_prompt {
                    vec![Message::user(format!("{system}{user}"))]
                } else {
                    vec![Message::system(system), Message::user(user)]
                }
            }
            KickoffInput::Messages(given) => {
                let mut messages = Vec::with_capacity(given.len() + 1);
                messages.push(if config.use_system_prompt {
                    Message::system(system)
                } else {
                    Message::user(system)
                });
                messages.extend(
                    given
                        .iter()
                        .filter(|m| config.use_system_prompt || m.role != Role::System)
                        .cloned(),
                );
                messages
            }
        }
    }
}
