//! A call's time limits: `timeout` since the call began or since it last reported progress,
//! and `max_duration` over the whole call, however often it reports.

use std::{future::Future, time::Duration};

use tokio::{
    sync::{mpsc::UnboundedReceiver, watch},
    time::Instant,
};

use crate::tool::ToolProgress;

/// Runs `call` within its limits, handing each progress report to `on_progress` as it comes;
/// `Err` with the limit it went over. A call that ends as a limit passes keeps its result.
/// While `waiting` counts open questions (a human's answer), `timeout` is held; it starts
/// again when the last is answered.
pub(super) async fn within<F: Future>(
    call: F,
    (timeout, max_duration): (Duration, Option<Duration>),
    (mut progress, mut waiting): (UnboundedReceiver<ToolProgress>, watch::Receiver<usize>),
    mut on_progress: impl FnMut(ToolProgress),
) -> Result<F::Output, Duration> {
    tokio::pin!(call);
    let idle = tokio::time::sleep(timeout);
    tokio::pin!(idle);
    let whole = async {
        match max_duration {
            Some(limit) => tokio::time::sleep(limit).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(whole);
    // Closed once the call dropped its context (it may still run on without it).
    let mut reporting = true;
    let mut asking = true;
    let mut held = *waiting.borrow_and_update() > 0;
    loop {
        tokio::select! {
            biased;
            output = &mut call => return Ok(output),
            report = progress.recv(), if reporting => match report {
                Some(report) => {
                    idle.as_mut().reset(Instant::now() + timeout);
                    on_progress(report);
                }
                None => reporting = false,
            },
            changed = waiting.changed(), if asking => match changed {
                Ok(()) => {
                    held = *waiting.borrow_and_update() > 0;
                    idle.as_mut().reset(Instant::now() + timeout);
                }
                Err(_) => {
                    asking = false;
                    held = false;
                }
            },
            () = &mut idle, if !held => return Err(timeout),
            () = &mut whole => return Err(max_duration.unwrap_or(timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(10);

    /// No question is ever open.
    fn idle() -> watch::Receiver<usize> {
        watch::channel(0).1
    }

    /// A call that reports `reports` times, `every` apart, then answers.
    async fn reporting(
        sender: UnboundedSender<ToolProgress>,
        reports: u32,
        every: Duration,
    ) -> u32 {
        for step in 1..=reports {
            tokio::time::sleep(every).await;
            let _ = sender.send(ToolProgress {
                progress: f64::from(step),
                total: Some(f64::from(reports)),
                message: None,
            });
        }
        tokio::time::sleep(every).await;
        reports
    }

    #[tokio::test(start_paused = true)]
    async fn progress_starts_the_timeout_again() {
        let (sender, receiver) = unbounded_channel();
        let mut seen = Vec::new();
        // Six reports 8 s apart: 56 s in all, each wait under the 10 s timeout.
        let call = reporting(sender, 6, Duration::from_secs(8));
        let ended = within(call, (TIMEOUT, None), (receiver, idle()), |report| {
            seen.push(report.progress)
        })
        .await;
        assert_eq!(ended, Ok(6));
        assert_eq!(seen, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_reports_nothing_times_out_at_the_timeout() {
        let (sender, receiver) = unbounded_channel();
        // Kept: a context that lives on does not count as progress.
        let call = async move {
            let _sender = sender;
            tokio::time::sleep(Duration::from_secs(11)).await;
        };
        let started = Instant::now();
        assert_eq!(
            within(call, (TIMEOUT, None), (receiver, idle()), |_| {}).await,
            Err(TIMEOUT)
        );
        assert_eq!(started.elapsed(), TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn the_gap_after_the_last_report_counts_too() {
        let (sender, receiver) = unbounded_channel();
        let call = async move {
            reporting(sender.clone(), 2, Duration::from_secs(8)).await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        };
        let started = Instant::now();
        assert_eq!(
            within(call, (TIMEOUT, None), (receiver, idle()), |_| {}).await,
            Err(TIMEOUT)
        );
        // Two reports at 8 s and 16 s, the answer due at 24 + 30 s: the limit at 26 s.
        assert_eq!(started.elapsed(), Duration::from_secs(26));
    }

    #[tokio::test(start_paused = true)]
    async fn max_duration_caps_a_call_that_keeps_reporting() {
        let (sender, receiver) = unbounded_channel();
        let call = reporting(sender, 100, Duration::from_secs(5));
        let limit = Duration::from_secs(42);
        let started = Instant::now();
        let mut reports = 0;
        let ended = within(call, (TIMEOUT, Some(limit)), (receiver, idle()), |_| {
            reports += 1
        })
        .await;
        assert_eq!(ended, Err(limit));
        assert_eq!(started.elapsed(), limit);
        assert_eq!(reports, 8);
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_question_holds_the_timeout_until_it_is_answered() {
        let (sender, receiver) = unbounded_channel();
        let (asking, waiting) = watch::channel(0usize);
        let call = async move {
            let _sender = sender;
            // A question open for a minute, far over the timeout, then 5 s of work.
            asking.send_replace(1);
            tokio::time::sleep(Duration::from_secs(60)).await;
            asking.send_replace(0);
            tokio::time::sleep(Duration::from_secs(5)).await;
            "answered"
        };
        let ended = within(call, (TIMEOUT, None), (receiver, waiting), |_| {}).await;
        assert_eq!(ended, Ok("answered"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_timeout_starts_again_once_the_question_is_answered() {
        let (sender, receiver) = unbounded_channel();
        let (asking, waiting) = watch::channel(0usize);
        let call = async move {
            let _sender = sender;
            asking.send_replace(1);
            tokio::time::sleep(Duration::from_secs(60)).await;
            asking.send_replace(0);
            tokio::time::sleep(Duration::from_secs(30)).await;
        };
        let started = Instant::now();
        let ended = within(call, (TIMEOUT, None), (receiver, waiting), |_| {}).await;
        assert_eq!(ended, Err(TIMEOUT));
        assert_eq!(started.elapsed(), Duration::from_secs(70));
    }
}
