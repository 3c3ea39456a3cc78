//! The W3C trace context of a request (`traceparent`): a run it starts continues that trace.

use axum::{extract::FromRequestParts, http::request::Parts};

/// The request's `traceparent` header, when it has a well-formed one
/// (`00-{32 hex}-{16 hex}-{2 hex}`); anything else is ignored, as the W3C recommends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceParent(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for TraceParent {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let given = parts
            .headers
            .get("traceparent")
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
            .filter(|value| well_formed(value));
        Ok(TraceParent(given.map(str::to_string)))
    }
}

fn well_formed(traceparent: &str) -> bool {
    let fields: Vec<&str> = traceparent.split('-').collect();
    let hex = |field: &str, len: usize| {
        field.len() == len && field.bytes().all(|byte| byte.is_ascii_hexdigit())
    };
    matches!(fields.as_slice(), [version, trace, span, flags]
        if hex(version, 2) && *version != "ff" && hex(trace, 32) && hex(span, 16) && hex(flags, 2)
            && trace.bytes().any(|byte| byte != b'0') && span.bytes().any(|byte| byte != b'0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_trace_contexts_are_taken() {
        assert!(well_formed(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        ));
        for wrong in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319X-b7ad6b7169203331-01",
        ] {
            assert!(!well_formed(wrong), "{wrong}");
        }
    }
}
