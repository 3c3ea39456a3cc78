//! Connections that failed before reaching any server: the host's name could not be resolved,
//! or no network route leads to it. The fix is this machine's network or DNS (or the spelling
//! of the host), not a server to start at `base_url`.

use std::error::Error;

/// Whether `error`, read along its chain of sources, is a failed name lookup or a network that
/// cannot be reached.
pub(crate) fn no_network(error: &(dyn Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::NetworkUnreachable | std::io::ErrorKind::HostUnreachable
            )
        {
            return true;
        }
        let text = error.to_string();
        // hyper-util's connector, then the standard library's getaddrinfo failure.
        if text == "dns error" || text.starts_with("failed to lookup address information") {
            return true;
        }
        cause = error.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error caused by another, as the connector's errors wrap the socket's.
    #[derive(Debug)]
    struct Wrapped(&'static str, Box<dyn Error + Send + Sync>);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(self.1.as_ref())
        }
    }

    #[test]
    fn failed_lookups_and_unreachable_networks_are_no_network() {
        let lookup = std::io::Error::other(
            "failed to lookup address information: Temporary failure in name resolution",
        );
        assert!(no_network(&Wrapped(
            "client error (Connect)",
            lookup.into()
        )));
        let dns = Wrapped("dns error", Box::new(std::fmt::Error));
        assert!(no_network(&Wrapped(
            "client error (Connect)",
            Box::new(dns)
        )));
        for kind in [
            std::io::ErrorKind::NetworkUnreachable,
            std::io::ErrorKind::HostUnreachable,
        ] {
            let unreachable = std::io::Error::from(kind);
            assert!(no_network(&Wrapped(
                "tcp connect error",
                unreachable.into()
            )));
        }
    }

    #[test]
    fn a_refused_connection_is_a_network_that_works() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(!no_network(&Wrapped("tcp connect error", refused.into())));
        assert!(!no_network(&std::fmt::Error));
    }
}
