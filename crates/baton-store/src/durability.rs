use crate::StoreError;

/// How hard a commit tries to reach the disk.
///
/// In WAL mode, `Normal` (SQLite's `synchronous=NORMAL`) fsyncs only at checkpoints: a committed
/// transaction survives the process crashing or being killed, because it is already in the WAL
/// file, which the operating system keeps; it can be lost only if the machine itself loses power
/// or the kernel crashes before the next checkpoint. `Full` fsyncs the WAL at every commit, which
/// survives power loss too but costs a disk flush per dispatcher turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    #[default]
    Normal,
    Full,
}

impl Durability {
    /// Reads `BATON_SYNC` (`normal` or `full`); `Normal` when it is unset or empty.
    pub fn from_env() -> Result<Self, StoreError> {
        match std::env::var("BATON_SYNC") {
            Ok(value) => Self::parse(&value),
            Err(_) => Ok(Self::Normal),
        }
    }

    fn parse(value: &str) -> Result<Self, StoreError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "normal" => Ok(Self::Normal),
            "full" => Ok(Self::Full),
            _ => Err(StoreError::BadSyncSetting(value.to_owned())),
        }
    }

    pub(crate) fn pragma_value(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Full => "FULL",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_two_settings_and_rejects_the_rest() {
        assert_eq!(Durability::parse("").unwrap(), Durability::Normal);
        assert_eq!(Durability::parse("normal").unwrap(), Durability::Normal);
        assert_eq!(Durability::parse("FULL").unwrap(), Durability::Full);
        assert!(matches!(
            Durability::parse("extra"),
            Err(StoreError::BadSyncSetting(v)) if v == "extra"
        ));
    }
}
