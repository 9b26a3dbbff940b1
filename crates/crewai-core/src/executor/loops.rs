//! The three loops and the forced final answer.

use crewai_llm::{Message, ToolCall};

use super::llm_call::{CallShape, parse_structured};
use super::react::{self, OBSERVATION_STOP, ReactStep};
use super::{Execution, LoopMode, LoopOutcome, RunKind};
use crate::agent::AgentStep;
use crate::error::AgentError;
use crate::prompts::agent as prompts;

impl Execution {
    /// The execution's work from `messages`: its plan carried out when it plans, else [`Self::act`].
    pub(crate) async fn run_loop(&self, messages: Vec<Message>) -> Result<LoopOutcome, AgentError> {
        match self.planning.clone() {
            Some(config) => self.plan_and_execute(&config, messages).await,
            None => self.act(messages).await,
        }
    }

    /// The loop the model and tools call for, from `messages` to a final answer.
    pub(crate) async fn act(&self, messages: Vec<Message>) -> Result<LoopOutcome, AgentError> {
        match self.mode {
            LoopMode::Native => self.native_loop(messages).await,
            LoopMode::React => self.react_loop(messages, 0).await,
            LoopMode::Direct => self.direct_answer(messages).await,
        }
    }

    pub(crate) fn finish(
        &self,
        messages: Vec<Message>,
        output: String,
        thought: Option<String>,
    ) -> Result<LoopOutcome, AgentError> {
        if output.trim().is_empty() {
            return Err(AgentError::EmptyAnswer {
                role: self.role().to_string(),
            });
        }
        self.report_step(AgentStep::FinalAnswer {
            output: output.clone(),
            thought,
        });
        Ok(LoopOutcome {
            output,
            typed: None,
            messages,
            result_as_answer: false,
        })
    }

    fn tool_answer(&self, messages: Vec<Message>, output: String) -> LoopOutcome {
        self.report_step(AgentStep::FinalAnswer {
            output: output.clone(),
            thought: None,
        });
        LoopOutcome {
            output,
            typed: None,
            messages,
            result_as_answer: true,
        }
    }

    /// Native tool calling: text ends the run; tool calls run and their results go back.
    async fn native_loop(&self, mut messages: Vec<Message>) -> Result<LoopOutcome, AgentError> {
        let definitions = self.tools.definitions();
        let mut iterations = 0;
        loop {
            if iterations >= self.max_iter {
                return self.forced_final_answer(messages, iterations).await;
            }
            let response = match self
                .call_model(
                    &mut messages,
                    CallShape {
                        tools: &definitions,
                        iterations,
                        ..Default::default()
                    },
                )
                .await
            {
                Ok(response) => response,
                // The adapter decided it from the provider's error body (crewai-llm's
                // `LlmError::ToolsUnsupported`): the run goes on in ReAct text mode.
                Err(AgentError::Llm { source, .. }) if source.is_tools_unsupported() => {
                    tracing::warn!(
                        agent = self.role(),
                        error = crewai_llm::error_chain(&source),
                        "the provider refused native tools; continuing with ReAct text tool calls"
                    );
                    messages.push(Message::user(prompts::native_tools_unavailable(
                        &self.react_instructions(),
                    )));
                    return self.react_loop(messages, iterations).await;
                }
                Err(error) => return Err(error),
            };
            messages.push(response.to_message());
            if response.tool_calls.is_empty() {
                let text = response.content.unwrap_or_default();
                return self.finish(messages, text, None);
            }
            let results = self.run_native_calls(&response.tool_calls).await?;
            let mut answer = None;
            for (call, result) in response.tool_calls.iter().zip(results) {
                messages.push(tool_message(call, &result.text));
                if result.is_answer && answer.is_none() {
                    answer = Some(result.text);
                }
            }
            if let Some(answer) = answer {
                return Ok(self.tool_answer(messages, answer));
            }
            // As CrewAI's task executor: one user turn after the results asks for the next step
            // (the conformance cassettes carry it; Agent::kickoff's executor sends none).
            if self.kind == RunKind::Task {
                messages.push(Message::user(prompts::AFTER_TOOLS_NATIVE));
            }
            iterations += 1;
        }
    }

