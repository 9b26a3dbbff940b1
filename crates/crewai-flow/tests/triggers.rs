//! Trigger resolution at run time: or, and, routers, cycles, the method-call bound, concurrency.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Log, no_inputs};
use crewai_flow::{
    Flow, FlowBuilder, FlowContext, FlowError, MethodError, UnstructuredState, and, on, or,
};
use serde_json::{Value, json};
use tokio::sync::Barrier;

fn logging(
    log: &Log,
    name: &'static str,
    output: Value,
) -> impl Fn(FlowContext) -> futures::future::BoxFuture<'static, crewai_flow::MethodResult>
+ Send
+ Sync
+ 'static {
    let log = log.clone();
    move |_ctx: FlowContext| {
        let (log, output) = (log.clone(), output.clone());
        Box::pin(async move {
            log.push(name);
            Ok(output)
        })
    }
}

#[tokio::test]
async fn or_fires_for_each_part_and_and_joins_once() {
    let log = Log::default();
    let flow = Flow::builder()
        .start("a", logging(&log, "a", json!("A")))
        .start("b", logging(&log, "b", json!("B")))
        .listen(
            "either",
            or(["a", "b"]),
            logging(&log, "either", json!(null)),
        )
        .listen("both", and(["a", "b"]), {
            let log = log.clone();
            move |ctx: FlowContext| {
                let log = log.clone();
                async move {
                    log.push("both");
                    let a = ctx.method_output("a").unwrap();
                    let b = ctx.method_output("b").unwrap();
                    Ok(json!([a, b]))
                }
            }
        })
        .build()
        .unwrap();
    let output = flow.kickoff(no_inputs()).await.unwrap();
    assert_eq!(
        log.count("either"),
        2,
        "or fires on each part: {:?}",
        log.entries()
    );
    assert_eq!(log.count("both"), 1, "and fires once: {:?}", log.entries());
    assert_eq!(output.output_of("both"), Some(&json!(["A", "B"])));
    assert_eq!(output.method_outputs.len(), 5);
}

#[tokio::test]
async fn listener_receives_the_triggering_output() {
    let flow = Flow::builder()
        .start("fetch", |_ctx: FlowContext| async move {
            Ok(json!({"items": [1, 2, 3]}))
        })
        .listen("count", on("fetch"), |ctx: FlowContext| async move {
            #[derive(serde::Deserialize)]
            struct Fetched {
                items: Vec<u32>,
            }
            let fetched: Fetched = ctx.trigger_output_as()?;
            assert_eq!(ctx.triggered_by(), Some("fetch"));
            Ok(fetched.items.len())
        })
        .build()
        .unwrap();
    let output = flow.kickoff(no_inputs()).await.unwrap();
    assert_eq!(output.result, Some(json!(3)));
}

#[tokio::test]
async fn router_label_fires_only_its_listeners_and_the_router_name_fires_too() {
    let log = Log::default();
    let flow = Flow::builder()
        .start("draft", logging(&log, "draft", json!("text")))
        .router("decide", on("draft"), |ctx: FlowContext| async move {
            Ok(if ctx.trigger_output() == Some(&json!("text")) {
                "approved"
            } else {
                "rejected"
            })
        })
        .emits(["approved", "rejected"])
        .listen("publish", on("approved"), {
            let log = log.clone();
            move |ctx: FlowContext| {
                let log = log.clone();
                async move {
                    log.push("publish");
                    assert_eq!(ctx.trigger_output(), Some(&json!("approved")));
                    Ok(json!("published"))
                }
            }
        })
        .listen(
            "discard",
            on("rejected"),
            logging(&log, "discard", json!("discarded")),
        )
        .listen(
            "audit",
            on("decide"),
            logging(&log, "audit", json!("audited")),
        )
        .build()
        .unwrap();
    let output = flow.kickoff(no_inputs()).await.unwrap();
    assert_eq!(log.count("publish"), 1);
    assert_eq!(log.count("discard"), 0);
    assert_eq!(log.count("audit"), 1);
    assert_eq!(output.output_of("decide"), Some(&json!("approved")));
}

