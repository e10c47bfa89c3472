//! Running `git`, hardened: a worktree an agent touched may hold hooks, filter drivers or an
//! fsmonitor it planted, and the user's global config may set any of them too. Every command
//! runs with no system or global config, hooks pointed at an empty place, no fsmonitor, no
//! pager, no prompts, and a fixed identity for baton's own commits.
//!
//! The environment is scrubbed of every `GIT_*` variable (but the `GIT_TRACE*` ones, which only
//! add diagnostics) before baton's own are set: a variable such as `GIT_CONFIG_PARAMETERS`,
//! `GIT_DIR` or `GIT_OBJECT_DIRECTORY` inherited from the caller (baton started from a git hook,
//! say) would otherwise inject config or point git at another repository.
//!
//! # Drivers
//!
//! A filter (`filter.NAME.clean`, `.smudge`, `.process`), merge (`merge.NAME.driver`) or diff
//! (`diff.NAME.textconv`, `.command`) driver is a command git runs on a file whose attributes
//! name it (`*.txt filter=NAME` in a `.gitattributes`). An agent that can write the
//! repository's config (`.git/config`, a worktree's `config.worktree`, a file they include)
//! and a `.gitattributes` could make baton's `add`, `commit`, `merge` or `checkout` run
//! anything. A user's own drivers (git-lfs) must go on working.
//!
//! So the driver settings are read once, when baton takes the repository in hand
//! ([`Drivers`], at the start of a run, before any task runs, and kept with the run so that a
//! `resume` trusts the same), and every later command that may run a driver compares them with
//! what the config says now, *in the directory the command runs in* (conditional includes can
//! differ per worktree): every setting that differs is pinned back on the command line
//! (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`, which outrank every config
//! file, and, unlike `-c`, take a name holding `=`): to its trusted value, or, for a driver
//! that was not there, to one that runs nothing foreign: no clean, smudge or process command
//! and `required = false` (the file is taken as it is), `git merge-file` as the merge driver
//! (git's own three-way merge; an empty one would fail every merge, since git runs it as
//! given), `cat` as the text conversion and no external diff (baton asks for none anyway).
//!
//! Why compare definitions rather than read the `.gitattributes` files for the names they
//! use: a driver runs only if the config defines it, and the config is all git reads it from
//! (system and global config are off), whereas attributes come from many places (every
//! directory's `.gitattributes`, in the worktree or in the commits being merged,
//! `$GIT_DIR/info/attributes`, `core.attributesFile`, `[attr]` macros). Comparing also catches
//! a trusted driver redefined (`filter.lfs.clean` pointed at another program), which a list
//! of trusted names would let through. `-c core.attributesFile=/dev/null` would not help: the
//! tree's own `.gitattributes` are still read. The one gap is a process still running in the
//! worktree that rewrites the config between the read and the command (milliseconds):
//! baton's commands on a worktree run after its attempt's processes are gone.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

/// A git command that failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git: {0}")]
    Spawn(std::io::Error),
    #[error("`git {args}` failed ({status}): {stderr}")]
    Failed {
        args: String,
        status: String,
        stderr: String,
    },
    #[error("{0}")]
    Other(String),
}

/// The settings of a repository's config that make git run a program on a file: those of its
/// filter, merge and diff drivers. What [`Repo::discover`](crate::Repo::discover) reads is
/// trusted: baton's later commands pin every one of them that changed back to it (see the
/// module's notes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drivers {
    /// Each setting's value (the last one given, which is the one git uses); `None` for a key
    /// given without a value.
    settings: BTreeMap<String, Option<String>>,
}

/// `git config --get-regexp` of every driver setting that runs a program (or that would make
/// a neutralized driver fail: `filter.NAME.required`).
const DRIVER_KEYS: &str =
    r"^(filter|merge|diff)\..*\.(clean|smudge|process|required|driver|textconv|command)$";

/// The merge driver given to a driver that is not trusted: git's own three-way merge of the
/// three versions, with git's conflict labels (a non-zero exit is a conflict).
const MERGE_FILE: &str = "git merge-file --marker-size=%L -L %X -L %S -L %Y %A %O %B";