    /// ReAct text: parse each reply; actions run a tool and the observation goes back.
    async fn react_loop(
        &self,
        mut messages: Vec<Message>,
        mut iterations: u32,
    ) -> Result<LoopOutcome, AgentError> {
        let stop = vec![OBSERVATION_STOP.to_string()];
        let definitions = self.tools.decoding_definitions();
        loop {
            if iterations >= self.max_iter {
                return self.forced_final_answer(messages, iterations).await;
            }
            let response = self
                .call_model(
                    &mut messages,
                    CallShape {
                        stop: &stop,
                        iterations,
                        react_tools: &definitions,
                        ..Default::default()
                    },
                )
                .await?;
            let reply = response.content.unwrap_or_default();
            match react::parse(&reply) {
                ReactStep::Finish {
                    thought,
                    output,
                    text,
                } => {
                    messages.push(Message::assistant(text));
                    return self.finish(messages, output, Some(thought).filter(|t| !t.is_empty()));
                }
                ReactStep::Action {
                    thought,
                    tool,
                    tool_input,
                    text,
                } => {
                    let result = self
                        .run_tool(
                            &tool,
                            &serde_json::Value::String(tool_input),
                            Some(&thought),
                        )
                        .await?;
                    messages.push(Message::assistant(format!(
                        "{text}\nObservation: {}",
                        result.text
                    )));
                    if result.is_answer {
                        return Ok(self.tool_answer(messages, result.text));
                    }
                    messages.push(Message::user(prompts::AFTER_TOOL_REACT));
                    iterations += 1;
                }
            }
        }
    }

    /// No tools: one call (with the response format when asked), the reply is the answer.
    pub(crate) async fn direct_answer(
        &self,
        mut messages: Vec<Message>,
    ) -> Result<LoopOutcome, AgentError> {
        let structured = self.response_format.is_some();
        let shape = CallShape {
            structured,
            ..Default::default()
        };
        let reply = self.reply_text(&mut messages, shape).await?;
        messages.push(Message::assistant(reply.clone()));
        if structured {
            // The stack's events layer already refused a reply that is not JSON, so this parse
            // succeeds; an after-hook may still have replaced the text, which is checked again.
            let typed = parse_structured(&reply).map_err(|problem| self.not_json_error(problem))?;
            let mut outcome = self.finish(messages, reply.trim().to_string(), None)?;
            outcome.typed = Some(typed);
            return Ok(outcome);
        }
        let (output, thought) = final_answer(&reply);
        self.finish(messages, output, thought)
    }

    /// `max_iter` reached: tell the model to answer now and make one call without tools.
    async fn forced_final_answer(
        &self,
        mut messages: Vec<Message>,
        iterations: u32,
    ) -> Result<LoopOutcome, AgentError> {
        messages.push(Message::assistant(prompts::FORCED_FINAL_ANSWER));
        let shape = CallShape {
            iterations,
            ..Default::default()
        };
        let reply = self.reply_text(&mut messages, shape).await?;
        let (output, _) = final_answer(&reply);
        messages.push(Message::assistant(reply));
        self.finish(messages, output, None)
    }

    /// The text of a call made without tools.
    async fn reply_text(
        &self,
        messages: &mut Vec<Message>,
        shape: CallShape<'_>,
    ) -> Result<String, AgentError> {
        let response = self.call_model(messages, shape).await?;
        Ok(response.content.unwrap_or_default())
    }
}

/// A reply made without tools, read as the final answer: its answer and thought, or the whole
/// reply when it names an action (no tool can run, so the reply itself is the answer).
fn final_answer(reply: &str) -> (String, Option<String>) {
    match react::parse(reply) {
        ReactStep::Finish {
            output, thought, ..
        } => (output, Some(thought).filter(|t| !t.is_empty())),
        ReactStep::Action { .. } => (reply.trim().to_string(), None),
    }
}

fn tool_message(call: &ToolCall, text: &str) -> Message {
    Message::tool_result(call.id.clone(), call.name.clone(), text)
}
