//! The chaos run's figures: what happened to each run, and the report as a table.

use super::*;

/// What happened to one run, as the store and its event replay tell.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub id: Uuid,
    pub query: String,
    /// The client learned its id (else its instance died before the first event).
    pub acknowledged: bool,
    pub status: String,
    pub error: Option<String>,
    pub outcome_unknown: usize,
    pub resumed: usize,
    /// Why its `/events` replay is not whole, if it is not.
    pub replay_problem: Option<String>,
}

impl RunOutcome {
    /// Still `running` when the chaos ended: nobody finished it (a lost run).
    pub fn is_lost(&self) -> bool {
        self.status == "running"
    }

    /// Recorded, then its instance was killed before the run's first step was saved, and the
    /// instance that adopted it ended it failed, nothing of it having run. (Until a run's
    /// beginning saved what it starts from with its row, this is what such a run came to; now
    /// the adopter starts it from there, and this count must be 0.)
    pub fn abandoned_before_its_first_step(&self) -> bool {
        !self.acknowledged
            && self.status == "failed"
            && self
                .error
                .as_deref()
                .is_some_and(|error| error.contains("before its first step was saved"))
    }
}

/// Why a run's event log, replayed (its events' `seq`s and types, in order), is not whole: a
/// gap or a repeat in the numbering, or a log that does not begin with `run_started` and end
/// with `done`. `None` when it is whole.
pub fn replay_problem(seqs: &[u64], kinds: &[&str]) -> Option<String> {
    let whole = seqs.iter().copied().eq(1..=seqs.len() as u64);
    let framed = kinds.first() == Some(&"run_started") && kinds.last() == Some(&"done");
    (!whole || !framed).then(|| format!("seqs {seqs:?}, events {kinds:?}"))
}

/// The non-idempotent effects that happened more than once: each note the recording tool
/// logged (its idempotency key, one per call the model made), with how many times.
pub fn duplicated_effects<'a>(notes: impl IntoIterator<Item = &'a str>) -> Vec<(String, usize)> {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for note in notes {
        *counts.entry(note).or_default() += 1;
    }
    counts
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(note, n)| (note.to_string(), n))
        .collect()
}

/// An owner change seen by the poller.
#[derive(Debug, Clone)]
pub struct Adoption {
    pub run: Uuid,
    pub from_pid: Option<u32>,
    pub to_pid: Option<u32>,
    /// Since the kill of the previous owner; `None` when it was not killed.
    pub after_kill: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct KillRecord {
    pub pid: u32,
    pub at: Instant,
    /// Its runs in progress as last seen before the kill.
    pub runs: Vec<Uuid>,
    /// Since the kill, when each of them was seen with another owner.
    pub adopted: HashMap<Uuid, Duration>,
}

#[derive(Debug)]
pub struct Report {
    pub settings: Settings,
    pub runs: Vec<RunOutcome>,
    /// Indices of runs the client could not start at all.
    pub not_started: Vec<String>,
    /// Acknowledged runs missing from the store.
    pub missing: Vec<Uuid>,
    /// Start attempts that failed on a dying instance and were made again elsewhere.
    pub start_retries: usize,
    /// The first of those failures.
    pub start_errors: Vec<String>,
    pub kills: Vec<KillRecord>,
    pub adoptions: Vec<Adoption>,
    /// Notes of `test.slow_record` logged more than once, with their count.
    pub duplicates: Vec<(String, usize)>,
    /// `slow_record` calls logged (executions started).
    pub records_executed: usize,
    /// `sleep` calls logged beyond one per run: run again after a resume (read-only: allowed).
    pub sleeps_run_again: usize,
    pub store_bytes: u64,
    pub store_tables: Vec<(String, u64)>,
    pub wall: Duration,
    pub all_ended_in_time: bool,
    /// Lines of the servers' logs at WARN or ERROR level, and a count of them.
    pub server_warnings: Vec<String>,
    pub server_warning_count: usize,
}

impl Report {
    pub fn completed(&self) -> usize {
        self.runs.iter().filter(|r| r.status == "completed").count()
    }

    pub fn failed(&self) -> Vec<&RunOutcome> {
        self.runs
            .iter()
            .filter(|r| r.status != "completed" && r.status != "running")
            .collect()
    }

    /// Runs that did not end (still `running` at the end) plus acknowledged runs the store
    /// does not have, plus runs that could not be started.
    pub fn lost(&self) -> usize {
        self.runs.iter().filter(|r| r.is_lost()).count()
            + self.missing.len()
            + self.not_started.len()
    }

    pub fn outcome_unknown(&self) -> usize {
        self.runs.iter().map(|r| r.outcome_unknown).sum()
    }

    pub fn resumed(&self) -> usize {
        self.runs.iter().map(|r| r.resumed).sum()
    }

    pub fn replay_problems(&self) -> Vec<&RunOutcome> {
        self.runs
            .iter()
            .filter(|r| r.replay_problem.is_some())
            .collect()
    }

    /// Kill-to-adoption of each run adopted from a killed instance.
    pub fn adoption_times(&self) -> Vec<Duration> {
        let mut times: Vec<Duration> = self.adoptions.iter().filter_map(|a| a.after_kill).collect();
        times.sort();
        times
    }

    /// Per kill that left runs behind: until the last of them was adopted.
    pub fn kill_to_all_adopted(&self) -> Vec<Duration> {
        let mut times: Vec<Duration> = self
            .kills
            .iter()
            .filter_map(|kill| kill.adopted.values().max().copied())
            .collect();
        times.sort();
        times
    }