#[tokio::test]
async fn an_undeclared_label_at_run_time_is_an_error_naming_it() {
    let flow = Flow::builder()
        .name("labels")
        .start("s", |_ctx: FlowContext| async move { Ok(1) })
        .router("r", on("s"), |_ctx: FlowContext| async move { Ok("maybe") })
        .emits(["yes", "no"])
        .listen("y", on("yes"), |_ctx: FlowContext| async move { Ok(2) })
        .build()
        .unwrap();
    let error = flow.kickoff(no_inputs()).await.unwrap_err();
    assert!(
        matches!(&error, FlowError::UndeclaredLabel { label, method, .. } if label == "maybe" && method == "r"),
        "{error}"
    );
    assert!(error.to_string().contains("declared: yes, no"), "{error}");
}

#[tokio::test]
async fn a_router_loops_back_until_done() {
    let flow = Flow::builder()
        .start("init", |ctx: FlowContext| async move {
            ctx.update_state(|s| s.insert("n".into(), json!(0)));
            Ok(0)
        })
        .listen(
            "step",
            or(["init", "again"]),
            |ctx: FlowContext| async move {
                Ok(ctx.update_state(|s| {
                    let n = s["n"].as_u64().unwrap_or(0) + 1;
                    s.insert("n".into(), json!(n));
                    n
                }))
            },
        )
        .router("check", on("step"), |ctx: FlowContext| async move {
            Ok(if ctx.trigger_output() == Some(&json!(4)) {
                "done"
            } else {
                "again"
            })
        })
        .emits(["again", "done"])
        .listen("finish", on("done"), |ctx: FlowContext| async move {
            Ok(json!({"n": ctx.read_state(|s| s["n"].clone())}))
        })
        .build()
        .unwrap();
    let output = flow.kickoff(no_inputs()).await.unwrap();
    assert_eq!(output.result, Some(json!({"n": 4})));
    // init + 4 × (step, check) + finish
    assert_eq!(output.method_outputs.len(), 10);
}

/// `builder` with a start and a router that routes back to itself for ever.
fn endless(builder: FlowBuilder<UnstructuredState>) -> Flow<UnstructuredState> {
    builder
        .start("s", |_ctx: FlowContext| async move { Ok(0) })
        .router("spin", or(["s", "again"]), |_ctx: FlowContext| async move {
            Ok("again")
        })
        .emits(["again"])
        .build()
        .unwrap()
}

#[tokio::test]
async fn an_endless_cycle_stops_at_max_method_calls() {
    let flow = endless(Flow::builder().name("looping").max_method_calls(7));
    let error = flow.kickoff(no_inputs()).await.unwrap_err();
    assert!(
        matches!(&error, FlowError::MaxMethodCallsExceeded { limit: 7, method, .. } if method == "spin"),
        "{error}"
    );
    assert!(
        error.to_string().contains("max_method_calls (7)"),
        "{error}"
    );
}

#[tokio::test]
async fn the_default_bound_is_one_hundred() {
    let flow = endless(Flow::builder());
    assert_eq!(flow.max_method_calls(), 100);
    assert!(matches!(
        flow.kickoff(no_inputs()).await,
        Err(FlowError::MaxMethodCallsExceeded { limit: 100, .. })
    ));
}

