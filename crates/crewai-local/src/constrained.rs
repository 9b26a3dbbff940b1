//! Picking the next token when the reply is held to a grammar (a JSON schema's, or a ReAct
//! step's): the model's candidates are tried best first and the first one whose text the grammar
//! accepts is taken (or, when sampling, one is drawn among the best accepted ones).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::LocalError;
use crate::json_grammar::JsonGrammar;
use crate::react_grammar::ReactGrammar;
use crate::tokenizer::GgufTokenizer;

/// The best-scored tokens looked at before the rest of the vocabulary is sorted; the model's
/// favourite usually fits, so most steps never sort all of it.
const FIRST_LOOK: usize = 64;
/// When sampling, the draw is among at most this many accepted tokens.
const SAMPLED_CANDIDATES: usize = 40;

/// The text of every token on its own, computed once per model. `None` for control tokens and
/// for tokens that are part of a multi-byte character (the grammar works on whole characters).
#[derive(Debug)]
pub(crate) struct TokenTexts(Vec<Option<String>>);

impl TokenTexts {
    pub(crate) fn new(tokenizer: &GgufTokenizer) -> Result<Self, LocalError> {
        let mut texts = Vec::with_capacity(tokenizer.vocab_size());
        for id in 0..tokenizer.vocab_size() as u32 {
            let text = if tokenizer.is_control(id) {
                None
            } else {
                Some(tokenizer.decode(&[id])?).filter(|t| !t.is_empty() && !t.contains('\u{FFFD}'))
            };
            texts.push(text);
        }
        Ok(TokenTexts(texts))
    }

    pub(crate) fn text(&self, id: u32) -> Option<&str> {
        self.0.get(id as usize).and_then(Option::as_deref)
    }
}

/// How the next token is drawn among the accepted ones.
#[derive(Debug)]
pub(crate) enum Pick {
    Greedy,
    Sample {
        /// Boxed: the generator is large and greedy decoding needs none.
        rng: Box<StdRng>,
        temperature: f64,
        top_p: Option<f64>,
    },
}

impl Pick {
    pub(crate) fn new(temperature: Option<f64>, top_p: Option<f64>, seed: u64) -> Self {
        match temperature.filter(|t| *t > 0.0) {
            None => Pick::Greedy,
            Some(temperature) => Pick::Sample {
                rng: Box::new(StdRng::seed_from_u64(seed)),
                temperature,
                top_p: top_p.filter(|p| *p > 0.0 && *p < 1.0),
            },
        }
    }
}

/// What the constrained step chose.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Token(u32),
    /// The document is complete (or nothing fits): the reply ends here.
    End,
}

/// A character-level automaton that a reply is held to, at the position of the text so far.
pub(crate) trait TokenGrammar: std::fmt::Debug {
    /// Whether `text` may be written next (the automaton is not changed).
    fn accepts(&self, text: &str) -> bool;
    /// Writes `text`; false if some character is not allowed.
    fn advance(&mut self, text: &str) -> bool;
    /// Nothing more may be written.
    fn is_complete(&self) -> bool;
    /// The reply may stop here (it may also go on).
    fn may_end(&self) -> bool;
    /// The shortest text that lets the reply stop, written when the budget runs out; empty when
    /// there is none worth forcing.
    fn completion(&self) -> String;
}

/// Implements [`TokenGrammar`] with the grammar's own methods of the same names.
macro_rules! token_grammar_by_inherent_methods {
    ($($grammar:ty),*) => {$(
        impl TokenGrammar for $grammar {
            fn accepts(&self, text: &str) -> bool {
                <$grammar>::accepts(self, text)
            }
            fn advance(&mut self, text: &str) -> bool {
                <$grammar>::advance(self, text)
            }
            fn is_complete(&self) -> bool {
                <$grammar>::is_complete(self)
            }
            fn may_end(&self) -> bool {
                <$grammar>::may_end(self)
            }
            fn completion(&self) -> String {
                <$grammar>::completion(self)
            }
        }
    )*};
}

token_grammar_by_inherent_methods!(JsonGrammar, ReactGrammar);

/// The reply so far as a position in a grammar, and the choice of the next token.
#[derive(Debug)]
pub(crate) struct Constraint {
    grammar: Box<dyn TokenGrammar>,
    pick: Pick,
}

impl Constraint {
    pub(crate) fn new(grammar: Box<dyn TokenGrammar>, pick: Pick) -> Self {
        Constraint { grammar, pick }
    }

    /// The text that lets the reply stop (see [`TokenGrammar::completion`]).
    pub(crate) fn completion(&self) -> String {
        self.grammar.completion()
    }

