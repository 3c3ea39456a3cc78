//! The three `agentloop serve` processes of a chaos run: started, killed (`-9`), started again.

use super::*;

/// `agentloop serve` in one slot: its stderr is drained by a thread into a file of its own.
pub(super) struct Instance {
    child: Child,
    pub(super) pid: u32,
    pub(super) address: String,
}

impl Instance {
    pub(super) async fn start(dir: &Path, slot: usize) -> Instance {
        let mut command = super::agentloop_command::agentloop(dir);
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("start agentloop serve");
        let pid = child.id();
        let stderr = child.stderr.take().unwrap();
        let log_path = dir.join(format!("serve-{slot}-{pid}.log"));
        let (tell, told) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let mut log = std::fs::File::create(&log_path).unwrap();
            let mut tell = Some(tell);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(log, "{line}");
                if let Some(address) = line
                    .split_whitespace()
                    .find(|word| word.starts_with("http://"))
                    && let Some(tell) = tell.take()
                {
                    let _ = tell.send(address.to_string());
                }
            }
        });
        let address = tokio::time::timeout(Duration::from_secs(30), told)
            .await
            .unwrap_or_else(|_| panic!("agentloop serve (pid {pid}) gave no address in 30 s"))
            .unwrap_or_else(|_| {
                panic!(
                    "agentloop serve (pid {pid}) stopped before it listened; see \
                     serve-{slot}-{pid}.log"
                )
            });
        Instance {
            child,
            pid,
            address,
        }
    }

    pub(super) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Every `kill_every`, kills a random instance and starts it again, until `finished`. The
/// first victim is the one that owns the most runs in progress, so that every chaos run adopts
/// something;
/// the others are any of the instances (always killing an owner would keep the last runs from
/// ever finishing: each adopter would be killed before the run's next step).
pub(super) async fn kill_and_restart(
    dir: &Path,
    instances: &mut [Instance],
    shared: &Shared,
    kill_every: Duration,
) {
    // Jittered (0.5 to 1.5 times `kill_every`), so that kills do not fall in step with runs
    // that started together.
    let jittered = || kill_every.mul_f64(0.5 + random_below(1000) as f64 / 1000.0);
    let mut next = Instant::now() + jittered();
    while !shared.finished.load(Ordering::SeqCst) {
        if Instant::now() < next {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        next += jittered();
        let first = shared.kills.lock().unwrap().is_empty();
        let victims: Vec<usize> = if first {
            let snapshot = shared.snapshot.lock().unwrap();
            let owned = |slot: usize| {
                let pid = Some(instances[slot].pid);
                snapshot.running.values().filter(|o| **o == pid).count()
            };
            (0..instances.len())
                .max_by_key(|&slot| owned(slot))
                .filter(|&slot| owned(slot) > 0)
                .into_iter()
                .collect()
        } else {
            (0..instances.len()).collect()
        };
        if victims.is_empty() {
            // Nothing to leave behind: try again shortly.
            next = Instant::now() + Duration::from_millis(100);
            continue;
        }
        let slot = victims[random_below(victims.len())];
        let pid = instances[slot].pid;
        shared.live.lock().unwrap()[slot] = None;
        let runs = shared
            .snapshot
            .lock()
            .unwrap()
            .running
            .iter()
            .filter(|(_, owner)| **owner == Some(pid))
            .map(|(id, _)| *id)
            .collect();
        shared.kills.lock().unwrap().push(KillRecord {
            pid,
            at: Instant::now(),
            runs,
            adopted: HashMap::new(),
        });
        instances[slot].kill();
        instances[slot] = Instance::start(dir, slot).await;
        shared.live.lock().unwrap()[slot] =
            Some((instances[slot].pid, instances[slot].address.clone()));
        if Instant::now() > next {
            next = Instant::now() + jittered();
        }
    }
}
