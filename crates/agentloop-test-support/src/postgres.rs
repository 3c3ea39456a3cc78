//! A PostgreSQL schema of its own for each test.
//!
//! The server is the one at `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`)
//! when it answers. When none answers there (nothing listens within 2 s; or, with
//! `DATABASE_URL` unset, the default server turns us away, as a freshly installed distribution
//! server does), the tests use a private throwaway cluster started from the machine's
//! PostgreSQL binaries ([`PrivateCluster`]). With no binaries either, the tests that start
//! with [`crate::requires::postgres`] are skipped saying how to install them (a failure with
//! `AGENTLOOP_TEST_ALL=1`), and [`TestSchema::create`] fails with that advice. An explicit `DATABASE_URL` whose server answers with an
//! error (bad password, no such database) fails the tests with that error.
//!
//! # The private cluster
//!
//! One cluster serves every test process of a user: test binaries are separate processes, and
//! `initdb` takes a second. It lives in `$TMPDIR/agentloop-test-pg-<uid>` and listens on
//! 127.0.0.1 only, on a free port, with `trust` authentication, `fsync` off (its data is thrown
//! away) and no Unix socket.
//!
//! - Sharing: the file `lock` in that directory serialises starting and stopping. The first
//!   process takes it, runs `initdb` and `pg_ctl start`; the others wait on it and join the
//!   running server. Each process then holds a shared lock on `users` for as long as it lives;
//!   the kernel releases it when the process ends, however it ends.
//! - Removal: nothing runs at the end of `cargo test`, so the cluster removes itself. With it
//!   starts a watchdog (`sh` and `flock` from util-linux, detached from the terminal's process
//!   group) that stops the server and deletes the directory once no process has held `users`
//!   for 30 s ([`SHARED_IDLE`]). It usually outlives the gaps between the test binaries of one
//!   `cargo test --workspace` and is gone about half a minute after the run. A cluster whose
//!   server died is created anew; one whose watchdog was killed gets a new watchdog.
//! - Root: `initdb` and `pg_ctl` refuse to run as root. As root they run as the `postgres`
//!   system user (`runuser -u postgres --`), in a data directory owned by it.
#![allow(clippy::panic, clippy::expect_used)] // test support: failing loudly is the point

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{FlockOperation, flock};
use sqlx::postgres::PgConnectOptions;
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use tokio::sync::OnceCell;

pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// How long the shared private cluster stays up after the last test process that used it.
pub const SHARED_IDLE: Duration = Duration::from_secs(30);
const SCHEMA_PREFIX: &str = "agentloop_test_";
/// Schemas of test runs that died before dropping theirs are removed after this long.
const LEFTOVER_AGE_SECS: u64 = 3600;
/// How long a server gets to accept a TCP connection before we call it absent.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the watchdog looks for users.
const WATCH_EVERY: Duration = Duration::from_secs(5);
const INSTALL_HINT: &str = "Install the PostgreSQL server binaries (`apt-get install postgresql` \
     on Debian/Ubuntu, `dnf install postgresql-server` on Fedora, `brew install postgresql` on \
     macOS) so that the tests start a private cluster, or set DATABASE_URL to a running server";

static SWEPT: OnceCell<()> = OnceCell::const_new();
static SERVER: OnceCell<Result<Server, NoServer>> = OnceCell::const_new();

/// Why the tests have no PostgreSQL.
#[derive(Debug, Clone)]
pub(crate) struct NoServer {
    pub(crate) message: String,
    /// `DATABASE_URL` names a server that answers but cannot be used: a mistake to fix, never
    /// a reason to skip.
    pub(crate) misconfigured: bool,
}

/// The server this process's tests use, and the private cluster behind it if there is one.
struct Server {
    url: String,
    _cluster: Option<PrivateCluster>,
}

/// The configured server: `DATABASE_URL`, or the default. Tests use [`server_url`], which falls
/// back to the private cluster when nothing answers here.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.into())
}

/// The URL of the server the tests use: [`database_url`] when a PostgreSQL answers there, else
/// the shared private cluster's (started if need be). Settled once per process.
pub async fn server_url() -> Result<String, String> {
    server().await.map_err(|no| no.message)
}

