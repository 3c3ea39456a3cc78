//! The calls of a batch, polled in the run's task, handed back as they end.
//!
//! `FuturesUnordered` wakes its own task whenever every call it polled is still pending (so
//! as not to starve other tasks), and tokio answers a task woken in the middle of its own poll
//! by queueing it for any worker thread and waking an idle one: for a batch of one call, that is
//! a thread woken, and the run moved to it, each time the call waits, for nothing. One call is
//! polled directly; several still go through `FuturesUnordered`.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use futures::{StreamExt, stream::FuturesUnordered};

/// The calls of a batch that have not ended.
pub(super) enum Running<F> {
    One(Option<Pin<Box<F>>>),
    Many(FuturesUnordered<F>),
}

impl<F: Future> FromIterator<F> for Running<F> {
    fn from_iter<I: IntoIterator<Item = F>>(calls: I) -> Self {
        let mut calls = calls.into_iter();
        match (calls.next(), calls.next()) {
            (None, _) => Self::One(None),
            (Some(only), None) => Self::One(Some(Box::pin(only))),
            (Some(first), Some(second)) => Self::Many(
                [first, second]
                    .into_iter()
                    .chain(calls)
                    .collect::<FuturesUnordered<F>>(),
            ),
        }
    }
}

impl<F: Future> Running<F> {
    /// The output of the next call that ends; `None` once every call has.
    pub(super) fn next(&mut self) -> impl Future<Output = Option<F::Output>> + '_ {
        std::future::poll_fn(move |cx| self.poll_next(cx))
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        match self {
            Self::One(slot) => {
                let Some(call) = slot else {
                    return Poll::Ready(None);
                };
                let output = ready!(call.as_mut().poll(cx));
                *slot = None;
                Poll::Ready(Some(output))
            }
            Self::Many(calls) => calls.poll_next_unpin(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };
    use std::task::Wake;

    use super::*;

    /// Counts the wake-ups of the task that polls.
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Polls `running` once with a waker that counts its wake-ups.
    fn poll_once<F: Future>(
        running: &mut Running<F>,
        counter: &Arc<Counter>,
    ) -> Poll<Option<F::Output>> {
        let waker = Arc::clone(counter).into();
        let mut cx = Context::from_waker(&waker);
        running.poll_next(&mut cx)
    }

    #[tokio::test]
    async fn one_pending_call_does_not_wake_its_own_task() {
        let (sender, receiver) = tokio::sync::oneshot::channel::<u32>();
        let mut running: Running<_> = std::iter::once(receiver).collect();
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        assert!(poll_once(&mut running, &counter).is_pending());
        assert_eq!(
            counter.0.load(Ordering::SeqCst),
            0,
            "no wake-up while the call waits"
        );
        sender.send(7).unwrap();
        assert_eq!(
            counter.0.load(Ordering::SeqCst),
            1,
            "woken when the call can go on"
        );
        assert!(matches!(
            poll_once(&mut running, &counter),
            Poll::Ready(Some(Ok(7)))
        ));
        assert!(matches!(
            poll_once(&mut running, &counter),
            Poll::Ready(None)
        ));
    }

    #[tokio::test]
    async fn several_calls_end_in_the_order_they_finish() {
        let (first_sender, first) = tokio::sync::oneshot::channel::<u32>();
        let (second_sender, second) = tokio::sync::oneshot::channel::<u32>();
        let (third_sender, third) = tokio::sync::oneshot::channel::<u32>();
        let mut running: Running<_> = [first, second, third].into_iter().collect();
        assert!(matches!(running, Running::Many(_)));
        second_sender.send(2).unwrap();
        assert_eq!(running.next().await.map(Result::unwrap), Some(2));
        third_sender.send(3).unwrap();
        first_sender.send(1).unwrap();
        let mut rest = vec![
            running.next().await.map(Result::unwrap),
            running.next().await.map(Result::unwrap),
        ];
        rest.sort();
        assert_eq!(rest, vec![Some(1), Some(3)]);
        assert_eq!(running.next().await.map(Result::unwrap), None);
    }

    #[tokio::test]
    async fn no_call_ends_at_once() {
        let mut running: Running<std::future::Ready<u32>> = std::iter::empty().collect();
        assert_eq!(running.next().await, None);
    }
}
