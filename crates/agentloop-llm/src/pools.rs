//! The HTTP client of a transport, and its pool of connections: one shared by the threads of a
//! multi-thread runtime, and one per thread for code running on a runtime of one thread (the
//! server's HTTP threads, `new_current_thread`).
//!
//! A connection is polled by a task of the runtime that opened it. On a runtime of one thread,
//! a call that took a connection another thread opened would wake that thread for every read
//! and write, and wait for it: a pool per thread keeps each call on its own thread. On a
//! multi-thread runtime tasks move between threads anyway, so one pool serves them all.

use std::time::Duration;

use reqwest::Client;
use thread_local::ThreadLocal;
use tokio::runtime::{Handle, RuntimeFlavor};

pub(crate) struct Pools {
    connect_timeout: Duration,
    shared: Client,
    per_thread: ThreadLocal<Client>,
}

impl Pools {
    /// Fails when the HTTP client cannot be built (its TLS roots, say).
    pub(crate) fn new(connect_timeout: Duration) -> reqwest::Result<Pools> {
        Ok(Pools {
            connect_timeout,
            shared: build(connect_timeout)?,
            per_thread: ThreadLocal::new(),
        })
    }

    /// The client for a call made from this thread.
    pub(crate) fn client(&self) -> &Client {
        let single_thread = Handle::try_current()
            .is_ok_and(|runtime| runtime.runtime_flavor() == RuntimeFlavor::CurrentThread);
        if !single_thread {
            return &self.shared;
        }
        // Built as the shared one was, which succeeded: should this one fail all the same,
        // the shared pool does.
        self.per_thread
            .get_or(|| build(self.connect_timeout).unwrap_or_else(|_| self.shared.clone()))
    }
}

fn build(connect_timeout: Duration) -> reqwest::Result<Client> {
    Client::builder().connect_timeout(connect_timeout).build()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};

    use super::*;

    fn pools() -> Arc<Pools> {
        Arc::new(Pools::new(Duration::from_secs(1)).unwrap())
    }

    fn is_shared(pools: &Pools, client: &Client) -> bool {
        std::ptr::eq(client, &pools.shared)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_multi_thread_runtime_shares_one_pool() {
        let pools = pools();
        assert!(is_shared(&pools, pools.client()));
    }

    #[test]
    fn outside_a_runtime_the_shared_pool_is_used() {
        let pools = pools();
        assert!(is_shared(&pools, pools.client()));
    }

    #[test]
    fn runtimes_of_one_thread_have_a_pool_each_and_keep_it() {
        let pools = pools();
        // Both threads alive at once, so neither can reuse the other's slot.
        let together = Arc::new(Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (pools, together) = (pools.clone(), together.clone());
                std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    let address = runtime.block_on(async {
                        let first: *const Client = pools.client();
                        assert!(
                            std::ptr::eq(first, pools.client()),
                            "a thread keeps its pool"
                        );
                        first as usize
                    });
                    together.wait();
                    address
                })
            })
            .collect();
        let addresses: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_ne!(addresses[0], addresses[1], "two threads, two pools");
        for address in addresses {
            assert_ne!(address, &pools.shared as *const Client as usize);
        }
    }
}
