//! `[mcp_servers.NAME.oauth]`: how agentloop authorizes with a server that asks for OAuth.
//! Every server reached over HTTP authorizes when it answers 401 (with a client registered
//! dynamically, or a client ID metadata document); the table only says more.

use serde::{Deserialize, Serialize};

/// `[mcp_servers.NAME.oauth]`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// A client registered with the authorization server beforehand; without it, agentloop
    /// registers one itself (dynamic client registration) unless `client_metadata_url` serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The secret of `client_id`, for a confidential client (sent as the authorization server's
    /// metadata prefers: HTTP Basic, else in the body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The scopes asked for; without them, the challenge's `scope`, else the resource's
    /// `scopes_supported`, else none (the parameter is left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// `authorization_code` (a person approves; the default) or `client_credentials` (the
    /// client itself is authorized, with `client_id` and `client_secret`: no person).
    #[serde(default)]
    pub grant: OAuthGrant,
    /// An HTTPS URL of agentloop's client ID metadata document, used as the client ID where the
    /// authorization server supports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// Where the authorization server sends the person back; `agentloop mcp login` listens
    /// there. It must be a loopback `http` URL; its port may be 0 (any free port) when the
    /// client is registered dynamically. Default `http://127.0.0.1:0/callback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// `false`: agentloop follows the authorization URL itself instead of asking a person,
    /// for authorization servers that approve at once (test servers, some internal ones).
    #[serde(default = "default_interactive")]
    pub interactive: bool,
}

fn default_interactive() -> bool {
    true
}

/// The OAuth grant a server is authorized with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    #[default]
    AuthorizationCode,
    ClientCredentials,
}

/// The redirect URI when none is configured: any free port on the loopback interface.
pub(crate) const DEFAULT_REDIRECT_URI: &str = "http://127.0.0.1:0/callback";

impl OAuthConfig {
    /// The table a server without one behaves as.
    pub fn defaults() -> Self {
        Self {
            interactive: true,
            ..Self::default()
        }
    }

    pub(crate) fn redirect_uri(&self) -> &str {
        self.redirect_uri.as_deref().unwrap_or(DEFAULT_REDIRECT_URI)
    }

    /// What is wrong with the table, as (key, problem).
    pub(crate) fn problems(&self) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        if self.client_secret.is_some() && self.client_id.is_none() {
            problems.push((
                "client_secret",
                "client_secret needs the client_id it belongs to".to_owned(),
            ));
        }
        if self.grant == OAuthGrant::ClientCredentials
            && (self.client_id.is_none() || self.client_secret.is_none())
        {
            problems.push((
                "grant",
                "the client_credentials grant needs client_id and client_secret".to_owned(),
            ));
        }
        if let Some(uri) = &self.redirect_uri
            && let Err(why) = check_redirect_uri(uri)
        {
            problems.push(("redirect_uri", why));
        }
        if let Some(url) = &self.client_metadata_url
            && !url.starts_with("https://")
        {
            problems.push(("client_metadata_url", format!("{url} is not an https URL")));
        }
        problems
    }
}

/// A redirect URI agentloop can listen on: `http` on a loopback address.
pub(crate) fn check_redirect_uri(uri: &str) -> Result<url::Url, String> {
    let parsed = url::Url::parse(uri).map_err(|error| format!("{uri} is not a URL: {error}"))?;
    let loopback = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name == "localhost",
        None => false,
    };
    if parsed.scheme() != "http" || !loopback {
        return Err(format!(
            "{uri} must be an http URL on the loopback interface (127.0.0.1, [::1] or \
             localhost): agentloop listens there for the authorization server's redirect"
        ));
    }
    Ok(parsed)
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret never reaches a log.
        f.debug_struct("OAuthConfig")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .field("scopes", &self.scopes)
            .field("grant", &self.grant)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("redirect_uri", &self.redirect_uri)
            .field("interactive", &self.interactive)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_table_reads_with_its_defaults() {
        let config: OAuthConfig = toml::from_str("client_id = \"agentloop\"").unwrap();
        assert_eq!(config.client_id.as_deref(), Some("agentloop"));
        assert!(config.interactive);
        assert_eq!(config.grant, OAuthGrant::AuthorizationCode);
        assert_eq!(config.redirect_uri(), DEFAULT_REDIRECT_URI);
        assert!(config.problems().is_empty());
    }

    #[test]
    fn problems_are_named_by_key() {
        let config: OAuthConfig = toml::from_str(
            "client_secret = \"s\"\ngrant = \"client_credentials\"\n\
             redirect_uri = \"https://example.com/cb\"\nclient_metadata_url = \"http://x/y\"",
        )
        .unwrap();
        let keys: Vec<&str> = config.problems().iter().map(|(key, _)| *key).collect();
        assert_eq!(
            keys,
            [
                "client_secret",
                "grant",
                "redirect_uri",
                "client_metadata_url"
            ]
        );
        assert!(toml::from_str::<OAuthConfig>("scope = \"x\"").is_err());
    }

    #[test]
    fn the_secret_is_not_shown() {
        let config = OAuthConfig {
            client_id: Some("id".into()),
            client_secret: Some("hunter2".into()),
            ..OAuthConfig::defaults()
        };
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