pub(crate) async fn server() -> Result<String, NoServer> {
    SERVER
        .get_or_init(|| {
            resolve_server(
                std::env::var("DATABASE_URL").ok(),
                PrivateCluster::shared_dir(),
                SHARED_IDLE,
            )
        })
        .await
        .as_ref()
        .map(|server| server.url.clone())
        .map_err(Clone::clone)
}

async fn resolve_server(
    configured: Option<String>,
    cluster_dir: PathBuf,
    idle: Duration,
) -> Result<Server, NoServer> {
    let url = configured
        .clone()
        .unwrap_or_else(|| DEFAULT_DATABASE_URL.into());
    let why = match probe(&url).await {
        Probe::Answers => {
            return Ok(Server {
                url,
                _cluster: None,
            });
        }
        Probe::Silent(why) => why,
        Probe::Refuses(why) if configured.is_none() => why,
        Probe::Refuses(why) => {
            return Err(NoServer {
                message: format!(
                    "the PostgreSQL at DATABASE_URL={url} answers but cannot be used: {why}. \
                     Fix DATABASE_URL, or unset it to use {DEFAULT_DATABASE_URL} or else a \
                     private cluster"
                ),
                misconfigured: true,
            });
        }
    };
    let cluster = PrivateCluster::start_in(&cluster_dir, idle)
        .await
        .map_err(|error| NoServer {
            message: format!(
                "no PostgreSQL answers at {url} ({why}), and no private cluster could be \
                 started instead: {error}"
            ),
            misconfigured: false,
        })?;
    eprintln!(
        "no PostgreSQL answers at {url} ({why}): the tests use a private cluster at {} (in {})",
        cluster.url(),
        cluster.dir().display()
    );
    Ok(Server {
        url: cluster.url().to_string(),
        _cluster: Some(cluster),
    })
}

enum Probe {
    Answers,
    /// Nobody there: fall back to a private cluster.
    Silent(String),
    /// A server answered and turned us away.
    Refuses(String),
}

async fn probe(url: &str) -> Probe {
    let options = match PgConnectOptions::from_str(url) {
        Ok(options) => options,
        Err(error) => return Probe::Refuses(format!("not a PostgreSQL URL: {error}")),
    };
    // A TCP check first, with a timeout of its own: a filtered port would otherwise hold the
    // connection attempt for minutes (and std's timeout ignores a test's paused tokio clock).
    if options.get_socket().is_none() {
        let host = options.get_host().to_string();
        let port = options.get_port();
        match tokio::task::spawn_blocking(move || tcp_answers(&host, port)).await {
            Ok(Ok(())) => {}
            Ok(Err(why)) => return Probe::Silent(why),
            Err(error) => return Probe::Silent(error.to_string()),
        }
    }
    match PgConnection::connect_with(&options).await {
        Ok(connection) => {
            let _ = connection.close().await;
            Probe::Answers
        }
        Err(sqlx::Error::Io(error)) => Probe::Silent(error.to_string()),
        Err(error) => Probe::Refuses(error.to_string()),
    }
}

fn tcp_answers(host: &str, port: u16) -> Result<(), String> {
    let addresses = (host, port)
        .to_socket_addrs()
        .map_err(|error| format!("{host}:{port}: {error}"))?;
    let mut why = format!("{host}:{port}: no address");
    for address in addresses {
        match TcpStream::connect_timeout(&address, PROBE_TIMEOUT) {
            Ok(_) => return Ok(()),
            Err(error) => why = format!("{address}: {error}"),
        }
    }
    Err(why)
}

/// A fresh schema; its URL points the store at it through the `search_path` option.
pub struct TestSchema {
    url: String,
    schema: String,
    admin: PgConnection,
}

impl TestSchema {
    /// A fresh schema; panics with what to do when no PostgreSQL can be had.
    pub async fn create() -> TestSchema {
        match Self::try_create().await {
            Ok(schema) => schema,
            Err(message) => panic!("{message}"),
        }
    }

