//! How long to wait before trying again.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};

/// Longest computed backoff: beyond it a user is better served by an error than by silence.
const MAX_BACKOFF: Duration = Duration::from_secs(20);
/// Longest wait a server may ask for; some ask for minutes on a quota they will not lift soon.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

pub(crate) const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(500);

/// Exponential backoff with jitter: `base × 2^retry`, capped, then scaled by a random factor in
/// [0.5, 1) so clients that failed together do not come back together.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    pub base: Duration,
}

impl Backoff {
    /// The wait before retry number `retry + 1`.
    pub fn delay(&self, retry: u32) -> Duration {
        self.delay_with(retry, random_unit())
    }

    fn delay_with(&self, retry: u32, unit: f64) -> Duration {
        let exponential = self
            .base
            .saturating_mul(2u32.saturating_pow(retry))
            .min(MAX_BACKOFF);
        exponential.mul_f64(0.5 + 0.5 * unit.clamp(0.0, 1.0))
    }
}

/// A number in [0, 1). Jitter needs no real randomness, so the std hasher's random keys do,
/// sparing a dependency.
fn random_unit() -> f64 {
    let mut hasher = RandomState::new().build_hasher();
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or_default();
    hasher.write_u32(nanos);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// The wait the server asked for: `retry-after-ms` (sent by OpenAI), else `Retry-After` as
/// seconds or as an HTTP date. Capped at [`MAX_RETRY_AFTER`].
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
    };
    let millis = header("retry-after-ms")
        .and_then(|value| value.parse::<f64>().ok())
        .and_then(|millis| Duration::try_from_secs_f64(millis / 1000.0).ok());
    let wait =
        millis.or_else(|| header(RETRY_AFTER.as_str()).and_then(|v| parse_retry_after(v, now)))?;
    Some(wait.min(MAX_RETRY_AFTER))
}

fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = httpdate::parse_http_date(value).ok()?;
    // A date in the past means "now".
    Some(date.duration_since(now).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn backoff_doubles_per_retry_within_its_jitter_band() {
        let backoff = Backoff {
            base: Duration::from_millis(500),
        };
        assert_eq!(backoff.delay_with(0, 0.0), Duration::from_millis(250));
        assert_eq!(backoff.delay_with(0, 1.0), Duration::from_millis(500));
        assert_eq!(backoff.delay_with(2, 0.0), Duration::from_millis(1000));
        assert_eq!(backoff.delay_with(3, 1.0), Duration::from_millis(4000));
    }

    #[test]
    fn backoff_is_capped_even_for_huge_retry_counts() {
        let backoff = Backoff {
            base: Duration::from_millis(500),
        };
        assert_eq!(backoff.delay_with(6, 1.0), MAX_BACKOFF);
        assert_eq!(backoff.delay_with(u32::MAX, 1.0), MAX_BACKOFF);
    }

    #[test]
    fn random_delays_stay_in_the_band_and_vary() {
        let backoff = Backoff {
            base: Duration::from_millis(1000),
        };
        let delays: Vec<Duration> = (0..50).map(|_| backoff.delay(0)).collect();
        assert!(
            delays
                .iter()
                .all(|d| *d >= Duration::from_millis(500) && *d <= Duration::from_millis(1000))
        );
        assert!(
            delays.iter().any(|d| *d != delays[0]),
            "no jitter: {delays:?}"
        );
    }

    #[test]
    fn retry_after_in_seconds() {
        let now = SystemTime::now();
        assert_eq!(
            retry_after(&headers(&[("retry-after", "7")]), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1.5")]), now),
            Some(Duration::from_millis(1500))
        );
    }

    #[test]
    fn retry_after_as_an_http_date() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        let in_ten = headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:10 GMT")]);
        assert_eq!(retry_after(&in_ten, now), Some(Duration::from_secs(10)));
        let past = headers(&[("retry-after", "Wed, 21 Oct 2015 07:27:00 GMT")]);
        assert_eq!(retry_after(&past, now), Some(Duration::ZERO));
    }

    #[test]
    fn retry_after_is_capped_and_garbage_is_ignored() {
        let now = SystemTime::now();
        assert_eq!(
            retry_after(&headers(&[("retry-after", "3600")]), now),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "-3")]), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn retry_after_ms_wins_over_retry_after() {
        let both = headers(&[("retry-after-ms", "250"), ("retry-after", "9")]);
        assert_eq!(
            retry_after(&both, SystemTime::now()),
            Some(Duration::from_millis(250))
        );
    }
}
