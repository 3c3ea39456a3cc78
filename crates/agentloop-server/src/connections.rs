//! Accepting connections and serving HTTP/1.1 on each: hyper's own connection, configured for
//! a server whose requests wait on runs (what `axum::serve` does, with the settings it does not
//! expose).
//!
//! A connection whose request is being answered does not read from its socket until the
//! answer is written (hyper's `half_close`). `axum::serve` had hyper read it, to notice a client
//! that hung up mid-request, and each such read took a read buffer of its own (8 KiB per
//! connection while its run works: the request's buffer is still held by the request). Runs
//! outlive their connection anyway (a client that hangs up loses nothing and follows again), so
//! nothing waits on that notice: an answer to a client that left fails when it is written, and
//! a stream of events at its next event or keep-alive comment.
//!
//! No connection keeps the server waiting for ever: a request's head is due within
//! `[server] header_timeout_s`, a keep-alive connection may be silent `idle_timeout_s` between
//! requests, an answer's writes may wait that long for the client to read ([`deadlines`]).
//! And at most `[server] max_connections` are open at once; past that, a new one is answered
//! 503 and closed ([`cap`]), so that the process never runs out of file descriptors.

use std::{io, sync::Arc, time::Duration};

use axum::Router;
use hyper_util::{rt::TokioIo, server::graceful::GracefulShutdown, service::TowerToHyperService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;

mod cap;
mod deadlines;

use cap::Cap;
use deadlines::{Activity, Timed, Timing, Tracked};

/// What the accept loops of a server share: the deadlines of its connections and their cap.
#[derive(Clone)]
pub(crate) struct Limits {
    timing: Timing,
    cap: Arc<Cap>,
}

impl Limits {
    /// The limits `config` sets (the cap from the open-files limit unless it names one).
    pub(crate) fn of(config: &ServerConfig) -> Limits {
        Limits {
            timing: Timing {
                header: config.header_timeout(),
                idle: config.idle_timeout(),
            },
            cap: Arc::new(Cap::new(cap::connection_cap(config.max_connections))),
        }
    }
}

/// How long accepting waits after an error that is not the client's (out of open files): the
/// connections in progress may close some meanwhile.
const AFTER_ACCEPT_ERROR: Duration = Duration::from_secs(1);

/// Serves `app` on connections from `listener`, within `limits`, until `stop_accepting` is
/// cancelled; then waits for the open connections to finish their requests in progress and
/// close.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    stop_accepting: CancellationToken,
    limits: Limits,
) -> io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.half_close(true);
    let open = GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop_accepting.cancelled() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                after_accept_error(error).await;
                continue;
            }
        };
        let Some(place) = limits.cap.admit() else {
            limits.cap.refuse(stream);
            continue;
        };
        let activity = Arc::new(Activity::default());
        let io = TokioIo::new(Timed::new(stream, activity.clone(), limits.timing));
        let service = Tracked::new(TowerToHyperService::new(app.clone()), activity);
        let connection = open.watch(http.serve_connection(io, service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::trace!(%error, "connection ended with an error");
            }
            drop(place);
        });
    }
    drop(listener);
    open.shutdown().await;
    Ok(())
}

/// A client's failed connection is skipped; anything else (out of open files) is logged, and
/// accepting waits a moment before it tries again.
async fn after_accept_error(error: io::Error) {
    if matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    let advice = agentloop_core::short_of_resources(&error).unwrap_or_default();
    tracing::error!(%error, advice, "cannot accept a connection; trying again in a second");
    tokio::time::sleep(AFTER_ACCEPT_ERROR).await;
}
