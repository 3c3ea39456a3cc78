//! Where connections are served: on the caller's runtime (`server.threads = 0`, the default:
//! tokio's multi-thread runtime, whose threads take work from each other), or on threads of
//! their own, each running a tokio runtime of one thread (`new_current_thread`) that accepts
//! connections from the one listener and drives the runs started through them (a run is a task
//! of the runtime that took its request).
//!
//! Why threads of their own: on the multi-thread runtime, a run that works alone wakes an idle
//! worker thread at many hand-overs between its tasks (the connection, the LLM call, the
//! store); on a thread of its own, a connection, its runs and their LLM connections (a pool per
//! such thread: `agentloop-llm`'s `pools`) wake nothing else. Measured (docs/performance.md):
//! a fifth less CPU for a run of one LLM call one run at a time, a tenth for three calls and
//! two tools; but waves of thousands of runs at once 5-15% slower (a thread cannot take work
//! from a busier one), and on PostgreSQL a fifth more CPU (its pool is shared by the threads).
//! Hence off by default, and refused with PostgreSQL (`agentloop::Config::validate`): a pool
//! connection is polled by the runtime that opened it, so the ones these threads opened would
//! stop with them, and the store would fail after `serve` returned. What the server shares
//! (MCP clients, the adoption loop, signals) stays on the caller's runtime.
//!
//! Those runtimes outlive the accept loops: they stop together at [`Serving::exit`], after
//! every run stopped, or when this is dropped.

use std::{io, net::TcpListener as StdListener};

use axum::Router;
use futures::{StreamExt, stream::FuturesUnordered};
use tokio::{net::TcpListener, sync::oneshot};
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use crate::connections::Limits;

/// The accept loops of one server.
pub(crate) struct Serving {
    /// Cancelled: the accept loops stop, and each waits for its connections to close.
    stop_accepting: CancellationToken,
    /// Cancelled: the loops and their runtimes stop (what still runs on them is dropped).
    exit: CancellationToken,
    /// One per loop: it ended (after `stop_accepting`), with how.
    served: FuturesUnordered<oneshot::Receiver<io::Result<()>>>,
    loops: Vec<Loop>,
}

enum Loop {
    Task(tokio::task::JoinHandle<()>),
    Thread(std::thread::JoinHandle<()>),
}

impl Serving {
    /// Serves `app` on `listener` within the connection limits of `config`: on the caller's
    /// runtime when `config.threads` is 0, else on that many threads of their own.
    pub(crate) fn start(
        listener: TcpListener,
        app: Router,
        config: &ServerConfig,
    ) -> io::Result<Serving> {
        let threads = config.threads;
        let limits = Limits::of(config);
        let mut serving = Serving {
            stop_accepting: CancellationToken::new(),
            exit: CancellationToken::new(),
            served: FuturesUnordered::new(),
            loops: Vec::new(),
        };
        if threads == 0 {
            let accept = serving.accept_loop(Listener::Tokio(listener), app, limits);
            serving.loops.push(Loop::Task(tokio::spawn(accept.run())));
            return Ok(serving);
        }
        let listener = listener.into_std()?;
        for index in 0..threads {
            let accept = serving.accept_loop(
                Listener::Std(listener.try_clone()?),
                app.clone(),
                limits.clone(),
            );
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let thread = std::thread::Builder::new()
                .name(format!("agentloop-http-{index}"))
                .spawn(move || runtime.block_on(accept.run()))?;
            serving.loops.push(Loop::Thread(thread));
        }
        Ok(serving)
    }

    /// An accept loop on `listener`, whose end [`Serving::served`] waits for.
    fn accept_loop(&mut self, listener: Listener, app: Router, limits: Limits) -> AcceptLoop {
        let (served, on_served) = oneshot::channel();
        self.served.push(on_served);
        AcceptLoop {
            listener,
            app,
            limits,
            stop_accepting: self.stop_accepting.clone(),
            exit: self.exit.clone(),
            served,
        }
    }

    /// Cancelled, asks the accept loops to stop; each then waits for its open connections to
    /// close.
    pub(crate) fn stop_accepting(&self) -> CancellationToken {
        self.stop_accepting.clone()
    }

    /// Resolves when every accept loop ended and its connections closed (or at the first that
    /// failed, with its error).
    pub(crate) async fn served(&mut self) -> io::Result<()> {
        while let Some(result) = self.served.next().await {
            match result {
                Ok(Ok(())) => {}
                Ok(Err(error)) => return Err(error),
                Err(_) => return Err(io::Error::other("an accept loop stopped unexpectedly")),
            }
        }
        Ok(())
    }

