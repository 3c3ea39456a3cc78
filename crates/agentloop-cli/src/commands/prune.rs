//! `agentloop prune`: delete the trail of finished runs that `[store.retention]` (or the flags)
//! no longer keeps: their events, checkpoints and orphaned tool outputs. Sessions' messages,
//! runs' rows and their tool call records stay.

use std::io::IsTerminal;
use std::process::ExitCode;

use agentloop::{Pruned, Retention, SqlStore};

use crate::cli::{GlobalArgs, PruneArgs};
use crate::commands::load_config;

pub async fn execute(global: GlobalArgs, args: PruneArgs) -> anyhow::Result<ExitCode> {
    let (config, _origin) = load_config(&global)?;
    let rules = rules(config.store.retention.clone(), &args)?;
    let Some(store) = SqlStore::open_existing(&config.store.url).await? else {
        let database = SqlStore::describe_url(&config.store.url)?;
        eprintln!("no database at {database}: nothing to prune");
        return print(&args, 0, Pruned::default());
    };
    let prunable = store.prunable(&rules).await?;
    if args.dry_run {
        return print(&args, prunable, Pruned::default());
    }
    // Batch after batch, as the server's pruner does, with the count on a terminal.
    let live = std::io::stderr().is_terminal() && !args.json;
    let mut pruned = Pruned::default();
    loop {
        let batch = store.prune_batch(&rules).await?;
        pruned += batch;
        if live {
            eprint!("\rpruned {} of {prunable} runs", pruned.runs);
        }
        if batch.runs < u64::from(rules.batch) {
            break;
        }
    }
    if live {
        eprintln!();
    }
    store.close().await;
    print(&args, prunable, pruned)
}

/// The configured rules with the flags' values instead where given; an error when no rule is
/// set at all.
fn rules(mut rules: Retention, args: &PruneArgs) -> anyhow::Result<Retention> {
    if args.max_age_days.is_some() {
        rules.max_age_days = args.max_age_days;
    }
    if args.keep_per_session.is_some() {
        rules.keep_per_session = args.keep_per_session;
    }
    if rules.max_age_days == Some(0) {
        anyhow::bail!("--max-age-days must be at least 1");
    }
    if !rules.is_set() {
        anyhow::bail!(
            "nothing says what to prune: set max_age_days or keep_per_session in \
             [store.retention] of agentloop.toml, or pass --max-age-days N or \
             --keep-per-session N"
        );
    }
    Ok(rules)
}

fn print(args: &PruneArgs, prunable: u64, pruned: Pruned) -> anyhow::Result<ExitCode> {
    if args.json {
        let line = serde_json::json!({
            "prunable": prunable,
            "dry_run": args.dry_run,
            "runs": pruned.runs,
            "events": pruned.events,
            "checkpoint_rows": pruned.checkpoint_rows,
            "tool_outputs": pruned.tool_outputs,
        });
        outln!("{line}")?;
    } else if args.dry_run {
        outln!("{prunable} finished runs would be pruned")?;
    } else {
        outln!(
            "pruned {} runs: {} events, {} checkpoint rows, {} tool outputs deleted",
            pruned.runs,
            pruned.events,
            pruned.checkpoint_rows,
            pruned.tool_outputs
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(max_age_days: Option<u32>, keep_per_session: Option<u32>) -> PruneArgs {
        PruneArgs {
            max_age_days,
            keep_per_session,
            dry_run: false,
            json: false,
        }
    }

    #[test]
    fn flags_win_over_the_configuration_and_some_rule_is_needed() {
        let configured = Retention {
            max_age_days: Some(30),
            ..Retention::default()
        };
        let merged = rules(configured.clone(), &args(None, Some(5))).unwrap();
        assert_eq!(merged.max_age_days, Some(30));
        assert_eq!(merged.keep_per_session, Some(5));
        let merged = rules(configured, &args(Some(7), None)).unwrap();
        assert_eq!(merged.max_age_days, Some(7));
        let error = rules(Retention::default(), &args(None, None)).unwrap_err();
        assert!(error.to_string().contains("[store.retention]"), "{error}");
        assert!(rules(Retention::default(), &args(Some(0), None)).is_err());
    }
}
