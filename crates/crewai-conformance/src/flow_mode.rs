//! Mode flow: a Flow of `flow.methods`, each running an agent or a crew, run the way CrewAI runs
//! the Python flow the case describes.
//!
//! Sync and async are honoured as CrewAI does them. An `async` method awaits its work on the
//! flow's own task (`await agent.kickoff_async(...)` / `await crew.akickoff()`); a sync method
//! runs on a worker thread of its own that blocks until its kickoff is done (CrewAI runs sync
//! methods in a thread, where `kickoff()` blocks). `flow.async: true` awaits the flow's kickoff
//! (`await flow.akickoff()`); otherwise the flow is kicked off from blocking code (`flow.kickoff()`
//! from a sync test). The result is what the flow returns: the output of the method the engine
//! reports as its result (the last one to complete), read through [`Returned`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use crewai_core::agent::{Agent, KickoffInput};
use crewai_core::crew::Crew;
use crewai_flow::{Flow, FlowContext, MethodError, on};
use crewai_llm::error_chain;
use serde_json::Value;

use crate::build::{Execution, RunError, World, kickoff_input};
use crate::case::Case;
use crate::outcome::Output;
use crate::returned::Returned;

/// What one flow method runs: an agent kickoff, or a crew kickoff.
#[derive(Clone)]
enum FlowWork {
    Agent { agent: Agent, input: KickoffInput },
    Crew(Crew),
}

impl FlowWork {
    /// Runs inside the method `ctx` belongs to: on the flow's bus, under the method's event,
    /// cancelled with the flow.
    async fn run(&self, ctx: &FlowContext) -> Result<Output, String> {
        match self {
            FlowWork::Agent { agent, input } => agent
                .kickoff_with(input.clone(), ctx.agent_kickoff_options())
                .await
                .map(|out| out.to_output())
                .map_err(|e| error_chain(&e)),
            FlowWork::Crew(crew) => crew
                .kickoff_with(BTreeMap::new(), ctx.crew_kickoff_options())
                .await
                .map(|out| out.to_output())
                .map_err(|e| error_chain(&e)),
        }
    }
}

/// Runs `work` as sync code does: on a worker thread that blocks until it is done.
async fn blocking<T: Send + 'static>(
    work: impl Future<Output = Result<T, String>> + Send + 'static,
) -> Result<T, String> {
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || runtime.block_on(work))
        .await
        .map_err(|join| format!("the sync code's thread failed: {join}"))?
}

/// Builds and runs the flow of `case`.
pub(crate) async fn run_flow(case: &Case, world: &World<'_>) -> Result<Execution, RunError> {
    let spec = case
        .flow
        .as_ref()
        .ok_or_else(|| RunError::Invalid("mode flow needs `flow`".into()))?;
    // Each method's latest output, by name: the flow's result names the method it came from.
    let outputs: Arc<Mutex<BTreeMap<String, Output>>> = Arc::default();
    let mut builder = Flow::builder()
        .name(&case.name)
        .event_bus(world.env.bus.clone());
    for method in &spec.methods {
        let work = match (&method.agent, &method.crew) {
            (Some(name), None) => {
                let message = method.message.as_ref().ok_or_else(|| {
                    RunError::Invalid(format!(
                        "flow method `{}` runs an agent and needs `message`",
                        method.name
                    ))
                })?;
                FlowWork::Agent {
                    agent: world.agent(name)?,
                    input: kickoff_input(message)?,
                }
            }
            (None, Some(crew)) => FlowWork::Crew(world.flow_crew(crew, &method.name)?),
            _ => {
                return Err(RunError::Invalid(format!(
                    "flow method `{}` needs exactly one of `agent` and `crew`",
                    method.name
                )));
            }
        };
        let (sink, name, is_async) = (outputs.clone(), method.name.clone(), method.is_async);
        let body = move |ctx: FlowContext| {
            let (work, sink, name) = (work.clone(), sink.clone(), name.clone());
            async move {
                let output = if is_async {
                    work.run(&ctx).await
                } else {
                    blocking(async move { work.run(&ctx).await }).await
                }
                .map_err(MethodError::msg)?;
                let raw = output.raw.clone();
                sink.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(name, output);
                Ok(raw)
            }
        };
        builder = match (method.start, &method.listen) {
            (true, None) => builder.start(&method.name, body),
            (true, Some(trigger)) => builder.start_on(&method.name, on(trigger.as_str()), body),
            (false, Some(trigger)) => builder.listen(&method.name, on(trigger.as_str()), body),
            (false, None) => {
                return Err(RunError::Invalid(format!(
                    "flow method `{}` needs `start: true` or `listen`",
                    method.name
                )));
            }
        };
    }
    let flow = builder
        .build()
        .map_err(|e| RunError::Failed(format!("building the flow: {e}")))?;
    let kickoff = {
        let flow = flow.clone();
        async move {
            flow.kickoff(Vec::<(String, Value)>::new())
                .await
                .map_err(|e| error_chain(&e))
        }
    };
    let result = if spec.is_async {
        kickoff.await
    } else {
        blocking(kickoff).await
    };
    let outputs = outputs.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(Execution::of(result.and_then(|done| {
        let last = done
            .method_outputs
            .last()
            .ok_or_else(|| "the flow ran no method".to_string())?;
        outputs
            .get(&last.method)
            .cloned()
            .map(|output| vec![output])
            .ok_or_else(|| {
                format!(
                    "the flow's result came from `{}`, which returned nothing the runner saw",
                    last.method
                )
            })
    })))
}

#[cfg(test)]
mod tests {
    use super::blocking;

    #[tokio::test]
    async fn sync_code_runs_on_a_thread_of_its_own_and_blocks_it() {
        let here = std::thread::current().id();
        let there = blocking(async {
            // Awaiting inside still works: the thread blocks on the runtime it came from.
            tokio::task::yield_now().await;
            Ok::<_, String>(std::thread::current().id())
        })
        .await
        .unwrap();
        assert_ne!(here, there);
        assert_eq!(
            blocking(async { Err::<(), _>("no".to_string()) }).await,
            Err("no".to_string())
        );
    }
}
