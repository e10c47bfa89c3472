//! Ends on disk before they are sent: a dropped connection loses no completion.

use std::io::Write;
use std::path::PathBuf;

use baton_model::RunId;
use baton_store::AttemptKey;

/// Ends written to disk before they are sent, so that one the store did not take is sent
/// again (and one this process dies holding is at least on disk, for a person to see).
///
/// An entry is written beside its final name and renamed into place: the heartbeat that sends
/// entries again reads them while attempts end on other threads, and must never find one half
/// written (an end cut short is no end the coordinator can read: the task would fail for it).
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
        let file = self.file(key);
        // Not `.json`: `pending` does not see it until it is whole.
        let partial = file.with_extension("json.partial");
        let written = std::fs::File::create(&partial)
            .and_then(|mut f| f.write_all(result.as_bytes()))
            .and_then(|()| std::fs::rename(&partial, &file));
        if written.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
    }

    pub(super) fn remove(&self, key: &AttemptKey) {
        let _ = std::fs::remove_file(self.file(key));
    }

    /// The ends waiting to be sent again, but for those of attempts `in_flight` says are still
    /// being delivered by the thread that ran them (it sends its end itself, and says how that
    /// went: sent from here as well, the first to arrive would make the other look refused).
    pub(super) fn pending(
        &self,
        in_flight: impl Fn(&AttemptKey) -> bool,
    ) -> Vec<(AttemptKey, String)> {
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
                let key = AttemptKey { run, task, attempt };
                if in_flight(&key) {
                    return None;
                }
                let result = std::fs::read_to_string(entry.path()).ok()?;
                Some((key, result))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(task: u32) -> AttemptKey {
        AttemptKey {
            run: RunId::new("20261202-010203-abcd".to_owned()).unwrap(),
            task,
            attempt: 1,
        }
    }

    #[test]
    fn an_entry_is_pending_once_whole_and_until_removed() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = Outbox::new(dir.path().join("w"));
        outbox.put(&key(3), r#"{"task":3}"#);
        assert_eq!(
            outbox.pending(|_| false),
            vec![(key(3), r#"{"task":3}"#.to_owned())]
        );
        // Nothing is left beside it.
        assert_eq!(std::fs::read_dir(dir.path().join("w")).unwrap().count(), 1);
        outbox.remove(&key(3));
        assert!(outbox.pending(|_| false).is_empty());
    }

    #[test]
    fn an_entry_being_written_is_not_pending() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = Outbox::new(dir.path().to_owned());
        // What `put` leaves while it writes: seen by no reader.
        let partial = outbox.file(&key(4)).with_extension("json.partial");
        std::fs::write(&partial, r#"{"ta"#).unwrap();
        assert!(outbox.pending(|_| false).is_empty());
    }

    #[test]
    fn an_attempt_still_being_delivered_is_not_sent_again() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = Outbox::new(dir.path().to_owned());
        outbox.put(&key(5), "{}");
        outbox.put(&key(6), "{}");
        let pending = outbox.pending(|k| k.task == 5);
        assert_eq!(pending, vec![(key(6), "{}".to_owned())]);
    }
}
