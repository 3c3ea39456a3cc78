//! The body of `POST /v1/runs` (and `/copilot-agent`), checked field by field: a bad body gets
//! a 400 that names the field.

use agentloop_core::{Budget, InputAnswer, RunContext, RunRequest};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::ApiError;
use crate::json_body::FromJsonBody;

/// A question for the agent.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBody {
    /// The question or task (not blank, unless `prompt` opens the run).
    #[serde(default)]
    pub query: String,
    /// Continue this session of yours (404 when it is not yours or does not exist); default:
    /// a new session.
    #[serde(default)]
    pub session_id: Option<Uuid>,
    /// Use this model instead of the configured one.
    #[serde(default)]
    #[schema(min_length = 1, pattern = r"\S")]
    pub model: Option<String>,
    /// Use this system prompt instead of the configured one.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Add the run's messages to the session.
    #[serde(default = "yes")]
    pub save_chat: bool,
    /// Show the model the session's earlier messages.
    #[serde(default = "yes")]
    pub include_history: bool,
    /// Answer with `text/event-stream` (true) or with the finished run as JSON (false).
    #[serde(default = "yes")]
    pub stream: bool,
    /// At most this many LLM calls that may ask for tools (capped by the server's limit).
    #[serde(default)]
    #[schema(minimum = 1)]
    pub max_iterations: Option<u32>,
    /// Lower limits than the server's `[agent.budget]` for this run; a higher limit is
    /// clamped to the server's (never raised).
    #[serde(default)]
    pub budget: Option<RunBodyBudget>,
    #[serde(default)]
    pub context: RunBodyContext,
    /// A typed answer: the JSON Schema the answer must match (`{name, schema, strict}`); the
    /// run's answer is then a JSON value valid against it (`output` of the finished run and of
    /// its `done` event). A schema that does not compile is a 400 naming where it is wrong.
    #[serde(default)]
    pub output: Option<agentloop_core::OutputSpec>,
    /// Images and files of the question (`[agent.attachments]` limits them: 413 with the
    /// limit named; a type the content does not have, or one the model cannot read, is a 400).
    #[serde(default)]
    pub attachments: Vec<crate::attachments::AttachmentBody>,
    /// Resources of the MCP servers, read and added to the question (each in a
    /// `<resource server uri>` block; a binary one as a short note). At most 16.
    #[serde(default)]
    pub resources: Vec<RunBodyResource>,
    /// A prompt of an MCP server whose messages open the run (before `query`, which may then
    /// be empty).
    #[serde(default)]
    pub prompt: Option<RunBodyPrompt>,
}

/// A resource of an MCP server, by its URI.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBodyResource {
    /// The `[mcp_servers.NAME]` that has it.
    pub server: String,
    pub uri: String,
}

/// A prompt of an MCP server, with its arguments.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBodyPrompt {
    pub server: String,
    pub name: String,
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// Resources one request may attach.
const MAX_RESOURCES: usize = 16;

/// What one run may spend. When its next LLM call would go over it, the run stops calling
/// tools and answers from what it has (`forced_finalize` with reason `budget`).
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBodyBudget {
    /// Tokens of the run's LLM calls, input and output.
    #[serde(default)]
    #[schema(minimum = 1)]
    pub max_tokens: Option<u64>,
    /// USD, at the server's prices.
    #[serde(default)]
    #[schema(exclusive_minimum = 0)]
    pub max_cost_usd: Option<f64>,
}

/// What the run is about and under which rules.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBodyContext {
    /// The entity the run works on (rate limits of mutating tools are kept per entity).
    #[serde(default)]
    pub entity_id: Option<String>,
    /// A workflow whose tool allowlist applies.
    #[serde(default)]
    pub workflow: Option<String>,
    /// Offer no tool that changes data.
    #[serde(default)]
    pub read_only: bool,
}

fn yes() -> bool {
    true
}

impl FromJsonBody for RunBody {
    fn read(bytes: &[u8]) -> Result<Self, ApiError> {
        RunBody::parse(bytes)
    }

