//! Completion of what only the store knows (clap_complete's engine, asked by the shell as
//! `COMPLETE=bash baton -- WORDS`): run ids, newest first, and the task ids of the run named
//! on the line (or of the latest run). A completer never fails loudly: a project with no
//! runs, or a store that cannot be read, completes nothing.

use std::ffi::OsStr;

use clap_complete::engine::CompletionCandidate;

use crate::commands::records;

/// Most runs offered.
const RUNS: u32 = 50;

/// Run ids that start with what is typed, newest first, each with its graph's name and state;
/// and `latest`.
pub(crate) fn runs(current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    let Ok(Some(store)) = records::open_if_recorded(None) else {
        return Vec::new();
    };
    let runs = store.runs(RUNS).unwrap_or_default();
    std::iter::once(CompletionCandidate::new("latest").help(Some("the newest run".into())))
        .chain(runs.into_iter().map(|run| {
            let state = records::effective_state(&run.run);
            CompletionCandidate::new(run.run.id.as_str()).help(Some(
                format!("{} · {}", run.run.name, state.as_str()).into(),
            ))
        }))
        .filter(|candidate| candidate.get_value().to_string_lossy().starts_with(&*typed))
        .collect()
}

/// The task ids that start with what is typed, of the run named on the command line (the
/// first word that names one), else of the latest run; each with its state.
pub(crate) fn tasks(current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    let Ok(Some(store)) = records::open_if_recorded(None) else {
        return Vec::new();
    };
    // The words of the line being completed, after clap_complete's `--`.
    let words: Vec<String> = std::env::args()
        .skip_while(|word| word != "--")
        .skip(2)
        .collect();
    let run = words
        .iter()
        .filter(|word| !word.starts_with('-') && *word != &*typed)
        .find_map(|word| records::resolve(&*store, Some(word)).ok())
        .or_else(|| records::resolve(&*store, None).ok());
    let Some(run) = run else {
        return Vec::new();
    };
    store
        .tasks(&run.id)
        .unwrap_or_default()
        .into_iter()
        .filter(|task| task.task.as_str().starts_with(&*typed))
        .map(|task| {
            CompletionCandidate::new(task.task.as_str())
                .help(Some(task.status.as_str().to_owned().into()))
        })
        .collect()
}
