//! Connections over real TCP: a request's head is due within `header_timeout_s`, a keep-alive
//! connection may be idle `idle_timeout_s`, an answer in progress (an SSE stream, a run answered
//! as JSON) is never cut for being long, and past `max_connections` a new connection is
//! answered 503 and closed while the others are served.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop_test_support::{scripted_llm::Reply, wait::eventually};
use common::*;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// Longer than any of these tests waits for a close: a close within it is the server's doing.
const BOUND: Duration = Duration::from_secs(20);

async fn connect(server: &TestServer) -> TcpStream {
    TcpStream::connect(server.url.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Reads until the server closes the connection (or resets it); what was read. Fails when it
/// stays open for [`BOUND`].
async fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut read = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout(BOUND, stream.read(&mut buffer)).await {
            Err(_) => panic!(
                "still open after {BOUND:?}; read {:?}",
                String::from_utf8_lossy(&read)
            ),
            Ok(Ok(0)) | Ok(Err(_)) => return String::from_utf8_lossy(&read).into_owned(),
            Ok(Ok(n)) => read.extend_from_slice(&buffer[..n]),
        }
    }
}

#[tokio::test]
async fn a_client_that_sends_its_head_slowly_is_closed_after_the_header_timeout() {
    let server = TestServer::start(
        vec![],
        "[server]\nheader_timeout_s = 0.3\nidle_timeout_s = 600\n",
    )
    .await;
    // Part of a head, then nothing: closed without an answer.
    let mut slow = connect(&server).await;
    slow.write_all(b"GET /livez HTTP/1.1\r\nhost: agentloop\r\n")
        .await
        .unwrap();
    assert_eq!(read_until_closed(&mut slow).await, "");
    // A connection that never sends a byte is as slow.
    let mut silent = connect(&server).await;
    assert_eq!(read_until_closed(&mut silent).await, "");
    server.shutdown().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let server = TestServer::start(
        vec![],
        "[server]\nheader_timeout_s = 600\nidle_timeout_s = 0.3\n",
    )
    .await;
    let mut client = connect(&server).await;
    client
        .write_all(b"GET /livez HTTP/1.1\r\nhost: agentloop\r\n\r\n")
        .await
        .unwrap();
    // The answer, then the connection stays open for the next request until the idle timeout
    // closes it (the header timeout is ten minutes).
    let read = read_until_closed(&mut client).await;
    assert!(read.starts_with("HTTP/1.1 200 OK"), "{read}");
    assert!(read.ends_with("\r\n\r\nok"), "{read}");
    server.shutdown().await;
}

/// An SSE stream and a JSON answer that take several idle timeouts are not cut: an answer in
/// progress has no deadline while what it writes leaves.
#[tokio::test]
async fn answers_longer_than_the_idle_timeout_are_not_cut() {
    let server = TestServer::start(
        vec![
            Reply::text("streamed").with_delay(Duration::from_millis(1500)),
            Reply::text("answered").with_delay(Duration::from_millis(1500)),
        ],
        "[server]\nheader_timeout_s = 0.3\nidle_timeout_s = 0.3\nkeep_alive_s = 0.1\n",
    )
    .await;
    let key = server.key("ann").await;
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "take your time"}))
        .send()
        .await
        .unwrap();
    let events = read_sse(response).await;
    let done = events.last().unwrap();
    assert_eq!(done.event, "done", "{:?}", kinds(&events));
    assert_eq!(done.data["status"], "completed");

    let body: Value = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "and again", "stream": false}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["answer"], "answered");
    server.shutdown().await;
}

/// Past `max_connections`, a new connection is answered 503 with the JSON error and
/// `Retry-After`, then closed; once a connection closes, `/livez` is served again.
#[tokio::test]
async fn past_the_cap_a_connection_gets_503_and_livez_answers_once_one_closes() {
    let server = TestServer::start(vec![], "[server]\nmax_connections = 3\n").await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(connect(&server).await);
    }
    // Served connections: each answers a request, and stays open.
    for stream in &mut open {
        stream
            .write_all(b"GET /livez HTTP/1.1\r\nhost: agentloop\r\n\r\n")
            .await
            .unwrap();
        let mut answer = [0u8; 17];
        stream.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"HTTP/1.1 200 OK\r\n");
    }
    let mut over = connect(&server).await;
    over.write_all(b"GET /livez HTTP/1.1\r\nhost: agentloop\r\n\r\n")
        .await
        .unwrap();
    let refused = read_until_closed(&mut over).await;
    let (head, body) = refused.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 503 "), "{refused}");
    assert!(head.contains("\r\nretry-after: 1\r\n"), "{refused}");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("server.max_connections"),
        "{body}"
    );
    let request_id = body["error"]["request_id"].as_str().unwrap();
    assert!(
        head.contains(&format!("x-request-id: {request_id}")),
        "{head}"
    );

    drop(open.pop());
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    eventually("/livez is served again", BOUND, || async {
        let response = client
            .get(format!("{}/livez", server.url))
            .send()
            .await
            .ok()?;
        (response.status() == 200).then_some(())
    })
    .await;
    drop(open);
    server.shutdown().await;
}