    /// A fresh schema, or why PostgreSQL cannot give one (for benchmarks that may skip it).
    pub async fn try_create() -> Result<TestSchema, String> {
        let base = server_url().await?;
        let mut admin = PgConnection::connect(&base)
            .await
            .map_err(|error| format!("PostgreSQL at {base} stopped answering: {error}"))?;
        SWEPT.get_or_init(|| sweep_leftovers(&mut admin)).await;
        let random = uuid::Uuid::new_v4().simple().to_string();
        let schema = format!("{SCHEMA_PREFIX}{}_{}", unix_secs(), &random[..12]);
        execute(&mut admin, format!("CREATE SCHEMA {schema}")).await;
        Ok(TestSchema {
            url: with_search_path(&base, &schema),
            schema,
            admin,
        })
    }

    /// The database URL of this schema.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.schema
    }

    /// A connection to the database outside the schema, for checks of the test's own.
    pub fn admin(&mut self) -> &mut PgConnection {
        &mut self.admin
    }

    /// Drops the schema (a test that panics keeps it for inspection; it is swept later).
    pub async fn drop_schema(mut self) {
        let drop = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema);
        if let Err(error) = sqlx::query(AssertSqlSafe(drop))
            .execute(&mut self.admin)
            .await
        {
            eprintln!("could not drop the test schema {}: {error}", self.schema);
        }
        let _ = self.admin.close().await;
    }
}

/// `url` with the schema as its search path, through libpq's `options` parameter.
pub fn with_search_path(url: &str, schema: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

async fn execute(connection: &mut PgConnection, sql: String) {
    sqlx::query(AssertSqlSafe(sql.clone()))
        .execute(&mut *connection)
        .await
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
}

/// Drops the schemas of earlier test runs that could not drop their own.
async fn sweep_leftovers(connection: &mut PgConnection) {
    let names: Vec<String> =
        sqlx::query_scalar("SELECT nspname::text FROM pg_namespace WHERE nspname LIKE $1")
            .bind(format!("{SCHEMA_PREFIX}%"))
            .fetch_all(&mut *connection)
            .await
            .expect("list the test schemas");
    let cutoff = unix_secs().saturating_sub(LEFTOVER_AGE_SECS);
    for name in names {
        let created = name
            .strip_prefix(SCHEMA_PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|secs| secs.parse::<u64>().ok());
        if created.is_some_and(|created| created < cutoff) {
            execute(connection, format!("DROP SCHEMA IF EXISTS {name} CASCADE")).await;
        }
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default()
}

/// A throwaway PostgreSQL cluster in a directory of its own, shared by every process that
/// starts it in the same directory, stopped and deleted by its watchdog once nobody has used
/// it for a while (see the module docs). Holding a value keeps the cluster up.
pub struct PrivateCluster {
    url: String,
    dir: PathBuf,
    /// The shared lock on `users`: this process uses the cluster.
    _lease: File,
}

impl PrivateCluster {
    /// The directory of the cluster the tests share: `$TMPDIR/agentloop-test-pg-<uid>`.
    pub fn shared_dir() -> PathBuf {
        let uid = rustix::process::getuid().as_raw();
        std::env::temp_dir().join(format!("agentloop-test-pg-{uid}"))
    }

    /// Starts the cluster in `dir`, or joins the one running there; its watchdog removes it
    /// once no process has held a `PrivateCluster` of it for `idle` (whole seconds, at least 1).
    pub async fn start_in(dir: &Path, idle: Duration) -> Result<PrivateCluster, String> {
        let dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || start_blocking(dir, idle))
            .await
            .map_err(|error| format!("starting the private cluster failed: {error}"))?
    }

    /// Its URL (user `postgres`, database `postgres`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The directory it lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn start_blocking(dir: PathBuf, idle: Duration) -> Result<PrivateCluster, String> {
    let tools = Tools::find()?;
    let _starting = lock_directory(&dir, tools.run_as.is_some())?;
    let data = dir.join("data");
    let port = match running_port(&data) {
        Some(port) => port,
        None => init_and_start(&tools, &data)?,
    };
    spawn_watchdog(&tools, &dir, idle)?;
    // Taken before `lock` is released: the watchdog decides under `lock`, so it can never stop
    // the server between our finding it up and our registering as a user.
    let lease = open_for_lock(&dir.join("users"))
        .and_then(|file| {
            flock(&file, FlockOperation::LockShared)
                .map(|()| file)
                .map_err(io::Error::from)
        })
        .map_err(|error| {
            format!(
                "could not register with the private cluster in {}: {error}",
                dir.display()
            )
        })?;
    Ok(PrivateCluster {
        url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        dir,
        _lease: lease,
    })
}

/// The exclusive lock on `dir/lock`. The watchdog renames the directory away before deleting
/// it, so a lock won on a file that is no longer at that path is worthless: try again.
fn lock_directory(dir: &Path, for_another_user: bool) -> Result<File, String> {
    let fail = |error: io::Error| format!("private cluster in {}: {error}", dir.display());
    loop {
        fs::create_dir_all(dir).map_err(fail)?;
        let owner = fs::metadata(dir).map_err(fail)?.uid();
        if owner != rustix::process::geteuid().as_raw() {
            return Err(fail(io::Error::other(format!(
                "owned by uid {owner}, not by us: remove it"
            ))));
        }
        // Others (the `postgres` user when we are root) must be able to reach the data.
        let mode = if for_another_user { 0o755 } else { 0o700 };
        fs::set_permissions(dir, fs::Permissions::from_mode(mode)).map_err(fail)?;
        let path = dir.join("lock");
        let file = match open_for_lock(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) => return Err(fail(error)),
        };
        flock(&file, FlockOperation::LockExclusive).map_err(|error| fail(error.into()))?;
        let held = file.metadata().map_err(fail)?;
        if let Ok(now) = fs::metadata(&path)
            && (now.dev(), now.ino()) == (held.dev(), held.ino())
        {
            return Ok(file);
        }
    }
}

