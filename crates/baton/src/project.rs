//! Where baton keeps its state: `.baton/` in the repository root, or in the current directory
//! outside a repository.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Where runs are recorded: an SQLite file (the default, `.baton/baton.db`), or a PostgreSQL
/// database shared by a team (`--store postgres://…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreAt {
    Sqlite(PathBuf),
    Postgres(String),
}

impl StoreAt {
    /// Whether anything was recorded there yet: a database server is always there.
    pub(crate) fn exists(&self) -> bool {
        match self {
            Self::Sqlite(path) => path.exists(),
            Self::Postgres(_) => true,
        }
    }
}

impl std::fmt::Display for StoreAt {
    /// The file, or the server without its password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "{}", path.display()),
            Self::Postgres(url) => f.write_str(&baton_store::describe_server(url)),
        }
    }
}

/// The directories a command works with.
#[derive(Debug, Clone)]
pub(crate) struct Project {
    /// The repository root, or the current directory outside a repository.
    pub root: PathBuf,
    /// `.baton/` under the root.
    pub state_dir: PathBuf,
    /// The git directory that holds `info/exclude`, when inside a repository.
    git_dir: Option<PathBuf>,
}

impl Project {
    pub(crate) fn discover() -> anyhow::Result<Self> {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        Ok(Self::discover_from(&cwd))
    }

    /// The project a graph file belongs to: the repository that holds it (or its directory,
    /// outside a repository), wherever baton was started. Its tasks run there and its run is
    /// recorded there, as `just` runs recipes in the justfile's directory.
    pub(crate) fn of_graph(file: &Path) -> anyhow::Result<Self> {
        let dir = match file.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let dir = dir
            .canonicalize()
            .with_context(|| format!("cannot find the directory of {}", file.display()))?;
        Ok(Self::discover_from(&dir))
    }

    /// The project that holds `start`: the nearest repository above it, else `start` itself.
    fn discover_from(start: &Path) -> Self {
        let cwd = start;
        for dir in cwd.ancestors() {
            let dot_git = dir.join(".git");
            if dot_git.is_dir() {
                return Self::at(dir, Some(dot_git));
            }
            if dot_git.is_file() {
                // A linked worktree or submodule: `.git` names the real git directory.
                return Self::at(dir, common_git_dir(&dot_git));
            }
        }
        Self::at(cwd, None)
    }

    fn at(root: &Path, git_dir: Option<PathBuf>) -> Self {
        Self {
            root: root.to_path_buf(),
            state_dir: root.join(".baton"),
            git_dir,
        }
    }

    /// The store path from `--store`/`BATON_STORE`, or the default.
    pub(crate) fn store_at(&self, url: Option<&str>) -> Result<StoreAt, String> {
        match url {
            None => Ok(StoreAt::Sqlite(self.state_dir.join("baton.db"))),
            Some(url) => {
                if let Some(path) = url.strip_prefix("sqlite:") {
                    let path = path.strip_prefix("//").unwrap_or(path);
                    if path.is_empty() {
                        return Err(
                            "`--store sqlite:` needs a path, like `sqlite:.baton/baton.db`".into(),
                        );
                    }
                    Ok(StoreAt::Sqlite(PathBuf::from(path)))
                } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
                    Ok(StoreAt::Postgres(url.to_owned()))
                } else {
                    Err(format!(
                        "`{url}` is not a store URL; write `sqlite:PATH` or `postgres://USER@HOST:PORT/DB`"
                    ))
                }
            }
        }
    }

    /// Creates `.baton/` (private to the user) and keeps it out of git's view via
    /// `.git/info/exclude`, so that it never shows up as untracked files.
    pub(crate) fn prepare_state_dir(&self) -> anyhow::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.state_dir)
            .with_context(|| format!("cannot create {}", self.state_dir.display()))?;
        if let Some(git_dir) = &self.git_dir {
            exclude_state_dir(git_dir).with_context(|| {
                format!("cannot add `.baton/` to {}/info/exclude", git_dir.display())
            })?;
        }
        Ok(())
    }
}

fn exclude_state_dir(git_dir: &Path) -> std::io::Result<()> {
    let info = git_dir.join("info");
    let exclude = info.join("exclude");
    let current = std::fs::read_to_string(&exclude).unwrap_or_default();
    if current
        .lines()
        .any(|l| matches!(l.trim(), ".baton/" | ".baton" | "/.baton" | "/.baton/"))
    {
        return Ok(());
    }
    std::fs::create_dir_all(&info)?;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&exclude)?;
    let sep = if current.is_empty() || current.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    write!(file, "{sep}# baton's run records and logs\n/.baton/\n")
}

/// Resolves a `.git` file (`gitdir: PATH`) to the common git directory, whose `info/exclude`
/// applies to every worktree.
fn common_git_dir(dot_git_file: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dot_git_file).ok()?;
    let gitdir = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let base = dot_git_file.parent()?;
    let gitdir = base.join(gitdir);
    match std::fs::read_to_string(gitdir.join("commondir")) {
        Ok(common) => Some(gitdir.join(common.trim())),
        Err(_) => Some(gitdir),
    }
}
