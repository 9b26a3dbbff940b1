//! Triggers: what makes a method run.
//!
//! A trigger names a method (it fires when that method completes) or a label (it fires when a
//! router returns it, or a human-feedback outcome selects it), or combines triggers: [`or`] fires
//! on any part, [`and`] is a join that fires once all its parts have completed, then re-arms (so a
//! cycle that completes every part again fires it again).
//!
//! ```
//! use crewai_flow::{and, on, or, Trigger};
//! let t: Trigger = or([on("fetch"), and(["left", "right"])]);
//! assert_eq!(t.to_string(), "or(fetch, and(left, right))");
//! assert_eq!(t.names(), vec!["fetch", "left", "right"]);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A method's trigger: a name (method or label) or an `or` / `and` tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// The completion of the method, or the emission of the label, with this name.
    On(String),
    /// Fires when any part fires.
    Or(Vec<Trigger>),
    /// Fires when every part has fired since the join last fired.
    And(Vec<Trigger>),
}

/// A trigger on one method name or label.
pub fn on(name: impl Into<String>) -> Trigger {
    Trigger::On(name.into())
}

/// A trigger that fires when any of `parts` fires (CrewAI's `or_`).
pub fn or<T: Into<Trigger>>(parts: impl IntoIterator<Item = T>) -> Trigger {
    Trigger::Or(parts.into_iter().map(Into::into).collect())
}

/// A join that fires once all of `parts` have fired in this run (CrewAI's `and_`).
pub fn and<T: Into<Trigger>>(parts: impl IntoIterator<Item = T>) -> Trigger {
    Trigger::And(parts.into_iter().map(Into::into).collect())
}

impl From<&str> for Trigger {
    fn from(name: &str) -> Self {
        on(name)
    }
}

impl From<String> for Trigger {
    fn from(name: String) -> Self {
        on(name)
    }
}

impl From<&String> for Trigger {
    fn from(name: &String) -> Self {
        on(name.clone())
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, word: &str, parts: &[Trigger]| {
            write!(f, "{word}(")?;
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    write!(f, ", ")?;
                }
                write!(f, "{part}")?;
            }
            write!(f, ")")
        };
        match self {
            Trigger::On(name) => write!(f, "{name}"),
            Trigger::Or(parts) => list(f, "or", parts),
            Trigger::And(parts) => list(f, "and", parts),
        }
    }
}

impl Trigger {
    /// Every name the trigger mentions, in order of appearance, without repeats.
    pub fn names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_names(&mut out);
        out
    }

    fn collect_names<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Trigger::On(name) => {
                if !out.contains(&name.as_str()) {
                    out.push(name);
                }
            }
            Trigger::Or(parts) | Trigger::And(parts) => {
                parts.iter().for_each(|p| p.collect_names(out))
            }
        }
    }

    /// The first `or(..)`/`and(..)` without parts, if any.
    pub(crate) fn first_empty_combinator(&self) -> Option<&'static str> {
        match self {
            Trigger::On(_) => None,
            Trigger::Or(parts) if parts.is_empty() => Some("or"),
            Trigger::And(parts) if parts.is_empty() => Some("and"),
            Trigger::Or(parts) | Trigger::And(parts) => {
                parts.iter().find_map(Trigger::first_empty_combinator)
            }
        }
    }
}

/// Progress of the `and` joins of one trigger: for each join (numbered depth-first, from 0), the
/// positions of the parts that have fired since it last fired. Saved with the flow's progress so
/// a resumed run keeps half-completed joins.
pub type JoinProgress = BTreeMap<usize, BTreeSet<usize>>;

impl Trigger {
    /// Feeds one completed method or emitted label to the trigger; returns whether it fires now.
    /// Every part is evaluated (not short-circuited) so joins nested in an `or` record progress.
    pub(crate) fn fire(&self, event: &str, progress: &mut JoinProgress) -> bool {
        let mut next_join = 0;
        self.fire_at(event, progress, &mut next_join)
    }

    fn fire_at(&self, event: &str, progress: &mut JoinProgress, next_join: &mut usize) -> bool {
        match self {
            Trigger::On(name) => name == event,
            Trigger::Or(parts) => parts.iter().fold(false, |fired, part| {
                part.fire_at(event, progress, next_join) | fired
            }),
            Trigger::And(parts) => {
                let join = *next_join;
                *next_join += 1;
                let mut done = progress.remove(&join).unwrap_or_default();
                for (position, part) in parts.iter().enumerate() {
                    if part.fire_at(event, progress, next_join) {
                        done.insert(position);
                    }
                }
                if done.len() == parts.len() {
                    true
                } else {
                    if !done.is_empty() {
                        progress.insert(join, done);
                    }
                    false
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(trigger: &Trigger, events: &[&str]) -> Vec<bool> {
        let mut progress = JoinProgress::new();
        events
            .iter()
            .map(|e| trigger.fire(e, &mut progress))
            .collect()
    }

    #[test]
    fn a_name_fires_on_itself_only() {
        assert_eq!(feed(&on("a"), &["b", "a", "a"]), vec![false, true, true]);
    }

    #[test]
    fn or_fires_on_any_part() {
        assert_eq!(
            feed(&or(["a", "b"]), &["c", "a", "b"]),
            vec![false, true, true]
        );
    }

    #[test]
    fn and_fires_once_all_parts_completed_then_rearms() {
        let join = and(["a", "b"]);
        assert_eq!(
            feed(&join, &["a", "a", "b", "b", "a"]),
            vec![false, false, true, false, true]
        );
    }

    #[test]
    fn nested_join_inside_or_keeps_its_progress() {
        let trigger = or([on("x"), and(["a", "b"])]);
        assert_eq!(feed(&trigger, &["a", "x", "b"]), vec![false, true, true]);
    }

    #[test]
    fn nested_or_inside_and_counts_as_one_part() {
        let trigger = and([or(["a", "b"]), on("c")]);
        assert_eq!(
            feed(&trigger, &["a", "b", "c", "c"]),
            vec![false, false, true, false]
        );
    }

    #[test]
    fn display_and_empty_detection() {
        assert_eq!(
            and([or(["a", "b"]), on("c")]).to_string(),
            "and(or(a, b), c)"
        );
        assert_eq!(
            or([and(Vec::<Trigger>::new())]).first_empty_combinator(),
            Some("and")
        );
        assert_eq!(on("a").first_empty_combinator(), None);
    }
}
