//! The builder every test drives baton through: a temporary git repository with graph files in
//! it, arguments and environment in; exit code, stdout, stderr and the store out.

use std::ffi::OsString;
use std::fs::{self, File};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use baton_model::{Event, EventKind, TaskId};
use baton_store::{AttemptRecord, RunReader, RunRecord, SqliteStore, TaskRecord};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tempfile::TempDir;

use crate::procs;

/// The binary under test.
pub(crate) const BATON: &str = env!("CARGO_BIN_EXE_baton");

/// Longest any single baton invocation may take before the test gives up on it; generous, so
/// that a loaded machine slows tests down rather than failing them.
pub(crate) const RUN_LIMIT: Duration = Duration::from_secs(60);

/// The environment variable that marks every process a test started (baton passes its own
/// environment on to tasks), so that cleanup finds stray descendants and nothing else.
const MARKER: &str = "BATON_CLI_TEST_DIR";

/// Whether attempts get a cgroup of their own here, for a test of `what` that needs one. The
/// portable process layer has none by design (`BATON_PLATFORM=portable`: the test command's
/// second pass); on Linux's layer, a machine without a writable cgroup v2 fails the test,
/// saying so, unless `BATON_TEST_ALLOW_NO_CGROUP` is set: then it is skipped, said past the
/// harness's capture. CI has cgroups: a test there never passes without testing them.
pub(crate) fn cgroups_here(what: &str) -> bool {
    if baton_exec::cgroups_available() {
        return true;
    }
    assert!(
        !baton_exec::platform().is_linux()
            || std::env::var_os("BATON_TEST_ALLOW_NO_CGROUP").is_some(),
        "{what}: cgroup v2 is not writable here (or BATON_NO_CGROUP is set); \
         set BATON_TEST_ALLOW_NO_CGROUP=1 to skip the tests that need it"
    );
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "{what}: skipped: cgroup v2 is not writable here"
    );
    false
}

/// Polls `ready` every 50 ms until it holds; past `limit` the test fails, saying it waited
/// for `what`. The one way these tests wait for another process to get somewhere.
#[track_caller]
pub(crate) fn poll_until(limit: Duration, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < deadline, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the file at `path` exists and holds `text`.
pub(crate) fn file_holds(path: &Path, text: &str) -> bool {
    fs::read_to_string(path).is_ok_and(|content| content.contains(text))
}

/// `path` in the repository (`""`: its root).
pub(crate) fn repo_path(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// The commands `baton --help` lists (its `Commands:` section), without `help`.
pub(crate) fn commands_in_help(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A long description goes on under its command, indented further.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// A misbehaving program from `tests/fixtures/`.
pub(crate) fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name);
    let path = path
        .canonicalize()
        .unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
    path.to_str().expect("fixture path is UTF-8").to_owned()
}

/// Whether this machine enforces Landlock, for a test of the sandbox: says on stderr that the
/// test ran, or that it is skipped and why (an old kernel, `BATON_NO_LANDLOCK`). Written past
/// the harness's capture, so that `cargo test` (and CI's log) shows a skip.
pub(crate) fn landlock_sandbox_test(test: &str) -> bool {
    use std::io::Write;
    let support = baton_exec::landlock_support();
    let line = match support {
        Ok(abi) => format!("landlock sandbox test {test}: ran (Landlock ABI {abi})\n"),
        Err(why) => format!("landlock sandbox test {test}: skipped: {why}\n"),
    };
    let _ = std::io::stderr().write_all(line.as_bytes());
    support.is_ok()
}

pub(crate) fn task_id(id: &str) -> TaskId {
    TaskId::new(id).expect("valid task id")
}

/// One baton invocation being set up. The repository is `<tmp>/repo`; baton's stdout and stderr
/// go to files beside it, never into the repository.
pub(crate) struct Test {
    tmp: TempDir,
    root: PathBuf,
    /// Where baton runs, relative to the repository root.
    cwd: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    stdout: StdoutTo,
    /// baton runs on a terminal of its own (`script`'s pty), typed this.
    typed: Option<String>,
}

/// Where baton's standard output goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StdoutTo {
    /// A file beside the repository, read back as [`Output::stdout`].
    File,
    /// A pipe whose reader has gone (`baton … | head -0`): every write fails with EPIPE.
    ClosedPipe,
    /// `/dev/full`: every write fails with ENOSPC, as on a full disk.
    Full,
}

