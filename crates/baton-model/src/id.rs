use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest task id accepted. Ids become file names and git branch components.
const MAX_TASK_ID_LEN: usize = 100;

/// Why a string is not a valid identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("id is empty")]
    Empty,
    #[error("id is longer than {MAX_TASK_ID_LEN} characters")]
    TooLong,
    #[error("id must start with a letter or digit")]
    BadStart,
    #[error("id contains `{0}`; use letters, digits, `_`, `-` and single dots")]
    BadChar(char),
    #[error("id contains `..` or ends with `.` or `.lock`")]
    BadDots,
}

/// A validated identifier type: both kinds of id become parts of file paths and git branch
/// names, so both follow the same rules (see [`validate`]).
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn new(s: impl Into<String>) -> Result<Self, IdError> {
                let s = s.into();
                validate(&s)?;
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
    /// branch names (`baton/RUN/TASK`): only ASCII letters, digits, `_`, `-` and non-consecutive
    /// dots, starting with a letter or digit, never ending in `.` or `.lock`.
    TaskId
);

id_type!(
    /// The id of one run: sortable by start time (`YYYYMMDD-HHMMSS-xxxx`), usable as a file name.
    RunId
);

/// The rules both kinds of id follow.
fn validate(s: &str) -> Result<(), IdError> {
    let first = s.chars().next().ok_or(IdError::Empty)?;
    if s.len() > MAX_TASK_ID_LEN {
        return Err(IdError::TooLong);
    }
    if !first.is_ascii_alphanumeric() {
        return Err(IdError::BadStart);
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(IdError::BadChar(c));
    }
    if s.contains("..") || s.ends_with('.') || s.ends_with(".lock") {
        return Err(IdError::BadDots);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_ids() {
        for ok in ["a", "build-api", "db_schema", "v1.2", "X9"] {
            assert!(TaskId::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_ids_that_could_escape_a_path_or_break_a_branch() {
        assert_eq!(TaskId::new(""), Err(IdError::Empty));
        assert_eq!(TaskId::new(".."), Err(IdError::BadStart));
        assert_eq!(TaskId::new("-rf"), Err(IdError::BadStart));
        assert_eq!(TaskId::new("a/b"), Err(IdError::BadChar('/')));
        assert_eq!(TaskId::new("a b"), Err(IdError::BadChar(' ')));
        assert_eq!(TaskId::new("a..b"), Err(IdError::BadDots));
        assert_eq!(TaskId::new("x.lock"), Err(IdError::BadDots));
        assert_eq!(TaskId::new("é"), Err(IdError::BadStart));
        assert_eq!(TaskId::new("a".repeat(101)), Err(IdError::TooLong));
    }

    #[test]
    fn deserializing_validates() {
        assert!(serde_json::from_str::<TaskId>("\"a/b\"").is_err());
        assert_eq!(
            serde_json::from_str::<TaskId>("\"ok\"").unwrap().as_str(),
            "ok"
        );
    }
}
