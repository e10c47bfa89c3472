//! Which environment variables hold secrets.

use std::ffi::OsStr;

/// Name segments (split at `_`, upper-cased) that make a variable a secret wherever they
/// stand: `GITHUB_TOKEN`, `DB_PASSWORD`, `AWS_SESSION_TOKEN`, `CI_JOB_JWT`.
const SEGMENTS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PASSPHRASE",
    "PAT",
    "APIKEY",
    "CREDENTIAL",
    "CREDENTIALS",
    "JWT",
];

/// The values of the variables in `env` that look like secrets, for
/// [`RedactorConfig::secret_values`](crate::RedactorConfig::secret_values).
///
/// A variable is a secret if its name is in `extra_names` (exactly, or by prefix for an entry
/// ending in `*`: `VAULT_*`), or, case-insensitively,
/// it has a `_`-separated segment in `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `PASS`,
/// `PASSPHRASE`, `PAT`, `APIKEY`, `CREDENTIAL(S)`, `JWT`, ends in `_KEY`
/// (`ANTHROPIC_API_KEY`, `AWS_SECRET_ACCESS_KEY`) or `_AUTH` (`NPM_AUTH`), or contains
/// `PASSWORD` (`PGPASSWORD`). Segments match whole, so `TOKENIZERS_PARALLELISM`,
/// `GIT_AUTHOR_NAME` and `SSH_AUTH_SOCK` are not secrets. Values shorter than [`MIN_SECRET_LEN`](crate::MIN_SECRET_LEN) are
/// left out (the redactor would ignore them anyway).
pub fn secret_env_values<N, V>(
    env: impl IntoIterator<Item = (N, V)>,
    extra_names: &[String],
) -> Vec<Vec<u8>>
where
    N: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    env.into_iter()
        .filter(|(name, value)| {
            let name = name.as_ref().to_string_lossy();
            value.as_ref().len() >= crate::MIN_SECRET_LEN
                && (extra_names.iter().any(|n| match n.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => *n == name,
                }) || is_secret_name(&name))
        })
        .map(|(_, value)| value.as_ref().as_encoded_bytes().to_vec())
        .collect()
}

/// Whether a variable of this name holds a secret, by the name alone.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.contains("PASSWORD")
        || upper == "KEY"
        || upper.ends_with("_KEY")
        || upper.ends_with("_AUTH")
        || upper.split('_').any(|segment| SEGMENTS.contains(&segment))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for name in [
            "GITHUB_TOKEN",
            "ANTHROPIC_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "DB_PASSWORD",
            "PGPASSWORD",
            "client_secret",
            "GITLAB_PAT",
            "NPM_AUTH",
            "SOME_CREDENTIALS",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "TOKENIZERS_PARALLELISM",
            "GIT_AUTHOR_NAME",
            "SSH_AUTH_SOCK",
            "AWS_ACCESS_KEY_ID",
            "KEYBOARD",
            "PWD",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn values() {
        let env = [
            ("GITHUB_TOKEN", "ghp_0123456789abcdef"),
            ("HOME", "/home/someone/long"),
            ("SHORT_TOKEN", "abc"),
            ("MY_VAR", "listed-explicitly"),
            ("VAULT_ADDR_URL", "https://vault.internal:8200"),
            ("VAULTED", "not-under-the-prefix"),
        ];
        let values = secret_env_values(env, &["MY_VAR".to_owned(), "VAULT_*".to_owned()]);
        assert_eq!(
            values,
            vec![
                b"ghp_0123456789abcdef".to_vec(),
                b"listed-explicitly".to_vec(),
                b"https://vault.internal:8200".to_vec()
            ]
        );
    }
}
