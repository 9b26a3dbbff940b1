//! [`KickoffOptions`]: how one kickoff, of a crew or of an agent alone, fits into a larger run.

use crewai_llm::ResponseFormat;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::events::EventBus;
use crate::usage::UsageTracker;

/// How a kickoff is embedded in a larger run: the options of
/// [`Crew::kickoff_with`](crate::crew::Crew::kickoff_with) (and `replay_with`, `resume_with`,
/// `fork_with`) and of [`Agent::kickoff_with`](crate::agent::Agent::kickoff_with). Everything is
/// optional; the default is a kickoff on its own.
///
/// Most settings apply to both kinds of kickoff. Those that apply to one kind only are refused by
/// the other rather than ignored: [`KickoffOptions::run_id`] is a crew's (a crew's run is
/// journaled, an agent's is not); [`KickoffOptions::event_bus`] and
/// [`KickoffOptions::response_format`] are an agent's (an agent alone reports to the bus it is
/// given and answers in the format it is asked; a crew reports to its own bus, and its tasks carry
/// their own formats).
///
/// ```
/// use crewai_core::KickoffOptions;
/// use tokio_util::sync::CancellationToken;
///
/// let stop = CancellationToken::new();
/// let options = KickoffOptions::new().run_id("nightly-1").cancellation(stop.clone());
/// assert_eq!(options.run_id_ref(), Some("nightly-1"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct KickoffOptions {
    pub(crate) parent_event_id: Option<Uuid>,
    pub(crate) cancellation: Option<CancellationToken>,
    pub(crate) usage: Option<UsageTracker>,
    pub(crate) run_id: Option<String>,
    pub(crate) events: Option<EventBus>,
    pub(crate) response_format: Option<ResponseFormat>,
    /// Set by `Crew::train` for its kickoffs.
    pub(crate) training: Option<crate::training::TrainingRun>,
}

impl KickoffOptions {
    /// A kickoff on its own (the same as `KickoffOptions::default()`).
    pub fn new() -> Self {
        Self::default()
    }

    setters! {
        /// The event the kickoff's first event (`crew_kickoff_started`,
        /// `lite_agent_execution_started`) hangs under: a flow method's event, say.
        pub fn parent_event(event_id: Uuid) => parent_event_id = Some(event_id);
        /// Cancelling `token` abandons the kickoff: a crew's then fails with
        /// [`CrewError::Cancelled`](crate::crew::CrewError::Cancelled) and is journaled as
        /// cancelled (so it can be resumed); an agent's stops its in-flight call.
        pub fn cancellation(token: CancellationToken) => cancellation = Some(token);
        /// An enclosing run's ledger (a flow's): every call of the kickoff counts there too and is
        /// held to that ledger's budget. A crew keeps its own usage and budget besides.
        pub fn usage(ledger: UsageTracker) => usage = Some(ledger);
        /// The id a crew journals its run under (default: a new UUID). Choosing it lets the caller
        /// name the run before it starts, to print it or to resume it after a crash. Crews only.
        pub fn run_id(id: impl Into<String>) => run_id = Some(id.into());
        /// Where an agent's kickoff reports its events (default: the agent's own bus, or a fresh
        /// one). Agents only: a crew reports to the bus it was built with
        /// ([`CrewBuilder::event_bus`](crate::crew::CrewBuilder::event_bus)).
        pub fn event_bus(bus: EventBus) => events = Some(bus);
        /// Ask an agent's kickoff for structured output (see
        /// [`Agent::kickoff_with_format`](crate::agent::Agent::kickoff_with_format)). Agents only:
        /// a crew's tasks carry their own output formats.
        pub fn response_format(format: ResponseFormat) => response_format = Some(format);
    }

    /// The run id set with [`KickoffOptions::run_id`].
    pub fn run_id_ref(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// The first setting a crew's kickoff cannot honour, with what to do instead.
    pub(crate) fn refused_by_a_crew(&self) -> Option<String> {
        if self.events.is_some() {
            return Some(
                "`KickoffOptions::event_bus` applies to an agent's kickoff; a crew reports to the bus it was built with (`CrewBuilder::event_bus`)".into(),
            );
        }
        self.response_format.as_ref().map(|_| {
            "`KickoffOptions::response_format` applies to an agent's kickoff; give the crew's tasks their output formats (`TaskBuilder::output_json`, `output_pydantic`)".into()
        })
    }

    /// The first setting an agent's kickoff cannot honour, with what to do instead.
    pub(crate) fn refused_by_an_agent(&self) -> Option<String> {
        self.run_id.as_ref().map(|_| {
            "`KickoffOptions::run_id` applies to a crew's kickoff: an agent's kickoff is not journaled".into()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_kickoff_refuses_the_other_kinds_settings() {
        assert_eq!(KickoffOptions::new().refused_by_a_crew(), None);
        assert_eq!(KickoffOptions::new().refused_by_an_agent(), None);
        let shared = KickoffOptions::new()
            .parent_event(Uuid::new_v4())
            .cancellation(CancellationToken::new())
            .usage(UsageTracker::new());
        assert_eq!(shared.refused_by_a_crew(), None);
        assert_eq!(shared.refused_by_an_agent(), None);

        let for_a_crew = shared.clone().run_id("r1");
        assert_eq!(for_a_crew.refused_by_a_crew(), None);
        assert!(for_a_crew.refused_by_an_agent().unwrap().contains("run_id"));

        let for_an_agent = shared.event_bus(EventBus::new());
        assert_eq!(for_an_agent.refused_by_an_agent(), None);
        assert!(
            for_an_agent
                .refused_by_a_crew()
                .unwrap()
                .contains("event_bus")
        );
        let formatted = KickoffOptions::new().response_format(ResponseFormat {
            name: "Answer".into(),
            schema: serde_json::json!({"type": "object"}),
            strict: true,
        });
        assert!(
            formatted
                .refused_by_a_crew()
                .unwrap()
                .contains("response_format")
        );
    }
}
