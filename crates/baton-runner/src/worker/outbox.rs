//! Ends on disk before they are sent: a dropped connection loses no completion.

use std::path::PathBuf;

use baton_model::RunId;
use baton_store::AttemptKey;

/// Ends written to disk before they are sent, so that one the store did not take is sent
/// again (and one this process dies holding is at least on disk, for a person to see).
#[derive(Clone)]
pub(super) struct Outbox {
    dir: PathBuf,
}

impl Outbox {
    pub(super) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn file(&self, key: &AttemptKey) -> PathBuf {
        self.dir
            .join(format!("{}.{}.{}.json", key.run, key.task, key.attempt))
    }

    pub(super) fn put(&self, key: &AttemptKey, result: &str) {
        let _ = std::fs::create_dir_all(&self.dir);
        let _ = std::fs::write(self.file(key), result);
    }

    pub(super) fn remove(&self, key: &AttemptKey) {
        let _ = std::fs::remove_file(self.file(key));
    }

    pub(super) fn pending(&self) -> Vec<(AttemptKey, String)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let mut parts = name.strip_suffix(".json")?.rsplitn(3, '.');
                let attempt = parts.next()?.parse().ok()?;
                let task = parts.next()?.parse().ok()?;
                let run = RunId::new(parts.next()?.to_owned()).ok()?;
                let result = std::fs::read_to_string(entry.path()).ok()?;
                Some((AttemptKey { run, task, attempt }, result))
            })
            .collect()
    }
}
