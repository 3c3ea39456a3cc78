//! A TCP proxy for tests, to lose a server (PostgreSQL, an MCP server, an LLM) in the middle of
//! a run and get it back.
//!
//! ```no_run
//! # async fn demo() {
//! use agentloop_test_support::tcp_proxy::TcpProxy;
//!
//! let (proxy, url) = TcpProxy::in_front_of_url("postgres://postgres@127.0.0.1:5432/test").await;
//! // ... connect to `url`, work ...
//! proxy.cut(); // every connection reset, new ones reset at once
//! proxy.blackhole(); // or: connections accepted and held, nothing ever answered
//! proxy.restore(); // forwarding again (connections from before stay lost)
//! # drop(url);
//! # }
//! ```
#![allow(clippy::panic, clippy::expect_used)] // test support: failing loudly is the point

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does with connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forwards both ways.
    Open,
    /// Resets every connection (the ones open when cut, and each new one as soon as it is
    /// accepted), as a server that crashed or a port nobody listens on. The listener stays
    /// bound, so the port cannot be taken by anything else meanwhile.
    Cut,
    /// Holds every connection open and forwards nothing, as a network that drops packets: a
    /// client waits until its own timeout. Connections held are closed on `restore`.
    Blackhole,
}

/// A proxy on `127.0.0.1:<port>` to one target; stops when dropped.
pub struct TcpProxy {
    address: SocketAddr,
    target: String,
    mode: watch::Sender<Mode>,
    accepted: Arc<AtomicUsize>,
    live: Arc<AtomicUsize>,
    accept_task: JoinHandle<()>,
}

impl std::fmt::Debug for TcpProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpProxy")
            .field("address", &self.address)
            .field("target", &self.target)
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}

impl TcpProxy {
    /// A proxy forwarding to `target` (`host:port`), open.
    pub async fn start(target: impl Into<String>) -> TcpProxy {
        let target = target.into();
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the test proxy on 127.0.0.1");
        let address = listener.local_addr().expect("address of the test proxy");
        let (mode, _) = watch::channel(Mode::Open);
        let accepted = Arc::new(AtomicUsize::new(0));
        let live = Arc::new(AtomicUsize::new(0));
        let accept_task = tokio::spawn(accept(
            listener,
            target.clone(),
            mode.clone(),
            accepted.clone(),
            live.clone(),
        ));
        TcpProxy {
            address,
            target,
            mode,
            accepted,
            live,
            accept_task,
        }
    }

    /// A proxy to the host and port of `url` (`scheme://[user[:password]@]host:port/...`), and
    /// `url` rewritten to go through it. Panics when `url` names no port.
    pub async fn in_front_of_url(url: &str) -> (TcpProxy, String) {
        let (before, host_port, after) = split_authority(url)
            .unwrap_or_else(|| panic!("{url:?} has no host:port to put a proxy in front of"));
        let proxy = TcpProxy::start(host_port).await;
        let proxied = format!("{before}{}{after}", proxy.address());
        (proxy, proxied)
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub fn port(&self) -> u16 {
        self.address.port()
    }

    pub fn mode(&self) -> Mode {
        *self.mode.borrow()
    }

    /// See [`Mode::Cut`].
    pub fn cut(&self) {
        self.mode.send_replace(Mode::Cut);
    }

    /// See [`Mode::Blackhole`].
    pub fn blackhole(&self) {
        self.mode.send_replace(Mode::Blackhole);
    }

    /// Forwards new connections again.
    pub fn restore(&self) {
        self.mode.send_replace(Mode::Open);
    }

    /// Connections accepted so far, whatever became of them.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Connections open now (forwarded or held).
    pub fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        // Connection tasks end when they see the mode's sender gone.
    }
}

async fn accept(
    listener: TcpListener,
    target: String,
    mode: watch::Sender<Mode>,
    accepted: Arc<AtomicUsize>,
    live: Arc<AtomicUsize>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        accepted.fetch_add(1, Ordering::SeqCst);
        let guard = LiveGuard::new(live.clone());
        tokio::spawn(serve(client, target.clone(), mode.subscribe(), guard));
    }
}

/// Counts a connection as live while it exists.
struct LiveGuard(Arc<AtomicUsize>);

