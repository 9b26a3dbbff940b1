//! The consensual process (`Process::Consensual`) against scripted OpenAI-compatible servers,
//! one per voter (the voters answer at the same time, so each needs its own script): the
//! revision request shows the others' answers by label only, the ballots and the judge ask for
//! their schemas, the voted answer is the task's, structured output and guardrails apply to
//! it, usage counts every call, the events hang under the task, a resume does not run a
//! finished task again, and bad configurations are refused when the crew is built.

mod crew_support;

use std::sync::Arc;
use std::time::Duration;

use crew_support::{agent, crew_builder, last_user, task, task_builder};
use crewai_core::crew::{
    ConsensusConfig, ConsensusOutcome, CrewError, DecisionMethod, JUDGEMENT_SCHEMA_NAME,
    KickoffOptions, Process, VOTE_SCHEMA_NAME,
};
use crewai_core::events::{EventKind, EventRecorder};
use crewai_core::guardrail::{Guardrail, GuardrailPass};
use crewai_core::store::{InMemoryRunJournal, RunJournal, RunStatus};
use crewai_testkit::scripted::{RecordedRequest, Reply, ScriptedServer};
use serde_json::json;

fn vote(label: &str, reason: &str) -> String {
    json!({"vote": label, "reason": reason}).to_string()
}

fn judgement(pick: &str, merged: &str, reason: &str) -> String {
    json!({"pick": pick, "merged_answer": merged, "reason": reason}).to_string()
}

fn format_name(request: &RecordedRequest) -> &str {
    request.body["response_format"]["json_schema"]["name"]
        .as_str()
        .unwrap_or_default()
}

/// One scripted server per voter (they answer at the same time, so each needs its own script).
async fn three_servers() -> [ScriptedServer; 3] {
    [
        ScriptedServer::start().await,
        ScriptedServer::start().await,
        ScriptedServer::start().await,
    ]
}

/// An Analyst, a Critic and an Editor, each on its own server.
async fn panel_of_three() -> ([ScriptedServer; 3], Vec<crewai_core::Agent>) {
    let servers = three_servers().await;
    let agents = ["Analyst", "Critic", "Editor"]
        .iter()
        .zip(&servers)
        .map(|(role, server)| agent(role, server))
        .collect();
    (servers, agents)
}

/// A consensual crew of two voters, no revision, decided by a judge on `judge`'s server.
fn judged_pair(
    first: &crewai_core::Agent,
    second: &crewai_core::Agent,
    task: crewai_core::task::Task,
    judge: &ScriptedServer,
) -> crewai_core::crew::Crew {
    crew_builder(&[first, second], vec![task])
        .process(Process::Consensual)
        .consensus(
            ConsensusConfig::new()
                .revisions(0)
                .judge(Some(crew_support::llm(judge))),
        )
        .build()
        .unwrap()
}

