use std::path::{Path, PathBuf};

use baton_model::{RunId, TaskId};

/// Where a run keeps its files under the state directory (`.baton/`).
///
/// ```text
/// .baton/runs/RUN/logs/TASK.ATTEMPT.log     everything an attempt printed
/// .baton/runs/RUN/handoff/TASK.json         what a task's predecessors handed it
/// .baton/runs/RUN/out/TASK.ATTEMPT.json     structured output a task may write ($BATON_OUTPUT)
/// ```
#[derive(Debug, Clone)]
pub struct RunDirs {
    pub run: PathBuf,
    pub logs: PathBuf,
    pub handoff: PathBuf,
    pub out: PathBuf,
}

impl RunDirs {
    pub fn new(state_dir: &Path, run: &RunId) -> Self {
        let run = state_dir.join("runs").join(run.as_str());
        Self {
            logs: run.join("logs"),
            handoff: run.join("handoff"),
            out: run.join("out"),
            run,
        }
    }

    /// Creates the directories, private to the user.
    pub fn create(&self) -> std::io::Result<()> {
        for dir in [&self.logs, &self.handoff, &self.out] {
            create_private_dir(dir)?;
        }
        Ok(())
    }

    pub fn log(&self, task: &TaskId, attempt: u32) -> PathBuf {
        self.logs.join(format!("{task}.{attempt}.log"))
    }

    pub fn handoff(&self, task: &TaskId) -> PathBuf {
        self.handoff.join(format!("{task}.json"))
    }

    pub fn structured_output(&self, task: &TaskId, attempt: u32) -> PathBuf {
        self.out.join(format!("{task}.{attempt}.json"))
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}
