//! CrewAI's declarative flows run end to end against a scripted OpenAI-compatible server: a crew
//! call, an agent call as a router, CEL expressions over the state and the outputs, kickoff
//! inputs laid over the state's defaults, and the state's JSON schema checked before anything
//! runs.

mod common;

use crewai_flow::FlowError;
use crewai_project::{BuildOptions, ToolRegistry};
use crewai_testkit::scripted::{Reply, ScriptedServer};
use serde_json::{Value, json};

use common::declaration;

/// A flow whose crew researches `state.topic`, whose agent routes on the findings, and whose
/// expressions write the result; every model call goes to `server`.
fn research_flow(server: &ScriptedServer) -> String {
    let llm = format!(
        "{{model: openai/gpt-4o-mini, api_key: test, base_url: '{}'}}",
        server.base_url()
    );
    format!(
        "schema: crewai.flow/v1
name: ResearchFlow
state:
  type: json_schema
  json_schema:
    type: object
    properties:
      topic: {{type: string}}
      depth: {{type: integer, default: 2}}
    required: [topic]
  default: {{audience: engineers}}
methods:
  research:
    start: true
    do:
      call: crew
      with:
        agents:
          researcher:
            role: Researcher
            goal: Research {{topic}} for {{audience}}
            backstory: Careful.
            llm: {llm}
        tasks:
          - name: find
            description: Find facts about {{topic}} for {{audience}}
            expected_output: Facts
            agent: researcher
        inputs: {{topic: Default topic}}
      inputs:
        topic: \"${{state.topic}}\"
        audience: \"${{state.audience}}\"
  decide:
    listen: research
    router: true
    emit: [deep, done]
    do:
      call: agent
      with:
        role: Editor
        goal: Answer deep or done
        backstory: Decides.
        settings: {{llm: {llm}}}
        input: \"Findings: ${{outputs.research.raw}}\"
  summarize:
    listen: deep
    do:
      call: expression
      expr: \"'summary of ' + state.topic + ': ' + outputs.research.raw + ' (depth ' + string(state.depth) + ', routed ' + outputs.decide + ')'\"
  stop:
    listen: done
    do: {{call: expression, expr: \"'stopped'\"}}
"
    )
}

fn options() -> BuildOptions {
    BuildOptions::new(ToolRegistry::new())
}

fn text_of(request: &crewai_testkit::scripted::RecordedRequest) -> String {
    request.body["messages"].to_string()
}

#[tokio::test]
async fn a_crew_an_agent_router_and_expressions_run_over_the_state() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text("Qubits decohere."));
    server.push(Reply::text("deep\n"));
    let (_dir, declaration) = declaration(&research_flow(&server));
    let inputs = [("topic".to_string(), json!("qubits"))]
        .into_iter()
        .collect();
    let state = declaration.kickoff_state(&inputs).unwrap();
    let flow = declaration.build(&options()).unwrap();
    let output = flow.kickoff(state).await.unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(
        output.result,
        Some(json!(
            "summary of qubits: Qubits decohere. (depth 2, routed deep)"
        ))
    );
    // Kickoff inputs over the defaults (the declared ones and the schema's); actions never
    // write the state.
    assert_eq!(output.state["topic"], "qubits");
    assert_eq!(output.state["audience"], "engineers");
    assert_eq!(output.state["depth"], 2);
    assert!(output.state.get("research").is_none());
    let research = output.output_of("research").unwrap();
    assert_eq!(research["raw"], "Qubits decohere.");
    assert_eq!(research["tasks_output"][0]["raw"], "Qubits decohere.");
    assert_eq!(output.output_of("decide"), Some(&json!("deep")));
    let methods: Vec<&str> = output
        .method_outputs
        .iter()
        .map(|r| r.method.as_str())
        .collect();
    assert_eq!(methods, ["research", "decide", "summarize"]);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // The crew saw `${state.topic}` rendered into `{topic}`, and the action's inputs over the
    // crew's own.
    let crew_prompt = text_of(&requests[0]);
    assert!(
        crew_prompt.contains("Find facts about qubits for engineers"),
        "{crew_prompt}"
    );
    // The agent got its input rendered from the crew's output.
    let agent_prompt = text_of(&requests[1]);
    assert!(
        agent_prompt.contains("Findings: Qubits decohere."),
        "{agent_prompt}"
    );
    assert!(agent_prompt.contains("Editor"), "{agent_prompt}");
    // Both calls count in the flow's usage.
    assert!(output.usage.total.total_tokens > 0, "{:?}", output.usage);
}

