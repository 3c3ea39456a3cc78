//! Waiting in tests for something that happens elsewhere (another task, a process, a server),
//! on a signal from it, bounded: never a sleep that hopes it happened.

use std::{future::Future, time::Duration};

/// How often a waiting test looks again.
const EVERY: Duration = Duration::from_millis(10);

/// Waits until `check` gives a value, looking every 10 ms for at most `limit`; then fails the
/// test saying what never happened.
#[allow(clippy::panic)]
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("{what}: not within {limit:?}");
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// Waits until `condition` holds, looking every 10 ms for at most `limit`.
pub async fn until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    eventually(what, limit, || {
        std::future::ready(condition().then_some(()))
    })
    .await
}

/// Checks that `event` does not happen for `window`, looking every 10 ms, and fails the test
/// at once when it does. Only for what must not happen: the window is how long it would take at
/// most to happen if it were going to (say, a few times a retry's backoff), never a wait for
/// something to be done.
#[allow(clippy::panic)]
pub async fn never(what: &str, window: Duration, mut event: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + window;
    loop {
        if event() {
            panic!("{what}");
        }
        if tokio::time::Instant::now() >= end {
            return;
        }
        tokio::time::sleep(EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn it_looks_until_the_value_comes() {
        let looks = AtomicUsize::new(0);
        let value = eventually("the third look", Duration::from_secs(1), || async {
            (looks.fetch_add(1, Ordering::SeqCst) == 2).then_some("found")
        })
        .await;
        assert_eq!(value, "found");
    }

    #[tokio::test]
    #[should_panic(expected = "it happened")]
    async fn never_fails_as_soon_as_it_happens() {
        let looks = AtomicUsize::new(0);
        never("it happened", Duration::from_secs(60), || {
            looks.fetch_add(1, Ordering::SeqCst) == 2
        })
        .await;
    }

    #[tokio::test]
    async fn never_returns_after_its_window() {
        never("it happened", Duration::from_millis(50), || false).await;
    }

    #[tokio::test]
    #[should_panic(expected = "never: not within")]
    async fn it_gives_up_at_its_limit() {
        until("never", Duration::from_millis(50), || false).await;
    }
}