fn open_for_lock(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// The port of the server running on `data`, if one is up and answers.
fn running_port(data: &Path) -> Option<u16> {
    // postmaster.pid: pid, data directory, start time, port, socket directory, listen
    // address, shared memory key, status.
    let pid_file = fs::read_to_string(data.join("postmaster.pid")).ok()?;
    let lines: Vec<&str> = pid_file.lines().collect();
    let port = lines.get(3)?.trim().parse::<u16>().ok()?;
    if lines.get(7)?.trim() != "ready" {
        return None;
    }
    tcp_answers("127.0.0.1", port).ok().map(|()| port)
}

fn init_and_start(tools: &Tools, data: &Path) -> Result<u16, String> {
    let fail = |error: io::Error| format!("private cluster in {}: {error}", data.display());
    if data.exists() {
        // A cluster whose server is gone (killed, or the machine restarted): start afresh.
        let _ = tools
            .pg_ctl(data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        fs::remove_dir_all(data).map_err(fail)?;
    }
    fs::create_dir(data).map_err(fail)?;
    fs::set_permissions(data, fs::Permissions::from_mode(0o700)).map_err(fail)?;
    if let Some(user) = &tools.run_as {
        std::os::unix::fs::chown(data, Some(user.uid), Some(user.gid)).map_err(fail)?;
    }
    run(tools.command("initdb").arg("-D").arg(data).args([
        "-U",
        "postgres",
        "--auth=trust",
        "--no-locale",
        "-E",
        "UTF8",
        "-N",
    ]))?;
    let settings = "\n# agentloop tests: a throwaway cluster\nlisten_addresses = '127.0.0.1'\n\
                    unix_socket_directories = ''\nfsync = off\nsynchronous_commit = off\n\
                    full_page_writes = off\nmax_connections = 200\n";
    OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .and_then(|mut conf| conf.write_all(settings.as_bytes()))
        .map_err(fail)?;
    let log = data.join("server.log");
    let mut attempts = 0;
    loop {
        attempts += 1;
        let port = free_port().map_err(fail)?;
        let started = run(tools
            .pg_ctl(data)
            .args(["-o", &format!("-p {port}"), "-w", "-t", "60", "-l"])
            .arg(&log)
            .arg("start"));
        match started {
            Ok(()) => return Ok(port),
            Err(error) => {
                let log = fs::read_to_string(&log).unwrap_or_default();
                // Someone took the free port between our look and the server's bind.
                if attempts < 3 && log.contains("already in use") {
                    continue;
                }
                let tail: Vec<&str> = log.lines().rev().take(10).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Err(format!("{error}\nserver log:\n{}", tail.join("\n")));
            }
        }
    }
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The watchdog: every `poll` seconds, is anyone holding `users`? After `idle` seconds of no,
/// it takes `lock` (no process can join meanwhile), checks once more, stops the server, renames
/// the directory away (so that a newcomer starts a fresh one at the path) and deletes it.
/// A lock on the file `watchdog` keeps it alone. Its commands get neither lock's descriptor
/// (`8>&- 9>&-`): a `sleep` left behind by a killed watchdog must not keep its lock.
const WATCHDOG: &str = r#"
dir=$1 idle=$2 poll=$3
shift 3
exec 8>>"$dir/watchdog" || exit 0
flock -n 8 || exit 0
unused=0
while sleep "$poll" 8>&-; do
    [ -d "$dir" ] || exit 0
    if flock -n "$dir/users" true 8>&-; then unused=$((unused + poll)); else unused=0; fi
    [ "$unused" -ge "$idle" ] || continue
    exec 9>>"$dir/lock" || exit 0
    flock 9 8>&-
    if flock -n "$dir/users" true 8>&- 9>&-; then
        "$@" -m fast -w -t 30 stop 8>&- 9>&- || "$@" -m immediate -w -t 30 stop 8>&- 9>&-
        gone="$dir.removed.$$"
        mv "$dir" "$gone" 8>&- 9>&- && rm -rf "$gone" 8>&- 9>&-
        exit 0
    fi
    exec 9>&-
    unused=0
done
"#;

fn spawn_watchdog(tools: &Tools, dir: &Path, idle: Duration) -> Result<(), String> {
    let has_flock = Command::new("flock")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !has_flock {
        eprintln!(
            "the private PostgreSQL cluster in {} cannot stop by itself: its watchdog needs \
             `flock` (util-linux). Stop it with `pg_ctl -D {} stop`",
            dir.display(),
            dir.join("data").display()
        );
    }
    let idle = idle.as_secs().max(1);
    let poll = WATCH_EVERY.as_secs().min(idle);
    let mut command = Command::new("sh");
    command
        .args(["-c", WATCHDOG, "agentloop-test-pg-watchdog"])
        .arg(dir)
        .arg(idle.to_string())
        .arg(poll.to_string())
        .args(tools.argv("pg_ctl"))
        .arg("-D")
        .arg(dir.join("data"))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group: a ^C to `cargo test` must not leave the cluster orphaned.
        .process_group(0);
    let mut child = command.spawn().map_err(|error| {
        format!("could not start the private cluster's watchdog (`sh`): {error}")
    })?;
    // Reaps it (at once when another watchdog is already there), so no zombie stays behind.
    std::thread::spawn(move || child.wait());
    Ok(())
}

/// The directory of the PostgreSQL server binaries (`initdb`, `pg_ctl`) a private cluster is
/// started from, or why there is none and how to install them.
pub fn server_binaries() -> Result<PathBuf, String> {
    Tools::find().map(|tools| tools.bindir)
}

/// Where the server binaries are and whom they run as.
struct Tools {
    bindir: PathBuf,
    run_as: Option<ClusterUser>,
}

struct ClusterUser {
    name: String,
    uid: u32,
    gid: u32,
}

impl Tools {
    fn find() -> Result<Tools, String> {
        let bindir = find_bindir(
            "pg_config",
            Path::new("/usr/lib/postgresql"),
            std::env::var_os("PATH"),
        )?;
        let run_as = if rustix::process::geteuid().is_root() {
            Some(postgres_user()?)
        } else {
            None
        };
        Ok(Tools { bindir, run_as })
    }

    /// `program` of the server binaries, as the cluster's user.
    fn argv(&self, program: &str) -> Vec<OsString> {
        let mut argv: Vec<OsString> = Vec::new();
        if let Some(user) = &self.run_as {
            argv.extend(["runuser", "-u", &user.name, "--"].map(OsString::from));
        }
        argv.push(self.bindir.join(program).into_os_string());
        argv
    }

    fn command(&self, program: &str) -> Command {
        let argv = self.argv(program);
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .current_dir("/")
            .stdin(Stdio::null())
            // pg_ctl starts the server in a session of its own; this is for older versions.
            .process_group(0);
        command
    }

    fn pg_ctl(&self, data: &Path) -> Command {
        let mut command = self.command("pg_ctl");
        command.arg("-D").arg(data);
        command
    }
}

/// Runs a command to its end; its output is the error when it fails.
fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let output: Output = command
        .output()
        .map_err(|error| format!("could not run {shown}: {error}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{shown} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// The system user to run `initdb` and `pg_ctl` as when we are root (they refuse root).
fn postgres_user() -> Result<ClusterUser, String> {
    let missing = "initdb and pg_ctl refuse to run as root, and there is no `postgres` user to \
                   run them as: create one (the distribution's postgresql package does), run \
                   the tests as another user, or set DATABASE_URL to a running server";
    let output = Command::new("getent")
        .args(["passwd", "postgres"])
        .output()
        .map_err(|error| format!("{missing} (getent: {error})"))?;
    let entry = String::from_utf8_lossy(&output.stdout);
    let fields: Vec<&str> = entry.trim().split(':').collect();
    match (fields.get(2), fields.get(3)) {
        (Some(uid), Some(gid)) if output.status.success() => Ok(ClusterUser {
            name: "postgres".into(),
            uid: uid.parse().map_err(|_| missing.to_string())?,
            gid: gid.parse().map_err(|_| missing.to_string())?,
        }),
        _ => Err(missing.into()),
    }
}

/// The directory with `initdb` and `pg_ctl`: `pg_config --bindir`, else the highest version
/// under `versions` (Debian's `/usr/lib/postgresql/<version>/bin`), else `PATH`.
fn find_bindir(
    pg_config: &str,
    versions: &Path,
    path: Option<OsString>,
) -> Result<PathBuf, String> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Ok(output) = Command::new(pg_config).arg("--bindir").output()
        && output.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        if has_both(&dir) {
            return Ok(dir);
        }
    }
    let mut versioned: Vec<(Vec<u32>, PathBuf)> = fs::read_dir(versions)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version = name
                .split('.')
                .map(|part| part.parse::<u32>().ok())
                .collect::<Option<Vec<u32>>>()?;
            let bin = entry.path().join("bin");
            has_both(&bin).then_some((version, bin))
        })
        .collect();
    versioned.sort();
    if let Some((_, bin)) = versioned.pop() {
        return Ok(bin);
    }
    if let Some(dir) = path
        .iter()
        .flat_map(std::env::split_paths)
        .find(|dir| has_both(dir))
    {
        return Ok(dir);
    }
    Err(format!(
        "no PostgreSQL server binaries (initdb, pg_ctl) found by `{pg_config} --bindir`, under \
         {}/<version>/bin or on PATH. {INSTALL_HINT}",
        versions.display()
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A directory the `postgres` user can reach too (tests run as root here).
    fn reachable_tempdir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    async fn answers(url: &str) -> bool {
        match PgConnection::connect(url).await {
            Ok(connection) => {
                let _ = connection.close().await;
                true
            }
            Err(_) => false,
        }
    }

    async fn wait_until_gone(dir: &Path, limit: Duration) {
        let started = std::time::Instant::now();
        while dir.exists() {
            assert!(started.elapsed() < limit, "{} still there", dir.display());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    #[tokio::test]
    async fn a_private_cluster_is_shared_then_removed_once_unused() {
        if !crate::requires::postgres_binaries() {
            return;
        }
        let temp = reachable_tempdir();
        let dir = temp.path().join("cluster");
        let started = std::time::Instant::now();
        let (first, second) = tokio::join!(
            PrivateCluster::start_in(&dir, Duration::from_secs(1)),
            PrivateCluster::start_in(&dir, Duration::from_secs(1)),
        );
        let (first, second) = (first.unwrap(), second.unwrap());
        eprintln!("two starts, one cluster, in {:?}", started.elapsed());
        assert_eq!(first.url(), second.url(), "one cluster for both");
        let mut connection = PgConnection::connect(first.url()).await.unwrap();
        let one: i32 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&mut connection)
            .await
            .unwrap();
        assert_eq!(one, 1);
        connection.close().await.unwrap();

        // Still in use by `second`: the watchdog leaves it alone.
        drop(first);
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(answers(second.url()).await, "stopped while in use");

        let url = second.url().to_string();
        drop(second);
        wait_until_gone(&dir, Duration::from_secs(30)).await;
        assert!(!answers(&url).await, "the server outlived its directory");
    }

    #[tokio::test]
    async fn a_cluster_whose_server_died_is_started_afresh() {
        if !crate::requires::postgres_binaries() {
            return;
        }
        let temp = reachable_tempdir();
        let dir = temp.path().join("cluster");
        let cluster = PrivateCluster::start_in(&dir, Duration::from_secs(1))
            .await
            .unwrap();
        let tools = Tools::find().unwrap();
        run(tools
            .pg_ctl(&dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"]))
        .unwrap();
        assert!(!answers(cluster.url()).await);

        let again = PrivateCluster::start_in(&dir, Duration::from_secs(1))
            .await
            .unwrap();
        assert!(answers(again.url()).await);
        drop((cluster, again));
        wait_until_gone(&dir, Duration::from_secs(30)).await;
    }

    #[tokio::test]
    async fn nothing_at_the_configured_url_means_the_private_cluster() {
        if !crate::requires::postgres_binaries() {
            return;
        }
        let temp = reachable_tempdir();
        let dir = temp.path().join("cluster");
        let server = resolve_server(
            Some("postgres://postgres@127.0.0.1:1/test".into()),
            dir.clone(),
            Duration::from_secs(1),
        )
        .await
        .unwrap();
        assert!(server.url.starts_with("postgres://postgres@127.0.0.1:"));
        assert!(!server.url.contains(":1/"), "{}", server.url);
        assert!(answers(&server.url).await);

        // A server that answers but refuses an explicit DATABASE_URL is an error, not a
        // reason to test elsewhere.
        let wrong = server.url.replace("/postgres", "/no_such_database");
        let error = resolve_server(Some(wrong), dir.clone(), Duration::from_secs(1))
            .await
            .err()
            .unwrap();
        assert!(error.misconfigured);
        let error = error.message;
        assert!(error.contains("no_such_database"), "{error}");
        assert!(error.contains("DATABASE_URL"), "{error}");
        drop(server);
        wait_until_gone(&dir, Duration::from_secs(30)).await;
    }

    #[test]
    fn without_binaries_the_message_says_how_to_install_them() {
        let empty = tempfile::tempdir().unwrap();
        let error = find_bindir(
            "/nonexistent/pg_config",
            empty.path(),
            Some(empty.path().into()),
        )
        .unwrap_err();
        assert!(error.contains("apt-get install postgresql"), "{error}");
        assert!(error.contains("DATABASE_URL"), "{error}");
    }

    #[test]
    fn the_highest_installed_version_wins() {
        let versions = tempfile::tempdir().unwrap();
        for version in ["9.6", "15", "13"] {
            let bin = versions.path().join(version).join("bin");
            fs::create_dir_all(&bin).unwrap();
            fs::write(bin.join("initdb"), "").unwrap();
            fs::write(bin.join("pg_ctl"), "").unwrap();
        }
        let found = find_bindir("/nonexistent/pg_config", versions.path(), None).unwrap();
        assert_eq!(found, versions.path().join("15").join("bin"));
    }
}
