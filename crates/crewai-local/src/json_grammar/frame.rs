//! Where the automaton is inside one open value: the frames of its stack.

#[cfg(doc)]
use super::compile::Node;

/// Where the automaton is inside one open value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Frame {
    /// A value of this node is expected and has not started.
    Value(usize),
    /// Inside an object of [`Node::Object`] shape.
    Object {
        node: usize,
        /// The next property that may be written.
        next: usize,
        phase: ObjectPhase,
    },
    /// Inside an object with free keys (a [`Node::Map`], or `Any`).
    Map {
        values: usize,
        phase: MapPhase,
    },
    Array(ArrayFrame),
    String {
        length: usize,
        max_length: Option<usize>,
        escape: Escape,
    },
    Number {
        integer: bool,
        phase: NumberPhase,
        digits: usize,
    },
    /// Matching some literal texts; `matched` characters of each candidate are written.
    Literal {
        candidates: Vec<String>,
        matched: usize,
    },
}

/// Inside an array of a [`Node::Array`] node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ArrayFrame {
    pub(super) node: usize,
    /// Items started so far.
    pub(super) count: usize,
    /// True right after `[` or `,`, when an item must (or, after `[`, may) start.
    pub(super) expecting_item: bool,
    pub(super) just_opened: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum ObjectPhase {
    /// After `{` or `,`: a key (of one of `candidates`, by property index) is being written.
    Key {
        candidates: Vec<usize>,
        matched: usize,
    },
    /// After `{` or after a value: a `,`/`}` or, right after `{`, a key's opening quote.
    BetweenMembers { opened: bool },
    /// After a key, before its `:`.
    Colon { property: usize },
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum MapPhase {
    /// After `{`: a key or `}`.
    Opened,
    /// After `,`: a key.
    NeedKey,
    /// The key is being read (a `String` frame sits on top), or is written and the `:` is next.
    Key,
    /// After a value: `,` or `}`.
    AfterValue,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Escape {
    None,
    /// After a backslash.
    Started,
    /// Inside `\uXXXX`, with this many hex digits left.
    Unicode(u8),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum NumberPhase {
    /// After `-`.
    Minus,
    /// After a leading `0`.
    Zero,
    /// In the integer part.
    Integer,
    /// After `.`.
    Dot,
    Fraction,
    /// After `e` / `E`.
    Exponent,
    ExponentSign,
    ExponentDigits,
}

impl NumberPhase {
    pub(super) fn complete(self) -> bool {
        matches!(
            self,
            NumberPhase::Zero
                | NumberPhase::Integer
                | NumberPhase::Fraction
                | NumberPhase::ExponentDigits
        )
    }
}
