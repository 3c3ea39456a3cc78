//! `agentloop keys create|revoke|list`: the API keys of the HTTP server.

use std::process::ExitCode;

use agentloop::core::ApiKeyInfo;
use agentloop::{KeyStore, SqlStore};
use chrono::{DateTime, Utc};

use crate::{
    cli::{GlobalArgs, KeysCommand, KeysCreateArgs, KeysListArgs, KeysRevokeArgs},
    commands::{load_config, sessions::no_database},
};

const ID_MARKER: &str = "key_";
const KEY_MARKER: &str = "al_";
/// What may be shown of an argument that is not a key id: it may be a key, ours or another
/// system's, and a terminal, a log or a screen share must not receive it whole.
const SHOWN_CHARS: usize = 11;

/// `list` and `revoke` read only: a SQLite file that is not there is not created for them.
pub async fn execute(global: GlobalArgs, command: KeysCommand) -> anyhow::Result<ExitCode> {
    let (config, _origin) = load_config(&global)?;
    let store = match &command {
        KeysCommand::Create(_) => SqlStore::connect(&config.store.url).await?,
        KeysCommand::List(_) | KeysCommand::Revoke(_) => {
            match SqlStore::open_existing(&config.store.url).await? {
                Some(store) => store,
                None => return no_store(&config.store.url, &command),
            }
        }
    };
    let code = match command {
        KeysCommand::Create(args) => create(&store, args).await?,
        KeysCommand::Revoke(args) => revoke(&store, args).await?,
        KeysCommand::List(args) => list(&store, args).await?,
    };
    store.close().await;
    Ok(code)
}

/// `keys list` and `keys revoke` without a database: nothing to list (0), no key to revoke (1).
fn no_store(url: &str, command: &KeysCommand) -> anyhow::Result<ExitCode> {
    let database = SqlStore::describe_url(url)?;
    let (consequence, code) = match command {
        KeysCommand::List(args) => {
            if args.json {
                outln!("[]")?;
            }
            ("nothing to list", ExitCode::SUCCESS)
        }
        KeysCommand::Revoke(args) => {
            eprintln!("{}", no_match_message(args.key.trim()));
            ("no key to revoke", ExitCode::from(1))
        }
        KeysCommand::Create(_) => ("nothing to create the key in", ExitCode::from(1)),
    };
    eprintln!("{}", no_database(&database, consequence));
    Ok(code)
}

/// The key goes alone to stdout, so that `KEY=$(agentloop keys create --user U)` captures it
/// and nothing else; what it is goes to stderr.
async fn create(store: &SqlStore, args: KeysCreateArgs) -> anyhow::Result<ExitCode> {
    let key = store.create_api_key(&args.user).await?;
    eprintln!(
        "created key {} for user {}; keep it now, it cannot be shown again",
        key.info.id, key.info.user_id
    );
    outln!("{}", key.secret)?;
    Ok(ExitCode::SUCCESS)
}

async fn revoke(store: &SqlStore, args: KeysRevokeArgs) -> anyhow::Result<ExitCode> {
    let key = args.key.trim();
    match store.revoke_api_key(key).await? {
        Some(revoked) => {
            outln!("revoked {} (user {})", revoked.id, revoked.user_id)?;
            Ok(ExitCode::SUCCESS)
        }
        None => {
            eprintln!("{}", no_match_message(key));
            Ok(ExitCode::from(1))
        }
    }
}

fn no_match_message(key: &str) -> String {
    let shape = key.starts_with(ID_MARKER) || key.starts_with(KEY_MARKER);
    let hint = match shape {
        true => "see `agentloop keys list` for the keys and their ids",
        false => {
            "name a key by its id (key_ and 12 hex digits, see `agentloop keys list`) or give \
             the key itself (al_ and 64 hex digits)"
        }
    };
    format!("no active key matches {}; {hint}", shown(key))
}

/// Ids are not secret and are shown whole; anything else only by its first characters.
fn shown(key: &str) -> String {
    if key.starts_with(ID_MARKER) || key.chars().count() <= SHOWN_CHARS {
        return format!("{key:?}");
    }
    let start: String = key.chars().take(SHOWN_CHARS).collect();
    format!("\"{start}…\"")
}

async fn list(store: &SqlStore, args: KeysListArgs) -> anyhow::Result<ExitCode> {
    let keys = store.list_api_keys(args.user.as_deref()).await?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&keys)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let database = store.location();
    if keys.is_empty() {
        match &args.user {
            Some(user) => eprintln!("No API keys of user {user} in {database}."),
            None => eprintln!(
                "No API keys in {database} yet. Create one with: agentloop keys create --user U"
            ),
        }
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("keys in {database}");
    print_table(&keys)?;
    Ok(ExitCode::SUCCESS)
}

fn print_table(keys: &[ApiKeyInfo]) -> std::io::Result<()> {
    let width = |column: fn(&ApiKeyInfo) -> &str, header: &str| {
        keys.iter()
            .map(|key| column(key).chars().count())
            .chain([header.len()])
            .max()
            .unwrap_or_default()
    };
    let id_width = width(|key| &key.id, "ID");
    let user_width = width(|key| &key.user_id, "USER");
    let prefix_width = width(|key| &key.prefix, "PREFIX") + 1;
    outln!(
        "{:id_width$}  {:user_width$}  {:prefix_width$}  {:16}  REVOKED (UTC)",
        "ID",
        "USER",
        "PREFIX",
        "CREATED (UTC)"
    )?;
    for key in keys {
        outln!(
            "{:id_width$}  {:user_width$}  {:prefix_width$}  {:16}  {}",
            key.id,
            key.user_id,
            format!("{}…", key.prefix),
            minute(key.created_at),
            key.revoked_at.map_or_else(|| "-".to_string(), minute)
        )?;
    }
    Ok(())
}

fn minute(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ids_and_short_arguments_are_echoed_whole() {
        assert_eq!(shown("key_0123456789ab"), "\"key_0123456789ab\"");
        assert_eq!(shown("nonsense"), "\"nonsense\"");
        let secret = format!("al_{}", "ab".repeat(32));
        assert_eq!(shown(&secret), "\"al_abababab…\"");
        assert_eq!(shown("sk-proj-very-secret"), "\"sk-proj-ver…\"");
    }

    #[test]
    fn a_malformed_argument_gets_the_accepted_forms() {
        let message = no_match_message("bogus");
        assert!(message.contains("key_ and 12 hex digits"), "{message}");
        assert!(message.contains("al_ and 64 hex digits"), "{message}");
        let message = no_match_message("key_000000000000");
        assert!(message.starts_with("no active key matches \"key_000000000000\""));
        assert!(message.contains("agentloop keys list"), "{message}");
    }
}