impl Drivers {
    /// Reads the driver settings that apply to commands run in `dir`: what git said the last
    /// time it read the same config (see [`Remembered`]), else what it says now.
    fn read(git: &Git, dir: &Path) -> Result<Drivers, GitError> {
        let common = git.common.as_deref();
        let config = common.and_then(|common| config_bytes(dir, common));
        if let Some(config) = &config
            && let Some(drivers) = git.remembered.get(config)
        {
            return Ok(drivers);
        }
        let drivers = Drivers::read_by_git(git, dir)?;
        // Remembered only if the config did not change while git read it.
        if let Some(config) = config
            && common.and_then(|common| config_bytes(dir, common)).as_ref() == Some(&config)
        {
            git.remembered.put(config, drivers.clone());
        }
        Ok(drivers)
    }

    /// The driver settings `git config` reads for commands in `dir`.
    fn read_by_git(git: &Git, dir: &Path) -> Result<Drivers, GitError> {
        let args = ["config", "--null", "--get-regexp", DRIVER_KEYS];
        let output = git.hardened(dir, &args).output().map_err(GitError::Spawn)?;
        match output.status.code() {
            Some(0) => Ok(Drivers::decode(&String::from_utf8_lossy(&output.stdout))),
            // Nothing matches.
            Some(1) if output.stderr.is_empty() => Ok(Drivers::default()),
            _ => Err(failed(&args, &output)),
        }
    }

    /// The settings from `git config --null` output (`KEY\nVALUE\0`, or `KEY\0` for a key
    /// without a value), as [`Drivers::encode`] writes them too.
    pub fn decode(text: &str) -> Drivers {
        let settings = text
            .split('\0')
            .filter(|entry| !entry.is_empty())
            .map(|entry| match entry.split_once('\n') {
                Some((key, value)) => (key.to_owned(), Some(value.to_owned())),
                None => (entry.to_owned(), None),
            })
            .collect();
        Drivers { settings }
    }

    /// The settings as text for [`Drivers::decode`]: to keep the trusted ones with a run.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        for (key, value) in &self.settings {
            text.push_str(key);
            if let Some(value) = value {
                text.push('\n');
                text.push_str(value);
            }
            text.push('\0');
        }
        text
    }

    /// The settings `current` must be given on the command line to act as `self` (trusted):
    /// every key whose value differs, set to the trusted value, or to one that runs nothing
    /// when the key is new.
    fn pins(&self, current: &Drivers) -> Vec<(String, String)> {
        let keys = self.settings.keys().chain(current.settings.keys());
        let mut pins: Vec<(String, String)> = keys
            .filter(|key| self.settings.get(*key) != current.settings.get(*key))
            .map(|key| {
                let value = match self.settings.get(key) {
                    Some(Some(trusted)) => trusted.clone(),
                    _ => neutral(key).to_owned(),
                };
                (key.clone(), value)
            })
            .collect();
        pins.sort();
        pins.dedup();
        pins
    }
}

/// The driver settings git read from a repository's config, with that config's bytes: a
/// task's worktree is asked for its driver settings before every command that may run one
/// (five times a task), and spawning `git config` for it cost ~2 ms each time, while the
/// config had not changed since the last time (docs/PERFORMANCE.md). What git said is
/// reused only for the very same bytes, and only where those bytes are all git reads (see
/// [`config_bytes`]), so no parser of baton's has to agree with git's.
#[derive(Debug, Default)]
struct Remembered(std::sync::Mutex<Option<(Vec<u8>, Drivers)>>);

impl Remembered {
    fn get(&self, config: &[u8]) -> Option<Drivers> {
        let last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (bytes, drivers) = last.as_ref()?;
        (bytes.as_slice() == config).then(|| drivers.clone())
    }

    fn put(&self, config: Vec<u8>, drivers: Drivers) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((config, drivers));
    }
}

