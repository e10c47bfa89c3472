//! A run's branches through its git remote (`[run] remote`), for workers on other machines:
//! the coordinator publishes the base and, at the end, the result; a worker fetches what its
//! task starts from and publishes what it made.

use baton_graph::Graph;
use baton_workspace::Repo;

use super::Workspaces;

/// Pushes one task's result to the run's remote (see [`Workspaces::publisher`]).
pub struct Publisher {
    repo: Repo,
    remote: String,
    /// `refs/heads/baton/RUN/TASK`.
    branch: String,
    name: String,
}

impl Publisher {
    pub fn publish(&self, head: &str) -> Result<(), String> {
        let spec = format!("+{head}:{}", self.branch);
        self.repo.push(&self.remote, &[spec]).map_err(|e| {
            format!(
                "cannot push the branch of `{}` to `{}`: {e}",
                self.name, self.remote
            )
        })
    }
}

impl Workspaces {
    /// The run's branches, as a remote holds them: `refs/heads/baton/RUN/NAME`.
    fn remote_branch(&self, name: &str) -> String {
        format!("refs/heads/baton/{}/{name}", self.run)
    }

    /// Where a fetched branch of the run is kept here: out of `refs/heads`, so that a fetch
    /// never touches a branch a worktree here has checked out.
    fn fetched_ref(&self, name: &str) -> String {
        format!("refs/baton-fetched/{}/{name}", self.run)
    }

    /// Puts the run's base on `remote` (as `baton/RUN/base`), for workers elsewhere to start
    /// from. Nothing to do for a run without worktrees.
    pub fn publish_base(&self, remote: &str) -> Result<(), String> {
        let Some(repo) = &self.repo else {
            return Ok(());
        };
        let spec = format!("+{}:{}", self.base, self.remote_branch("base"));
        repo.push(remote, &[spec])
            .map_err(|e| format!("cannot push the run's base to `{remote}`: {e}"))
    }

    /// Fetches what `task`'s worktree starts from — the run's base, and the branches of its
    /// needs that work in worktrees — from `remote`, and takes those as its needs' results.
    pub fn fetch_needs(&mut self, graph: &Graph, task: u32, remote: &str) -> Result<(), String> {
        if !self.uses_tree(graph, task) {
            return Ok(());
        }
        let Some(repo) = &self.repo else {
            return Ok(());
        };
        let needs: Vec<(u32, String)> = graph
            .task(task)
            .needs
            .iter()
            .filter(|&&n| self.uses_tree(graph, n))
            .map(|&n| (n, graph.task(n).id.file_name().into_owned()))
            .collect();
        let mut specs = vec![format!(
            "+{}:{}",
            self.remote_branch("base"),
            self.fetched_ref("base")
        )];
        specs.extend(
            needs.iter().map(|(_, name)| {
                format!("+{}:{}", self.remote_branch(name), self.fetched_ref(name))
            }),
        );
        repo.fetch(remote, &specs)
            .map_err(|e| format!("cannot fetch the run's branches from `{remote}`: {e}"))?;
        for (need, name) in needs {
            let commit = repo
                .resolve(&self.fetched_ref(&name))
                .map_err(|e| format!("`{remote}` has no branch of `{name}`: {e}"))?;
            self.results[need as usize] = Some(commit);
        }
        Ok(())
    }

    /// What pushes `task`'s result to the run's remote as its branch, for its dependents and
    /// the coordinator elsewhere: `None` for a task without a worktree or a run without a
    /// remote. It is sent with the attempt, which pushes before it reports its end.
    pub fn publisher(&self, graph: &Graph, task: u32) -> Option<Publisher> {
        let remote = graph.run_settings().remote.clone()?;
        let repo = self.repo.clone().filter(|_| self.uses_tree(graph, task))?;
        let name = graph.task(task).id.file_name().into_owned();
        Some(Publisher {
            repo,
            remote,
            branch: self.remote_branch(&name),
            name,
        })
    }

    /// Fetches every branch of the run from `remote`: the objects the result is merged from.
    pub fn fetch_all(&self, remote: &str) -> Result<(), String> {
        let Some(repo) = &self.repo else {
            return Ok(());
        };
        let spec = format!("+{}:{}", self.remote_branch("*"), self.fetched_ref("*"));
        repo.fetch(remote, &[spec])
            .map_err(|e| format!("cannot fetch the run's branches from `{remote}`: {e}"))
    }

    /// Pushes the run's merged result to `remote` (as `baton/RUN/result`).
    pub fn publish_result(&self, remote: &str) -> Result<(), String> {
        let Some(repo) = &self.repo else {
            return Ok(());
        };
        let branch = self.branch("result");
        let Ok(Some(_)) = repo.branch_commit(&branch) else {
            return Ok(());
        };
        let spec = format!("+refs/heads/{branch}:refs/heads/{branch}");
        repo.push(remote, &[spec])
            .map_err(|e| format!("cannot push the run's result to `{remote}`: {e}"))
    }
}
