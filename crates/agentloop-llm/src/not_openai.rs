//! The error for a server behind `base_url` that does not speak the provider's API: a web page,
//! a proxy's error page, an API root without `/v1` (or, for Anthropic, with one too many). What
//! the user needs is the URL that was tried, the setting it came from, a few words of what came
//! back (never a page of HTML) and what to change. Every provider's [`crate::transport`] carries
//! an [`Endpoint`]; `exchange.rs` asks for this message wherever it reads an attempt's body (an
//! error status, and a 200 that is not JSON).

use crate::config::{LlmConfig, Provider};

/// Where a client sends its requests, and where that address came from.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The provider's URL: `base_url` + `/chat/completions`, `/responses` or `/v1/messages`.
    pub url: String,
    /// `llm.base_url`, or the provider's default.
    pub base_url: String,
    /// The setting `base_url` came from, for people: `"[llm] base_url in agentloop.toml"`,
    /// `"the OPENAI_BASE_URL environment variable"`.
    pub origin: String,
    pub provider: Provider,
}

impl Endpoint {
    /// `url` under `config`'s `base_url`, its origin not yet told ([`unknown_origin`]).
    pub fn new(config: &LlmConfig, url: String) -> Self {
        Self {
            url,
            base_url: config.base_url().to_owned(),
            origin: unknown_origin(config.provider),
            provider: config.provider,
        }
    }

    /// What comes after `base_url` in the URL (`/chat/completions`, `/v1/messages`, ...).
    fn path(&self) -> &str {
        let base = self.base_url.trim_end_matches('/');
        self.url.strip_prefix(base).unwrap_or(&self.url)
    }
}

/// What is said when the caller did not tell where `base_url` came from: both settings, the
/// environment variable being the provider's own.
pub(crate) fn unknown_origin(provider: Provider) -> String {
    format!(
        "llm.base_url (or the {} environment variable)",
        provider.base_url_env()
    )
}

/// How much of a body the message keeps.
const EXCERPT_CHARS: usize = 160;

/// The message for an answer whose body is not JSON (`status` is its HTTP status); `None` when
/// the body is JSON, which the usual path reads (the provider's error object, or a reply).
pub(crate) fn not_openai_message(endpoint: &Endpoint, status: u16, body: &str) -> Option<String> {
    if serde_json::from_str::<serde_json::Value>(body).is_ok() {
        return None;
    }
    let what = if looks_like_html(body) {
        "an HTML page"
    } else if body.trim().is_empty() {
        "an empty body"
    } else {
        "text"
    };
    let excerpt = excerpt(body);
    let shown = if excerpt.is_empty() {
        String::new()
    } else {
        format!(" ({excerpt:?})")
    };
    Some(format!(
        "{url} answered HTTP {status} with {what}{shown}, not {api} reply. The URL comes from \
         {origin} ({base_url:?}), plus {path}. {hint}",
        url = endpoint.url,
        api = api_name(endpoint.provider),
        origin = endpoint.origin,
        base_url = endpoint.base_url,
        path = endpoint.path(),
        hint = hint(endpoint),
    ))
}

fn api_name(provider: Provider) -> &'static str {
    match provider {
        Provider::OpenAi => "an OpenAI-compatible",
        Provider::OpenAiResponses => "an OpenAI Responses API",
        Provider::Anthropic => "an Anthropic Messages API",
        Provider::Scripted => "a scripted",
    }
}

/// Most OpenAI-compatible servers serve the API under `/v1`; a root without it is the usual
/// mistake (`http://localhost:11434` for Ollama). Anthropic's root is the other way round: the
/// client adds `/v1/messages`, so a root ending in `/v1` asks for `/v1/v1/messages`.
fn hint(endpoint: &Endpoint) -> String {
    let trimmed = endpoint.base_url.trim_end_matches('/');
    let path = endpoint.path();
    match (endpoint.provider, trimmed.strip_suffix("/v1")) {
        (Provider::Anthropic, Some(root)) => {
            format!("The client adds {path} itself: is /v1 one too many (try {root})?")
        }
        (Provider::Anthropic, None) => format!(
            "Check that this is the root of an Anthropic Messages API (the part before {path}), \
             not a web page or another service."
        ),
        (_, Some(_)) => format!(
            "Check that this is the API root of an OpenAI-compatible server (the part before \
             {path}), not a web page or another service."
        ),
        (_, None) => format!(
            "OpenAI-compatible servers usually serve the API under /v1: is /v1 missing (try \
             {trimmed}/v1)?"
        ),
    }
}

fn looks_like_html(body: &str) -> bool {
    let start: String = body.trim_start().chars().take(64).collect();
    let start = start.to_ascii_lowercase();
    start.starts_with("<!doctype")
        || start.starts_with("<html")
        || start.starts_with("<head")
        || start.starts_with("<body")
        || (start.starts_with('<') && body.contains("</"))
}

