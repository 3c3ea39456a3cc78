//! How long a connection may keep the server waiting, on its socket: a request's head must
//! arrive within `header_timeout` of the connection or of its first byte; between requests a
//! keep-alive connection may stay silent `idle_timeout`; a request's body may pause that long
//! too. A request being answered has no deadline (a run takes minutes, an SSE stream hours),
//! as long as what it writes leaves: a write that cannot go out for `idle_timeout` (a client
//! that stopped reading) ends the connection. A keep-alive comment is a write, so a quiet SSE
//! stream is never cut.
//!
//! hyper's own header timeout does not tell the two apart: it runs from the end of the last
//! answer, so it would close keep-alive connections after the header timeout. Here the socket
//! is wrapped ([`Timed`]) and learns from the service ([`Tracked`]) when a request's head was
//! read and when its answer was written; a deadline that passes fails the read or the write
//! with `TimedOut`, and hyper closes the connection.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    task::{Context, Poll, ready},
    time::Duration,
};

use hyper::body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The deadlines of the connections of a server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) header: Duration,
    pub(crate) idle: Duration,
}

/// What the service tells the socket of one connection: requests begun, answers ended.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    /// A request's head was read and its answer is not written yet.
    busy: AtomicBool,
    /// Requests begun so far.
    begun: AtomicU64,
}

impl Activity {
    fn begin(self: &Arc<Self>) -> InFlight {
        self.begun.fetch_add(1, Ordering::Relaxed);
        self.busy.store(true, Ordering::Release);
        InFlight(self.clone())
    }
}

/// A request being answered: dropped once its answer is written (or dropped).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

/// Where a connection's reading stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Waiting for a request's head (or the rest of it): `header_timeout` from its first byte
    /// (or from the connection).
    Head { begun: bool },
    /// Waiting for the next request after an answer: `idle_timeout`.
    Idle,
    /// A request is being answered: only its body is read, `idle_timeout` between its bytes.
    Busy,
}

pin_project! {
    /// A socket whose reads and writes fail with `TimedOut` once a deadline passes.
    pub(crate) struct Timed<IO> {
        #[pin]
        io: IO,
        activity: Arc<Activity>,
        timing: Timing,
        reading: Reading,
        // The requests begun when `reading` was last set.
        begun: u64,
        #[pin]
        read_deadline: Sleep,
        // Set while a write waits for room.
        #[pin]
        write_deadline: Sleep,
        write_waiting: bool,
    }
}

impl<IO> Timed<IO> {
    /// `io`, a connection just accepted: its first request's head is due within the header
    /// timeout. Boxed: hyper wants a socket it can move.
    pub(crate) fn new(io: IO, activity: Arc<Activity>, timing: Timing) -> Pin<Box<Timed<IO>>> {
        let now = Instant::now();
        Box::pin(Timed {
            io,
            activity,
            timing,
            reading: Reading::Head { begun: false },
            begun: 0,
            read_deadline: tokio::time::sleep_until(now + timing.header),
            write_deadline: tokio::time::sleep_until(now + timing.idle),
            write_waiting: false,
        })
    }
}

impl<IO: AsyncRead> AsyncRead for Timed<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut this = self.project();
        let busy = this.activity.busy.load(Ordering::Acquire);
        let begun = this.activity.begun.load(Ordering::Relaxed);
        // What the service says since the last read: a request began (its body is read now),
        // or its answer ended (the next request is awaited).
        let now = Instant::now();
        if busy && (*this.reading != Reading::Busy || begun != *this.begun) {
            *this.reading = Reading::Busy;
            this.read_deadline.as_mut().reset(now + this.timing.idle);
        } else if !busy && (*this.reading == Reading::Busy || begun != *this.begun) {
            *this.reading = Reading::Idle;
            this.read_deadline.as_mut().reset(now + this.timing.idle);
        }
        *this.begun = begun;
        let before = buf.filled().len();
        match this.io.poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    match *this.reading {
                        Reading::Idle | Reading::Head { begun: false } => {
                            *this.reading = Reading::Head { begun: true };
                            this.read_deadline.as_mut().reset(now + this.timing.header);
                        }
                        Reading::Busy => {
                            this.read_deadline.as_mut().reset(now + this.timing.idle);
                        }
                        Reading::Head { begun: true } => {}
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => {
                ready!(this.read_deadline.poll(cx));
                let what = match *this.reading {
                    Reading::Head { .. } => "the request's head did not arrive in time",
                    Reading::Idle => "the connection was idle too long",
                    Reading::Busy => "the request's body stopped arriving",
                };
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, what)))
            }
        }
    }
}

impl<IO: AsyncWrite> Timed<IO> {
    /// `written`, or once a write waited `idle_timeout` for room, `TimedOut`.
    fn deadline<T>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        written: impl FnOnce(Pin<&mut IO>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        let mut this = self.project();
        match written(this.io, cx) {
            Poll::Ready(result) => {
                *this.write_waiting = false;
                Poll::Ready(result)
            }
            Poll::Pending => {
                if !*this.write_waiting {
                    *this.write_waiting = true;
                    this.write_deadline
                        .as_mut()
                        .reset(Instant::now() + this.timing.idle);
                }
                ready!(this.write_deadline.poll(cx));
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client stopped reading the answer",
                )))
            }
        }
    }
}