fn config_message(error: CrewError) -> String {
    match error {
        CrewError::Config { message, .. } => message,
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

#[tokio::test]
async fn three_voters_revise_after_reading_each_other_then_vote() {
    let servers = three_servers().await;
    let analyst = agent("Analyst", &servers[0]);
    let critic = agent("Critic", &servers[1]);
    let editor = agent("Editor", &servers[2]);
    let crew = crew_builder(
        &[&analyst, &critic, &editor],
        vec![task("fact", "Give one fact about bees", &critic)],
    )
    .process(Process::Consensual)
    .consensus(ConsensusConfig::new().revisions(1))
    .build()
    .unwrap();
    let recorder = EventRecorder::attach(crew.event_bus());
    // Round 0, round 1, then the vote: Analyst's revised answer gets two votes.
    servers[0].push_all([
        Reply::text("Bees dance."),
        Reply::text("Bees dance to show where flowers are."),
        Reply::text(vote("C", "It is precise.")),
    ]);
    servers[1].push_all([
        Reply::text("Bees hum."),
        Reply::text("Bees hum."),
        Reply::text(vote("A", "It explains why.")),
    ]);
    servers[2].push_all([
        Reply::text("Bees sting."),
        Reply::text("Bees sting once, then die."),
        Reply::text(vote("A", "It is the most useful.")),
    ]);

    let output = crew.kickoff(Default::default()).await.unwrap();
    assert_eq!(output.raw, "Bees dance to show where flowers are.");
    let task_output = &output.tasks_output[0];
    assert_eq!(task_output.agent, "Analyst");

    // The revision request: its own answer, and the others' by label, never by role.
    let critic_requests = servers[1].requests();
    assert_eq!(critic_requests.len(), 3);
    assert!(!last_user(&critic_requests[0]).contains("Answer A"));
    let revision = last_user(&critic_requests[1]);
    for part in [
        "Give one fact about bees",
        "### Your answer\nBees hum.",
        "### Answer A\nBees dance.",
        "### Answer C\nBees sting.",
    ] {
        assert!(revision.contains(part), "{part:?} missing from {revision}");
    }
    for role in ["Analyst", "Editor"] {
        assert!(!revision.contains(role), "{role} is named in {revision}");
    }
    assert!(
        !revision.contains("### Answer B"),
        "its own answer is not labelled"
    );

    // The ballots: the vote's schema, whose choices leave out the voter's own answer.
    for (server, allowed) in servers.iter().zip([["B", "C"], ["A", "C"], ["A", "B"]]) {
        let requests = server.requests();
        let ballot = &requests[2];
        assert_eq!(ballot.body["response_format"]["type"], "json_schema");
        assert_eq!(format_name(ballot), VOTE_SCHEMA_NAME);
        assert_eq!(
            ballot.body["response_format"]["json_schema"]["schema"]["properties"]["vote"]["enum"],
            json!(allowed)
        );
        assert!(ballot.body.get("tools").is_none());
        assert!(last_user(ballot).contains("## The answers you can vote for"));
    }
    let analyst_ballot = last_user(&servers[0].requests()[2]);
    assert!(
        analyst_ballot.contains("(you may not vote for it)\nBees dance to show where flowers are.")
    );
    assert!(analyst_ballot.contains("### Answer C\nBees sting once, then die."));

    // The record: both rounds, the votes, the tally and the outcome.
    let record = task_output.consensus.as_ref().expect("a consensus record");
    assert_eq!(record.method, DecisionMethod::Vote);
    assert_eq!(record.voters, ["Analyst", "Critic", "Editor"]);
    assert_eq!(record.rounds.len(), 2);
    let revised: Vec<bool> = record.rounds[1].answers.iter().map(|a| a.revised).collect();
    assert_eq!(revised, [true, false, true]);
    assert_eq!(record.votes.len(), 3);
    assert_eq!(record.votes[1].voter, "Critic");
    assert_eq!(record.votes[1].vote, "A");
    assert_eq!(record.tally["A"], 2);
    assert_eq!(record.tally["C"], 1);
    assert_eq!(
        record.outcome,
        ConsensusOutcome::Chosen {
            label: "A".into(),
            agent: "Analyst".into(),
            tie_broken: false
        }
    );
    assert!(record.reason.contains("2 of 3"), "{}", record.reason);
    let json = serde_json::to_value(&output).unwrap();
    assert_eq!(
        json["tasks_output"][0]["consensus"]["outcome"]["label"],
        "A"
    );

    // Every call counted: 3 voters × (1 answer + 1 revision) + 3 votes.
    let usage = crew.usage();
    assert_eq!(usage.total.successful_requests, 9);
    assert_eq!(usage.by_agent["Critic"].successful_requests, 3);
    assert_eq!(usage.by_task["fact"].successful_requests, 9);

    // The events, each under its parent.
    let events = recorder.events();
    let one = |name: &str| {
        let found: Vec<_> = events.iter().filter(|e| e.type_name() == name).collect();
        assert_eq!(found.len(), 1, "{name}");
        found[0].clone()
    };
    let started = one("task_started");
    let rounds: Vec<_> = events
        .iter()
        .filter(|e| e.type_name() == "consensus_round_started")
        .collect();
    assert_eq!(rounds.len(), 2);
    assert!(
        rounds
            .iter()
            .all(|r| r.parent_event_id == Some(started.event_id))
    );
    let completed: Vec<_> = events
        .iter()
        .filter(|e| e.type_name() == "consensus_round_completed")
        .collect();
    assert!(matches!(
        completed[1].kind,
        EventKind::ConsensusRoundCompleted {
            round: 1,
            answers: 3,
            revised: 2,
            ..
        }
    ));
    assert_eq!(completed[1].parent_event_id, Some(rounds[1].event_id));
    let answering = events
        .iter()
        .filter(|e| e.type_name() == "agent_execution_started")
        .filter(|e| e.parent_event_id == Some(rounds[0].event_id))
        .count();
    assert_eq!(answering, 3, "the first answers hang under round 0");
    let deciding = one("consensus_decision_started");
    assert_eq!(deciding.parent_event_id, Some(started.event_id));
    let decided = one("consensus_decided");
    assert_eq!(decided.parent_event_id, Some(deciding.event_id));
    let EventKind::ConsensusDecided {
        outcome,
        agent_role,
        tally,
        ..
    } = &decided.kind
    else {
        unreachable!()
    };
    assert_eq!(outcome, "Answer A");
    assert_eq!(agent_role.as_deref(), Some("Analyst"));
    assert_eq!(tally["A"], 2);
    let finished = one("task_completed");
    assert!(matches!(
        &finished.kind,
        EventKind::TaskCompleted { agent_role: Some(role), .. } if role == "Analyst"
    ));
}

#[tokio::test]
async fn a_judge_merges_a_structured_answer_and_a_judge_is_one_call() {
    let voters = [ScriptedServer::start().await, ScriptedServer::start().await];
    let judge = ScriptedServer::start().await;
    let analyst = agent("Analyst", &voters[0]);
    let critic = agent("Critic", &voters[1]);
    let score = task_builder("score", "Score the hive from 1 to 5", &analyst)
        .output_json(crew_support::score_schema())
        .build()
        .unwrap();
    let crew = judged_pair(&analyst, &critic, score, &judge);
    voters[0].push_text(r#"{"score": 3}"#);
    voters[1].push_text(r#"{"score": 5}"#);
    judge.push(
        Reply::text(judgement("MERGE", r#"{"score": 4}"#, "Both have a point.")).with_usage(50, 10),
    );

    let output = crew.kickoff(Default::default()).await.unwrap();
    let task_output = &output.tasks_output[0];
    assert_eq!(task_output.raw, r#"{"score": 4}"#);
    assert_eq!(task_output.json_dict, Some(json!({"score": 4})));
    assert_eq!(task_output.agent, "Consensus Judge");

    // The voters answer in the task's own schema; the judge in its own.
    assert_eq!(
        voters[0].requests()[0].body["response_format"]["json_schema"]["name"],
        "ScoreOutput"
    );
    let requests = judge.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(format_name(&requests[0]), JUDGEMENT_SCHEMA_NAME);
    assert_eq!(
        requests[0].body["response_format"]["json_schema"]["schema"]["properties"]["pick"]["enum"],
        json!(["A", "B", "MERGE"])
    );
    let brief = last_user(&requests[0]);
    assert!(
        brief.contains("### Answer A\n{\"score\": 3}\n\n### Answer B\n{\"score\": 5}"),
        "{brief}"
    );
    assert!(!brief.contains("Analyst") && !brief.contains("Critic"));

    let record = task_output.consensus.as_ref().unwrap();
    assert_eq!(record.method, DecisionMethod::Judge);
    assert_eq!(record.rounds.len(), 1, "no revision round");
    assert!(record.votes.is_empty());
    assert_eq!(
        record.outcome,
        ConsensusOutcome::Merged {
            by: "Consensus Judge".into()
        }
    );
    assert_eq!(record.reason, "Both have a point.");
    // 2 answers + 1 judge call.
    let usage = crew.usage();
    assert_eq!(usage.total.successful_requests, 3);
    assert_eq!(usage.by_agent["Consensus Judge"].total_tokens, 60);
}

#[tokio::test]
async fn a_guardrail_checks_the_chosen_answer_and_its_author_retries() {
    let voters = [ScriptedServer::start().await, ScriptedServer::start().await];
    let judge = ScriptedServer::start().await;
    let analyst = agent("Analyst", &voters[0]);
    let critic = agent("Critic", &voters[1]);
    let exclaims = Guardrail::named("exclaims", |out| match out.raw.ends_with('!') {
        true => Ok(GuardrailPass::Keep),
        false => Err("End with an exclamation mark".into()),
    });
    let cheer = task_builder("cheer", "Cheer for the bees", &analyst)
        .guardrail(exclaims)
        .build()
        .unwrap();
    let crew = judged_pair(&analyst, &critic, cheer, &judge);
    voters[0].push_text("Go bees.");
    voters[1].push_text("Bees are great.");
    voters[1].push_text("Bees are great!");
    judge.push_text(judgement("B", "", "B is warmer."));

    let output = crew.kickoff(Default::default()).await.unwrap();
    assert_eq!(output.raw, "Bees are great!");
    assert_eq!(output.tasks_output[0].agent, "Critic");
    let retry = last_user(&voters[1].requests()[1]);
    assert!(retry.contains("End with an exclamation mark"), "{retry}");
    assert!(retry.contains("Bees are great."));
    let record = output.tasks_output[0].consensus.as_ref().unwrap();
    assert!(matches!(&record.outcome, ConsensusOutcome::Chosen { label, .. } if label == "B"));
    assert_eq!(voters[0].request_count(), 1, "only the author retries");
}

#[tokio::test]
async fn a_resumed_run_does_not_decide_a_finished_task_again() {
    let (servers, agents) = panel_of_three().await;
    let journal = Arc::new(InMemoryRunJournal::new());
    let crew = crew_builder(
        &agents.iter().collect::<Vec<_>>(),
        vec![
            task("one", "First job", &agents[0]),
            task("two", "Second job", &agents[0]),
        ],
    )
    .process(Process::Consensual)
    .consensus(ConsensusConfig::new().revisions(0))
    .run_journal(journal.clone())
    .build()
    .unwrap();
    for (server, (answer, ballot)) in servers.iter().zip([("a1", "B"), ("b1", "A"), ("c1", "A")]) {
        server.push_text(answer);
        server.push_text(vote(ballot, "best"));
    }
    servers[0].push_text("a2");
    servers[1].push_text("b2");
    // Late, so the other voters' answers of this round are in before the task fails.
    servers[2].push(Reply::error(400, "the model refused").delayed(Duration::from_millis(300)));
    let error = crew
        .kickoff_with(Default::default(), KickoffOptions::new().run_id("r1"))
        .await
        .unwrap_err();
    assert!(matches!(error, CrewError::Task(_)), "{error:?}");
    let stored = journal.load("r1").await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Failed);
    let first = &stored.tasks[&0].output;
    assert_eq!(first.raw, "a1");
    assert!(
        first.consensus.is_some(),
        "the record is journaled with the output"
    );

    let before: Vec<usize> = servers.iter().map(ScriptedServer::request_count).collect();
    for (server, (answer, ballot)) in servers.iter().zip([("a2", "C"), ("b2", "C"), ("c2", "A")]) {
        server.push_text(answer);
        server.push_text(vote(ballot, "best"));
    }
    let output = crew.resume("r1").await.unwrap();
    assert_eq!(output.tasks_output[0].raw, "a1");
    assert_eq!(output.raw, "c2");
    for (server, before) in servers.iter().zip(before) {
        assert_eq!(
            server.request_count() - before,
            2,
            "task one is not asked again"
        );
        let answer = last_user(&server.requests()[before]);
        assert!(answer.contains("Second job"), "{answer}");
    }
}

#[tokio::test]
async fn a_tied_vote_goes_to_the_tasks_own_agent_and_async_tasks_are_panels_too() {
    let (servers, agents) = panel_of_three().await;
    let early = task_builder("early", "Name a flower", &agents[2])
        .async_execution(true)
        .build()
        .unwrap();
    let crew = crew_builder(
        &agents.iter().collect::<Vec<_>>(),
        vec![early, task("late", "Name a tree", &agents[0])],
    )
    .process(Process::Consensual)
    .consensus(ConsensusConfig::new().revisions(0))
    .build()
    .unwrap();
    // Each votes for the next answer round the circle: one vote each, a three-way tie.
    for (server, (flower, ballot)) in
        servers
            .iter()
            .zip([("rose", "B"), ("tulip", "C"), ("lily", "A")])
    {
        server.push_text(flower);
        server.push_text(vote(ballot, "nice"));
    }
    // The second task: no tie, Critic's answer wins.
    for (server, (tree, ballot)) in servers
        .iter()
        .zip([("oak", "B"), ("elm", "A"), ("ash", "B")])
    {
        server.push_text(tree);
        server.push_text(vote(ballot, "tall"));
    }
    let output = crew.kickoff(Default::default()).await.unwrap();
    let early = &output.tasks_output[0];
    assert_eq!(
        early.raw, "lily",
        "the tie goes to the task's agent, Editor"
    );
    let record = early.consensus.as_ref().unwrap();
    assert!(matches!(
        &record.outcome,
        ConsensusOutcome::Chosen { label, tie_broken: true, .. } if label == "C"
    ));
    assert!(record.reason.contains("tie"), "{}", record.reason);
    assert_eq!(output.raw, "elm");
    assert_eq!(crew.usage().total.successful_requests, 12);
}

#[tokio::test]
async fn the_budget_stops_a_consensual_task_with_the_finished_outputs() {
    let (servers, agents) = panel_of_three().await;
    let crew = crew_builder(
        &agents.iter().collect::<Vec<_>>(),
        vec![task("one", "First job", &agents[0])],
    )
    .process(Process::Consensual)
    .max_tokens(5)
    .build()
    .unwrap();
    let error = crew.kickoff(Default::default()).await.unwrap_err();
    let stop = crew_support::budget_stop(&error);
    assert_eq!(stop.task, Some("one"));
    assert!(stop.completed.is_empty());
    assert!(servers.iter().all(|s| s.request_count() == 0));
}

#[tokio::test]
async fn bad_configurations_are_refused_when_the_crew_is_built() {
    let server = ScriptedServer::start().await;
    let [a, b, c, outsider] =
        ["Analyst", "Critic", "Editor", "Outsider"].map(|role| agent(role, &server));
    let one_task = |owner: &crewai_core::agent::Agent| vec![task("t", "Do it", owner)];

    let lonely = crew_builder(&[&a], one_task(&a))
        .process(Process::Consensual)
        .consensus(ConsensusConfig::new().judge(None))
        .build()
        .unwrap_err();
    assert!(config_message(lonely).contains("at least 2 voters"));

    let two_votes = crew_builder(&[&a, &b], one_task(&a))
        .process(Process::Consensual)
        .build()
        .unwrap_err();
    assert!(config_message(two_votes).contains("needs at least 3 voters"));

    let unknown = crew_builder(&[&a, &b, &c], one_task(&a))
        .process(Process::Consensual)
        .consensus(ConsensusConfig::new().voters(["Analyst", "Critc"]))
        .build()
        .unwrap_err();
    assert!(config_message(unknown).contains("'Critc' is not one of the crew's agents"));

    let not_consensual = crew_builder(&[&a, &b, &c], one_task(&a))
        .consensus(ConsensusConfig::new())
        .build()
        .unwrap_err();
    assert!(config_message(not_consensual).contains("process is not consensual"));

    let not_a_voter = crew_builder(&[&a, &b, &c, &outsider], one_task(&outsider))
        .process(Process::Consensual)
        .consensus(ConsensusConfig::new().voters(["Analyst", "Critic", "Editor"]))
        .build()
        .unwrap_err();
    assert!(config_message(not_a_voter).contains("'Outsider', who is not a voter"));

    let too_many = crew_builder(&[&a, &b, &c], one_task(&a))
        .process(Process::Consensual)
        .consensus(ConsensusConfig::new().revisions(9))
        .build()
        .unwrap_err();
    assert!(config_message(too_many).contains("more than the 5 allowed"));

    // Tasks need no agent in a consensual crew.
    let unassigned = crewai_core::task::Task::builder()
        .name("free")
        .description("Anyone")
        .expected_output("A line")
        .build()
        .unwrap();
    crew_builder(&[&a, &b, &c], vec![unassigned])
        .process(Process::Consensual)
        .build()
        .unwrap();
}
