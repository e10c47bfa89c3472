//! Which repository a run belongs to: where a run submitted for workers came from, and
//! whether a process in another repository may work on it.

use std::path::Path;

use baton_graph::Graph;
use baton_workspace::Repo;

/// Where a run submitted for workers from `root` comes from (`baton run --detach`): the
/// repository and the commit its base names there. `None` outside a repository, before its
/// first commit, and for `base = "working-tree"` (a snapshot of this checkout, taken by the
/// coordinator where it runs).
pub fn origin_of(graph: &Graph, root: &Path) -> Option<baton_graph::Origin> {
    let asked = graph.run_settings().base.as_deref();
    if asked == Some(super::WORKING_TREE) {
        return None;
    }
    let repo = Repo::discover(root).ok()?;
    Some(baton_graph::Origin {
        base: repo.resolve(asked.unwrap_or("HEAD")).ok()?,
        repository: repo.git_dir().ok()?.to_owned(),
    })
}

/// Whether this process, in the repository at `root`, may work on a run of `graph`: a run
/// submitted from another repository is refused unless it shares its branches through a
/// `[run] remote`, since whatever it did here would land where the submitter cannot diff or
/// apply it. The refusal says what to do.
pub fn check_origin(graph: &Graph, root: &Path) -> Result<(), String> {
    let settings = graph.run_settings();
    let Some(origin) = settings
        .origin
        .as_ref()
        .filter(|_| settings.remote.is_none())
    else {
        return Ok(());
    };
    let here = Repo::discover(root).ok();
    let here_dir = here.as_ref().and_then(|repo| repo.git_dir().ok());
    let same = |a: &str, b: &str| {
        a == b
            || std::fs::canonicalize(a)
                .ok()
                .zip(std::fs::canonicalize(b).ok())
                .is_some_and(|(a, b)| a == b)
    };
    if here_dir.is_some_and(|dir| same(dir, &origin.repository)) {
        return Ok(());
    }
    Err(format!(
        "the run was submitted from the repository at {}, and this worker works in {}: what it \
         did here would be where the submitter cannot diff or apply it. Run the worker in that \
         repository, or give the run a `[run] remote` that every worker fetches from and \
         pushes to",
        origin.repository,
        here_dir.map_or_else(
            || format!("{} (no repository)", root.display()),
            str::to_owned
        )
    ))
}
