//! Human feedback: routing answers to labels, storing them, and pausing across processes.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::{Log, no_inputs};
use crewai_flow::{
    BoxError, FeedbackProvider, FeedbackReply, FeedbackRequest, Flow, FlowContext, FlowError,
    FlowStatus, HumanFeedback, SqliteFlowPersistence, on,
};
use serde_json::json;

/// Answers from a queue and keeps the requests it was shown.
#[derive(Default)]
struct Reviewer {
    replies: Mutex<VecDeque<FeedbackReply>>,
    seen: Mutex<Vec<FeedbackRequest>>,
}

impl Reviewer {
    fn replying(replies: impl IntoIterator<Item = FeedbackReply>) -> Arc<Self> {
        Arc::new(Reviewer {
            replies: Mutex::new(replies.into_iter().collect()),
            seen: Mutex::default(),
        })
    }
}

#[async_trait]
impl FeedbackProvider for Reviewer {
    async fn request(&self, request: &FeedbackRequest) -> Result<FeedbackReply, BoxError> {
        self.seen.lock().unwrap().push(request.clone());
        self.replies
            .lock()
            .unwrap()
            .pop_front()
            .ok_or_else(|| "no reply scripted".into())
    }
}

fn review_flow(
    provider: Arc<dyn FeedbackProvider>,
    store: Option<SqliteFlowPersistence>,
    log: Log,
) -> Flow {
    let mark = |log: &Log, name: &'static str| {
        let log = log.clone();
        move |ctx: FlowContext| {
            let log = log.clone();
            async move {
                log.push(name);
                let feedback = ctx.last_feedback().map(|f| f.feedback).unwrap_or_default();
                Ok(json!({ "by": name, "feedback": feedback }))
            }
        }
    };
    let builder = Flow::builder().name("review").feedback_provider(provider);
    let builder = match store {
        Some(store) => builder.persistence(Arc::new(store)),
        None => builder,
    };
    builder
        .start("draft", mark(&log, "draft"))
        .human_feedback(HumanFeedback::new("Approve this draft?").emit(["approved", "rejected"]))
        .listen("publish", on("approved"), mark(&log, "publish"))
        .listen("revise", on("rejected"), mark(&log, "revise"))
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_answer_routes_to_its_label_and_is_stored() {
    let reviewer = Reviewer::replying([FeedbackReply::Answer("Approved, nice work".into())]);
    let log = Log::default();
    let output = review_flow(reviewer.clone(), None, log.clone())
        .kickoff(no_inputs())
        .await
        .unwrap();
    assert_eq!(log.entries(), vec!["draft", "publish"]);
    assert_eq!(
        output.result,
        Some(json!({"by": "publish", "feedback": "Approved, nice work"}))
    );
    assert_eq!(output.feedback.len(), 1);
    assert_eq!(output.feedback[0].outcome.as_deref(), Some("approved"));
    let seen = reviewer.seen.lock().unwrap().clone();
    assert_eq!(seen[0].message, "Approve this draft?");
    assert_eq!(seen[0].output, json!({"by": "draft", "feedback": ""}));
    assert_eq!(seen[0].outcomes, vec!["approved", "rejected"]);
}

#[tokio::test]
async fn an_unmatched_answer_without_default_fails_naming_it() {
    let reviewer = Reviewer::replying([FeedbackReply::Answer("hmm".into())]);
    let error = review_flow(reviewer, None, Log::default())
        .kickoff(no_inputs())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, FlowError::Feedback { method, .. } if method == "draft"),
        "{error}"
    );
    let text = crewai_llm::error_chain(&error);
    assert!(text.contains("\"hmm\""), "{text}");
}

#[tokio::test]
async fn pausing_needs_persistence() {
    let reviewer = Reviewer::replying([FeedbackReply::Pending]);
    let error = review_flow(reviewer, None, Log::default())
        .kickoff(no_inputs())
        .await
        .unwrap_err();
    assert!(
        matches!(error, FlowError::PersistenceRequired { .. }),
        "{error}"
    );
}

#[tokio::test]
async fn a_pending_answer_pauses_and_another_process_resumes_with_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flow_states.db");
    let first_log = Log::default();
    let paused = review_flow(
        Reviewer::replying([FeedbackReply::Pending]),
        Some(SqliteFlowPersistence::open(&path).unwrap()),
        first_log.clone(),
    )
    .kickoff(no_inputs())
    .await
    .unwrap();
    let FlowStatus::AwaitingFeedback(waiting) = &paused.status else {
        panic!("expected a paused run, got {:?}", paused.status)
    };
    assert_eq!(waiting[0].method, "draft");
    assert_eq!(first_log.entries(), vec!["draft"]);

    // A second flow value on its own connection (another process): the answer continues the run.
    let second_log = Log::default();
    let nobody = Reviewer::replying([]);
    let flow = review_flow(
        nobody.clone(),
        Some(SqliteFlowPersistence::open(&path).unwrap()),
        second_log.clone(),
    );
    let output = flow
        .resume_with_feedback(&paused.id, "rejected")
        .await
        .unwrap();
    assert!(output.is_completed());
    assert_eq!(
        second_log.entries(),
        vec!["revise"],
        "the reviewed method is not re-run"
    );
    assert_eq!(
        output.result,
        Some(json!({"by": "revise", "feedback": "rejected"}))
    );
    assert_eq!(output.feedback[0].outcome.as_deref(), Some("rejected"));
    assert!(nobody.seen.lock().unwrap().is_empty());

    // Answering again is an error: the run is no longer waiting.
    assert!(matches!(
        flow.resume_with_feedback(&paused.id, "approved").await,
        Err(FlowError::NotAwaitingFeedback { .. })
    ));
}
