//! Typed answers from Rust: a run whose answer is a value of a Rust type, its JSON Schema
//! derived from the type (`schemars`), the value read back into it.

use std::marker::PhantomData;

use agentloop_protocol::{OutputSpec, RunStatus};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::{
    agent::{Agent, AgentError, RunHandle, RunRequest},
    machine::{RunFailure, RunOutcome},
};

/// Why a typed run gave no value of its type.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TypedRunError {
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The run did not complete (failed, cancelled, paused for a human); `failure` says why
    /// when it failed (`output_invalid` when no valid value came).
    #[error("the run ended {status:?} without a typed answer{}", failure.as_ref().map(|f| format!(": {} ({})", f.message, f.code)).unwrap_or_default())]
    NoValue {
        status: RunStatus,
        failure: Option<RunFailure>,
        outcome: Box<RunOutcome>,
    },
    /// The value matched the schema but not the type (a schema that says less than the type).
    #[error("the typed answer does not read as the requested type: {0}")]
    Mismatch(#[source] serde_json::Error),
}

/// The output spec of answers of type `T`: its JSON Schema, named after the type.
pub fn output_spec_for<T: JsonSchema>() -> OutputSpec {
    let name: String = T::schema_name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    OutputSpec {
        name: if name.is_empty() {
            "answer".into()
        } else {
            name
        },
        schema: crate::tool::schema_for::<T>(),
        strict: false,
    }
}

impl RunRequest {
    /// Asks for an answer of type `T` (its JSON Schema is the run's output schema).
    pub fn output_of<T: JsonSchema>(mut self) -> Self {
        self.output = Some(output_spec_for::<T>());
        self
    }
}

/// A typed run in progress: its events as [`RunHandle`]'s, its end as a value of `T`.
pub struct TypedRunHandle<T> {
    pub handle: RunHandle,
    answer: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> TypedRunHandle<T> {
    /// Waits for the end of the run and reads its value.
    pub async fn value(self) -> Result<(T, RunOutcome), TypedRunError> {
        let outcome = self.handle.outcome().await?;
        typed_value(outcome)
    }
}

/// The value of a finished run as a `T`.
pub fn typed_value<T: DeserializeOwned>(
    outcome: RunOutcome,
) -> Result<(T, RunOutcome), TypedRunError> {
    match (&outcome.status, &outcome.output) {
        (RunStatus::Completed, Some(value)) => {
            let value = serde_json::from_value(value.clone()).map_err(TypedRunError::Mismatch)?;
            Ok((value, outcome))
        }
        _ => Err(TypedRunError::NoValue {
            status: outcome.status,
            failure: outcome.failure.clone(),
            outcome: Box::new(outcome),
        }),
    }
}

impl Agent {
    /// Starts a run whose answer is a `T`: the JSON Schema of `T` is its output schema (in
    /// the agent's `output_mode`), and the value, valid against it, is read back as a `T`.
    pub fn run_typed<T: DeserializeOwned + JsonSchema>(
        &self,
        request: RunRequest,
    ) -> TypedRunHandle<T> {
        TypedRunHandle {
            handle: self.run(request.output_of::<T>()),
            answer: PhantomData,
        }
    }
}