/// The bytes of the repository config a git command run in `dir` reads, when that file is
/// all it reads for the driver settings: system and global config are off (see
/// [`Git::hardened`]), the environment is scrubbed, and `dir` is the root of a worktree
/// whose `.git` leads, as git follows it, to `common`, the repository's common directory
/// (canonical): a file `gitdir: PATH` naming a directory whose `commondir` names `common`
/// (git stops with an error on a `.git` file that leads nowhere valid), or `common` itself,
/// as a directory git takes for a repository (`HEAD` naming a ref or a commit, `objects/`,
/// `refs/`: one it would not take, git passes over and looks for another higher up, whose
/// config this is not). `None`, so that git is asked, for anything else: a config that
/// includes another file (`include`, `includeIf`: which can differ per worktree) or that
/// turns on per-worktree config (`extensions.worktreeConfig`), found by a case-blind search
/// for those words anywhere in it, whatever they stand in; a `.git` that is a symbolic link,
/// unreadable, or leads elsewhere; no config.
fn config_bytes(dir: &Path, common: &Path) -> Option<Vec<u8>> {
    // Git takes a `gitdir:` or `commondir` path up to its end of line, relative to the file
    // that names it unless absolute.
    fn line(text: &str) -> &str {
        text.trim_end_matches(['\n', '\r'])
    }
    let dot_git = dir.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).ok()?;
    let found = if meta.is_dir() {
        let head = std::fs::read_to_string(dot_git.join("HEAD")).ok()?;
        let head = line(&head);
        let names = head.starts_with("ref: refs/")
            || (matches!(head.len(), 40 | 64) && head.bytes().all(|b| b.is_ascii_hexdigit()));
        if !names || !dot_git.join("objects").is_dir() || !dot_git.join("refs").is_dir() {
            return None;
        }
        dot_git
    } else if meta.is_file() {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let git_dir = dir.join(line(text.strip_prefix("gitdir: ")?));
        let named = std::fs::read_to_string(git_dir.join("commondir")).ok()?;
        git_dir.join(line(&named))
    } else {
        return None;
    };
    if std::fs::canonicalize(&found).ok()? != common {
        return None;
    }
    let bytes = std::fs::read(common.join("config")).ok()?;
    let lower = bytes.to_ascii_lowercase();
    let holds = |word: &[u8]| lower.windows(word.len()).any(|w| w == word);
    if holds(b"include") || holds(b"worktreeconfig") {
        return None;
    }
    Some(bytes)
}

/// A value of a driver setting that runs nothing but git itself (see the module's notes).
fn neutral(key: &str) -> &'static str {
    match key.rsplit('.').next() {
        Some("required") => "false",
        Some("driver") => MERGE_FILE,
        Some("textconv") => "cat",
        // clean, smudge, process, command: none.
        _ => "",
    }
}

/// Whether git may run a driver for `args`: everything but the commands that only read
/// refs and names.
fn may_run_drivers(args: &[&str]) -> bool {
    let (command, mut args) = subcommand(args);
    let read_only = match command {
        Some(
            "rev-parse" | "rev-list" | "for-each-ref" | "symbolic-ref" | "branch" | "config"
            | "commit-tree" | "update-ref",
        ) => true,
        // Moving a worktree or repairing its links renames directories and rewrites the
        // files that tie it to the repository; no file's content goes through git.
        Some("worktree") => matches!(args.next(), Some(&("list" | "prune" | "move" | "repair"))),
        _ => false,
    };
    !read_only
}

/// The file whose lock a git command that makes, moves, removes or looks through the
/// repository's worktrees holds while it runs: `baton-worktrees.lock` in the repository's
/// common directory. Git's own commands race on `.git/worktrees/`: one that lists the
/// worktrees (`worktree add` looking for the branch checked out elsewhere, `checkout -b`,
/// `branch -D`, `worktree move`) fails with `failed to read .git/worktrees/NAME/commondir`
/// when it meets a worktree another is still making (four `git worktree add` at once, by
/// hand: 2 failures in 8 tries). Baton makes, pools and removes worktrees from several
/// threads at once (a task's attempt makes its own: `baton-runner`'s `making`), and two
/// baton processes (two runs, workers sharing a checkout, a `prune`) may work in one
/// repository, so those commands take turns through a lock on a file (`flock`: held per open
/// file, so threads of one process exclude each other too, and a process that dies lets go).
/// A worktree's checkout, the slow part, is not one of them (see
/// [`Repo::add_worktree`](crate::Repo::add_worktree)).
const TURNS_FILE: &str = "baton-worktrees.lock";

