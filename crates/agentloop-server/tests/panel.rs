//! The web panel's files over real HTTP (the panel itself is tested in a browser by
//! `crates/agentloop-cli/tests/panel.rs`), `[server] panel = false`, and the JSON error body of
//! a wrong method.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use common::*;

/// The files a first visit loads: the page, then what it names, then what the modules import.
#[tokio::test]
async fn the_panel_is_served_with_its_modules_under_a_strict_policy() {
    let server = TestServer::start(vec![], "").await;
    let page = server.client.get(&server.url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let policy = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(policy.contains("script-src 'self'"), "{policy}");
    assert!(!policy.contains("unsafe"), "{policy}");
    let html = page.text().await.unwrap();
    assert!(html.contains("<label for=\"key\">API key</label>"));
    assert!(html.contains("<label for=\"message\">Message</label>"));

    let mut pending: Vec<String> = names(&html, "/panel/");
    let mut loaded = vec![];
    let mut bytes = html.len();
    while let Some(name) = pending.pop() {
        if loaded.contains(&name) {
            continue;
        }
        let response = server
            .client
            .get(format!("{}/panel/{name}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{name}");
        let body = response.text().await.unwrap();
        bytes += body.len();
        pending.extend(names(&body, "\"./"));
        loaded.push(name);
    }
    assert!(loaded.iter().any(|name| name == "main.js"), "{loaded:?}");
    assert!(loaded.iter().any(|name| name == "follow.js"), "{loaded:?}");
    println!("first load: {bytes} bytes in {} files", loaded.len() + 1);
    // docs/web-panel.md states the figure; the panel must stay small.
    assert!(bytes < 80_000, "the first load grew to {bytes} bytes");

    let missing = server
        .client
        .get(format!("{}/panel/nothing.js", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(missing).await.0, 404);
}

/// The file names after each `prefix` in `text` (up to the closing quote).
fn names(text: &str, prefix: &str) -> Vec<String> {
    text.split(prefix)
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn panel_false_turns_the_panel_off() {
    let server = TestServer::start(vec![], "[server]\npanel = false\n").await;
    for path in ["/", "/panel/main.js"] {
        let response = server
            .client
            .get(format!("{}{path}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(error_of(response).await.0, 404, "{path}");
    }
}

#[tokio::test]
async fn a_wrong_method_answers_405_with_the_json_error_body() {
    let server = TestServer::start(vec![], "").await;
    let key = server.key("ann").await;
    for (method, path, allowed) in [
        (reqwest::Method::DELETE, "/v1/runs", "POST"),
        (reqwest::Method::PUT, "/v1/sessions", "GET"),
        (reqwest::Method::POST, "/healthz", "GET"),
        (reqwest::Method::POST, "/", "GET"),
    ] {
        let response = server
            .client
            .request(method.clone(), format!("{}{path}", server.url))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        let allow = response.headers()["allow"].to_str().unwrap().to_string();
        assert!(allow.contains(allowed), "{method} {path}: Allow {allow}");
        let (status, error) = error_of(response).await;
        assert_eq!(status, 405, "{method} {path}");
        assert_eq!(error["code"], "method_not_allowed");
        assert!(error["message"].as_str().unwrap().contains(path), "{error}");
    }
}