    /// Stops the loops and their runtimes (closing the connections still open) and waits for
    /// them.
    pub(crate) async fn exit(mut self) {
        self.stop_accepting.cancel();
        self.exit.cancel();
        let mut threads = Vec::new();
        for accept in std::mem::take(&mut self.loops) {
            match accept {
                Loop::Task(task) => {
                    if task.await.is_err() {
                        tracing::warn!("the accept loop ended with a panic");
                    }
                }
                Loop::Thread(thread) => threads.push(thread),
            }
        }
        if threads.is_empty() {
            return;
        }
        let panicked = tokio::task::spawn_blocking(move || {
            threads
                .into_iter()
                .filter_map(|thread| thread.join().err())
                .count()
        })
        .await;
        if !matches!(panicked, Ok(0)) {
            tracing::warn!("an HTTP thread ended with a panic");
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        // Dropped without `exit` (the server's future was dropped): the loops end by themselves.
        self.stop_accepting.cancel();
        self.exit.cancel();
    }
}

enum Listener {
    /// Registered with the caller's runtime.
    Tokio(TcpListener),
    /// To register with the runtime of the thread that serves it.
    Std(StdListener),
}

/// One accept loop and what it owns.
struct AcceptLoop {
    listener: Listener,
    app: Router,
    limits: Limits,
    stop_accepting: CancellationToken,
    exit: CancellationToken,
    served: oneshot::Sender<io::Result<()>>,
}

impl AcceptLoop {
    async fn run(self) {
        let AcceptLoop {
            listener,
            app,
            limits,
            stop_accepting,
            exit,
            served,
        } = self;
        let accepted = async {
            let listener = match listener {
                Listener::Tokio(listener) => listener,
                Listener::Std(listener) => {
                    listener.set_nonblocking(true)?;
                    TcpListener::from_std(listener)?
                }
            };
            crate::connections::serve(listener, app, stop_accepting, limits).await
        };
        let result = tokio::select! {
            result = accepted => result,
            () = exit.cancelled() => Ok(()),
        };
        let _ = served.send(result);
        // A runtime of its own goes on (its sockets may serve other runtimes' runs) until the
        // end.
        exit.cancelled().await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::routing::get;

    use super::*;

    /// Answers with the name of the thread that ran the handler, after `?ms=` milliseconds.
    fn app() -> Router {
        Router::new().route(
            "/thread",
            get(|query: axum::extract::RawQuery| async move {
                let ms = query
                    .0
                    .and_then(|q| q.strip_prefix("ms=").and_then(|ms| ms.parse().ok()))
                    .unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                std::thread::current().name().unwrap_or("").to_string()
            }),
        )
    }

    fn threads(threads: usize) -> ServerConfig {
        ServerConfig {
            threads,
            ..ServerConfig::default()
        }
    }

    async fn listener() -> (TcpListener, String) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        (listener, url)
    }

    #[tokio::test]
    async fn with_no_threads_requests_are_served_on_the_callers_runtime() {
        let (listener, url) = listener().await;
        let serving = Serving::start(listener, app(), &threads(0)).unwrap();
        let name = reqwest::get(format!("{url}/thread")).await.unwrap();
        let caller = std::thread::current().name().unwrap_or("").to_string();
        assert_eq!(name.text().await.unwrap(), caller);
        serving.exit().await;
        assert!(reqwest::get(format!("{url}/thread")).await.is_err());
    }

    #[tokio::test]
    async fn requests_are_served_on_the_threads_not_the_callers_runtime() {
        let (listener, url) = listener().await;
        let threads = Serving::start(listener, app(), &threads(2)).unwrap();
        let requests = (0..40).map(|_| {
            // A client each: a connection each, raced for by the threads.
            let url = format!("{url}/thread?ms=20");
            async move { reqwest::get(url).await.unwrap().text().await.unwrap() }
        });
        let names = futures::future::join_all(requests).await;
        for name in &names {
            assert!(
                name == "agentloop-http-0" || name == "agentloop-http-1",
                "served on {name:?}"
            );
        }
        threads.exit().await;
        assert!(
            reqwest::get(format!("{url}/thread")).await.is_err(),
            "the listener is closed once the threads exited"
        );
    }

    #[tokio::test]
    async fn stopping_lets_requests_in_progress_finish_and_refuses_new_connections() {
        use std::sync::Arc;
        use tokio::sync::Notify;
        // A request held by the test: `started` when its handler runs, answered on `release`.
        let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let held = {
            let (started, release) = (started.clone(), release.clone());
            get(move || async move {
                started.notify_one();
                release.notified().await;
                std::thread::current().name().unwrap_or("").to_string()
            })
        };
        let (listener, url) = listener().await;
        let app = app().route("/held", held);
        let mut threads = Serving::start(listener, app, &threads(2)).unwrap();
        let slow = tokio::spawn(reqwest::get(format!("{url}/held")));
        started.notified().await;
        threads.stop_accepting().cancel();
        // Not served yet: the held request's connection is still open.
        let early = tokio::time::timeout(Duration::from_millis(50), threads.served()).await;
        assert!(
            early.is_err(),
            "served before the request in progress ended"
        );
        release.notify_one();
        tokio::time::timeout(Duration::from_secs(10), threads.served())
            .await
            .expect("served once the request ended")
            .unwrap();
        let answer = slow.await.unwrap().unwrap();
        assert_eq!(answer.status(), 200);
        assert!(answer.text().await.unwrap().starts_with("agentloop-http-"));
        assert!(
            reqwest::get(format!("{url}/thread")).await.is_err(),
            "no connection is accepted once stopped"
        );
        threads.exit().await;
    }

    #[tokio::test]
    async fn a_client_that_stops_writing_after_its_request_still_gets_the_answer() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let (listener, url) = listener().await;
        let serving = Serving::start(listener, app(), &threads(0)).unwrap();
        let address = url.trim_start_matches("http://");
        let mut client = tokio::net::TcpStream::connect(address).await.unwrap();
        client
            .write_all(b"GET /thread?ms=100 HTTP/1.1\r\nhost: agentloop\r\n\r\n")
            .await
            .unwrap();
        // Half-closed: the request is all sent, and the client waits for its answer.
        client.shutdown().await.unwrap();
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(10), client.read_to_string(&mut answer))
            .await
            .expect("answered in time")
            .unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        let caller = std::thread::current().name().unwrap_or("").to_string();
        assert!(answer.ends_with(&caller), "{answer}");
        serving.exit().await;
    }
}
