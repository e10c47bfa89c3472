//! Tests only. A real PostgreSQL for the tests: the one `BATON_TEST_POSTGRES` names (a server URL whose
//! user may create databases), else a private cluster this test binary starts (`initdb` into a
//! temporary directory, the server on a free loopback port) and that ends with it. Each test
//! gets a database of its own.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The server every test of this binary uses: its base URL (no database).
fn server() -> &'static str {
    static SERVER: OnceLock<String> = OnceLock::new();
    SERVER.get_or_init(|| match std::env::var("BATON_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => url.trim_end_matches('/').to_owned(),
        _ => private_cluster(),
    })
}

/// Where Debian's `postgresql` package puts its programs (not on `PATH`), newest first.
fn bin_dir() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "PostgreSQL's initdb is not installed (Debian's `postgresql` package, which \
             ./scripts/test installs), and BATON_TEST_POSTGRES names no server"
        )
    })
}

/// PostgreSQL refuses to run as root: as root (in CI, in a container), the cluster belongs to
/// `nobody`, and its programs run as that user.
fn as_server_user(program: &Path) -> Command {
    if !is_root() {
        return Command::new(program);
    }
    let mut command = Command::new("runuser");
    command.args(["-u", "nobody", "--"]).arg(program);
    command
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

fn nobody() -> (u32, u32) {
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, "nobody"])
            .output()
            .expect("id");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("nobody's id")
    };
    (id("-u"), id("-g"))
}

fn private_cluster() -> String {
    let bin = bin_dir();
    // Kept for the life of the process: the server's files.
    let dir = Box::leak(Box::new(tempfile::tempdir().unwrap()));
    if is_root() {
        let (uid, gid) = nobody();
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
    }
    let data = dir.path().join("data");
    let initdb = as_server_user(&bin.join("initdb"))
        .args(["-D"])
        .arg(&data)
        .args([
            "-U",
            "baton",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--locale=C",
        ])
        .stdout(Stdio::null())
        .output()
        .expect("initdb");
    assert!(
        initdb.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&initdb.stderr)
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The server ends with this process: a watchdog shell stops it once its parent is gone,
    // however the test binary ends.
    let postgres = bin.join("postgres");
    let run_as = if is_root() {
        "runuser -u nobody -- "
    } else {
        ""
    };
    // The server's own pid is in its postmaster.pid (runuser, as root, stands between).
    let script = format!(
        "{run_as}'{}' -D '{data}' -p {port} -c listen_addresses=127.0.0.1 -k '{dir}' -c fsync=off \
         -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 \
         >'{dir}/server.log' 2>&1 & \
         while kill -0 {parent} 2>/dev/null; do sleep 0.5; done; \
         kill -INT \"$(head -1 '{data}/postmaster.pid')\"; \
         while [ -e '{data}/postmaster.pid' ]; do sleep 0.2; done; rm -rf '{dir}'",
        postgres.display(),
        data = data.display(),
        dir = dir.path().display(),
        parent = std::process::id(),
    );
    let mut watchdog = Command::new("sh");
    // A group of its own: whatever ends the tests' group (a terminal's Ctrl-C, a harness that
    // kills it) does not leave the server behind without its watchdog.
    std::os::unix::process::CommandExt::process_group(&mut watchdog, 0);
    let watchdog = watchdog
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start postgres");
    // Never waited for: it outlives this process on purpose, to stop the server after it.
    std::mem::forget(watchdog);
    let url = format!("postgres://baton@127.0.0.1:{port}");
    wait_for(&url, &dir.path().join("server.log"));
    url
}

fn wait_for(url: &str, log: &Path) {
    let start = Instant::now();
    loop {
        match postgres::Client::connect(&format!("{url}/postgres"), postgres::NoTls) {
            Ok(_) => return,
            Err(e) if start.elapsed() > Duration::from_secs(30) => panic!(
                "the private PostgreSQL did not start: {e}\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            ),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// A new, empty database on the server: its URL.
pub fn fresh_database() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "baton_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut admin =
        postgres::Client::connect(&format!("{}/postgres", server()), postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    format!("{}/{name}", server())
}

/// Runs `sql` (statements separated by `;`) in the database at `url`.
pub fn execute(url: &str, sql: &str) {
    postgres::Client::connect(url, postgres::NoTls)
        .unwrap()
        .batch_execute(sql)
        .unwrap();
}

/// Closes every connection to the database at `url` but the one asking: what a server restart
/// or failover looks like to its clients, without stopping the server other tests share.
pub fn cut_connections(url: &str) {
    let (server, db) = url.rsplit_once('/').expect("a database's URL");
    execute(
        &format!("{server}/postgres"),
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = '{db}' AND pid <> pg_backend_pid()"
        ),
    );
}
