//! OAuth with a real MCP server: the official Python SDK's server with its own authorization
//! server (`tests/python/oauth_server.py`: dynamic client registration, PKCE, refresh tokens,
//! access tokens that live one second). A login through the loopback redirect listener (the
//! "browser" is an HTTP client that follows the authorization server's redirect), the tokens
//! sealed in a SQLite file, a later connection that finds them there and refreshes them, and
//! the file searched for every token the server issued.
//!
//! Needs a Python with `mcp` (`requires::mcp_python`); skipped, saying so, without one.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::Duration,
};

use agentloop::{
    McpServerConfig, McpSource, SqlStore,
    core::{OAuthTokenStore, Tool, ToolContext, ToolSource},
    mcp::oauth::{LoopbackAuthorizer, NoAuthorizer, OAuthContext, TOKEN_KEY_ENV, TokenKey},
};
use agentloop_test_support::{requires, wait::eventually};
use serde_json::json;

const PATIENCE: Duration = Duration::from_secs(30);
const KEY: &str = "5f0e7c3a9b1d2e4f60718293a4b5c6d7e8f90123456789abcdef0123456789ab";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/oauth_server.py")
}

/// The Python server, stopped when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(python: &Path) -> (Server, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(python)
        .arg(script())
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (Server(child), format!("http://127.0.0.1:{port}/mcp"))
}

/// A person who approves in a browser: follows the authorization URL and its redirects, to
/// agentloop's listener.
fn browser() -> LoopbackAuthorizer {
    LoopbackAuthorizer::new(
        Arc::new(|url: &str| {
            let url = url.to_owned();
            tokio::spawn(async move {
                let _ = reqwest::get(url).await;
            });
        }),
        PATIENCE,
    )
}

async fn text(source: &McpSource, name: &str) -> String {
    let tool: Arc<dyn Tool> = source
        .tools()
        .await
        .unwrap()
        .into_iter()
        .find(|tool| tool.info().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"));
    tool.call(json!({}), ToolContext::default())
        .await
        .unwrap()
        .text
}

#[tokio::test]
async fn a_login_keeps_sealed_tokens_that_a_later_connection_refreshes() {
    let Some(python) = requires::mcp_python() else {
        return;
    };
    let (_server, url) = start(&python);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    let store = Arc::new(
        SqlStore::connect(&format!("sqlite://{}", db.display()))
            .await
            .unwrap(),
    );
    let config = McpServerConfig::http(&url);
    let context = |authorizer| OAuthContext {
        tokens: Some(store.clone() as Arc<dyn OAuthTokenStore>),
        key: Some(TokenKey::parse(KEY).unwrap()),
        user: "ana".to_owned(),
        authorizer,
    };

    // Without tokens and with no one to approve, the server is left out, saying what to do.
    let error = eventually("the Python server to answer", PATIENCE, || async {
        match McpSource::connect_with("py", &config, &context(Arc::new(NoAuthorizer))).await {
            Err(error) if error.to_string().contains("OAuth") => Some(error),
            _ => None,
        }
    })
    .await;
    assert!(
        error.to_string().contains("agentloop mcp login py"),
        "{error}"
    );

    // A login: registration, PKCE, the redirect to the listener, the code exchanged.
    let source = McpSource::connect_with("py", &config, &context(Arc::new(browser())))
        .await
        .unwrap();
    assert!(
        text(&source, "py.stats")
            .await
            .starts_with("authorizations=1")
    );
    source.shutdown().await;

    // A later connection (another process) finds the sealed tokens: no new authorization, and
    // the access token, a second old by now, is refreshed.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let source = McpSource::connect_with("py", &config, &context(Arc::new(NoAuthorizer)))
        .await
        .unwrap();
    let stats = text(&source, "py.stats").await;
    let refreshes: u32 = stats
        .rsplit('=')
        .next()
        .and_then(|count| count.parse().ok())
        .unwrap();
    assert!(
        stats.starts_with("authorizations=1 ") && refreshes >= 1,
        "{stats}"
    );

    // No token the server issued is in the database's files, in any form kept there.
    let issued = text(&source, "py.issued").await;
    source.shutdown().await;
    let tokens: Vec<&str> = issued.lines().collect();
    assert!(tokens.len() >= 4, "{issued}");
    let sealed = store.load_oauth_tokens("py", "ana").await.unwrap().unwrap();
    drop(store);
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        files.push(std::fs::read(entry.unwrap().path()).unwrap());
    }
    let found = |needle: &[u8]| {
        files
            .iter()
            .any(|file| file.windows(needle.len()).any(|window| window == needle))
    };
    assert!(found(sealed.as_bytes()), "the sealed record is in the file");
    for token in tokens {
        assert!(!found(token.as_bytes()), "{token} is in the store's files");
    }
}

#[tokio::test]
async fn without_a_key_no_token_is_kept_and_the_error_names_the_variable() {
    let Some(python) = requires::mcp_python() else {
        return;
    };
    let (_server, url) = start(&python);
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqlStore::connect(&format!("sqlite://{}", dir.path().join("s.db").display()))
            .await
            .unwrap(),
    );
    let context = OAuthContext {
        tokens: Some(store.clone() as Arc<dyn OAuthTokenStore>),
        key: None,
        user: "ana".to_owned(),
        authorizer: Arc::new(browser()),
    };
    let config = McpServerConfig::http(&url);
    let error = eventually("the Python server to answer", PATIENCE, || async {
        match McpSource::connect_with("py", &config, &context).await {
            Err(error) if error.to_string().contains("OAuth") => Some(error),
            _ => None,
        }
    })
    .await;
    assert!(error.to_string().contains(TOKEN_KEY_ENV), "{error}");
    assert_eq!(store.load_oauth_tokens("py", "ana").await.unwrap(), None);
}