    pub fn takeovers_from_live(&self) -> Vec<&Adoption> {
        self.adoptions
            .iter()
            .filter(|a| a.after_kill.is_none())
            .collect()
    }
}

/// Nearest-rank percentile; zero for nothing.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

pub(super) struct Ms(Duration);

impl fmt::Display for Ms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.0} ms", self.0.as_secs_f64() * 1000.0)
    }
}

/// The report as a table, then what went wrong in detail.
pub fn print(report: &Report) {
    let s = &report.settings;
    let times = report.adoption_times();
    let per_kill = report.kill_to_all_adopted();
    let stored = report.runs.len();
    let unacknowledged = report.runs.iter().filter(|r| !r.acknowledged).count();
    println!(
        "\nagentloop chaos: {} runs, {} at a time, over {INSTANCES} `agentloop serve` on one \
         PostgreSQL (run_lease_s = {}); kill -9 + restart of a random instance every \
         {:.1} s (± 50 %); each run: LLM ({} ms) → test.slow_record ({} ms, mutating) → LLM → test.sleep \
         ({} ms, read-only) → LLM → answer",
        s.runs,
        s.concurrency,
        s.lease_s,
        s.kill_every.as_secs_f64(),
        s.latency.as_millis(),
        s.record_ms,
        s.sleep_ms
    );
    println!("\n| figure | value |\n| --- | --- |");
    println!(
        "| runs started (acknowledged) | {} |",
        report.runs.iter().filter(|r| r.acknowledged).count()
    );
    println!(
        "| runs in the store | {stored} (of which {unacknowledged} whose instance died before the \
         client had the run id; the client started those again) |"
    );
    println!("| completed | {} |", report.completed());
    println!("| failed / cancelled | {} |", report.failed().len());
    println!(
        "| of which ended failed for want of their first step (must be 0) | {} |",
        report
            .runs
            .iter()
            .filter(|run| run.abandoned_before_its_first_step())
            .count()
    );
    println!(
        "| **lost** (not ended, missing, never started) | **{}** |",
        report.lost()
    );
    println!(
        "| **duplicate executions of `slow_record`** (a note logged twice) | **{}** |",
        report.duplicates.len()
    );
    println!(
        "| `slow_record` executions logged / runs | {} / {stored} |",
        report.records_executed
    );
    println!(
        "| calls told to the model as `outcome_unknown` | {} |",
        report.outcome_unknown()
    );
    println!(
        "| read-only `sleep` calls run again after a resume | {} |",
        report.sleeps_run_again
    );
    println!(
        "| /events replays not whole | {} |",
        report.replay_problems().len()
    );
    println!("| kills (-9) and restarts | {} |", report.kills.len());
    println!(
        "| adoptions (`run_resumed` events) | {} |",
        report.resumed()
    );
    println!(
        "| adoptions seen in `runs.owner` (from a killed / a live instance) | {} / {} |",
        times.len(),
        report.takeovers_from_live().len()
    );
    println!(
        "| kill → adoption, per run: p50 / p95 / max | {} / {} / {} |",
        Ms(percentile(&times, 0.5)),
        Ms(percentile(&times, 0.95)),
        Ms(percentile(&times, 1.0))
    );
    println!(
        "| kill → last of its runs adopted, per kill: p50 / max | {} / {} ({} kills that left \
         runs) |",
        Ms(percentile(&per_kill, 0.5)),
        Ms(percentile(&per_kill, 1.0)),
        per_kill.len()
    );
    println!(
        "| store bytes per run | {:.1} KiB ({:.1} MiB for {stored} runs) |",
        report.store_bytes as f64 / 1024.0 / stored.max(1) as f64,
        report.store_bytes as f64 / 1024.0 / 1024.0
    );
    println!(
        "| start attempts made again on another instance | {} |",
        report.start_retries
    );
    println!(
        "| wall time (first start → every run ended) | {:.1} s |",
        report.wall.as_secs_f64()
    );
    println!(
        "\nstore by table: {}",
        report
            .store_tables
            .iter()
            .filter(|(_, bytes)| *bytes > 0)
            .map(|(name, bytes)| format!("{name} {:.0} KiB", *bytes as f64 / 1024.0))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !report.all_ended_in_time {
        println!("NOT every run ended within {:?}", s.deadline);
    }
    for error in &report.start_errors {
        println!("start attempt failed (made again elsewhere): {error}");
    }
    for problem in &report.not_started {
        println!("not started: {problem}");
    }
    for id in report.missing.iter().take(SHOWN) {
        println!("missing from the store: {id}");
    }
    for run in report
        .runs
        .iter()
        .filter(|r| r.status != "completed")
        .take(SHOWN)
    {
        println!(
            "run {} ({}) ended {}: {}",
            run.id,
            run.query,
            run.status,
            run.error.as_deref().unwrap_or("")
        );
    }
    for (note, count) in report.duplicates.iter().take(SHOWN) {
        println!("duplicate: {note} logged {count} times");
    }
    for run in report.replay_problems().into_iter().take(SHOWN) {
        println!(
            "replay of {} ({}) not whole: {}",
            run.id,
            run.query,
            run.replay_problem.as_deref().unwrap_or("")
        );
    }
    for takeover in report.takeovers_from_live().into_iter().take(SHOWN) {
        println!(
            "run {} taken from live pid {:?} by pid {:?}",
            takeover.run, takeover.from_pid, takeover.to_pid
        );
    }
    if report.server_warning_count > 0 {
        println!(
            "server log lines at WARN/ERROR: {}",
            report.server_warning_count
        );
        for line in &report.server_warnings {
            println!("  {line}");
        }
    }
}
