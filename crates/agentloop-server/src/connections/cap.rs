//! The most connections a server keeps open (`[server] max_connections`). Each takes a file
//! descriptor, and a run started through one takes another (its LLM connection): past the
//! open-files limit, `accept` fails and nobody is answered, `/livez` included, until clients let
//! go. Below the cap a connection is served; above it, it is answered at once with 503 (the
//! JSON error, `Retry-After`) and closed, so its descriptor is back within a moment.
//!
//! Without a setting, the cap follows the process's open-files limit: half of what is left
//! after [`RESERVED_FILES`] (the store, MCP servers' pipes, the runtime, the answers of refused
//! connections), one descriptor for the connection and one for its run's LLM call.

use std::{
    io,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};

use crate::request_id;

/// Descriptors left to everything but connections when the cap follows the open-files limit.
pub(crate) const RESERVED_FILES: u64 = 128;
/// Connections answered 503 at once: more are closed without an answer.
const MAX_REFUSING: usize = 32;
/// How long a refused connection is kept to send its answer and read the client's request (so
/// that closing it does not reset the connection before the client read the answer).
const REFUSAL_TIME: Duration = Duration::from_secs(1);
/// What a refused client is told to wait, in seconds.
const RETRY_AFTER_S: u64 = 1;
/// How often a server at its cap says so in the log.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// The cap when the open-files limit is unlimited (or not known on this system).
const WITHOUT_LIMIT: usize = 100_000;

/// The cap of one server, shared by its accept loops.
pub(crate) struct Cap {
    max: usize,
    open: Arc<Semaphore>,
    refusing: Arc<Semaphore>,
    last_warned: Mutex<Option<Instant>>,
}

impl Cap {
    pub(crate) fn new(max: usize) -> Cap {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Cap {
            max,
            open: Arc::new(Semaphore::new(max)),
            refusing: Arc::new(Semaphore::new(MAX_REFUSING)),
            last_warned: Mutex::new(None),
        }
    }

    /// A place for a new connection, held until it closes; `None` at the cap.
    pub(crate) fn admit(&self) -> Option<OwnedSemaphorePermit> {
        self.open.clone().try_acquire_owned().ok()
    }

    /// Answers `stream` 503 and closes it (in a task of its own while few are being refused,
    /// else at once, as far as the socket takes the answer without waiting).
    pub(crate) fn refuse(&self, stream: TcpStream) {
        self.warn();
        let answer = refusal();
        match self.refusing.clone().try_acquire_owned() {
            Ok(refusing) => {
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(REFUSAL_TIME, send(stream, &answer)).await;
                    drop(refusing);
                });
            }
            Err(_) => {
                let _ = stream.try_write(&answer);
            }
        }
    }

    fn warn(&self) {
        let mut last = self
            .last_warned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        if last.is_none_or(|at| now.duration_since(at) >= WARN_EVERY) {
            *last = Some(now);
            tracing::warn!(
                max_connections = self.max,
                "as many connections are open as server.max_connections allows: new ones are \
                 answered 503 until some close (raise server.max_connections with the open-files \
                 limit, `ulimit -n` or systemd's LimitNOFILE, or add instances)"
            );
        }
    }
}

/// The answer to a refused connection: a 503 with the JSON error, which closes it.
fn refusal() -> Vec<u8> {
    let id = request_id::new_id();
    let body = serde_json::json!({
        "error": {
            "code": "unavailable",
            "message": "the server has as many connections open as it allows \
                        (server.max_connections); try again in a moment",
            "request_id": &*id,
        }
    })
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: {RETRY_AFTER_S}\r\n{}: {id}\r\n\
         connection: close\r\n\r\n{body}",
        body.len(),
        request_id::HEADER,
    )
    .into_bytes()
}

/// Sends `answer`, then reads what the client sent until it closes.
async fn send(mut stream: TcpStream, answer: &[u8]) -> io::Result<()> {
    stream.write_all(answer).await?;
    stream.shutdown().await?;
    let mut sink = [0u8; 1024];
    while stream.read(&mut sink).await? > 0 {}
    Ok(())
}

/// The cap: `configured`, else what the open-files limit allows. A configured cap above that
/// is kept, with a warning: the limit may be raised for the children too, or the operator
/// knows better.
pub(crate) fn connection_cap(configured: Option<usize>) -> usize {
    let limit = open_files_limit();
    let allowed = limit.map_or(WITHOUT_LIMIT, allowed_by);
    match configured {
        Some(max) => {
            if let Some(limit) = limit
                && max > allowed
            {
                tracing::warn!(
                    max_connections = max,
                    open_files_limit = limit,
                    "server.max_connections is more than the open-files limit leaves room for \
                     ({allowed}): past the limit, connections are neither served nor answered; \
                     raise the limit (`ulimit -n`, systemd's LimitNOFILE) or lower \
                     server.max_connections"
                );
            }
            max
        }
        None => allowed,
    }
}

/// The connections an open-files limit of `limit` leaves room for (at least 1).
pub(crate) fn allowed_by(limit: u64) -> usize {
    let allowed = limit.saturating_sub(RESERVED_FILES) / 2;
    usize::try_from(allowed).unwrap_or(usize::MAX).max(1)
}

/// The process's limit of open files (its soft limit), when it has one.
#[cfg(unix)]
fn open_files_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

#[cfg(not(unix))]
fn open_files_limit() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_room_for_the_runs_and_the_rest_of_the_process() {
        assert_eq!(allowed_by(256), 64);
        assert_eq!(allowed_by(1024), 448);
        assert_eq!(allowed_by(65_536), 32_704);
        assert_eq!(allowed_by(100), 1, "at least one connection");
        assert_eq!(connection_cap(Some(7)), 7);
    }

    #[test]
    fn the_refusal_is_a_complete_503_with_the_json_error() {
        let answer = String::from_utf8(refusal()).unwrap_or_default();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(head.contains("\r\nretry-after: 1\r\n"), "{head}");
        assert!(head.contains("\r\nconnection: close"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}\r\n", body.len())),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        assert_eq!(body["error"]["code"], "unavailable");
        let id = body["error"]["request_id"].as_str().unwrap_or_default();
        assert!(head.contains(&format!("x-request-id: {id}\r\n")), "{head}");
    }
}
