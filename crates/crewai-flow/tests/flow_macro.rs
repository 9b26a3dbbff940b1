//! `#[flow]` on an impl block builds the same definition as the builder.

use crewai_flow::{
    BoxError, FeedbackProvider, FeedbackReply, FeedbackRequest, FlowContext, HumanFeedback,
    MethodKind, MethodResult, SqliteFlowPersistence, flow,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Research {
    #[serde(default)]
    topic: String,
    #[serde(default)]
    rounds: u32,
}

struct ResearchFlow {
    max_rounds: u32,
}

#[flow(state = Research, name = "research")]
impl ResearchFlow {
    #[start]
    async fn fetch(&self, ctx: FlowContext<Research>) -> MethodResult<String> {
        Ok(format!(
            "sources on {}",
            ctx.read_state(|s| s.topic.clone())
        ))
    }

    #[start]
    async fn style(&self) -> MethodResult<&'static str> {
        Ok("plain")
    }

    #[listen(or(and(fetch, style), again))]
    #[persist]
    async fn summarise(&self, ctx: FlowContext<Research>) -> MethodResult<u32> {
        Ok(ctx.update_state(|s| {
            s.rounds += 1;
            s.rounds
        }))
    }

    #[router(summarise, emits = [again, done])]
    async fn decide(&self, ctx: FlowContext<Research>) -> MethodResult<&'static str> {
        Ok(if ctx.read_state(|s| s.rounds) < self.max_rounds {
            "again"
        } else {
            "done"
        })
    }

    #[listen("done")]
    async fn publish(ctx: FlowContext<Research>) -> MethodResult<Value> {
        Ok(json!({"rounds": ctx.read_state(|s| s.rounds), "sources": ctx.method_output("fetch")}))
    }

    /// Not a flow method: left alone.
    fn helper(&self) -> u32 {
        self.max_rounds
    }
}

#[tokio::test]
async fn the_macro_builds_a_runnable_flow() {
    let research = ResearchFlow { max_rounds: 3 };
    assert_eq!(research.helper(), 3);
    // `#[persist]` on a method would use the default database; the test gives it a temporary one.
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteFlowPersistence::open(dir.path().join("flow_states.db")).unwrap();
    let flow = research
        .flow_builder()
        .persistence(Arc::new(store))
        .build()
        .unwrap();
    assert_eq!(flow.name(), "research");
    let kinds: Vec<(&str, MethodKind)> = flow.methods().iter().map(|m| (m.name, m.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            ("fetch", MethodKind::Start),
            ("style", MethodKind::Start),
            ("summarise", MethodKind::Listen),
            ("decide", MethodKind::Router),
            ("publish", MethodKind::Listen)
        ]
    );
    assert!(flow.methods()[2].persisted);
    assert_eq!(
        flow.methods()[2].trigger.unwrap().to_string(),
        "or(and(fetch, style), again)"
    );
    let output = flow.kickoff([("topic", json!("rust"))]).await.unwrap();
    assert_eq!(
        output.result,
        Some(json!({"rounds": 3, "sources": "sources on rust"}))
    );
    assert_eq!(
        flow.saved_state(&output.id).await.unwrap().unwrap().rounds,
        3
    );
}

struct Approve;

#[async_trait::async_trait]
impl FeedbackProvider for Approve {
    async fn request(&self, _request: &FeedbackRequest) -> Result<FeedbackReply, BoxError> {
        Ok(FeedbackReply::Answer("approved".into()))
    }
}

struct Review;

#[flow]
impl Review {
    #[start]
    #[human_feedback(message = "Ship it?", emit = [approved, rejected], default = "rejected")]
    async fn draft(&self) -> MethodResult<&'static str> {
        Ok("draft")
    }

    #[listen(approved)]
    async fn ship(&self, ctx: FlowContext) -> MethodResult<Value> {
        Ok(json!(ctx.last_feedback().map(|f| f.feedback)))
    }

    #[start(rejected)]
    async fn redo(&self) -> MethodResult<&'static str> {
        Ok("redo")
    }
}

#[tokio::test]
async fn feedback_and_conditional_starts_come_through() {
    assert!(Review.into_flow().is_ok());
    let flow = Review
        .flow_builder()
        .feedback_provider(Arc::new(Approve))
        .build()
        .unwrap();
    assert_eq!(flow.name(), "Review");
    assert_eq!(
        flow.methods()[0].human_feedback,
        Some(
            &HumanFeedback::new("Ship it?")
                .emit(["approved", "rejected"])
                .default_outcome("rejected")
        )
    );
    assert_eq!(flow.methods()[2].kind, MethodKind::Start);
    assert!(flow.methods()[2].trigger.is_some());
    let output = flow.kickoff(serde_json::Map::new()).await.unwrap();
    assert_eq!(output.result, Some(json!("approved")));
}