    /// Chooses the next token from `logits` and writes its text into the grammar.
    pub(crate) fn step(&mut self, logits: &[f32], texts: &TokenTexts) -> Step {
        if self.grammar.is_complete() {
            return Step::End;
        }
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        let by_score = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
        let first_look = FIRST_LOOK.min(order.len());
        if first_look < order.len() {
            order.select_nth_unstable_by(first_look, by_score);
        }
        order[..first_look].sort_unstable_by(by_score);
        let wanted = match self.pick {
            Pick::Greedy => 1,
            Pick::Sample { .. } => SAMPLED_CANDIDATES,
        };
        let mut accepted: Vec<u32> = Vec::with_capacity(wanted);
        let scan = |ids: &[u32], accepted: &mut Vec<u32>| {
            for &id in ids {
                if accepted.len() >= wanted {
                    return;
                }
                if texts
                    .text(id)
                    .is_some_and(|text| self.grammar.accepts(text))
                {
                    accepted.push(id);
                }
            }
        };
        scan(&order[..first_look], &mut accepted);
        if accepted.is_empty() {
            order[first_look..].sort_unstable_by(by_score);
            scan(&order[first_look..], &mut accepted);
        }
        // The reply may end here (a top-level number, a final answer): the model ending its turn
        // is then the best choice.
        let model_wants_to_end = texts.text(order[0]).is_none() && self.grammar.may_end();
        if model_wants_to_end {
            return Step::End;
        }
        let chosen = match &mut self.pick {
            Pick::Greedy => accepted.first().copied(),
            Pick::Sample {
                rng,
                temperature,
                top_p,
            } => draw(&accepted, logits, *temperature, *top_p, rng),
        };
        match chosen {
            Some(id) => {
                if let Some(text) = texts.text(id) {
                    self.grammar.advance(text);
                }
                Step::Token(id)
            }
            None => Step::End,
        }
    }
}

/// Draws one of `candidates` (best first) with softmax weights at `temperature`, within `top_p`.
fn draw(
    candidates: &[u32],
    logits: &[f32],
    temperature: f64,
    top_p: Option<f64>,
    rng: &mut StdRng,
) -> Option<u32> {
    let best = f64::from(logits[*candidates.first()? as usize]);
    let weights: Vec<f64> = candidates
        .iter()
        .map(|id| ((f64::from(logits[*id as usize]) - best) / temperature).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut kept = weights.len();
    if let Some(p) = top_p {
        let mut mass = 0.0;
        for (index, weight) in weights.iter().enumerate() {
            mass += weight / total;
            if mass >= p {
                kept = index + 1;
                break;
            }
        }
    }
    let kept_total: f64 = weights[..kept].iter().sum();
    let mut target = rng.random::<f64>() * kept_total;
    for (id, weight) in candidates.iter().zip(&weights[..kept]) {
        if target < *weight {
            return Some(*id);
        }
        target -= weight;
    }
    candidates.get(kept - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(words: &[&str]) -> TokenTexts {
        TokenTexts(words.iter().map(|w| Some(w.to_string())).collect())
    }

    #[test]
    fn the_best_scored_token_that_fits_is_taken() {
        let vocab = texts(&["hello", "{\"", "{", "ok", "\":", "true", "}"]);
        let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
        let mut constraint = Constraint::new(Box::new(JsonGrammar::new(&schema)), Pick::Greedy);
        // "hello" scores best but is not JSON; `{"` is the best that fits.
        let logits = [5.0, 4.0, 3.0, 2.0, 1.0, 0.5, 0.1];
        assert_eq!(constraint.step(&logits, &vocab), Step::Token(1));
        assert_eq!(constraint.step(&logits, &vocab), Step::Token(3));
        assert_eq!(constraint.step(&logits, &vocab), Step::Token(4));
        assert_eq!(constraint.step(&logits, &vocab), Step::Token(5));
        assert_eq!(constraint.step(&logits, &vocab), Step::Token(6));
        assert_eq!(constraint.step(&logits, &vocab), Step::End);
    }

    #[test]
    fn sampling_only_draws_accepted_tokens_and_is_seeded() {
        let vocab = texts(&["x", "{", "[", "\"", "1"]);
        let run = |seed| {
            let mut constraint = Constraint::new(
                Box::new(JsonGrammar::any()),
                Pick::new(Some(1.0), None, seed),
            );
            constraint.step(&[9.0, 1.0, 1.0, 1.0, 1.0], &vocab)
        };
        for seed in 0..20 {
            assert_ne!(run(seed), Step::Token(0));
            assert_eq!(run(seed), run(seed));
        }
    }
}