    fn carries_attachments() -> bool {
        true
    }

    fn attachment_bytes(&self) -> usize {
        self.attachments.iter().map(|body| body.url.len()).sum()
    }
}

impl FromJsonBody for InputBody {
    fn read(bytes: &[u8]) -> Result<Self, ApiError> {
        InputBody::parse(bytes)
    }
}

impl RunBody {
    /// Parses and checks a body.
    pub fn parse(bytes: &[u8]) -> Result<RunBody, ApiError> {
        let body: RunBody = parse_json(bytes)?;
        body.check()?;
        Ok(body)
    }

    fn check(&self) -> Result<(), ApiError> {
        let invalid = |field: &str, message: &str| {
            ApiError::bad_request("invalid_body", format!("{field}: {message}"))
                .with_details(json!({ "field": field }))
        };
        if self.query.trim().is_empty() && self.prompt.is_none() {
            return Err(invalid("query", "must not be empty"));
        }
        if self.resources.len() > MAX_RESOURCES {
            return Err(invalid(
                "resources",
                &format!("at most {MAX_RESOURCES} resources may be attached"),
            ));
        }
        if self.max_iterations == Some(0) {
            return Err(invalid("max_iterations", "must be at least 1"));
        }
        if let Some(budget) = self.budget {
            if budget.max_tokens == Some(0) {
                return Err(invalid("budget.max_tokens", "must be at least 1"));
            }
            if budget
                .max_cost_usd
                .is_some_and(|cost| !(cost.is_finite() && cost > 0.0))
            {
                return Err(invalid(
                    "budget.max_cost_usd",
                    "must be an amount in USD above 0",
                ));
            }
        }
        if self
            .model
            .as_deref()
            .is_some_and(|model| model.trim().is_empty())
        {
            return Err(invalid("model", "must not be empty when given"));
        }
        if let Some(output) = &self.output {
            check_output(output, "output")?;
        }
        Ok(())
    }

    /// The run this body asks for, on behalf of `user`.
    pub fn into_request(self, user: &str) -> RunRequest {
        RunRequest {
            query: self.query,
            session_id: self.session_id,
            // A client names a session it has; only the server makes new ones.
            existing_session: self.session_id.is_some(),
            system_prompt: self.system_prompt,
            model: self.model,
            save_chat: self.save_chat,
            include_history: self.include_history,
            max_iterations: self.max_iterations,
            budget: self
                .budget
                .map(|budget| Budget {
                    max_tokens: budget.max_tokens,
                    max_cost_usd: budget.max_cost_usd,
                })
                .unwrap_or_default(),
            context: RunContext {
                user_id: Some(user.to_string()),
                entity_id: self.context.entity_id,
                workflow: self.context.workflow,
                read_only: self.context.read_only,
            },
            output: self.output,
            ..RunRequest::default()
        }
    }
}

/// The field an error is about. The path of an unknown field already ends with its name; a
/// missing field is named in the message only, below the path of its parent.
fn field_of(path: &str, message: &str) -> String {
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    match (path, missing) {
        (".", Some(name)) => name.to_string(),
        (path, Some(name)) => format!("{path}.{name}"),
        (".", None) => "body".to_string(),
        (path, None) => path.to_string(),
    }
}