#[tokio::test]
async fn the_other_route_runs_its_own_listener() {
    let server = ScriptedServer::start().await;
    server.push(Reply::text("Nothing new."));
    server.push(Reply::text("done"));
    let (_dir, declaration) = declaration(&research_flow(&server));
    let inputs = [("topic".to_string(), json!("tea"))].into_iter().collect();
    let flow = declaration.build(&options()).unwrap();
    // The built flow lays kickoff inputs over the defaults itself.
    let output = flow
        .kickoff(declaration.kickoff_state(&inputs).unwrap())
        .await
        .unwrap();
    assert_eq!(output.result, Some(json!("stopped")));
    assert!(output.output_of("summarize").is_none());
}

#[tokio::test]
async fn a_state_that_breaks_the_schema_stops_the_run_before_any_model_call() {
    let server = ScriptedServer::start().await;
    let (_dir, declaration) = declaration(&research_flow(&server));
    let err = declaration
        .kickoff_state(&[("depth".to_string(), json!("deep"))].into_iter().collect())
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"topic\" is a required property"), "{err}");
    assert!(
        err.contains("state.depth: \"deep\" is not of type \"integer\""),
        "{err}"
    );

    // A caller that kicks the built flow off directly gets the same check from the flow.
    let flow = declaration.build(&options()).unwrap();
    let err = flow
        .kickoff([("depth", json!(3))])
        .await
        .expect_err("the state has no topic");
    assert!(matches!(err, FlowError::MethodFailed { .. }), "{err:?}");
    let text = crewai_llm::error_chain(&err);
    assert!(text.contains("\"topic\" is a required property"), "{text}");
    assert_eq!(server.requests().len(), 0);
}

