//! A real server on 127.0.0.1:0 over the real stack (scripted LLM over HTTP, the test MCP
//! server, a SQLite file), and a real HTTP and SSE client.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::{sync::Arc, time::Duration};

use agentloop::{
    Config, ConfigOrigin, KeyStore, Runtime, SqlStore, Store,
    server::{AppState, Metrics, serve},
};
use agentloop_test_support::{
    mcp::test_mcp_server_config_toml,
    scripted_llm::{Reply, ScriptedLlm},
};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::{Client, Response};
use serde_json::Value;
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

pub struct TestServer {
    pub url: String,
    pub llm: ScriptedLlm,
    pub store: Arc<SqlStore>,
    pub client: Client,
    pub store_url: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<bool>>>,
    runtime: Option<Runtime>,
    _dir: Option<tempfile::TempDir>,
}

impl TestServer {
    pub async fn start(script: Vec<Reply>, extra: &str) -> TestServer {
        let llm = ScriptedLlm::start(script).await;
        let dir = tempfile::tempdir().unwrap();
        let store_url = format!("sqlite://{}/agentloop.db", dir.path().display());
        let mut server = Self::start_on(llm, &store_url, extra).await;
        server._dir = Some(dir);
        server
    }

    /// A server on an existing store (another instance, or a restart).
    pub async fn start_on(llm: ScriptedLlm, store_url: &str, extra: &str) -> TestServer {
        let text = format!(
            "[llm]\nbase_url = \"{}\"\nmodel = \"scripted\"\nmax_retries = 0\n\n[store]\nurl = \"{store_url}\"\n\n{}\n{extra}\n",
            llm.base_url(),
            test_mcp_server_config_toml("test", None),
        );
        let config = Config::parse(&text, ConfigOrigin::Defaults).unwrap();
        config.validate().unwrap();
        let metrics = Arc::new(Metrics::new().unwrap());
        let telemetry = metrics.clone();
        let runtime = Runtime::start_with(&config, |agent| agent.telemetry(telemetry))
            .await
            .unwrap();
        let store = runtime.store().clone();
        let state = AppState::new(
            runtime.agent().clone(),
            store.clone() as Arc<dyn Store>,
            store.clone() as Arc<dyn KeyStore>,
            metrics,
            config.server.clone(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, state, async move {
            let _ = stopped.await;
        }));
        TestServer {
            url,
            llm,
            store,
            client: Client::new(),
            store_url: store_url.to_string(),
            stop: Some(stop),
            task: Some(task),
            runtime: Some(runtime),
            _dir: None,
        }
    }

    /// A new API key of `user`.
    pub async fn key(&self, user: &str) -> String {
        self.store.create_api_key(user).await.unwrap().secret
    }

    pub fn post(&self, path: &str, key: &str) -> reqwest::RequestBuilder {
        self.client
            .post(format!("{}{path}", self.url))
            .bearer_auth(key)
    }

    pub fn get(&self, path: &str, key: &str) -> reqwest::RequestBuilder {
        self.client
            .get(format!("{}{path}", self.url))
            .bearer_auth(key)
    }

    /// Shuts down as on SIGTERM; true when every run reached a safe point in time.
    pub async fn shutdown(mut self) -> bool {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let finished = match self.task.take() {
            Some(task) => tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .expect("the server stops")
                .unwrap()
                .unwrap(),
            None => true,
        };
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown().await;
        }
        finished
    }
}

/// One SSE event as received: its `event:` and `id:` lines and its JSON data.
#[derive(Debug, Clone)]
pub struct Sse {
    pub event: String,
    pub id: String,
    pub data: Value,
}

/// Reads every SSE event of a response until the server ends the stream.
pub async fn read_sse(response: Response) -> Vec<Sse> {
    read_sse_while(response, None).await
}

/// Reads SSE events until one of type `until` (included), then drops the connection.
pub async fn read_sse_until(response: Response, until: &str) -> Vec<Sse> {
    read_sse_while(response, Some(until)).await
}

async fn read_sse_while(response: Response, until: Option<&str>) -> Vec<Sse> {
    let mut stream = response.bytes_stream().eventsource();
    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("the stream makes progress")
    {
        let event = event.unwrap();
        let sse = Sse {
            event: event.event,
            id: event.id,
            data: serde_json::from_str(&event.data).unwrap(),
        };
        let stop = until == Some(sse.event.as_str());
        events.push(sse);
        if stop {
            break;
        }
    }
    events
}

pub fn kinds(events: &[Sse]) -> Vec<&str> {
    events
        .iter()
        .map(|event| event.event.as_str())
        .filter(|kind| *kind != "assistant_delta")
        .collect()
}

/// The error body of a response, checked for the `{"error": {"code", "message"}}` shape.
pub async fn error_of(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["code"].is_string(), "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
    (status, body["error"].clone())
}

impl TestServer {
    /// Like [`TestServer::start`], also handing back the server's state, to look at its live
    /// runs.
    pub async fn start_with_state(script: Vec<Reply>, extra: &str) -> (TestServer, AppState) {
        let llm = ScriptedLlm::start(script).await;
        let dir = tempfile::tempdir().unwrap();
        let store_url = format!("sqlite://{}/agentloop.db", dir.path().display());
        let text = format!(
            "[llm]\nbase_url = \"{}\"\nmodel = \"scripted\"\nmax_retries = 0\n\n[store]\nurl = \"{store_url}\"\n\n{}\n{extra}\n",
            llm.base_url(),
            test_mcp_server_config_toml("test", None),
        );
        let config = Config::parse(&text, ConfigOrigin::Defaults).unwrap();
        config.validate().unwrap();
        let metrics = Arc::new(Metrics::new().unwrap());
        let telemetry = metrics.clone();
        let runtime = Runtime::start_with(&config, |agent| agent.telemetry(telemetry))
            .await
            .unwrap();
        let store = runtime.store().clone();
        let state = AppState::new(
            runtime.agent().clone(),
            store.clone() as Arc<dyn Store>,
            store.clone() as Arc<dyn KeyStore>,
            metrics,
            config.server.clone(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, state.clone(), async move {
            let _ = stopped.await;
        }));
        let server = TestServer {
            url,
            llm,
            store,
            client: Client::new(),
            store_url,
            stop: Some(stop),
            task: Some(task),
            runtime: Some(runtime),
            _dir: Some(dir),
        };
        (server, state)
    }
}