impl Test {
    pub(crate) fn new() -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("baton-cli-")
            .tempdir()
            .expect("temporary directory");
        let root = tmp.path().join("repo");
        fs::create_dir(&root).expect("create repo dir");
        let git = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .status();
        if !matches!(git, Ok(status) if status.success()) {
            // What baton looks for is a `.git` directory; without git, make one.
            fs::create_dir_all(root.join(".git/info")).expect("create .git");
        }
        Self {
            tmp,
            root,
            cwd: PathBuf::new(),
            args: Vec::new(),
            env: Vec::new(),
            stdout: StdoutTo::File,
            typed: None,
        }
    }

    /// baton runs with a terminal as its standard input (and output: a pty, from util-linux's
    /// `script`), on which `input` is typed; what it prints goes to the stdout file, stderr
    /// included, as on a terminal.
    pub(crate) fn typing(mut self, input: &str) -> Self {
        self.typed = Some(input.to_owned());
        self
    }

    /// baton's standard output is a pipe nobody reads any more.
    pub(crate) fn stdout_closed_pipe(mut self) -> Self {
        self.stdout = StdoutTo::ClosedPipe;
        self
    }

    /// baton's standard output is `/dev/full`.
    pub(crate) fn stdout_full(mut self) -> Self {
        self.stdout = StdoutTo::Full;
        self
    }

    /// Writes a graph file (or any file) into the repository.
    pub(crate) fn graph(self, name: &str, text: &str) -> Self {
        self.file(name, text)
    }

    pub(crate) fn file(self, name: &str, contents: impl AsRef<[u8]>) -> Self {
        let path = self.root.join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create parent dir");
        }
        fs::write(&path, contents).expect("write file");
        self
    }

    /// Runs baton from this directory of the repository (created if need be).
    pub(crate) fn current_dir(mut self, dir: &str) -> Self {
        fs::create_dir_all(self.root.join(dir)).expect("create current dir");
        self.cwd = dir.into();
        self
    }

    pub(crate) fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(OsString::from));
        self
    }

    pub(crate) fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub(crate) fn path(&self) -> &Path {
        &self.root
    }

    /// The `$XDG_RUNTIME_DIR` every baton of this test runs with (its runs' scratch files are
    /// under `baton/RUN/` there).
    pub(crate) fn runtime_dir(&self) -> PathBuf {
        self.tmp.path().join("runtime")
    }

    /// What every baton a test starts runs with, in the repository (or the directory under it
    /// the test chose).
    fn environment(&self, command: &mut Command, runtime: &Path) {
        command
            .current_dir(self.root.join(&self.cwd))
            .env_remove("BATON_STORE")
            .env_remove("BATON_SYNC")
            .env("NO_COLOR", "1")
            .env("XDG_RUNTIME_DIR", runtime)
            .env(MARKER, self.tmp.path())
            // Tasks get only what they are given of baton's environment: the marker must
            // reach them so that cleanup can find their processes.
            .env("BATON_PASS_ENV", MARKER)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
    }

    /// baton with `args`, in the test's directory and environment, its stderr to the file
    /// `log` in that directory: for tests that start several processes (workers) beside each other. They
    /// carry the test's marker: what is left of them is stopped with the test.
    pub(crate) fn command(&self, args: &[&str], log: &str) -> Command {
        let runtime = self.runtime_dir();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&runtime)
            .expect("runtime dir");
        let mut command = Command::new(BATON);
        command.args(args);
        self.environment(&mut command, &runtime);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(self.path().join(log)).expect("log file"));
        command
    }

    /// Starts baton on a terminal of `cols` × `rows`: a tmux session of the test's own, whose
    /// screen the test reads as a person would see it.
    pub(crate) fn on_terminal(self, cols: u16, rows: u16) -> Screen {
        let runtime = self.runtime_dir();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&runtime)
            .expect("runtime dir");
        let screen = Screen {
            socket: self.tmp.path().join("tmux.sock"),
            windows: 0,
            test: self,
        };
        let mut command = screen.tmux();
        command.args(["new-session", "-d", "-s", "baton", "-n", "w0"]);
        command.args(["-x", &cols.to_string(), "-y", &rows.to_string()]);
        command.arg(screen.shell_line(&screen.test.args));
        // The server starts here, with baton's environment: every window inherits it.
        screen.test.environment(&mut command, &runtime);
        let status = command
            .status()
            .expect("tmux (the test command installs it)");
        assert!(status.success(), "tmux new-session failed");
        screen
    }

    /// Runs baton to the end (bounded by [`RUN_LIMIT`]).
    pub(crate) fn run(self) -> Output {
        self.spawn().wait(RUN_LIMIT)
    }

    /// Starts baton in the background.
    pub(crate) fn spawn(self) -> Running {
        let file = File::create(self.tmp.path().join("stdout")).expect("stdout file");
        let stdout: Stdio = match self.stdout {
            StdoutTo::File => file.into(),
            StdoutTo::ClosedPipe => {
                let (reader, writer) = std::io::pipe().expect("pipe");
                drop(reader);
                writer.into()
            }
            StdoutTo::Full => File::options()
                .write(true)
                .open("/dev/full")
                .expect("open /dev/full")
                .into(),
        };
        let stderr = File::create(self.tmp.path().join("stderr")).expect("stderr file");
        // baton keeps short-lived scratch files under `$XDG_RUNTIME_DIR/baton`: give it one of
        // the test's own, so that nothing lands in the shared `/dev/shm` and tests can see what
        // is left behind.
        let runtime = self.runtime_dir();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&runtime)
            .expect("runtime dir");
        let mut command = match &self.typed {
            None => {
                let mut command = Command::new(BATON);
                command.args(&self.args);
                command
            }
            Some(_) => {
                let words: Vec<String> = std::iter::once(OsString::from(BATON))
                    .chain(self.args.iter().cloned())
                    .map(|w| format!("'{}'", w.to_string_lossy().replace('\'', "'\\''")))
                    .collect();
                let mut command = Command::new("script");
                command.args(["-qec", &words.join(" "), "/dev/null"]);
                command
            }
        };
        let stdin: Stdio = match &self.typed {
            None => Stdio::null(),
            Some(input) => {
                let path = self.tmp.path().join("typed");
                fs::write(&path, input).expect("typed input");
                File::open(&path).expect("typed input").into()
            }
        };
        self.environment(&mut command, &runtime);
        command.stdin(stdin).stdout(stdout).stderr(stderr);
        let child = command.spawn().expect("spawn baton");
        Running {
            test: Some(self),
            child: Some(child),
            started: Instant::now(),
        }
    }
}

