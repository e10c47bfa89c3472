use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest task id accepted, in bytes of UTF-8 (100 ASCII characters, 33 of most CJK ones).
/// Ids become file names (with a suffix like `.12.check-3.log`, under the usual 255-byte limit
/// on a name) and git branch components.
const MAX_TASK_ID_LEN: usize = 100;

/// The rule, as errors and the README state it.
pub const TASK_ID_RULE: &str = "letters and digits of any script, `_`, `-` and single dots; \
    starting with a letter or digit, not ending in `.` or `.lock`, at most 100 bytes (UTF-8)";

/// Why a string is not a valid identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("id is empty")]
    Empty,
    #[error("id is {0} bytes long (UTF-8); at most {MAX_TASK_ID_LEN} are allowed")]
    TooLong(usize),
    #[error("id starts with `{0}`; it must start with a letter or digit (of any script)")]
    BadStart(char),
    #[error(
        "id contains `{}`; use letters and digits of any script, `_`, `-` and single dots",
        .0.escape_debug()
    )]
    BadChar(char),
    #[error("id contains `..` or ends with `.` or `.lock`")]
    BadDots,
}

/// A validated identifier type: both kinds of id become parts of file paths and git branch
/// names, so both follow the same rules (see [`validate`]).
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $validate:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn new(s: impl Into<String>) -> Result<Self, IdError> {
                let s = s.into();
                $validate(&s)?;
                Ok(Self(s))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, IdError> {
                Self::new(s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

id_type!(
    /// The id of a task inside one graph.
    ///
    /// Validated on construction because it becomes part of file paths (logs, worktrees) and git
    /// branch names (`baton/RUN/TASK`): only letters and digits (Unicode alphabetic and numeric
    /// characters, any script), `_`, `-` and non-consecutive dots, starting with a letter or
    /// digit, never ending in `.` or `.lock`, at most 100 bytes. Everything else git refuses in a
    /// branch name (space, `~^:?*[\`, control characters, `@{`) or a file name cannot hold
    /// (`/`, NUL) is none of these; nor are invisible format characters (bidi controls,
    /// zero-width joiners) or combining marks on their own.
    ///
    /// The subtasks a planner adds are named under it, `PLANNER/LOCAL` (`plan/api`, and
    /// `plan/api/db` for a planner among them): each segment follows the rule above, and where
    /// an id becomes a file or branch name, `/` is written `+` ([`TaskId::file_name`]), which no
    /// segment can hold, so that `plan`'s files and branch never contain `plan/api`'s.
    TaskId,
    validate_task
);

id_type!(
    /// The id of one run: sortable by start time (`YYYYMMDD-HHMMSS-xxxx`), usable as a file name.
    RunId,
    validate
);

impl TaskId {
    /// `local`, the id of a subtask as its planner wrote it, under `parent`: `parent/local`.
    pub fn nested(parent: &TaskId, local: &str) -> Result<Self, IdError> {
        validate(local)?;
        Self::new(format!("{parent}/{local}"))
    }

    /// The planner this id is nested under (`plan` for `plan/api`), if any.
    pub fn parent(&self) -> Option<&str> {
        self.0.rsplit_once('/').map(|(parent, _)| parent)
    }

    /// The id as its planner wrote it: the last segment.
    pub fn local(&self) -> &str {
        self.0.rsplit_once('/').map_or(&self.0, |(_, local)| local)
    }

    /// Whether a planner added it (it has a `/`).
    pub fn is_nested(&self) -> bool {
        self.0.contains('/')
    }

    /// The id as a part of a file or branch name: `/` written `+`.
    pub fn file_name(&self) -> std::borrow::Cow<'_, str> {
        if self.is_nested() {
            std::borrow::Cow::Owned(self.0.replace('/', "+"))
        } else {
            std::borrow::Cow::Borrowed(&self.0)
        }
    }
}

/// A letter or digit of any script: alphabetic or numeric in Unicode (`é`, `日`, `٣`). Never
/// ASCII punctuation, space, a control or format character: nothing git refuses in a branch
/// name, nothing a file name cannot hold.
pub fn is_id_letter(c: char) -> bool {
    c.is_alphanumeric()
}

/// A task id: segments separated by single `/`, each following [`validate`], at most
/// [`MAX_TASK_ID_LEN`] bytes in all.
fn validate_task(s: &str) -> Result<(), IdError> {
    if s.len() > MAX_TASK_ID_LEN {
        return Err(IdError::TooLong(s.len()));
    }
    // Most ids are one segment of ASCII: decided byte by byte, without decoding characters or
    // splitting (ids are checked by the hundred thousand: a graph's, a run's read back).
    if is_plain_ascii(s) {
        return Ok(());
    }
    s.split('/').try_for_each(validate)
}

/// Whether `s` is one segment of ASCII letters, digits, `_`, `-` and `.`, starting with a
/// letter or digit, without `..` and not ending in `.` or `.lock`: an id [`validate`] accepts.
/// `false` says nothing: the full check decides.
fn is_plain_ascii(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !bytes.windows(2).any(|pair| pair == b"..")
        && !s.ends_with('.')
        && !s.ends_with(".lock")
}

/// The rules both kinds of id follow (a task id, segment by segment).
fn validate(s: &str) -> Result<(), IdError> {
    let first = s.chars().next().ok_or(IdError::Empty)?;
    if s.len() > MAX_TASK_ID_LEN {
        return Err(IdError::TooLong(s.len()));
    }
    if !first.is_alphanumeric() {
        return Err(IdError::BadStart(first));
    }
    if let Some(c) = s
        .chars()
        .find(|&c| !(is_id_letter(c) || matches!(c, '_' | '-' | '.')))
    {
        return Err(IdError::BadChar(c));
    }
    // Not `s.contains("..")`: setting up its substring search cost more than the rest of the
    // check on a short id, and ids are checked by the hundred thousand (a graph's, a run's
    // read back).
    if s.as_bytes().windows(2).any(|pair| pair == b"..") || s.ends_with('.') || s.ends_with(".lock")
    {
        return Err(IdError::BadDots);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-by-byte check answers as the full one wherever it answers: every id of up to
    /// four characters over letters, digits, the punctuation ids may hold and some they may not.
    #[test]
    fn the_plain_ascii_check_accepts_only_what_the_full_one_does() {
        let alphabet = [
            'a', 'Z', '0', '_', '-', '.', '/', 'é', ' ', 'k', 'l', 'o', 'c',
        ];
        let mut ids = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = ids
                .iter()
                .flat_map(|id| alphabet.iter().map(move |c| format!("{id}{c}")))
                .collect();
            ids.extend(longer);
        }
        ids.extend(
            [
                "a.lock",
                "ab.lock",
                "x/a.lock",
                "t12345",
                "build-api",
                "v1.2",
            ]
            .map(String::from),
        );
        let mut plain = 0;
        for id in &ids {
            let full = id.split('/').try_for_each(validate);
            if is_plain_ascii(id) {
                plain += 1;
                assert_eq!(full, Ok(()), "{id:?}");
            }
            assert_eq!(validate_task(id), full, "{id:?}");
        }
        assert!(plain > 1_000, "{plain}");
    }

    #[test]
    fn accepts_ordinary_ids() {
        for ok in [
            "a",
            "build-api",
            "db_schema",
            "v1.2",
            "X9",
            "日本語-タスク",
            "café.v2",
            "Ωmega_٣",
            "é",
        ] {
            assert!(TaskId::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_ids_that_could_escape_a_path_or_break_a_branch() {
        assert_eq!(TaskId::new(""), Err(IdError::Empty));
        assert_eq!(TaskId::new(".."), Err(IdError::BadStart('.')));
        assert_eq!(TaskId::new("-rf"), Err(IdError::BadStart('-')));
        assert_eq!(TaskId::new("_a"), Err(IdError::BadStart('_')));
        assert_eq!(TaskId::new("a/"), Err(IdError::Empty));
        assert_eq!(TaskId::new("/a"), Err(IdError::Empty));
        assert_eq!(TaskId::new("a//b"), Err(IdError::Empty));
        assert_eq!(TaskId::new("a/-b"), Err(IdError::BadStart('-')));
        assert_eq!(TaskId::new("a/b."), Err(IdError::BadDots));
        assert_eq!(TaskId::new("a/b.lock"), Err(IdError::BadDots));
        assert_eq!(RunId::new("a/b"), Err(IdError::BadChar('/')));
        assert_eq!(TaskId::new("a b"), Err(IdError::BadChar(' ')));
        assert_eq!(TaskId::new("a..b"), Err(IdError::BadDots));
        assert_eq!(TaskId::new("x.lock"), Err(IdError::BadDots));
        assert_eq!(TaskId::new("a".repeat(101)), Err(IdError::TooLong(101)));
        // 34 three-byte characters are 102 bytes.
        assert_eq!(TaskId::new("日".repeat(34)), Err(IdError::TooLong(102)));
        assert!(TaskId::new("日".repeat(33)).is_ok());
        // What git refuses in a branch name, and what is not a letter though it is not ASCII.
        for (id, bad) in [
            ("a~1", '~'),
            ("a^", '^'),
            ("a:b", ':'),
            ("a?", '?'),
            ("a*", '*'),
            ("a[b", '['),
            ("a\\b", '\\'),
            ("a@{1}", '@'),
            ("a\u{7f}", '\u{7f}'),
            ("a\tb", '\t'),
            ("a\0b", '\0'),
            ("a\u{a0}b", '\u{a0}'),
            ("a\u{200d}b", '\u{200d}'),
            ("a\u{202e}b", '\u{202e}'),
            ("e\u{301}", '\u{301}'),
            ("a。b", '。'),
            ("a／b", '／'),
        ] {
            assert_eq!(TaskId::new(id), Err(IdError::BadChar(bad)), "{id:?}");
        }
        assert_eq!(TaskId::new("\u{301}e"), Err(IdError::BadStart('\u{301}')));
        assert_eq!(
            IdError::BadChar('\u{202e}').to_string(),
            "id contains `\\u{202e}`; use letters and digits of any script, `_`, `-` and single dots"
        );
    }

    #[test]
    fn nested_ids_name_their_planner_and_never_share_its_files() {
        let plan = TaskId::new("plan").unwrap();
        let api = TaskId::nested(&plan, "api").unwrap();
        assert_eq!(api.as_str(), "plan/api");
        assert_eq!(api.parent(), Some("plan"));
        assert_eq!(api.local(), "api");
        assert_eq!(api.file_name(), "plan+api");
        let db = TaskId::nested(&api, "db").unwrap();
        assert_eq!((db.parent(), db.local()), (Some("plan/api"), "db"));
        assert_eq!(db.file_name(), "plan+api+db");
        assert_eq!(plan.file_name(), "plan");
        assert_eq!(plan.parent(), None);
        assert_eq!(TaskId::nested(&plan, "a/b"), Err(IdError::BadChar('/')));
        assert_eq!(
            TaskId::nested(&plan, &"a".repeat(96)),
            Err(IdError::TooLong(101))
        );
    }

    #[test]
    fn deserializing_validates() {
        assert!(serde_json::from_str::<TaskId>("\"a//b\"").is_err());
        assert!(serde_json::from_str::<TaskId>("\"a/b\"").is_ok());
        assert_eq!(
            serde_json::from_str::<TaskId>("\"ok\"").unwrap().as_str(),
            "ok"
        );
    }
}
