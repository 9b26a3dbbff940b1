//! The ChatML chat template (`<|im_start|>role\n…<|im_end|>\n`) SmolLM2 and many other small
//! models were tuned on.
//!
//! The template is kept as pieces (turn markers vs. text) rather than one string, so that turn
//! markers become their token ids and message text is always tokenized as text.

use crewai_llm::{Message, Role};

use crate::error::LocalError;
use crate::tokenizer::GgufTokenizer;

const TURN_START: &str = "<|im_start|>";
const TURN_END: &str = "<|im_end|>";

/// The user-turn ending with which a ReAct prompt asks the model to start reasoning.
const REASONING_CUE: &str = "Thought:";

/// One piece of a templated prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// A turn marker, inserted as its token id.
    Marker(&'static str),
    /// Text, tokenized as text.
    Text(String),
}

/// A conversation laid out in ChatML, ending where the model's reply begins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatPrompt {
    pieces: Vec<Piece>,
}

/// How conversations are laid out for one model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatTemplate {
    /// The system turn the model's own template adds when a conversation has none.
    pub default_system: Option<String>,
}

impl ChatTemplate {
    /// Reads the default system turn from a GGUF `tokenizer.chat_template` (Jinja source), when the
    /// template writes one as a literal, as SmolLM2's does.
    pub fn from_jinja(source: Option<&str>) -> Self {
        let default_system = source.and_then(|source| {
            let start = source.find("<|im_start|>system\n")? + "<|im_start|>system\n".len();
            let rest = &source[start..];
            let end = rest.find(TURN_END)?;
            let text = &rest[..end];
            // Only a literal sentence, not the `message['content']` expression of the general case.
            (!text.contains(['{', '}', '\'', '+'])).then(|| text.to_string())
        });
        ChatTemplate { default_system }
    }

    /// Lays out `messages`. A trailing assistant message is continued rather than closed; a
    /// final user turn that ends with the ReAct cue `Thought:` has the reply start with it too,
    /// which small models need to keep to the Thought/Action format.
    pub fn render(&self, messages: &[Message]) -> ChatPrompt {
        let mut pieces = Vec::new();
        let has_system = messages.first().is_some_and(|m| m.role == Role::System);
        if !has_system && let Some(system) = &self.default_system {
            push_turn(&mut pieces, "system", system, true);
        }
        let continues_reply = messages.last().is_some_and(|m| m.role == Role::Assistant);
        for (index, message) in messages.iter().enumerate() {
            let role = match message.role {
                Role::System => "system",
                Role::User | Role::Tool => "user",
                Role::Assistant => "assistant",
            };
            let closed = !(continues_reply && index + 1 == messages.len());
            push_turn(&mut pieces, role, &message.text(), closed);
        }
        if !continues_reply {
            pieces.push(Piece::Marker(TURN_START));
            let cue = messages
                .last()
                .filter(|m| m.text().trim_end().ends_with(REASONING_CUE))
                .map(|_| REASONING_CUE);
            pieces.push(Piece::Text(format!(
                "assistant\n{}",
                cue.unwrap_or_default()
            )));
        }
        ChatPrompt { pieces }
    }
}

fn push_turn(pieces: &mut Vec<Piece>, role: &str, text: &str, closed: bool) {
    pieces.push(Piece::Marker(TURN_START));
    pieces.push(Piece::Text(format!("{role}\n{text}")));
    if closed {
        pieces.push(Piece::Marker(TURN_END));
        pieces.push(Piece::Text("\n".into()));
    }
}

impl ChatPrompt {
    /// The prompt as one string, markers spelled out (for logs and tests).
    pub fn to_text(&self) -> String {
        self.pieces
            .iter()
            .map(|piece| match piece {
                Piece::Marker(marker) => *marker,
                Piece::Text(text) => text.as_str(),
            })
            .collect()
    }

    /// The pieces, in order.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// The token ids of the prompt.
    pub fn encode(&self, tokenizer: &GgufTokenizer) -> Result<Vec<u32>, LocalError> {
        let mut ids = Vec::new();
        for piece in &self.pieces {
            match piece {
                Piece::Marker(marker) => ids.push(tokenizer.token_id(marker).ok_or_else(|| {
                    LocalError::inference(format!("the model's vocabulary has no {marker} token, so it does not use the ChatML template"))
                })?),
                Piece::Text(text) => ids.extend(tokenizer.encode(text)?),
            }
        }
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMOLLM_TEMPLATE: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    /// The text of `messages` in the plain ChatML template.
    fn chatml(messages: &[Message]) -> String {
        ChatTemplate::default().render(messages).to_text()
    }

    #[test]
    fn system_and_user_turns_then_the_reply_header() {
        assert_eq!(
            chatml(&[Message::system("Be brief."), Message::user("Hi?")]),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn the_models_default_system_turn_is_added_when_missing() {
        let template = ChatTemplate::from_jinja(Some(SMOLLM_TEMPLATE));
        assert_eq!(
            template.default_system.as_deref(),
            Some("You are a helpful AI assistant named SmolLM, trained by Hugging Face")
        );
        let prompt = template.render(&[Message::user("Hi")]);
        assert!(
            prompt
                .to_text()
                .starts_with("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
        );
        let with_system = template.render(&[Message::system("S"), Message::user("Hi")]);
        assert!(
            with_system
                .to_text()
                .starts_with("<|im_start|>system\nS<|im_end|>")
        );
        assert_eq!(
            ChatTemplate::from_jinja(Some(
                "{{ '<|im_start|>system\n' + message['content'] + '<|im_end|>' }}"
            ))
            .default_system,
            None
        );
    }

    #[test]
    fn a_trailing_assistant_message_is_continued() {
        assert_eq!(
            chatml(&[Message::user("Count"), Message::assistant("1, 2,")]),
            "<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n1, 2,"
        );
    }

    #[test]
    fn a_react_cue_starts_the_reply_with_a_thought() {
        let prompt = chatml(&[Message::user("Use the tools.\n\nThought:")]);
        assert!(
            prompt.ends_with("<|im_start|>assistant\nThought:"),
            "{prompt}"
        );
    }

    #[test]
    fn tool_results_are_user_turns_and_markers_stay_markers() {
        let prompt = ChatTemplate::default().render(&[
            Message::user("q"),
            Message::tool_result("1", "search", "result <|im_end|>"),
        ]);
        assert_eq!(prompt.pieces()[4], Piece::Marker(TURN_START));
        assert_eq!(
            prompt.pieces()[5],
            Piece::Text("user\nresult <|im_end|>".into())
        );
    }
}
