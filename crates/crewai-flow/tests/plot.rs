//! The flow drawings: a mermaid snapshot and the HTML page's self-containment.

use crewai_flow::{Flow, FlowContext, MethodResult, and, on, or};
use serde_json::{Value, json};

async fn step(_ctx: FlowContext) -> MethodResult<Value> {
    Ok(json!(null))
}

async fn decide(_ctx: FlowContext) -> MethodResult<&'static str> {
    Ok("approved")
}

fn review_flow() -> Flow {
    Flow::builder()
        .name("review <draft>")
        .start("fetch", step)
        .start("load_style", step)
        .listen("write", and(["fetch", "load_style"]), step)
        .router("check", or(["write", "rewrite"]), decide)
        .emits(["approved", "rejected"])
        .listen("rewrite", on("rejected"), step)
        .listen("publish", on("approved"), step)
        .build()
        .unwrap()
}

#[test]
fn mermaid_snapshot() {
    let expected = "\
flowchart TD
    m0([\"fetch\"])
    m1([\"load_style\"])
    m2[\"write\"]
    m3{\"check\"}
    m4[\"rewrite\"]
    m5[\"publish\"]
    j6((\"and\"))
    m0 --> j6
    m1 --> j6
    j6 --> m2
    m2 --> m3
    m4 --> m3
    m3 -->|\"rejected\"| m4
    m3 -->|\"approved\"| m5
    classDef start fill:#d1fae5,stroke:#059669
    class m0,m1 start
    classDef listen fill:#dbeafe,stroke:#2563eb
    class m2,m4,m5 listen
    classDef router fill:#ffedd5,stroke:#ea580c
    class m3 router
    classDef join fill:#f3e8ff,stroke:#7c3aed
    class j6 join
";
    assert_eq!(review_flow().to_mermaid(), expected);
}

#[test]
fn html_is_self_contained_and_draws_every_part() {
    let html = review_flow().plot_html();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script"), "no scripts needed");
    assert!(!html.contains("https://"), "no CDN");
    assert_eq!(
        html.matches("http://").count(),
        1,
        "only the SVG namespace is a URL"
    );
    assert!(html.contains("<svg"));
    for name in [
        "fetch",
        "load_style",
        "write",
        "check",
        "rewrite",
        "publish",
    ] {
        assert!(
            html.contains(&format!("<title>{name}</title>")),
            "node {name} missing"
        );
    }
    assert!(
        html.contains(">approved</text>") && html.contains(">rejected</text>"),
        "router labels on edges"
    );
    assert!(html.contains(">AND</text>"), "the join is drawn");
    assert!(
        html.contains("stroke-dasharray=\"6 4\""),
        "the rewrite → check cycle is drawn dashed"
    );
    assert!(html.contains("review &lt;draft&gt;"), "the name is escaped");
    assert_eq!(html.matches("class=\"edge\"").count(), 7);
}