/// serde's message without its position suffix (the field is named instead).
fn plain(message: &str) -> String {
    match message.find(" at line ") {
        Some(cut) => message[..cut].to_string(),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(body: &str) -> ApiError {
        RunBody::parse(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn defaults_follow_the_design() {
        let body = RunBody::parse(br#"{"query": "hi"}"#).unwrap();
        assert!(body.stream && body.save_chat && body.include_history);
        assert!(!body.context.read_only);
        let request = body.into_request("ann");
        assert_eq!(request.context.user_id.as_deref(), Some("ann"));
    }

    #[test]
    fn an_output_schema_reaches_the_request_and_a_bad_one_says_where() {
        let body = RunBody::parse(
            br#"{"query": "hi", "output": {"name": "ticket", "schema": {"type": "object"}, "strict": true}}"#,
        )
        .unwrap();
        let output = body.into_request("ann").output.unwrap();
        assert_eq!((output.name.as_str(), output.strict), ("ticket", true));
        let bad = error(
            r#"{"query": "q", "output": {"schema": {"type": "object", "properties": {"n": {"minimum": "x"}}}}}"#,
        );
        assert!(
            bad.message.contains("at /properties/n/minimum"),
            "{}",
            bad.message
        );
    }

    #[test]
    fn a_budget_in_the_body_reaches_the_request() {
        let body = RunBody::parse(
            br#"{"query": "hi", "budget": {"max_tokens": 500, "max_cost_usd": 0.01}}"#,
        )
        .unwrap();
        let request = body.into_request("ann");
        assert_eq!(request.budget.max_tokens, Some(500));
        assert_eq!(request.budget.max_cost_usd, Some(0.01));
    }

    #[test]
    fn each_problem_names_its_field() {
        let cases = [
            (r#"{}"#, "query"),
            (r#"{"query": 5}"#, "query"),
            (r#"{"query": "  "}"#, "query"),
            (r#"{"query": "q", "session_id": "nope"}"#, "session_id"),
            (
                r#"{"query": "q", "context": {"read_only": "yes"}}"#,
                "context.read_only",
            ),
            (
                r#"{"query": "q", "context": {"entity": "x"}}"#,
                "context.entity",
            ),
            (r#"{"query": "q", "sesion_id": "x"}"#, "sesion_id"),
            (r#"{"query": "q", "max_iterations": 0}"#, "max_iterations"),
            (r#"{"query": "q", "max_iterations": -1}"#, "max_iterations"),
            (r#"{"query": "q", "stream": null}"#, "stream"),
            (
                r#"{"query": "q", "budget": {"max_tokens": 0}}"#,
                "budget.max_tokens",
            ),
            (
                r#"{"query": "q", "budget": {"max_cost_usd": -1}}"#,
                "budget.max_cost_usd",
            ),
            (
                r#"{"query": "q", "budget": {"max_usd": 1}}"#,
                "budget.max_usd",
            ),
            (r#"{"query": "q", "output": {}}"#, "output.schema"),
            (
                r#"{"query": "q", "output": {"schema": {"type": 5}}}"#,
                "output.schema",
            ),
            (
                r#"{"query": "q", "output": {"name": "a b", "schema": {}}}"#,
                "output.name",
            ),
        ];
        for (body, field) in cases {
            let error = error(body);
            assert_eq!(error.status, 400, "{body}");
            assert_eq!(
                error.details.clone().unwrap()["field"],
                field,
                "{body}: {}",
                error.message
            );
            assert!(
                error.message.starts_with(field),
                "{body}: {}",
                error.message
            );
        }
    }

    #[test]
    fn the_input_fields_are_those_of_the_answer_and_stream() {
        let answer = serde_json::to_value(InputAnswer::default()).unwrap();
        let mut fields: Vec<&str> = answer
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        fields.push("stream");
        // Left out when absent, like the other optional answer.
        fields.push("elicitation");
        fields.sort_unstable();
        assert_eq!(fields, INPUT_FIELDS);
    }

    #[test]
    fn an_input_body_is_the_core_answer_and_stream() {
        let body = InputBody::parse(br#"{"approve": ["c1"], "stream": false}"#).unwrap();
        assert_eq!(body.input.approve, ["c1"]);
        assert!(body.input.answer.is_none() && body.input.deny.is_empty());
        assert!(!body.stream);
        assert!(InputBody::parse(b"{}").unwrap().stream);
        let error = InputBody::parse(br#"{"aprove": ["c1"]}"#).unwrap_err();
        assert_eq!(error.code, "invalid_body");
        assert!(
            error.message.starts_with("aprove: unknown field"),
            "{}",
            error.message
        );
        assert_eq!(error.details, Some(json!({"field": "aprove"})));
        let error = InputBody::parse(br#"{"answer": 5}"#).unwrap_err();
        assert!(
            error.message.starts_with("answer: invalid type"),
            "{}",
            error.message
        );
    }

    #[test]
    fn broken_json_is_said_to_be_broken() {
        for body in ["{", "", "not json", "{\"query\": "] {
            assert_eq!(error(body).code, "invalid_json", "{body}");
        }
        assert_eq!(error("[]").code, "invalid_body");
    }
}

/// The body of `POST /v1/runs/{id}/input`: the answer to the run's question, or a decision on
/// the calls waiting for approval (the core's [`InputAnswer`]), and how to answer.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct InputBody {
    #[serde(flatten)]
    pub input: InputAnswer,
    /// Answer with the run's further events (`text/event-stream`, the default) or, when false,
    /// with the finished run as JSON.
    #[serde(default = "yes")]
    pub stream: bool,
}

impl InputBody {
    /// The body's fields are `stream` and those of [`InputAnswer`]; any other is refused. A
    /// problem names its field (serde loses the path inside a flattened struct, so the two are
    /// read apart).
    pub fn parse(bytes: &[u8]) -> Result<InputBody, ApiError> {
        let mut fields: Map<String, Value> = parse_json(bytes)?;
        if let Some(field) = fields
            .keys()
            .find(|key| !INPUT_FIELDS.contains(&key.as_str()))
        {
            let expected = INPUT_FIELDS.map(|name| format!("`{name}`")).join(", ");
            return Err(ApiError::bad_request(
                "invalid_body",
                format!("{field}: unknown field `{field}`, expected one of {expected}"),
            )
            .with_details(json!({ "field": field })));
        }
        let stream = match fields.remove("stream") {
            Some(stream) => read_value("stream", stream)?,
            None => true,
        };
        let input = read_value("", Value::Object(fields))?;
        Ok(InputBody { input, stream })
    }
}

/// The fields of [`InputBody`]: those of [`InputAnswer`], and `stream`.
const INPUT_FIELDS: [&str; 5] = ["answer", "approve", "deny", "elicitation", "stream"];

/// Parses a JSON body; a problem names its field.
fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let deserializer = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let inner = error.inner();
        if inner.is_syntax() || inner.is_eof() {
            return ApiError::bad_request(
                "invalid_json",
                format!("the body is not valid JSON: {inner}"),
            );
        }
        invalid_field("", &error.path().to_string(), &inner.to_string())
    })
}

/// Reads the value of field `at` (`""`: the whole body) of a body already parsed as JSON.
fn read_value<T: serde::de::DeserializeOwned>(at: &str, value: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value)
        .map_err(|error| invalid_field(at, &error.path().to_string(), &error.inner().to_string()))
}

/// Checks the schema of a typed answer a request asks for, `field` naming where it is in the
/// body (`output`, `forwardedProps.agentloop.output`): a 400 naming the part that is wrong.
pub(crate) fn check_output(
    output: &agentloop_core::OutputSpec,
    field: &str,
) -> Result<(), ApiError> {
    if !agentloop_core::protocol::is_valid_output_name(&output.name) {
        let field = format!("{field}.name");
        return Err(ApiError::bad_request(
            "invalid_body",
            format!("{field}: must be 1 to 64 letters, digits, '_' or '-'"),
        )
        .with_details(json!({ "field": field })));
    }
    let field = format!("{field}.schema");
    if let Err(problem) = agentloop_core::output::check_spec(output, &field) {
        return Err(ApiError::bad_request("invalid_body", problem.message)
            .with_details(json!({ "field": field })));
    }
    Ok(())
}

fn invalid_field(at: &str, path: &str, message: &str) -> ApiError {
    let field = match (at, field_of(path, message).as_str()) {
        ("", field) => field.to_string(),
        (at, "body") => at.to_string(),
        (at, field) => format!("{at}.{field}"),
    };
    ApiError::bad_request("invalid_body", format!("{field}: {}", plain(message)))
        .with_details(json!({ "field": field }))
}
