//! This process's TCP connections, as the kernel lists them: for a test that must wait until a
//! client has seen its connections to a server close (it drops them), rather than sleep and
//! hope it has.

use std::collections::HashSet;

/// TCP states in `/proc/net/tcp` (the kernel's `include/net/tcp_states.h`).
const LISTEN: &str = "0A";

/// The sockets (by inode) of this process connected to `port` on any address: on Linux, from
/// `/proc/net/tcp{,6}` and `/proc/self/fd`; empty elsewhere.
pub fn connections_to(port: u16) -> HashSet<u64> {
    let ours = own_socket_inodes();
    let mut found = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(remote), Some(state), Some(inode)) =
                (fields.get(2), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let remote_port = remote
                .rsplit_once(':')
                .and_then(|(_, hex)| u16::from_str_radix(hex, 16).ok());
            let Ok(inode) = inode.parse::<u64>() else {
                continue;
            };
            if remote_port == Some(port) && *state != LISTEN && ours.contains(&inode) {
                found.insert(inode);
            }
        }
    }
    found
}

/// The inodes of the sockets this process holds open (`socket:[INODE]` in `/proc/self/fd`).
fn own_socket_inodes() -> HashSet<u64> {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return HashSet::new();
    };
    entries
        .flatten()
        .filter_map(|entry| std::fs::read_link(entry.path()).ok())
        .filter_map(|target| {
            target
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_listed_while_open_and_gone_once_dropped() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(connections_to(port).is_empty());
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_server_side, _) = listener.accept().unwrap();
        // The accepted side's remote port is the client's, not `port`: one connection.
        assert_eq!(connections_to(port).len(), 1);
        drop(client);
        assert!(connections_to(port).is_empty());
    }
}