impl<IO: AsyncWrite> AsyncWrite for Timed<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.deadline(cx, |io, cx| io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.deadline(cx, |io, cx| io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.deadline(cx, |io, cx| io.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.deadline(cx, |io, cx| io.poll_shutdown(cx))
    }
}

/// A service that tells the connection's [`Activity`] when each request begins and when its
/// answer was written.
#[derive(Clone)]
pub(crate) struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Tracked<S> {
    pub(crate) fn new(inner: S, activity: Arc<Activity>) -> Tracked<S> {
        Tracked { inner, activity }
    }
}

impl<S, R, B> hyper::service::Service<R> for Tracked<S>
where
    S: hyper::service::Service<R, Response = hyper::Response<B>>,
{
    type Response = hyper::Response<TrackedBody<B>>;
    type Error = S::Error;
    type Future = TrackedFuture<S::Future>;

    fn call(&self, request: R) -> Self::Future {
        TrackedFuture {
            in_flight: Some(self.activity.begin()),
            inner: self.inner.call(request),
        }
    }
}

pin_project! {
    /// The answer to come, then its body, holding the request's [`InFlight`].
    pub(crate) struct TrackedFuture<F> {
        #[pin]
        inner: F,
        in_flight: Option<InFlight>,
    }
}

impl<F, B, E> Future for TrackedFuture<F>
where
    F: Future<Output = Result<hyper::Response<B>, E>>,
{
    type Output = Result<hyper::Response<TrackedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.inner.poll(cx))?;
        let in_flight = this.in_flight.take();
        Poll::Ready(Ok(response.map(|body| TrackedBody {
            inner: body,
            _in_flight: in_flight,
        })))
    }
}

pin_project! {
    /// An answer's body: hyper drops it once it is written.
    pub(crate) struct TrackedBody<B> {
        #[pin]
        inner: B,
        _in_flight: Option<InFlight>,
    }
}

impl<B: Body> Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    const TIMING: Timing = Timing {
        header: Duration::from_secs(10),
        idle: Duration::from_secs(100),
    };

    /// A server's end of a connection, and the client's.
    fn connection() -> (Pin<Box<Timed<DuplexStream>>>, DuplexStream, Arc<Activity>) {
        let (server, client) = tokio::io::duplex(64);
        let activity = Arc::new(Activity::default());
        (
            Timed::new(server, activity.clone(), TIMING),
            client,
            activity,
        )
    }

    /// How long a read on `server` waits before it fails with `TimedOut`.
    async fn read_times_out(server: &mut Pin<Box<Timed<DuplexStream>>>) -> Duration {
        let start = Instant::now();
        let mut byte = [0u8; 1];
        let error = server.read(&mut byte).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_is_due_within_the_header_timeout_of_the_connection_or_its_first_byte() {
        let (mut server, _client, _) = connection();
        assert_eq!(read_times_out(&mut server).await, TIMING.header);

        let (mut server, mut client, _) = connection();
        tokio::time::sleep(Duration::from_secs(3)).await;
        client.write_all(b"GET / HT").await.unwrap();
        let mut head = [0u8; 8];
        server.read_exact(&mut head).await.unwrap();
        // Dripping bytes does not buy more time: the deadline runs from the first byte.
        tokio::time::sleep(Duration::from_secs(4)).await;
        client.write_all(b"T").await.unwrap();
        server.read_exact(&mut [0u8; 1]).await.unwrap();
        assert_eq!(
            read_times_out(&mut server).await,
            TIMING.header - Duration::from_secs(4)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn between_requests_a_connection_may_be_idle_and_an_answer_in_progress_has_no_deadline() {
        let (mut server, mut client, activity) = connection();
        client.write_all(b"GET").await.unwrap();
        server.read_exact(&mut [0u8; 3]).await.unwrap();
        // The head was read: the request is answered, for longer than any deadline (hyper reads
        // nothing meanwhile)...
        let in_flight = activity.begin();
        tokio::time::sleep(TIMING.idle * 2).await;
        drop(in_flight);
        // ...then the next request may take the idle timeout to come, from the answer's end.
        assert_eq!(read_times_out(&mut server).await, TIMING.idle);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_arriving_times_out_after_the_idle_timeout() {
        let (mut server, mut client, activity) = connection();
        let _in_flight = activity.begin();
        client.write_all(b"part").await.unwrap();
        server.read_exact(&mut [0u8; 4]).await.unwrap();
        assert_eq!(read_times_out(&mut server).await, TIMING.idle);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_finds_no_room_for_the_idle_timeout_fails() {
        let (mut server, mut client, _) = connection();
        // The client reads a while, then stops.
        server.write_all(&[1; 64]).await.unwrap();
        client.read_exact(&mut [0u8; 64]).await.unwrap();
        server.write_all(&[1; 64]).await.unwrap();
        let start = Instant::now();
        let error = server.write_all(&[2; 64]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(start.elapsed(), TIMING.idle);
    }
}