#[tokio::test]
async fn listeners_on_the_same_trigger_run_concurrently() {
    // Each listener waits for the other at a barrier: this only completes if both run at once.
    let barrier = Arc::new(Barrier::new(2));
    let meet = |barrier: Arc<Barrier>, answer: &'static str| {
        move |_ctx: FlowContext| {
            let barrier = barrier.clone();
            async move {
                barrier.wait().await;
                Ok(answer)
            }
        }
    };
    let flow = Flow::builder()
        .start("s", |_ctx: FlowContext| async move { Ok(0) })
        .listen("left", on("s"), meet(barrier.clone(), "L"))
        .listen("right", on("s"), meet(barrier.clone(), "R"))
        .listen(
            "joined",
            and(["left", "right"]),
            |_ctx: FlowContext| async move { Ok("joined") },
        )
        .build()
        .unwrap();
    let output = tokio::time::timeout(Duration::from_secs(10), flow.kickoff(no_inputs()))
        .await
        .expect("listeners did not run concurrently")
        .unwrap();
    assert_eq!(output.result, Some(json!("joined")));
}

#[tokio::test]
async fn a_conditional_start_waits_for_its_trigger() {
    let log = Log::default();
    let flow = Flow::builder()
        .start("s", logging(&log, "s", json!(1)))
        .start_on("late", on("s"), logging(&log, "late", json!(2)))
        .build()
        .unwrap();
    let output = flow.kickoff(no_inputs()).await.unwrap();
    assert_eq!(log.entries(), vec!["s", "late"]);
    assert_eq!(output.result, Some(json!(2)));
}

#[tokio::test]
async fn a_failing_method_fails_the_kickoff_with_its_name() {
    let flow = Flow::builder()
        .name("fragile")
        .start("s", |_ctx: FlowContext| async move {
            Err::<Value, _>(MethodError::msg("the source is down"))
        })
        .build()
        .unwrap();
    let error = flow.kickoff(no_inputs()).await.unwrap_err();
    assert_eq!(
        crewai_llm::error_chain(&error),
        "flow `fragile`: method `s` failed: the source is down"
    );
}

#[tokio::test]
async fn a_std_error_converts_with_question_mark() {
    let flow = Flow::builder()
        .start("parse", |_ctx: FlowContext| async move {
            let n: u32 = "x".parse()?;
            Ok(n)
        })
        .build()
        .unwrap();
    assert!(
        matches!(flow.kickoff(no_inputs()).await, Err(FlowError::MethodFailed { method, .. }) if method == "parse")
    );
}

#[tokio::test]
async fn a_panicking_method_is_reported_not_propagated() {
    let bus = crewai_core::events::EventBus::new();
    let flow = Flow::builder()
        .event_bus(bus.clone())
        .start("boom", |_ctx: FlowContext| async move {
            if true {
                panic!("bug in user code");
            }
            Ok(0)
        })
        .build()
        .unwrap();
    let error = flow.kickoff(no_inputs()).await.unwrap_err();
    assert!(
        matches!(&error, FlowError::MethodPanicked { method, message, .. } if method == "boom" && message == "bug in user code"),
        "{error}"
    );
    // The panic is counted on the flow's bus too, as a flow method's.
    assert_eq!(
        bus.caught_panics_at(crewai_core::events::PanicSite::FlowMethod),
        1
    );
    assert_eq!(bus.caught_panics(), 1);
}

#[tokio::test]
async fn cancellation_stops_a_running_flow() {
    let token = tokio_util::sync::CancellationToken::new();
    let flow = Flow::builder()
        .start("wait", |ctx: FlowContext| async move {
            ctx.cancellation().cancel();
            std::future::pending::<()>().await;
            Ok(0)
        })
        .build()
        .unwrap();
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        flow.kickoff_with(crewai_flow::Kickoff::new().cancellation(token.clone())),
    )
    .await
    .unwrap();
    assert!(matches!(result, Err(FlowError::Cancelled { .. })));
    assert!(token.is_cancelled());
}

#[tokio::test]
async fn closures_need_no_type_annotations() {
    let flow = Flow::builder()
        .start("a", |_ctx| async move { Ok(1) })
        .listen("b", on("a"), |ctx| async move {
            let n: u32 = ctx.trigger_output_as()?;
            Ok(n + 1)
        })
        .build()
        .unwrap();
    assert_eq!(
        flow.kickoff(no_inputs()).await.unwrap().result,
        Some(json!(2))
    );
}
