//! Running the real agent CLIs from tests/agents against a MockModel.
#![allow(dead_code, reason = "each test file uses a different part")]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `tests/agents/node_modules/.bin/NAME` of the workspace. The test command installs it; a
/// missing one fails the test with what to do, rather than letting it pass untested.
pub(crate) fn agent_bin(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/agents/node_modules/.bin")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: run ./scripts/test (it runs `npm ci` in tests/agents)",
        p.display()
    );
    p
}

/// A command with an empty environment except PATH (node must be found for the Gemini CLI)
/// and HOME.
pub(crate) fn clean_command(bin: &Path, home: &Path, cwd: &Path) -> Command {
    let mut c = Command::new(bin);
    c.env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
        )
        .env("HOME", home)
        .current_dir(cwd);
    c
}

pub(crate) struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// The stdout lines that parse as JSON.
    pub(crate) fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
    pub(crate) fn last_of_type(&self, ty: &str) -> Option<serde_json::Value> {
        self.json_lines()
            .into_iter()
            .rev()
            .find(|v| v["type"] == ty)
    }
}

/// Run to completion with `stdin` as input, killing it after `limit`.
pub(crate) fn run(mut cmd: Command, stdin: &[u8], limit: Duration) -> Run {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agent CLI");
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = writer.join();
    let r = Run {
        code: status.and_then(|s| s.code()),
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
        elapsed: start.elapsed(),
    };
    assert!(
        status.is_some(),
        "timed out after {limit:?}\nstdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    r
}

/// With BATON_MOCK_UPDATE_FIXTURES=1, save `stdout` as tests/fixtures/NAME, with the temp dir
/// (also in Claude Code's dash-encoded form) and the server's port replaced by stable placeholders.
pub(crate) fn save_fixture(name: &str, stdout: &str, tmp: &Path, url: &str) {
    if std::env::var_os("BATON_MOCK_UPDATE_FIXTURES").is_none() {
        return;
    }
    let port = url.rsplit(':').next().unwrap_or("");
    let tmp = tmp.display().to_string();
    let text = stdout
        .replace(&tmp, "/tmp/baton-fixture")
        // Claude Code names its project directory after the cwd with '/' turned into '-'.
        .replace(&tmp.replace('/', "-"), "-tmp-baton-fixture")
        .replace(&format!("127.0.0.1:{port}"), "127.0.0.1:PORT");
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::write(&path, text).expect("write fixture");
}

pub(crate) fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("baton-mock-")
        .tempdir()
        .unwrap()
}
