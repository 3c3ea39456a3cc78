//! The per-user daily limit (`[server] user_daily_cost_usd`, `user_daily_tokens`): a user whose
//! runs since midnight UTC spent the limit starts no new run until the next midnight UTC (429
//! `budget_exceeded`, with `Retry-After`). Runs already going are not stopped (their own budget
//! is `[agent.budget]`); paused runs that get their answer go on.
//!
//! The cost summed is what the price table knows: runs of a model without a price count their
//! tokens, not their cost (the configuration refuses a cost limit for configured models
//! without a price; only a request's `model` can name one).

use agentloop_core::{Store, protocol::Usage};
use axum::http::StatusCode;
use chrono::{DateTime, Days, Utc};
use serde_json::json;

use crate::error::ApiError;

/// The limits of one user per UTC day; none by default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DailyLimit {
    pub cost_usd: Option<f64>,
    pub tokens: Option<u64>,
}

impl DailyLimit {
    pub fn is_unlimited(&self) -> bool {
        self.cost_usd.is_none() && self.tokens.is_none()
    }

    /// Refuses a new run of `user` at `now` when their runs of the day spent the limit.
    pub async fn admit(
        &self,
        store: Option<&dyn Store>,
        user: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ApiError> {
        let Some(store) = store.filter(|_| !self.is_unlimited()) else {
            return Ok(());
        };
        let (start, reset) = day_of(now);
        let spent = store.user_usage_since(user, start).await.map_err(|error| {
            tracing::error!(%error, "cannot read what the user spent today");
            ApiError::unavailable("cannot check your daily budget now; try again in a moment")
        })?;
        match self.exceeded(&spent) {
            Some(what) => Err(over_limit(what, reset, now, &spent)),
            None => Ok(()),
        }
    }

    /// Which limit `spent` reached, in words, if any.
    fn exceeded(&self, spent: &Usage) -> Option<String> {
        if let Some(max) = self.tokens
            && spent.total() >= max
        {
            return Some(format!(
                "{} tokens of your daily {max} (server.user_daily_tokens)",
                spent.total()
            ));
        }
        let cost = spent.cost_usd.unwrap_or(0.0);
        if let Some(max) = self.cost_usd
            && cost >= max
        {
            return Some(format!(
                "${cost:.4} of your daily ${max:.4} (server.user_daily_cost_usd)"
            ));
        }
        None
    }
}

/// The UTC day `now` is in: its midnight, and the next one (when the limit resets).
fn day_of(now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let midnight = now
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .map(|time| time.and_utc())
        .unwrap_or(now);
    let next = midnight.checked_add_days(Days::new(1)).unwrap_or(midnight);
    (midnight, next)
}

fn over_limit(what: String, reset: DateTime<Utc>, now: DateTime<Utc>, spent: &Usage) -> ApiError {
    let wait = (reset - now).num_seconds().max(1);
    let reset_text = reset.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut error = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "budget_exceeded",
        format!(
            "your runs today spent {what}; the daily budget resets at {reset_text} (midnight \
             UTC, in {wait} s)"
        ),
    )
    .with_details(json!({
        "resets_at": reset_text,
        "tokens": spent.total(),
        "cost_usd": spent.cost_usd,
    }));
    error.retry_after = u64::try_from(wait).ok();
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn the_day_starts_and_resets_at_midnight_utc() {
        let (start, reset) = day_of(time("2026-11-25T16:30:00Z"));
        assert_eq!(start, time("2026-11-25T00:00:00Z"));
        assert_eq!(reset, time("2026-11-26T00:00:00Z"));
    }

    #[test]
    fn each_limit_is_reached_on_its_own_and_the_answer_says_when_it_resets() {
        let limit = DailyLimit {
            cost_usd: Some(1.0),
            tokens: Some(1000),
        };
        let spent = |tokens: u64, cost: f64| Usage {
            prompt_tokens: tokens,
            cost_usd: Some(cost),
            ..Usage::default()
        };
        assert_eq!(limit.exceeded(&spent(999, 0.99)), None);
        assert!(
            limit
                .exceeded(&spent(1000, 0.0))
                .unwrap()
                .contains("user_daily_tokens")
        );
        assert!(
            limit
                .exceeded(&spent(10, 1.0))
                .unwrap()
                .contains("user_daily_cost_usd")
        );

        let now = time("2026-11-25T23:00:00Z");
        let error = over_limit("x".into(), day_of(now).1, now, &spent(1, 1.0));
        assert_eq!(error.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(error.code, "budget_exceeded");
        assert_eq!(error.retry_after, Some(3600));
        assert!(
            error.message.contains("2026-11-26T00:00:00Z"),
            "{}",
            error.message
        );
    }
}