/// Where the turns are taken when the lock file cannot be opened (a read-only repository):
/// within this process only.
static TURNS_HERE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A turn taken ([`TURNS_FILE`]), or another lock [`hold`] holds: let go when dropped.
pub(crate) enum Turn {
    File(#[expect(dead_code, reason = "held for its lock")] std::fs::File),
    Here(#[expect(dead_code, reason = "held for its lock")] std::sync::MutexGuard<'static, ()>),
}

/// Waits for the repository's worktree commands' turn (see [`TURNS_FILE`]).
fn take_turn(turns: Option<&Path>) -> Turn {
    hold(turns, &TURNS_HERE)
}

/// Holds an exclusive `flock` of the file at `path` (made if missing) until dropped: threads
/// and processes alike wait for it. Where it cannot be opened, `here` stands in for it, within
/// this process only (one mutex per lock: a thread holding one may take another).
pub(crate) fn hold(path: Option<&Path>, here: &'static std::sync::Mutex<()>) -> Turn {
    let file = path.and_then(|path| {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()?;
        file.lock().ok()?;
        Some(file)
    });
    match file {
        Some(file) => Turn::File(file),
        None => Turn::Here(here.lock().unwrap_or_else(|e| e.into_inner())),
    }
}

/// Whether `args` writes a worktree's files (a checkout can take seconds): such a command
/// must not outlive the baton process that started it. Killed with it, it would otherwise go
/// on writing into a worktree a takeover has meanwhile found never checked out, removed and
/// made again at the same path.
fn writes_files(args: &[&str]) -> bool {
    let (command, _) = subcommand(args);
    matches!(
        command,
        Some("reset" | "checkout" | "switch" | "clean" | "read-tree")
    )
}

/// Makes the child `command` starts die (SIGKILL) when baton does: `PR_SET_PDEATHSIG`, and
/// an exit at once if baton died before it was set. The hook makes `std` fork rather than
/// `posix_spawn`: only for the few commands [`writes_files`] picks, each of which takes far
/// longer than the fork.
#[cfg(target_os = "linux")]
fn die_with_baton(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let baton = std::process::id();
    // SAFETY: between fork and exec the hook makes only async-signal-safe calls (`prctl`,
    // `getppid`, `_exit`) and touches no memory but its captured integer.
    unsafe {
        command.pre_exec(move || {
            // Refused (a seccomp policy, say): the command runs all the same, as it did before.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0
                // The signal is only for a death after the call: one before it reparented the
                // child.
                && u32::try_from(libc::getppid()).ok() != Some(baton)
            {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Elsewhere there is no parent-death signal: a git command outlives a killed baton by as long
/// as it takes (it holds no lock of baton's).
#[cfg(not(target_os = "linux"))]
fn die_with_baton(_command: &mut Command) {}

/// Whether `args` is a command that must not run beside another that changes the
/// repository's worktrees ([`TURNS_FILE`]).
fn runs_alone(args: &[&str]) -> bool {
    let (command, _) = subcommand(args);
    matches!(command, Some("worktree" | "branch" | "checkout" | "switch"))
}

/// The git subcommand `args` run, past `-c KEY=VALUE` pairs, and the arguments after it.
fn subcommand<'a, 'b>(args: &'a [&'b str]) -> (Option<&'b str>, std::slice::Iter<'a, &'b str>) {
    let mut args = args.iter();
    loop {
        match args.next() {
            Some(&"-c") => {
                args.next();
            }
            other => return (other.copied(), args),
        }
    }
}

/// Driver settings pinned on a command line: `(key, value)`.
type Pins = Vec<(String, String)>;

#[derive(Debug, Clone, Default)]
pub(crate) struct Git {
    /// The driver settings later commands are held to; `None` before they are read.
    trusted: Option<Arc<Drivers>>,
    /// The pins of one directory, read once for a run of commands there ([`Git::settled`]).
    settled: Option<(std::path::PathBuf, Arc<Pins>)>,
    /// The driver settings git last read, shared by this `Git`'s clones.
    remembered: Arc<Remembered>,
    /// The repository's common directory (canonical), once known: where its worktree
    /// commands take turns ([`TURNS_FILE`]), and the config whose driver settings are
    /// remembered ([`Remembered`]).
    common: Option<Arc<std::path::PathBuf>>,
}

impl Git {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Works in the repository whose common directory is `common`.
    pub(crate) fn in_repository(&mut self, common: &Path) {
        let common = std::fs::canonicalize(common).unwrap_or_else(|_| common.to_owned());
        self.common = Some(Arc::new(common));
    }

    /// Runs `command` (`git ARGS`) to its end, taking its turn if it must ([`runs_alone`]).
    fn execute(&self, command: &mut Command, args: &[&str]) -> Result<Output, GitError> {
        if writes_files(args) {
            die_with_baton(command);
        }
        let turns = self.common.as_deref().map(|common| common.join(TURNS_FILE));
        let _turn = runs_alone(args).then(|| take_turn(turns.as_deref()));
        command.output().map_err(GitError::Spawn)
    }

    /// Reads the driver settings that hold for `dir` now and trusts them from now on.
    pub(crate) fn trust_drivers_of(&mut self, dir: &Path) -> Result<(), GitError> {
        self.trusted = Some(Arc::new(Drivers::read(self, dir)?));
        Ok(())
    }

    /// Trusts `drivers` (read earlier, kept with the run) from now on.
    pub(crate) fn trust(&mut self, drivers: Drivers) {
        self.trusted = Some(Arc::new(drivers));
    }

    /// The driver settings trusted, if they were read.
    pub(crate) fn trusted(&self) -> Option<&Drivers> {
        self.trusted.as_deref()
    }

    /// This `Git` with the driver pins of `dir` read now, once, for the commands run there
    /// next: for a few commands in a row on a worktree whose attempt's processes are gone, so
    /// that nothing but baton changes its config in between (the module's notes).
    pub(crate) fn settled(&self, dir: &Path) -> Result<Git, GitError> {
        let Some(trusted) = &self.trusted else {
            return Ok(self.clone());
        };
        let pins = trusted.pins(&Drivers::read(self, dir)?);
        Ok(Git {
            trusted: self.trusted.clone(),
            settled: Some((dir.to_owned(), Arc::new(pins))),
            remembered: self.remembered.clone(),
            common: self.common.clone(),
        })
    }

    /// `git ARGS` in `dir`, hardened, with every driver setting that changed since they were
    /// trusted pinned back.
    pub(crate) fn command(&self, dir: &Path, args: &[&str]) -> Result<Command, GitError> {
        let mut command = self.hardened(dir, args);
        if let Some(trusted) = &self.trusted
            && may_run_drivers(args)
        {
            let pins = match &self.settled {
                Some((settled, pins)) if settled == dir => pins.as_ref().clone(),
                _ => trusted.pins(&Drivers::read(self, dir)?),
            };
            command.env("GIT_CONFIG_COUNT", pins.len().to_string());
            for (n, (key, value)) in pins.iter().enumerate() {
                command.env(format!("GIT_CONFIG_KEY_{n}"), key);
                command.env(format!("GIT_CONFIG_VALUE_{n}"), value);
            }
        }
        Ok(command)
    }

    /// `git ARGS` in `dir`, hardened but for drivers.
    fn hardened(&self, dir: &Path, args: &[&str]) -> Command {
        let mut command = Command::new("git");
        for (name, _) in std::env::vars_os() {
            if is_scrubbed(&name) {
                command.env_remove(name);
            }
        }
        command
            .current_dir(dir)
            .args([
                "-c",
                "core.fsmonitor=false",
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.pager=cat",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "tag.gpgsign=false",
                // A repository's config may turn these on; each would make baton's merges or
                // checkouts do more than baton asked: replay recorded resolutions, recurse into
                // submodules (and fetch them), start a detached `gc` racing parallel worktrees.
                "-c",
                "rerere.enabled=false",
                "-c",
                "submodule.recurse=false",
                "-c",
                "gc.auto=0",
                "-c",
                "maintenance.auto=false",
            ])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            // Replace refs (`git replace`) would let a planted ref swap the content baton
            // reads and merges.
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            // Never wait for an editor: every message baton needs is given on the command line.
            .env("GIT_EDITOR", ":")
            .env("GIT_MERGE_AUTOEDIT", "no")
            .env("GIT_PAGER", "cat")
            .env("GIT_AUTHOR_NAME", "baton")
            .env("GIT_AUTHOR_EMAIL", "baton@localhost")
            .env("GIT_COMMITTER_NAME", "baton")
            .env("GIT_COMMITTER_EMAIL", "baton@localhost")
            .stdin(Stdio::null());
        command
    }

    /// Runs `git ARGS` in `dir` and returns its stdout; a non-zero exit is an error with
    /// its stderr.
    pub(crate) fn output(&self, dir: &Path, args: &[&str]) -> Result<String, GitError> {
        let output = self.run(dir, args)?;
        if !output.status.success() {
            return Err(failed(args, &output));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// [`Git::output`] with `GIT_INDEX_FILE` set to `index`: a command on an index of its own,
    /// which the user's is not touched by.
    pub(crate) fn output_with_index(
        &self,
        dir: &Path,
        args: &[&str],
        index: &Path,
    ) -> Result<String, GitError> {
        let mut command = self.command(dir, args)?;
        command.env("GIT_INDEX_FILE", index);
        let output = self.execute(&mut command, args)?;
        if !output.status.success() {
            return Err(failed(args, &output));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Runs `git ARGS` in `dir` and returns what happened, whatever the exit status: for the
    /// commands whose exit status is an answer (`diff --quiet`, `rev-parse --verify --quiet`,
    /// a `merge` that conflicts).
    pub(crate) fn run(&self, dir: &Path, args: &[&str]) -> Result<Output, GitError> {
        self.execute(&mut self.command(dir, args)?, args)
    }

    /// Like [`Git::output`], with `input` on stdin: commit messages go there rather than on
    /// the command line, which limits one argument to 128 KiB on Linux.
    pub(crate) fn output_with_input(
        &self,
        dir: &Path,
        args: &[&str],
        input: &str,
    ) -> Result<String, GitError> {
        let mut child = self
            .command(dir, args)?
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(GitError::Spawn)?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let input = input.to_owned();
        // Written from a thread so that git filling its stdout pipe first cannot deadlock us.
        let writer = std::thread::spawn(move || {
            // git may exit without reading everything (an error); its stderr says why.
            let _ = stdin.write_all(input.as_bytes());
        });
        let output = child.wait_with_output().map_err(GitError::Spawn)?;
        let _ = writer.join();
        if !output.status.success() {
            return Err(failed(args, &output));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

/// The error for a command that exited with `output`'s non-zero status.
pub(crate) fn failed(args: &[&str], output: &Output) -> GitError {
    GitError::Failed {
        args: args.join(" "),
        status: output.status.to_string(),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    }
}

fn is_scrubbed(name: &OsStr) -> bool {
    let name = name.as_encoded_bytes();
    name.starts_with(b"GIT_") && !name.starts_with(b"GIT_TRACE")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_settings_round_trip_and_pin_what_changed() {
        let trusted = Drivers::decode(
            "filter.lfs.clean\ngit-lfs clean -- %f\0filter.lfs.required\0diff.x=y.textconv\nod\0",
        );
        assert_eq!(Drivers::decode(&trusted.encode()), trusted);
        assert_eq!(trusted.pins(&trusted), []);

        let current = Drivers::decode(
            "filter.lfs.clean\nevil\0filter.lfs.required\0filter.new.clean\nevil\0\
             filter.new.required\ntrue\0merge.new.driver\nevil\0diff.new.textconv\nevil\0\
             diff.new.command\nevil\0filter.a=b.process\nevil\0",
        );
        let pins = trusted.pins(&current);
        let pins: Vec<(&str, &str)> = pins.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            pins,
            [
                ("diff.new.command", ""),
                ("diff.new.textconv", "cat"),
                // Gone from the config: given back.
                ("diff.x=y.textconv", "od"),
                ("filter.a=b.process", ""),
                // Redefined: the trusted value again.
                ("filter.lfs.clean", "git-lfs clean -- %f"),
                ("filter.new.clean", ""),
                ("filter.new.required", "false"),
                ("merge.new.driver", MERGE_FILE),
            ]
        );
    }

    #[test]
    fn only_commands_that_read_names_skip_the_driver_check() {
        for args in [
            &["rev-parse", "HEAD"][..],
            &["branch", "--delete", "x"],
            &["worktree", "list"],
            &["worktree", "prune"],
            &["worktree", "move", "a", "b"],
            &["worktree", "repair", "a"],
            &["-c", "core.quotePath=false", "for-each-ref"],
            &["commit-tree", "t", "-p", "p"],
            &["update-ref", "refs/heads/x", "c"],
        ] {
            assert!(!may_run_drivers(args), "{args:?}");
        }
        for args in [
            &["add", "--all"][..],
            &["commit"],
            &["merge", "x"],
            &["merge-tree", "--write-tree", "a", "b"],
            // It refreshes the index: a file whose stat is racy is hashed again, cleaned.
            &["write-tree"],
            &["worktree", "add", "p"],
            &["worktree", "remove", "p"],
            &["-c", "core.quotePath=false", "diff"],
            &["status"],
        ] {
            assert!(may_run_drivers(args), "{args:?}");
        }
    }
}
