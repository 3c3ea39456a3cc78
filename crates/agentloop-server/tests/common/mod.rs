//! A real server on 127.0.0.1:0 over the real stack (scripted LLM over HTTP, the test MCP
//! server, a SQLite file), and a real HTTP and SSE client (the SSE reader and the configuration
//! are test support's, shared with the other harnesses).
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)] // test code

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use agentloop::{
    AgentBuilder, Config, ConfigOrigin, KeyStore, Runtime, SqlStore, Store,
    server::{AppState, Metrics, serve},
};
pub use agentloop_test_support::sse::{Sse, kinds, read_sse, read_sse_until};
use agentloop_test_support::{
    config::TestConfig,
    scripted_llm::{Reply, ScriptedLlm},
};
use reqwest::{Client, Response};
use serde_json::Value;
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

pub struct TestServer {
    pub url: String,
    pub llm: ScriptedLlm,
    pub store: Arc<SqlStore>,
    pub client: Client,
    pub store_url: String,
    /// Where the test MCP server logs each call as it starts ([`wait_for_call`]).
    ///
    /// [`wait_for_call`]: agentloop_test_support::mcp::wait_for_call
    pub mcp_log: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<bool>>>,
    runtime: Option<Runtime>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start(script: Vec<Reply>, extra: &str) -> TestServer {
        Self::start_with_state(script, extra).await.0
    }

    /// Like [`TestServer::start`], also handing back the server's state, to look at its live
    /// runs.
    pub async fn start_with_state(script: Vec<Reply>, extra: &str) -> (TestServer, AppState) {
        let llm = ScriptedLlm::start(script).await;
        let dir = tempfile::tempdir().unwrap();
        let store_url = format!("sqlite://{}/agentloop.db", dir.path().display());
        let mcp_log = dir.path().join("calls.jsonl");
        Self::launch(llm, &store_url, extra, mcp_log, dir, |agent| agent).await
    }

    /// A server on an existing store (another instance, or a restart).
    pub async fn start_on(llm: ScriptedLlm, store_url: &str, extra: &str) -> TestServer {
        Self::start_on_with(llm, store_url, extra, |agent| agent).await
    }

    /// Like [`TestServer::start_on`], the agent given more by `extend` (a tool of the test).
    pub async fn start_on_with(
        llm: ScriptedLlm,
        store_url: &str,
        extra: &str,
        extend: impl FnOnce(AgentBuilder) -> AgentBuilder,
    ) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mcp_log = dir.path().join("calls.jsonl");
        Self::launch(llm, store_url, extra, mcp_log, dir, extend)
            .await
            .0
    }

    /// Like [`TestServer::start_on`], the test MCP server logging to `mcp_log` (one log across a
    /// restart).
    pub async fn start_on_logging(
        llm: ScriptedLlm,
        store_url: &str,
        extra: &str,
        mcp_log: &Path,
    ) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mcp_log = mcp_log.to_path_buf();
        Self::launch(llm, store_url, extra, mcp_log, dir, |agent| agent)
            .await
            .0
    }

    async fn launch(
        llm: ScriptedLlm,
        store_url: &str,
        extra: &str,
        mcp_log: PathBuf,
        dir: tempfile::TempDir,
        extend: impl FnOnce(AgentBuilder) -> AgentBuilder,
    ) -> (TestServer, AppState) {
        let text = TestConfig::new(&llm.base_url())
            .store(store_url)
            .mcp_log(&mcp_log)
            .extra(extra)
            .toml();
        let config = Config::parse(&text, ConfigOrigin::Defaults).unwrap();
        config.validate().unwrap();
        let metrics = Arc::new(Metrics::new().unwrap());
        let telemetry = metrics.clone();
        let runtime = Runtime::start_with(&config, |agent| extend(agent.telemetry(telemetry)))
            .await
            .unwrap();
        let store = runtime.store().clone();
        let mut state = AppState::new(
            runtime.agent().clone(),
            store.clone() as Arc<dyn Store>,
            store.clone() as Arc<dyn KeyStore>,
            metrics,
            config.server.clone(),
        );
        state.mcp = Some(runtime.mcp_context());
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
            store_url: store_url.to_string(),
            mcp_log,
            stop: Some(stop),
            task: Some(task),
            runtime: Some(runtime),
            _dir: dir,
        };
        (server, state)
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

    /// Shuts down as on SIGTERM, then closes the store (a SQLite file then holds everything,
    /// its WAL folded in); true when every run reached a safe point in time.
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
        self.store.close().await;
        finished
    }
}

/// The error body of a response, checked for the `{"error": {"code", "message"}}` shape.
pub async fn error_of(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["code"].is_string(), "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
    (status, body["error"].clone())
}
