//! Reading a run's events as a client does: server-sent events over HTTP, or the text of a
//! whole `text/event-stream` body.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::Response;
use serde_json::Value;

/// How long a stream may stay silent before a test gives up on it.
const SILENCE: Duration = Duration::from_secs(20);

/// One server-sent event as received: its `event:` and `id:` lines and its JSON data.
#[derive(Debug, Clone, PartialEq)]
pub struct Sse {
    pub event: String,
    pub id: String,
    pub data: Value,
}

/// Reads every event of a response until the server ends the stream.
pub async fn read_sse(response: Response) -> Vec<Sse> {
    read_sse_while(response, None).await
}

/// Reads events until one of type `until` (included), then drops the connection.
pub async fn read_sse_until(response: Response, until: &str) -> Vec<Sse> {
    read_sse_while(response, Some(until)).await
}

#[allow(clippy::panic)]
async fn read_sse_while(response: Response, until: Option<&str>) -> Vec<Sse> {
    let mut stream = response.bytes_stream().eventsource();
    let mut events = Vec::new();
    loop {
        let next = tokio::time::timeout(SILENCE, stream.next())
            .await
            .unwrap_or_else(|_| panic!("the stream was silent for {SILENCE:?}"));
        let Some(event) = next else { break };
        let event = event.unwrap_or_else(|error| panic!("the stream broke: {error}"));
        let sse = Sse {
            event: event.event,
            id: event.id,
            data: json(&event.data),
        };
        let stop = until == Some(sse.event.as_str());
        events.push(sse);
        if stop {
            break;
        }
    }
    events
}

/// The events of a whole `text/event-stream` body; keep-alive comments are skipped.
pub fn parse_sse(text: &str) -> Vec<Sse> {
    text.split("\n\n").filter_map(parse_sse_frame).collect()
}

/// One frame (the lines up to a blank line); `None` for one without data (a keep-alive).
pub fn parse_sse_frame(frame: &str) -> Option<Sse> {
    let field = |name: &str| {
        frame
            .lines()
            .filter_map(|line| line.strip_prefix(name))
            .map(|value| value.strip_prefix(' ').unwrap_or(value))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let data = field("data:");
    if data.trim().is_empty() {
        return None;
    }
    Some(Sse {
        event: field("event:").trim().to_string(),
        id: field("id:").trim().to_string(),
        data: json(&data),
    })
}

#[allow(clippy::panic)]
fn json(data: &str) -> Value {
    serde_json::from_str(data.trim())
        .unwrap_or_else(|error| panic!("an event's data is not JSON ({error}): {data}"))
}

/// The types of `events`, without the `assistant_delta` chunks.
pub fn kinds(events: &[Sse]) -> Vec<&str> {
    events
        .iter()
        .map(|event| event.event.as_str())
        .filter(|kind| *kind != "assistant_delta")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_read_and_keep_alives_skipped() {
        let text = "event: run_started\nid: 1\ndata: {\"seq\":1}\n\n: keep-alive\n\n\
                    event: done\nid: 2\ndata: {\"seq\":2}\n\n";
        let events = parse_sse(text);
        assert_eq!(kinds(&events), ["run_started", "done"]);
        assert_eq!(events[1].id, "2");
        assert_eq!(events[1].data["seq"], 2);
    }
}
