//! Connections this process could not open for lack of its own resources (open files, local
//! ports): the LLM client, MCP over HTTP and side-effect webhooks tell such a failure apart
//! from a server that is down, since the fix is on this side (a higher limit, fewer runs at
//! once), and it may pass once other calls let go of theirs.

use std::error::Error;

/// What to do when a connection could not be opened for lack of this process's or this
/// machine's resources, read along `error`'s chain of sources; `None` for any other failure.
pub fn short_of_resources(error: &(dyn Error + 'static)) -> Option<&'static str> {
    // The same numbers on Linux, the BSDs and macOS.
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(EMFILE | ENFILE)) {
                return Some(
                    "agentloop has as many connections and files open as it may: raise its limit \
                     of open files (`ulimit -n`, systemd's LimitNOFILE) or run fewer runs at once",
                );
            }
            if io.kind() == std::io::ErrorKind::AddrNotAvailable {
                return Some(
                    "no local port is free for a new connection (too many opened and closed in a \
                     short time): run fewer runs at once, or widen net.ipv4.ip_local_port_range",
                );
            }
        }
        cause = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error caused by an I/O error, as hyper's connect error wraps the socket's.
    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("tcp connect error")
        }
    }

    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_connection_refused_for_lack_of_file_descriptors_is_told_as_such() {
        let error = Wrapped(std::io::Error::from_raw_os_error(24));
        let advice = short_of_resources(&error).expect("EMFILE is a shortage");
        assert!(advice.contains("ulimit -n"), "{advice}");
        let system = Wrapped(std::io::Error::from_raw_os_error(23));
        assert_eq!(short_of_resources(&system), Some(advice));
        let ports = Wrapped(std::io::Error::from(std::io::ErrorKind::AddrNotAvailable));
        assert!(short_of_resources(&ports).unwrap().contains("port"));
    }

    #[test]
    fn a_server_that_refuses_is_no_shortage() {
        let refused = Wrapped(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(short_of_resources(&refused), None);
        assert_eq!(short_of_resources(&std::fmt::Error), None);
    }
}
