//! The scripted LLM timed on its own: the bench's client calls it straight, one call after
//! another, on a keep-alive connection, so that a sequential run's time splits into the LLM's
//! and the runtime's. (The runtime's requests also carry the system prompt and ten tools'
//! schemas; the scripted LLM parses them in microseconds.)

use super::*;

/// Calls timed, after one that opens the connection.
const CALLS: usize = 500;

pub(super) async fn measure(client: &reqwest::Client, llm_url: &str, model: &str) -> Percentiles {
    let body = json!({
        "model": model,
        "stream": false,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Echo something (0)"}
        ]
    });
    let url = format!("{llm_url}/chat/completions");
    let mut times = Vec::with_capacity(CALLS);
    for call in 0..=CALLS {
        let started = Instant::now();
        let response = client
            .post(&url)
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|error| panic!("calling the scripted LLM: {}", error_chain(&error)));
        let status = response.status();
        let reply = response.bytes().await.expect("the scripted LLM's reply");
        assert!(
            status.is_success(),
            "the scripted LLM answered {status}: {}",
            String::from_utf8_lossy(&reply)
        );
        if call > 0 {
            times.push(started.elapsed());
        }
    }
    Percentiles::of(times)
}

/// A sequential run's own time per LLM call: its p50 less that many calls to the LLM alone,
/// shared among them (tool calls and store writes included).
pub(super) fn runtime_per_call(run_p50: Duration, llm_alone_p50: Duration, calls: u32) -> Duration {
    run_p50.saturating_sub(llm_alone_p50 * calls) / calls.max(1)
}
