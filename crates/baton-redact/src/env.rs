//! Which environment variables hold secrets.

use std::ffi::OsStr;

/// Name segments (split at `_`, upper-cased) that make a variable a secret wherever they
/// stand: `GITHUB_TOKEN`, `DB_PASSWORD`, `AWS_SESSION_TOKEN`, `CI_JOB_JWT`, `MYSQL_PWD`,
/// `LDAP_BIND_PW`.
const SEGMENTS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PASSPHRASE",
    "PWD",
    "PW",
    "PAT",
    "APIKEY",
    "CREDENTIAL",
    "CREDENTIALS",
    "JWT",
    "DSN",
    "COOKIE",
];

/// Whole names that hold a password by convention but have no segment above.
const NAMES: &[&str] = &[
    // sshpass -e
    "SSHPASS",
    // Docker's registry credentials for GitLab runners (JSON with base64 `user:password`).
    "DOCKER_AUTH_CONFIG",
    // Bitwarden's CLI session key.
    "BW_SESSION",
];

/// Names with a secret segment that are not secrets: the shell's working directories.
const NOT_SECRET: &[&str] = &["PWD", "OLDPWD"];

/// The values of the variables in `env` that look like secrets, for
/// [`RedactorConfig::secret_values`](crate::RedactorConfig::secret_values).
///
/// A variable is a secret if its name is in `extra_names` (exactly, or by prefix for an entry
/// ending in `*`: `VAULT_*`), or [`is_secret_name`] says so. Besides its whole value, each line
/// of a multi-line value is a secret on its own (a key or a certificate printed a line at a
/// time; not a key block's `-----BEGIN`/`-----END` lines), and so is the password of a URL
/// held by any variable (`DATABASE_URL=postgres://app:pw@db/app`: `pw`, as written and
/// percent-decoded). Values shorter than [`MIN_SECRET_LEN`](crate::MIN_SECRET_LEN) are left
/// out (the redactor would ignore them anyway).
pub fn secret_env_values<N, V>(
    env: impl IntoIterator<Item = (N, V)>,
    extra_names: &[String],
) -> Vec<Vec<u8>>
where
    N: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let mut values = Vec::new();
    for (name, value) in env {
        let name = name.as_ref().to_string_lossy();
        let value = value.as_ref().as_encoded_bytes();
        let secret = extra_names.iter().any(|n| match n.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => *n == name,
        }) || is_secret_name(&name);
        if secret {
            values.push(value.to_vec());
            if value.contains(&b'\n') {
                values.extend(
                    value
                        .split(|&b| b == b'\n')
                        .map(<[u8]>::trim_ascii)
                        .filter(|line| !line.starts_with(b"-----"))
                        .map(<[u8]>::to_vec),
                );
            }
        }
        values.extend(url_passwords(value));
    }
    values.retain(|v| v.len() >= crate::MIN_SECRET_LEN);
    values
}

/// The passwords of the URLs in `value` (`scheme://user:password@host`), as written and, if
/// it differs, percent-decoded.
fn url_passwords(value: &[u8]) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    let mut rest = value;
    while let Some(at) = find(rest, b"://") {
        rest = &rest[at + 3..];
        let authority_end = rest
            .iter()
            .position(|&b| matches!(b, b'/' | b'?' | b'#') || b.is_ascii_whitespace())
            .unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        let Some(at_sign) = authority.iter().rposition(|&b| b == b'@') else {
            continue;
        };
        let userinfo = &authority[..at_sign];
        if let Some(colon) = userinfo.iter().position(|&b| b == b':') {
            let password = &userinfo[colon + 1..];
            found.push(password.to_vec());
            let decoded = percent_decoded(password);
            if decoded != password {
                found.push(decoded);
            }
        }
        rest = &rest[authority_end..];
    }
    found
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn percent_decoded(text: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        match (
            text[i],
            text.get(i + 1).copied().and_then(hex),
            text.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Whether a variable of this name holds a secret, by the name alone: case-insensitively, it
/// has a `_`-separated segment in `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `PASS`,
/// `PASSPHRASE`, `PWD` (`MYSQL_PWD`; not `PWD` or `OLDPWD` themselves), `PW`, `PAT`,
/// `APIKEY`, `CREDENTIAL(S)`, `JWT`, `DSN`, `COOKIE`; ends in `_KEY` (`ANTHROPIC_API_KEY`,
/// `AWS_SECRET_ACCESS_KEY`) or `_AUTH` (`NPM_AUTH`, `REDISCLI_AUTH`); contains `PASSWORD`,
/// `PASSWD` or `PASSPHRASE` (`PGPASSWORD`, `SQLCMDPASSWORD`, `SMBPASSWD`); or is one of
/// `SSHPASS`, `DOCKER_AUTH_CONFIG`, `BW_SESSION`. Segments match whole, so
/// `TOKENIZERS_PARALLELISM`, `GIT_AUTHOR_NAME` and `SSH_AUTH_SOCK` are not secrets.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if NOT_SECRET.contains(&upper.as_str()) {
        return false;
    }
    ["PASSWORD", "PASSWD", "PASSPHRASE"]
        .iter()
        .any(|word| upper.contains(word))
        || NAMES.contains(&upper.as_str())
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
            "MYSQL_PWD",
            "SSHPASS",
            "REDIS_PASSWORD",
            "REDISCLI_AUTH",
            "RABBITMQ_DEFAULT_PASS",
            "SQLCMDPASSWORD",
            "SMBPASSWD",
            "BORG_PASSPHRASE",
            "LDAP_BIND_PW",
            "ORACLE_PWD",
            "SENTRY_DSN",
            "DOCKER_AUTH_CONFIG",
            "BW_SESSION",
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
            "OLDPWD",
            "GIT_ASKPASS",
            "PGPASSFILE",
            "COMPASS_HOME",
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

    #[test]
    fn lines_of_a_multi_line_value_and_url_passwords() {
        let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\r\n  QyNTUxOQAAACDk7\nab\n-----END OPENSSH PRIVATE KEY-----\n";
        let env = [
            ("DEPLOY_KEY", key),
            ("DATABASE_URL", "postgres://app:s3cret%2Fpw@db:5432/app"),
            (
                "MIRROR",
                "see https://mirror.example.com/x and ftp://anon:anonymous@ftp.example.com",
            ),
        ];
        let values = secret_env_values(env, &[]);
        assert_eq!(
            values,
            vec![
                key.as_bytes().to_vec(),
                b"b3BlbnNzaC1rZXktdjEAAAAA".to_vec(),
                b"QyNTUxOQAAACDk7".to_vec(),
                b"s3cret%2Fpw".to_vec(),
                b"s3cret/pw".to_vec(),
                b"anonymous".to_vec(),
            ]
        );
    }
}