impl Drop for Test {
    fn drop(&mut self) {
        // Whatever a test left running (a task orphaned by a killed baton, a grandchild that
        // escaped) must not outlive it.
        procs::kill_marked(MARKER, self.tmp.path());
    }
}

/// baton running in the background.
pub(crate) struct Running {
    test: Option<Test>,
    child: Option<Child>,
    started: Instant,
}

impl Running {
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("baton was reaped").id()
    }

    pub(crate) fn path(&self) -> &Path {
        self.test.as_ref().expect("baton was reaped").path()
    }

    pub(crate) fn signal(&self, signal: Signal) {
        nix::sys::signal::kill(Pid::from_raw(self.pid() as i32), signal)
            .unwrap_or_else(|e| panic!("cannot send {signal} to baton: {e}"));
    }

    /// Whether baton has exited (without reaping a still running one).
    pub(crate) fn exited(&mut self) -> bool {
        let child = self.child.as_mut().expect("baton was reaped");
        matches!(child.try_wait(), Ok(Some(_)))
    }

    /// Polls `check` every 20 ms until it gives a value; panics if baton exits first or `limit`
    /// passes, saying what was awaited.
    pub(crate) fn await_that<T>(
        &mut self,
        what: &str,
        limit: Duration,
        mut check: impl FnMut(&Path) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(value) = check(self.path()) {
                return value;
            }
            if self.exited() {
                let out = self.collect();
                panic!(
                    "baton exited ({:?}) while waiting for {what}\nstdout:\n{}\nstderr:\n{}",
                    out.code, out.stdout, out.stderr
                );
            }
            assert!(
                Instant::now() < deadline,
                "gave up after {limit:?} waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for baton to exit, at most `limit`; past that, kills it and fails the test.
    pub(crate) fn wait(mut self, limit: Duration) -> Output {
        let deadline = self.started + limit;
        loop {
            if self.exited() {
                return self.collect();
            }
            if Instant::now() >= deadline {
                let _ = self.child.as_mut().map(Child::kill);
                let out = self.collect();
                panic!(
                    "baton did not exit within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                    out.stdout, out.stderr
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kills baton with SIGKILL and reaps it.
    pub(crate) fn kill(mut self) -> Output {
        self.signal(Signal::SIGKILL);
        self.collect()
    }

    /// Kills baton with SIGKILL, then resumes its run to the end (`--json`, which must
    /// succeed): the run's id and what the resume printed.
    pub(crate) fn kill_and_resume(self) -> (String, Output) {
        let killed = self.kill();
        let run = killed.store().run().id.to_string();
        let resumed = killed
            .then()
            .args(&["resume", &run, "--json"])
            .run()
            .status(0);
        (run, resumed)
    }

    fn collect(&mut self) -> Output {
        let mut child = self.child.take().expect("baton was reaped");
        let status = child.wait().expect("wait for baton");
        let elapsed = self.started.elapsed();
        let test = self.test.take().expect("baton was reaped");
        let read = |name: &str| {
            String::from_utf8_lossy(&fs::read(test.tmp.path().join(name)).unwrap_or_default())
                .into_owned()
        };
        let stdout = read("stdout");
        let stderr = read("stderr");
        Output {
            code: status.code(),
            stdout,
            stderr,
            elapsed,
            test,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What one baton invocation did.
pub(crate) struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    test: Test,
}

impl Output {
    fn context(&self) -> String {
        format!(
            "exit code {:?} after {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code, self.elapsed, self.stdout, self.stderr
        )
    }

    #[track_caller]
    pub(crate) fn status(self, code: i32) -> Self {
        assert_eq!(
            self.code,
            Some(code),
            "unexpected exit code\n{}",
            self.context()
        );
        self
    }

    #[track_caller]
    pub(crate) fn stdout_contains(self, text: &str) -> Self {
        assert!(
            self.stdout.contains(text),
            "stdout lacks {text:?}\n{}",
            self.context()
        );
        self
    }

    #[track_caller]
    pub(crate) fn stderr_contains(self, text: &str) -> Self {
        assert!(
            self.stderr.contains(text),
            "stderr lacks {text:?}\n{}",
            self.context()
        );
        self
    }

    /// stdout parsed as JSON (for `--json`).
    #[track_caller]
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON: {e}\n{}", self.context()))
    }

    /// The `tasks` entry of `--json` output with this id.
    #[track_caller]
    pub(crate) fn json_task(&self, id: &str) -> serde_json::Value {
        let json = self.json();
        json["tasks"]
            .as_array()
            .expect("tasks array")
            .iter()
            .find(|t| t["id"] == id)
            .unwrap_or_else(|| panic!("no task {id} in the JSON result\n{}", self.context()))
            .clone()
    }

    pub(crate) fn path(&self) -> &Path {
        self.test.path()
    }

    /// `baton resume RUN --json` of the run this one left (its driver killed, say), which
    /// must succeed: the run's id, and what the resume printed.
    #[track_caller]
    pub(crate) fn resumed(self) -> (String, Output) {
        let run = self.store().run().id.to_string();
        let resumed = self
            .then()
            .args(&["resume", &run, "--json"])
            .run()
            .status(0);
        (run, resumed)
    }

    /// The same repository, for another invocation.
    pub(crate) fn then(self) -> Test {
        let mut test = self.test;
        test.args.clear();
        test.stdout = StdoutTo::File;
        test
    }

    pub(crate) fn read(&self, name: &str) -> Vec<u8> {
        fs::read(self.path().join(name)).unwrap_or_else(|e| panic!("read {name}: {e}"))
    }

    /// Where baton keeps a run's scratch files (handoffs, structured outputs) while it runs.
    pub(crate) fn scratch(&self, run: &str) -> PathBuf {
        self.test.tmp.path().join("runtime/baton").join(run)
    }

    pub(crate) fn state_dir_exists(&self) -> bool {
        self.path().join(".baton").exists()
    }

    #[track_caller]
    pub(crate) fn store(&self) -> Store {
        Store::try_open(self.path())
            .unwrap_or_else(|| panic!("cannot open the store\n{}", self.context()))
    }
}

/// The run store, opened read-only as another process would.
pub(crate) struct Store {
    inner: SqliteStore,
}

impl Store {
    pub(crate) fn try_open(root: &Path) -> Option<Self> {
        let path = root.join(".baton/baton.db");
        if !path.exists() {
            return None;
        }
        SqliteStore::open_readonly(&path)
            .ok()
            .map(|inner| Self { inner })
    }

    /// The store once a run is recorded in it: a test polling for a run's progress may find
    /// the database before the run is in it.
    pub(crate) fn once_a_run_is_in(root: &Path) -> Option<Self> {
        Self::try_open(root).filter(|store| store.try_run().is_some())
    }

    /// The one run recorded (every test makes exactly one, unless it says otherwise).
    #[track_caller]
    pub(crate) fn run(&self) -> RunRecord {
        let runs = self.inner.runs(10).expect("list runs");
        assert_eq!(runs.len(), 1, "expected exactly one run, found {runs:#?}");
        runs.into_iter().next().expect("one run").run
    }

    /// Every run, newest first.
    pub(crate) fn runs(&self) -> Vec<RunRecord> {
        let runs = self.inner.runs(100).expect("list runs");
        runs.into_iter().map(|r| r.run).collect()
    }

    /// The run if it has been created yet.
    pub(crate) fn try_run(&self) -> Option<RunRecord> {
        self.inner
            .runs(1)
            .ok()
            .and_then(|r| r.into_iter().next())
            .map(|r| r.run)
    }

    pub(crate) fn tasks(&self) -> Vec<TaskRecord> {
        self.inner.tasks(&self.run().id).expect("list tasks")
    }

    #[track_caller]
    pub(crate) fn task(&self, id: &str) -> TaskRecord {
        self.tasks()
            .into_iter()
            .find(|t| t.task.as_str() == id)
            .unwrap_or_else(|| panic!("no task {id} in the store"))
    }

    pub(crate) fn attempts(&self, id: &str) -> Vec<AttemptRecord> {
        self.inner
            .attempts(&self.run().id, &task_id(id))
            .expect("list attempts")
    }

    pub(crate) fn all_attempts(&self) -> Vec<AttemptRecord> {
        self.inner
            .run_attempts(&self.run().id)
            .expect("list attempts")
    }

    pub(crate) fn events(&self) -> Vec<Event> {
        self.inner
            .events(&self.run().id, 0, u32::MAX)
            .expect("list events")
    }

    pub(crate) fn events_of(&self, pick: impl Fn(&EventKind) -> bool) -> Vec<EventKind> {
        self.events()
            .into_iter()
            .map(|e| e.kind)
            .filter(|k| pick(k))
            .collect()
    }

    #[track_caller]
    pub(crate) fn assert_consistent(&self) {
        let problems = self
            .inner
            .check_consistency(&self.run().id)
            .expect("check consistency");
        assert!(
            problems.is_empty(),
            "the store is inconsistent: {problems:#?}"
        );
    }
}

/// The `(start, end)` of each finished attempt, in milliseconds.
pub(crate) fn intervals(attempts: &[AttemptRecord]) -> Vec<(i64, i64)> {
    attempts
        .iter()
        .map(|a| {
            let end = a
                .ended_at_ms
                .unwrap_or_else(|| panic!("attempt {} of {} never ended", a.attempt, a.task));
            (a.started_at_ms, end)
        })
        .collect()
}

/// Most intervals that hold at one instant; an interval ending when another starts does not
/// overlap it.
pub(crate) fn peak_overlap(intervals: &[(i64, i64)]) -> usize {
    let mut edges: Vec<(i64, i32)> = intervals
        .iter()
        .flat_map(|&(s, e)| [(s, 1), (e, -1)])
        .collect();
    edges.sort_unstable();
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, delta) in edges {
        now += delta;
        peak = peak.max(now);
    }
    peak as usize
}

pub(crate) fn overlaps(a: (i64, i64), b: (i64, i64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// What a baton run "from another terminal" printed.
pub(crate) struct Side {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<std::process::Output> for Side {
    fn from(out: std::process::Output) -> Self {
        Side {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Runs baton in `dir` to its end, as a user would from another terminal while a run goes on.
pub(crate) fn baton_in(dir: &Path, args: &[&str]) -> Side {
    Command::new(BATON)
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("BATON_STORE")
        .stdin(Stdio::null())
        .output()
        .expect("run baton")
        .into()
}

/// Every command that reads the graph file `g.toml`, and so refuses a bad one alike.
pub(crate) const READING_G_TOML: &[&[&str]] = &[
    &["run", "g.toml"],
    &["plan", "g.toml"],
    &["plan", "g.toml", "--json"],
    &["run", "g.toml", "--dry-run"],
    &["graph", "g.toml"],
];

/// baton running a graph of one long task (`long`, which needs 30 s) and, if `with_next`, a
/// task `next` that needs it; returned once `long` has started.
pub(crate) fn running_long_task(with_next: bool) -> Running {
    let mut graph = String::from("[[task]]\nid = \"long\"\nrun = \"touch started; sleep 30\"\n");
    if with_next {
        graph.push_str("\n[[task]]\nid = \"next\"\nneeds = [\"long\"]\nrun = \"true\"\n");
    }
    let mut running = Test::new()
        .graph("g.toml", &graph)
        .args(&["run", "g.toml"])
        .spawn();
    running.await_that("the task to start", Duration::from_secs(30), |root| {
        root.join("started").exists().then_some(())
    });
    running
}

/// A terminal (tmux) with baton running in it.
pub(crate) struct Screen {
    test: Test,
    socket: PathBuf,
    /// Windows opened after the first.
    windows: u32,
}

impl Screen {
    fn tmux(&self) -> Command {
        let mut command = Command::new("tmux");
        command.arg("-S").arg(&self.socket).stdin(Stdio::null());
        command
    }

    /// `baton ARGS`, then a shell that keeps the window (and what baton printed) open.
    fn shell_line(&self, args: &[OsString]) -> String {
        let words: Vec<String> = std::iter::once(OsString::from(BATON))
            .chain(args.iter().cloned())
            .map(|w| format!("'{}'", w.to_string_lossy().replace('\'', "'\\''")))
            .collect();
        format!("{}; echo \"[exit $?]\"; sleep 600", words.join(" "))
    }

    /// Opens another window running `baton ARGS` there; returns its name.
    pub(crate) fn open(&mut self, args: &[&str]) -> String {
        self.windows += 1;
        let name = format!("w{}", self.windows);
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let status = self
            .tmux()
            .args(["new-window", "-d", "-t", "baton", "-n", &name, "-c"])
            .arg(self.test.root.join(&self.test.cwd))
            .arg(self.shell_line(&args))
            .status()
            .expect("tmux new-window");
        assert!(status.success(), "tmux new-window failed");
        name
    }

    /// What window `window` shows now, line by line, as plain text.
    pub(crate) fn text(&self, window: &str) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-t", &format!("baton:{window}")])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until window `window` shows what `done` accepts; what it shows then.
    #[track_caller]
    pub(crate) fn wait_until(
        &self,
        window: &str,
        what: &str,
        done: impl Fn(&str) -> bool,
    ) -> String {
        let start = Instant::now();
        loop {
            let text = self.text(window);
            if done(&text) {
                return text;
            }
            if start.elapsed() > RUN_LIMIT {
                panic!("window {window} never showed {what}; it shows:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until window `window` shows `text`; what it shows then.
    #[track_caller]
    pub(crate) fn wait_for(&self, window: &str, text: &str) -> String {
        self.wait_until(window, &format!("{text:?}"), |screen| screen.contains(text))
    }

    /// Runs `baton ARGS` to its end beside the terminal, in the same repository.
    pub(crate) fn baton(&self, args: &[&str]) -> std::process::Output {
        let mut command = Command::new(BATON);
        command.args(args).stdin(Stdio::null());
        self.test
            .environment(&mut command, &self.test.runtime_dir());
        command.output().expect("run baton")
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self
            .tmux()
            .arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
