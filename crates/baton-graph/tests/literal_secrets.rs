//! The literal-secret check of graph files, over two corpora: ordinary commands that must
//! load (shell code, placeholders, diagnostics that name a secret without holding one), and
//! real values that must be refused (issue 14, item 12; red team 2026-12-01, §15).

use std::path::Path;

use baton_graph::load_str;

/// A graph whose one task runs `command`, and one whose task's `env` sets `NAME = value`.
fn with_run(command: &str) -> String {
    format!("[[task]]\nid = \"a\"\nrun = '''{command}'''\n")
}

fn with_env(name: &str, value: &str) -> String {
    format!("[[task]]\nid = \"a\"\nrun = \"true\"\nenv = {{ {name} = '{value}' }}\n")
}

/// Commands of ordinary graphs. Each was refused once as holding a literal secret.
const ORDINARY: &[&str] = &[
    "grep -rn 'password=' src/",
    "grep -rn \"password=\" src/ | wc -l",
    "test -n \"$PASSWORD\" || echo 'password: missing'",
    "echo 'Authorization: required'",
    "echo passwd: /etc/passwd",
    "echo \"password = input('pw: ')\"",
    "python -c \"password = getpass.getpass('pw: ')\"",
    "printf 'password=\"'; head -c 12 /dev/urandom | base64",
    "sed -i 's/^password=.*/password=changeme/' config.ini",
    "echo api_key=placeholder_for_docs >> .env.example",
    "echo 'token: missing, set GITHUB_TOKEN' >&2",
    "echo \"secret: $(cat secret.txt)\"",
    "mysql --password=\"$DB_PASSWORD\" -e 'select 1'",
    "curl -H \"Authorization: Bearer $TOKEN\" https://api.example.com",
    "echo 'Authorization: see the docs'",
    "grep -q 'api_key: ' settings.yaml",
    "awk -F'password=' '{print $2}' creds.txt | wc -c",
    "echo password: ${DB_PASSWORD:?set it}",
    "cargo test -- --test-threads=1 auth::token",
    "echo 'secret_key = os.environ[\"SECRET_KEY\"]' >> settings.py",
    "echo \"password: <your password>\"",
    "echo password=changeme",
];

/// Real values, in commands and in `env`.
const SECRETS: &[&str] = &[
    "mysql --password=hunter2hunter2 -e 'select 1'",
    "echo 'password: Tr0ub4dor&3'",
    "export DB_PASSWORD=s3cr3t-v4lue",
    "curl -H 'Authorization: Bearer abcdef0123456789abcdef' https://api",
    "psql postgres://app:s3cretpw9@db/app",
    "echo api_key=9f8e7d6c5b4a3210",
    "echo \"token: AbCdEf0123456789\"",
    "echo password=hunter2",
    "echo 'secret: x9!Qw2#zL'",
    // A secret inside what is taken for code.
    "printf 'password=\"'; curl -H 'x: ghp_aB3dE5gH7jK9mN1pQ3sTaB3dE5gH7jK9mN1pQ3sT' https://api",
];

fn loads(text: &str) -> Result<(), String> {
    load_str(Path::new("g.toml"), text)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn ordinary_commands_load() {
    let refused: Vec<String> = ORDINARY
        .iter()
        .filter_map(|command| {
            loads(&with_run(command))
                .err()
                .map(|e| format!("{command}\n{e}"))
        })
        .collect();
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n\n"));
}

#[test]
fn real_values_are_refused() {
    for command in SECRETS {
        let error = loads(&with_run(command)).expect_err(command);
        assert!(
            error.contains("holds a literal secret"),
            "{command}: {error}"
        );
    }
    for (name, value) in [
        ("DB_PASSWORD", "hunter2hunter2"),
        ("DB_PASSWORD", "correcthorsebatterystaple"),
        ("API_TOKEN", "AbCdEf0123456789"),
        ("SECRET", "s3cr3t"),
    ] {
        let error = loads(&with_env(name, value)).expect_err(value);
        assert!(error.contains("literal secret"), "{name}: {error}");
    }
    // Placeholders and references in `env` load.
    for (name, value) in [
        ("DB_PASSWORD", "${DB_PASSWORD}"),
        ("DB_PASSWORD", "$DB_PASS"),
        ("API_TOKEN", "<token>"),
    ] {
        loads(&with_env(name, value)).unwrap_or_else(|e| panic!("{name}={value}: {e}"));
    }
}
