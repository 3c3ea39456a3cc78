//! What a run holds in memory: nothing once it ended (clients that come back read the store),
//! and no more than a bounded backlog for a client that does not read (it is dropped, and comes
//! back from its last event).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop::Store;
use agentloop_test_support::{scripted_llm::Reply, sse::parse_sse_frame, wait::until};
use common::{Sse, TestServer, read_sse};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};
use uuid::Uuid;

/// An answer of `bytes`, in words of `word` bytes: one `assistant_delta` per word.
fn answer(bytes: usize, word: usize) -> String {
    let word = format!("{} ", "x".repeat(word - 1));
    word.repeat(bytes / word.len())
}

/// Waits (at most 30 s) until `condition` holds.
async fn wait_until(what: &str, condition: impl FnMut() -> bool) {
    until(what, Duration::from_secs(30), condition).await;
}

fn seqs(events: &[Sse]) -> Vec<u64> {
    events
        .iter()
        .map(|event| event.data["seq"].as_u64().unwrap())
        .collect()
}

fn run_id(events: &[Sse]) -> Uuid {
    events[0].data["run_id"].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_finished_run_holds_no_event_and_a_client_that_comes_back_reads_them_all_from_the_store()
{
    let text = answer(1_500_000, 1000);
    let (server, state) = TestServer::start_with_state(vec![Reply::text(text.clone())], "").await;
    let key = server.key("ann").await;
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "Tell me everything"}))
        .send()
        .await
        .unwrap();
    let live = read_sse(response).await;
    let count = live.len() as u64;
    assert_eq!(seqs(&live), (1..=count).collect::<Vec<_>>());
    assert_eq!(live.last().unwrap().event, "done");
    let id = run_id(&live);

    let run = state
        .runs
        .get(id)
        .expect("a finished run stays registered a while");
    wait_until("the finished run lets go of its events", || {
        run.held().events == 0
    })
    .await;
    assert_eq!(run.held().bytes, 0);
    assert_eq!(state.runs.held().bytes, 0);

    // Every event, from the store, in pages (the answer is streamed and then sent whole).
    let again = read_sse(
        server
            .get(&format!("/v1/runs/{id}/events"), &key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(seqs(&again), (1..=count).collect::<Vec<_>>());
    let data = |events: &[Sse]| {
        events
            .iter()
            .map(|e| e.data.clone())
            .collect::<Vec<Value>>()
    };
    assert_eq!(data(&again), data(&live));
    let answered = again
        .iter()
        .find(|event| event.event == "final_response")
        .map(|event| event.data["delta"].as_str().unwrap().to_string());
    assert_eq!(
        answered.as_deref().map(str::trim_end),
        Some(text.trim_end())
    );

    // And from the middle, without a gap or a repeat.
    let rest = read_sse(
        server
            .get(&format!("/v1/runs/{id}/events"), &key)
            .header("last-event-id", "700")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(seqs(&rest), (701..=count).collect::<Vec<_>>());
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_that_does_not_read_is_dropped_and_resumes_after_its_last_event() {
    // More text than the connection's buffers take (the kernel's send buffer grows to 4 MiB,
    // tcp_wmem, even for a reader that does not read), then the whole answer again as
    // `final_response`: far more than the backlog a follower may have (4 MiB).
    let text = answer(6_000_000, 20_000);
    let (server, state) = TestServer::start_with_state(vec![Reply::text(text)], "").await;
    let key = server.key("ann").await;
    let mut client = RawSse::post(&server.url, &key, r#"{"query": "Tell me everything"}"#).await;
    let first = client.next_event().await.expect("run_started");
    assert_eq!(first.event, "run_started");
    let id: Uuid = first.data["run_id"].as_str().unwrap().parse().unwrap();
    let run = state.runs.get(id).unwrap();

    // The client reads nothing more.
    wait_until("the run ends", || run.is_finished()).await;
    assert_eq!(
        run.dropped_followers(),
        1,
        "the client that does not read is dropped"
    );
    assert_eq!(run.followers(), 0);

    // What it was given before it was dropped, then the end of the stream, with no `done`.
    let mut received = vec![first];
    while let Some(event) = client.next_event().await {
        received.push(event);
    }
    let given = received.len() as u64;
    assert_eq!(seqs(&received), (1..=given).collect::<Vec<_>>());
    assert_ne!(received.last().unwrap().event, "done");

    let rest = read_sse(
        server
            .get(&format!("/v1/runs/{id}/events"), &key)
            .header("last-event-id", given.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    let stored = server.store.events(id, 0).await.unwrap().len() as u64;
    assert_eq!(seqs(&rest), (given + 1..=stored).collect::<Vec<_>>());
    assert_eq!(rest.last().unwrap().event, "done");
    server.shutdown().await;
}

/// An SSE client on a raw connection with a small receive buffer, so what it does not read
/// stays on the server's side.
struct RawSse {
    reader: BufReader<TcpStream>,
    /// Received body bytes not yet parsed into events.
    body: Vec<u8>,
    ended: bool,
}

impl RawSse {
    async fn post(url: &str, key: &str, body: &str) -> RawSse {
        let address = url.trim_start_matches("http://");
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stream = socket.connect(address.parse().unwrap()).await.unwrap();
        let request = format!(
            "POST /v1/runs HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {key}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).await.unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).await.unwrap();
            if line == "\r\n" {
                break;
            }
            assert!(
                !line.to_ascii_lowercase().starts_with("content-length"),
                "a stream is chunked"
            );
        }
        RawSse {
            reader,
            body: Vec::new(),
            ended: false,
        }
    }

    /// The next event; `None` once the response ended.
    async fn next_event(&mut self) -> Option<Sse> {
        loop {
            if let Some(end) = self.body.windows(2).position(|pair| pair == b"\n\n") {
                let frame: Vec<u8> = self.body.drain(..end + 2).collect();
                match parse_sse_frame(&String::from_utf8(frame).unwrap()) {
                    Some(event) => return Some(event),
                    None => continue, // a keep-alive comment
                }
            }
            if self.ended {
                assert!(self.body.is_empty(), "half an event at the end");
                return None;
            }
            self.read_chunk().await;
        }
    }

    /// One chunk of the chunked body.
    async fn read_chunk(&mut self) {
        let mut size = String::new();
        self.reader.read_line(&mut size).await.unwrap();
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        let mut chunk = vec![0; size + 2];
        self.reader.read_exact(&mut chunk).await.unwrap();
        chunk.truncate(size);
        self.ended = size == 0;
        self.body.extend_from_slice(&chunk);
    }
}
