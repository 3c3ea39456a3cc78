//! Running a case: its questions through the agent, one after another in one session, and
//! what the runs did, read from their events.

use std::time::{Duration, Instant};

use agentloop::{Agent, EventKind, RunRequest, RunStatus};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::cases::Case;

/// What a case's runs did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Tool calls the model made, in order: the tool's name and its arguments.
    pub calls: Vec<(String, Value)>,
    /// The last run's answer.
    pub answer: String,
    /// The last run's typed answer.
    pub output: Option<Value>,
    /// The last run's status (`None`: it sent no `done`).
    pub status: Option<RunStatus>,
    /// Why the last run failed, when it did.
    pub error: Option<String>,
    /// LLM calls, over the runs.
    pub steps: u32,
    pub tokens: u64,
    /// Known cost, over the runs (`None` when no call had a price).
    pub cost_usd: Option<f64>,
    pub latency: Duration,
    /// The LLM judge's verdict, when the case has one (its tokens and cost are not the run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<super::judge::Verdict>,
}

/// Asks `case`'s questions in a new session and watches the runs.
pub async fn observe(agent: &Agent, case: &Case) -> Observation {
    let started = Instant::now();
    let session_id = Uuid::now_v7();
    let mut seen = Observation::default();
    for (turn, question) in case.questions().into_iter().enumerate() {
        let request = RunRequest {
            query: question,
            session_id: Some(session_id),
            session_is_new: turn == 0,
            output: case.output.clone(),
            ..RunRequest::default()
        };
        seen.answer.clear();
        seen.output = None;
        seen.status = None;
        seen.error = None;
        let mut events = agent.run(request);
        while let Some(event) = events.next().await {
            match event.kind {
                EventKind::ToolSelected {
                    tool, arguments, ..
                } if event.parent_run_id.is_none() => seen.calls.push((tool, arguments)),
                EventKind::FinalResponse { delta } if event.parent_run_id.is_none() => {
                    seen.answer.push_str(&delta);
                }
                EventKind::AnswerRetracted { .. } if event.parent_run_id.is_none() => {
                    seen.answer.clear();
                }
                EventKind::Error { message, .. } if event.parent_run_id.is_none() => {
                    seen.error = Some(message);
                }
                EventKind::Done {
                    status,
                    iterations,
                    usage,
                    output,
                    ..
                } if event.parent_run_id.is_none() => {
                    seen.status = Some(status);
                    seen.steps += iterations;
                    seen.tokens += usage.prompt_tokens + usage.completion_tokens;
                    if let Some(cost) = usage.cost_usd {
                        seen.cost_usd = Some(seen.cost_usd.unwrap_or(0.0) + cost);
                    }
                    seen.output = output;
                }
                _ => {}
            }
        }
        if seen.status != Some(RunStatus::Completed) {
            break;
        }
    }
    seen.latency = started.elapsed();
    seen
}
