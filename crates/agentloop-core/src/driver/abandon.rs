//! A run cancelled while its tool calls run does not wait for them: each call in flight is
//! dropped (an MCP server is told with `notifications/cancelled`, as for a call that timed
//! out) and recorded as failed, its outcome unknown; the run then ends `cancelled` at its next
//! safe point.

use agentloop_protocol::ErrorCode;

use super::{RunServices, feed, feed_step};
use crate::{
    machine::{Handled, Input, RunMachine, Step, ToolOutcome, ToolResult},
    tool::ToolError,
};

/// What the model and the record are told of a call the cancel cut off.
const CANCELLED: &str = "the run was cancelled while the call ran: agentloop stopped waiting \
                         and told the tool (MCP notifications/cancelled); whether it took effect \
                         is unknown";

/// Feeds a result for each call still `in_flight` (already dropped); the batch's next step.
pub(super) fn calls(
    machine: &mut RunMachine,
    services: &RunServices,
    in_flight: Vec<String>,
) -> Step {
    let now = crate::clock::now();
    for call_id in in_flight {
        let outcome = ToolOutcome::Failed(ToolError::Failed(CANCELLED.to_owned()));
        let result = ToolResult::new(call_id, now, 0, outcome);
        match feed(machine, services.inputs.as_ref(), Input::ToolResult(result)) {
            Handled::Next(step) => return step,
            Handled::BatchRunning => {}
            other => {
                tracing::warn!(run_id = %machine.run_id(), ?other, "unexpected answer to a tool result");
            }
        }
    }
    let failure = Input::Fail {
        code: ErrorCode::InternalError,
        message: "internal error: a cancelled tool batch ended without a result for every call"
            .to_string(),
    };
    feed_step(machine, services, failure)
}