impl LiveGuard {
    fn new(live: Arc<AtomicUsize>) -> LiveGuard {
        live.fetch_add(1, Ordering::SeqCst);
        LiveGuard(live)
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve(
    mut client: TcpStream,
    target: String,
    mut mode: watch::Receiver<Mode>,
    _live: LiveGuard,
) {
    let _ = client.set_nodelay(true);
    let now = *mode.borrow_and_update();
    match now {
        Mode::Cut => return reset(client),
        Mode::Blackhole => return hold(client, mode).await,
        Mode::Open => {}
    }
    let Ok(mut server) = TcpStream::connect(&target).await else {
        return reset(client);
    };
    let _ = server.set_nodelay(true);
    let changed = async {
        loop {
            if mode.changed().await.is_err() {
                return None; // the proxy is gone
            }
            let now = *mode.borrow_and_update();
            if now != Mode::Open {
                return Some(now);
            }
        }
    };
    let next = tokio::select! {
        // A cut must win over bytes that arrived in the same instant.
        biased;
        next = changed => next,
        _ = copy_bidirectional(&mut client, &mut server) => return,
    };
    drop(server);
    match next {
        Some(Mode::Blackhole) => hold(client, mode).await,
        _ => reset(client),
    }
}

/// Closes with a reset rather than an orderly end, as a dead server's host answers.
fn reset(client: TcpStream) {
    let _ = client.set_zero_linger();
    drop(client);
}

/// Keeps `client` open, unanswered, until the proxy leaves the blackhole (or is dropped).
async fn hold(client: TcpStream, mut mode: watch::Receiver<Mode>) {
    while *mode.borrow_and_update() == Mode::Blackhole {
        if mode.changed().await.is_err() {
            break;
        }
    }
    reset(client);
}

/// `("postgres://user@", "127.0.0.1:5432", "/db?x=y")` of a URL.
fn split_authority(url: &str) -> Option<(&str, &str, &str)> {
    let authority_start = url.find("://")? + 3;
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    let host_start = authority.rfind('@').map_or(0, |at| at + 1);
    let host_port = &authority[host_start..];
    // An IPv6 host is bracketed; the port follows the last colon.
    host_port
        .rsplit_once(':')
        .filter(|(_, port)| port.parse::<u16>().is_ok())?;
    let start = authority_start + host_start;
    let end = authority_start + authority_len;
    Some((&url[..start], &url[start..end], &url[end..]))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[test]
    fn the_host_and_port_of_a_url_are_found() {
        assert_eq!(
            split_authority("postgres://postgres@127.0.0.1:5432/test?options=-c%20x%3Dy"),
            Some((
                "postgres://postgres@",
                "127.0.0.1:5432",
                "/test?options=-c%20x%3Dy"
            ))
        );
        assert_eq!(
            split_authority("http://u:p@[::1]:80"),
            Some(("http://u:p@", "[::1]:80", ""))
        );
        assert_eq!(split_authority("postgres://localhost/test"), None);
    }

    /// A server that echoes what it reads.
    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = stream.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        address
    }

    async fn round_trip(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
        stream.write_all(b"ping").await?;
        let mut answer = [0; 4];
        let read = tokio::time::timeout(Duration::from_millis(300), stream.read(&mut answer))
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        Ok(answer[..read].to_vec())
    }

    /// Reset or closed, rather than silent.
    fn ended(result: &std::io::Result<Vec<u8>>) -> bool {
        match result {
            Ok(bytes) => bytes.is_empty(),
            Err(error) => error.kind() != std::io::ErrorKind::TimedOut,
        }
    }

    #[tokio::test]
    async fn forwards_cuts_blackholes_and_restores() {
        let proxy = TcpProxy::start(echo_server().await.to_string()).await;
        let mut first = TcpStream::connect(proxy.address()).await.unwrap();
        assert_eq!(round_trip(&mut first).await.unwrap(), b"ping");

        proxy.cut();
        // The open connection ends: at once, with no answer.
        let after_cut = round_trip(&mut first).await;
        assert!(ended(&after_cut), "{after_cut:?}");
        let mut during_cut = TcpStream::connect(proxy.address()).await.unwrap();
        let refused = round_trip(&mut during_cut).await;
        assert!(ended(&refused), "{refused:?}");

        proxy.blackhole();
        let mut held = TcpStream::connect(proxy.address()).await.unwrap();
        let silent = round_trip(&mut held).await.unwrap_err();
        assert_eq!(silent.kind(), std::io::ErrorKind::TimedOut);

        proxy.restore();
        let mut again = TcpStream::connect(proxy.address()).await.unwrap();
        assert_eq!(round_trip(&mut again).await.unwrap(), b"ping");
        assert_eq!(proxy.mode(), Mode::Open);
        assert!(proxy.accepted() >= 4);
    }

    #[tokio::test]
    async fn a_url_is_rewritten_to_go_through_the_proxy() {
        let target = echo_server().await;
        let (proxy, url) = TcpProxy::in_front_of_url(&format!("pg://me@{target}/db?a=b")).await;
        assert_eq!(url, format!("pg://me@{}/db?a=b", proxy.address()));
        let mut stream = TcpStream::connect(proxy.address()).await.unwrap();
        assert_eq!(round_trip(&mut stream).await.unwrap(), b"ping");
    }
}