/// A few words of `body` on one line: an HTML page's title (or its text without tags, scripts
/// and styles), else the text itself, whitespace collapsed, cut at 160 characters.
pub(crate) fn excerpt(body: &str) -> String {
    let text = if looks_like_html(body) {
        title(body).unwrap_or_else(|| without_tags(body))
    } else {
        body.to_string()
    };
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

fn title(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let title = html.get(start..end)?.trim();
    (!title.is_empty()).then(|| title.to_string())
}

/// The text of an HTML document: tags dropped, and what is inside `<script>` and `<style>`.
fn without_tags(html: &str) -> String {
    let mut text = String::with_capacity(html.len().min(4096));
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        text.push_str(&rest[..open]);
        text.push(' ');
        let tag = &rest[open..];
        let lower: String = tag.chars().take(7).collect::<String>().to_ascii_lowercase();
        let skip_to = ["<script", "<style"]
            .iter()
            .find(|name| lower.starts_with(**name))
            .map(|name| format!("</{}", &name[1..]));
        let after = match skip_to {
            Some(closing) => tag
                .to_ascii_lowercase()
                .find(&closing)
                .and_then(|at| tag[at..].find('>').map(|end| at + end + 1)),
            None => tag.find('>').map(|end| end + 1),
        };
        match after {
            Some(after) => rest = &tag[after..],
            None => {
                rest = "";
                break;
            }
        }
    }
    text.push_str(rest);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(base_url: &str) -> Endpoint {
        Endpoint {
            url: format!("{base_url}/chat/completions"),
            base_url: base_url.to_string(),
            origin: "[llm] base_url in agentloop.toml".to_string(),
            provider: Provider::OpenAi,
        }
    }

    fn anthropic(base_url: &str) -> Endpoint {
        let config = LlmConfig {
            provider: Provider::Anthropic,
            base_url: Some(base_url.to_string()),
            ..LlmConfig::default()
        };
        Endpoint::new(&config, config.endpoint("v1/messages"))
    }

    const PAGE: &str = "<!DOCTYPE html>\n<html><head><title>404 Not Found</title>\
        <style>body { color: red }</style></head><body><h1>Not Found</h1>\
        <p>The requested URL was not found on this server.</p></body></html>";

    #[test]
    fn an_html_page_is_named_by_its_title_with_the_url_the_setting_and_v1() {
        let message = not_openai_message(&endpoint("http://127.0.0.1:8000"), 404, PAGE).unwrap();
        assert!(
            message.starts_with(
                "http://127.0.0.1:8000/chat/completions answered HTTP 404 with an HTML page \
                 (\"404 Not Found\")"
            ),
            "{message}"
        );
        assert!(
            message.contains("[llm] base_url in agentloop.toml"),
            "{message}"
        );
        assert!(
            message.contains("try http://127.0.0.1:8000/v1"),
            "{message}"
        );
        assert!(!message.contains('<'), "{message}");
    }

    #[test]
    fn a_page_without_a_title_is_shown_as_its_text_cut_short() {
        let page = format!(
            "<html><script>var x = '<b>';</script><body><p>{}</p></body></html>",
            "word ".repeat(200)
        );
        let shown = excerpt(&page);
        assert!(shown.starts_with("word word"), "{shown}");
        assert!(!shown.contains("var x"), "{shown}");
        assert_eq!(shown.chars().count(), EXCERPT_CHARS + 1);
    }

    #[test]
    fn json_bodies_take_the_usual_path_and_v1_roots_get_another_hint() {
        let base = endpoint("http://127.0.0.1:8000/v1");
        assert_eq!(not_openai_message(&base, 404, r#"{"error": "x"}"#), None);
        let message = not_openai_message(&base, 405, "Method Not Allowed").unwrap();
        assert!(
            message.contains("with text (\"Method Not Allowed\")"),
            "{message}"
        );
        assert!(
            message.contains("API root of an OpenAI-compatible server"),
            "{message}"
        );
        assert!(!message.contains("/v1/v1"), "{message}");
    }

    #[test]
    fn anthropic_roots_are_named_with_their_own_api_variable_and_path() {
        let endpoint = anthropic("http://127.0.0.1:8000/v1");
        let message = not_openai_message(&endpoint, 404, PAGE).unwrap();
        assert!(
            message.starts_with(
                "http://127.0.0.1:8000/v1/v1/messages answered HTTP 404 with an HTML page"
            ),
            "{message}"
        );
        assert!(
            message.contains("not an Anthropic Messages API reply"),
            "{message}"
        );
        assert!(message.contains("ANTHROPIC_BASE_URL"), "{message}");
        assert!(!message.contains("OPENAI_BASE_URL"), "{message}");
        assert!(message.contains("plus /v1/messages"), "{message}");
        assert!(message.contains("try http://127.0.0.1:8000)"), "{message}");
        let message = not_openai_message(&anthropic("http://127.0.0.1:8000/"), 200, PAGE).unwrap();
        assert!(
            message.contains("root of an Anthropic Messages API (the part before /v1/messages)"),
            "{message}"
        );
    }
}