#[tokio::test]
async fn expressions_read_outputs_of_every_kind_and_templates_keep_types() {
    let (_dir, declaration) = declaration(
        "schema: crewai.flow/v1
name: Expr
state: {default: {items: [1, 2, 3], name: Ada}}
methods:
  count:
    start: true
    do: {call: expression, expr: 'state.items.filter(i, i > 1).map(i, i * 10)'}
  greet:
    listen: count
    do: {call: expression, expr: \"'hi ' + state.name + ' ' + string(size(outputs.count))\"}
  pick:
    listen: greet
    router: true
    emit: [many, few]
    do: {call: expression, expr: \"size(outputs.count) > 1 ? 'many' : 'few'\"}
  report:
    listen: many
    do: {call: expression, expr: \"{'greeting': outputs.greet, 'sum': outputs.count[0] + outputs.count[1]}\"}
",
    );
    let output = declaration
        .build(&options())
        .unwrap()
        .kickoff(Vec::<(String, Value)>::new())
        .await
        .unwrap();
    assert_eq!(output.output_of("count"), Some(&json!([20, 30])));
    assert_eq!(output.output_of("greet"), Some(&json!("hi Ada 2")));
    assert_eq!(
        output.result,
        Some(json!({"greeting": "hi Ada 2", "sum": 50}))
    );
}

#[tokio::test]
async fn an_expression_that_fails_at_run_time_names_the_method_and_expression() {
    let (_dir, declaration) = declaration(
        "schema: crewai.flow/v1\nname: E\nmethods:\n  a:\n    start: true\n    do: {call: expression, expr: state.missing.deeper}\n",
    );
    let err = declaration
        .build(&options())
        .unwrap()
        .kickoff(Vec::<(String, Value)>::new())
        .await
        .expect_err("state.missing does not exist");
    let text = crewai_llm::error_chain(&err);
    assert!(text.contains("method `a` failed"), "{text}");
    assert!(
        text.contains("expression 'state.missing.deeper' failed"),
        "{text}"
    );
}

#[tokio::test]
async fn max_method_calls_bounds_a_loop() {
    let (_dir, declaration) = declaration(
        "schema: crewai.flow/v1
name: Loop
config: {max_method_calls: 5}
methods:
  begin:
    start: true
    do: {call: expression, expr: \"'x'\"}
  again:
    listen: {or: [begin, loop]}
    router: true
    emit: [loop]
    do: {call: expression, expr: \"'loop'\"}
",
    );
    let err = declaration
        .build(&options())
        .unwrap()
        .kickoff(Vec::<(String, Value)>::new())
        .await
        .expect_err("the loop never ends");
    let text = crewai_llm::error_chain(&err);
    assert!(text.contains("reached max_method_calls (5)"), "{text}");
}

/// Answers every feedback request with one text, keeping what it was asked.
struct Reviewer {
    answer: &'static str,
    asked: std::sync::Mutex<Vec<crewai_flow::FeedbackRequest>>,
}

#[crewai_tools::async_trait]
impl crewai_flow::FeedbackProvider for Reviewer {
    async fn request(
        &self,
        request: &crewai_flow::FeedbackRequest,
    ) -> Result<crewai_flow::FeedbackReply, crewai_flow::BoxError> {
        self.asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(request.clone());
        Ok(crewai_flow::FeedbackReply::Answer(self.answer.to_string()))
    }
}

#[tokio::test]
async fn human_feedback_routes_on_the_answer_and_later_methods_read_it() {
    let (_dir, declaration) = declaration(
        "schema: crewai.flow/v1
name: Review
methods:
  draft:
    start: true
    do: {call: expression, expr: \"'draft-content'\"}
    human_feedback:
      message: 'Review the draft:'
      emit: [approved, rejected]
      llm: gpt-4o-mini
      default_outcome: rejected
  rewrite:
    listen: rejected
    do:
      call: expression
      expr: \"outputs.draft.feedback + '|' + outputs.draft.outcome + '|' + outputs.draft.output\"
  publish:
    listen: approved
    do: {call: expression, expr: \"'published'\"}
",
    );
    let reviewer = std::sync::Arc::new(Reviewer {
        answer: "make it shorter",
        asked: Default::default(),
    });
    let flow = declaration
        .builder(&options())
        .unwrap()
        .feedback_provider(reviewer.clone())
        .build()
        .unwrap();
    let output = flow.kickoff(Vec::<(String, Value)>::new()).await.unwrap();
    // An answer naming no outcome takes the default one.
    assert_eq!(
        output.result,
        Some(json!("make it shorter|rejected|draft-content"))
    );
    assert_eq!(output.output_of("draft"), Some(&json!("draft-content")));
    let asked = reviewer.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].message, "Review the draft:");
    assert_eq!(asked[0].output, json!("draft-content"));
    assert_eq!(asked[0].outcomes, ["approved", "rejected"]);
}

#[tokio::test]
async fn a_router_whose_output_is_no_label_fails_naming_it() {
    let (_dir, declaration) = declaration(
        "schema: crewai.flow/v1\nname: R\nmethods:\n  a:\n    start: true\n    do: {call: expression, expr: '1'}\n  r:\n    listen: a\n    router: true\n    emit: [x]\n    do: {call: expression, expr: '[outputs.a]'}\n  b:\n    listen: x\n    do: {call: expression, expr: '2'}\n",
    );
    let err = declaration
        .build(&options())
        .unwrap()
        .kickoff(Vec::<(String, Value)>::new())
        .await
        .expect_err("a list is no label");
    let text = crewai_llm::error_chain(&err);
    assert!(text.contains("method `r` failed"), "{text}");
    assert!(
        text.contains("a router's output must be a label (text), not [1]"),
        "{text}"
    );
}
