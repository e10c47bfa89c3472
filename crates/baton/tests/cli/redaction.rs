//! No secret a task prints reaches anything baton stores or prints: the database, its WAL, the
//! logs, the JSON result, the event log, `status`, `logs`, what is handed downstream.

use std::path::Path;

use crate::test::{Test, baton_in};

/// Fake but well-formed secrets of several kinds, built at run time so that this file holds no
/// key-shaped string. Each is written to `secrets/NAME` in the repository.
fn secrets() -> Vec<(&'static str, String)> {
    let alnum = |n: usize, seed: u64| -> String {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..n)
            .map(|_| {
                let c = rng.u8(0..62);
                char::from(match c {
                    0..=9 => b'0' + c,
                    10..=35 => b'a' + c - 10,
                    _ => b'A' + c - 36,
                })
            })
            .collect()
    };
    let upper = |n: usize, seed: u64| alnum(n, seed).to_uppercase();
    vec![
        ("github", format!("{}{}", "ghp_", alnum(36, 1))),
        ("aws", format!("{}{}", "AKIA", upper(16, 2))),
        (
            "slack",
            format!(
                "{}-{}-{}-{}",
                "xoxb",
                "1234567890",
                "0987654321",
                alnum(24, 3)
            ),
        ),
        ("anthropic", format!("{}{}", "sk-ant-api03-", alnum(80, 4))),
        ("bearer", format!("Authorization: Bearer {}", alnum(40, 5))),
        (
            "url",
            format!("https://deploy:{}@git.example.com/repo.git", alnum(20, 6)),
        ),
        ("assignment", format!("DB_PASSWORD={}", alnum(18, 7))),
    ]
}

/// The part of a secret that must never be seen: the secret itself, not its harmless prefix.
fn sensitive(name: &str, secret: &str) -> String {
    match name {
        "bearer" => secret
            .trim_start_matches("Authorization: Bearer ")
            .to_owned(),
        "url" => secret["https://deploy:".len()..secret.find('@').unwrap()].to_owned(),
        "assignment" => secret["DB_PASSWORD=".len()..].to_owned(),
        _ => secret.to_owned(),
    }
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Everything baton wrote or printed for the run: `out`'s stdout and stderr, what `baton`
/// says to each of `views` (each must succeed), and every file under `.baton/` that `keep`
/// lets through (pooled worktrees hold a checkout of the repository, as the user's does).
fn everything(
    out: &crate::test::Output,
    views: &[&[&str]],
    keep: impl Fn(&Path) -> bool,
) -> Vec<(String, Vec<u8>)> {
    let root = out.path().to_path_buf();
    let mut haystacks: Vec<(String, Vec<u8>)> = vec![
        ("run --json".into(), out.stdout.clone().into_bytes()),
        ("run stderr".into(), out.stderr.clone().into_bytes()),
    ];
    for args in views {
        let side = baton_in(&root, args);
        assert_eq!(side.code, Some(0), "{args:?}: {}", side.stderr);
        haystacks.push((args.join(" "), side.stdout.into_bytes()));
    }
    let mut files = Vec::new();
    files_under(&root.join(".baton"), &mut files);
    let pool = root.join(".baton/worktrees/.pool");
    files.retain(|file| !file.starts_with(&pool) && keep(file));
    assert!(!files.is_empty());
    for file in files {
        haystacks.push((file.display().to_string(), std::fs::read(&file).unwrap()));
    }
    haystacks
}

/// No needle in any haystack.
fn nowhere(haystacks: &[(String, Vec<u8>)], needles: &[&str]) {
    for (what, hay) in haystacks {
        for needle in needles {
            assert!(
                !hay.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "{needle} leaked into {what}"
            );
        }
    }
}

#[test]
fn secrets_printed_by_tasks_are_redacted_everywhere() {
    let env_secret = "v4lue-of-an-env-secret-9f8e7d6c";
    let mut test = Test::new().env("MY_SERVICE_TOKEN", env_secret);
    for (name, secret) in secrets() {
        test = test.file(&format!("secrets/{name}"), &secret);
    }
    let graph = r#"
[[task]]
id = "leaky"
run = '''
for f in secrets/*; do cat "$f"; echo; done
# Split across two writes, with a pause between them.
head -c 10 secrets/github; sleep 0.05; tail -c +11 secrets/github; echo
# On stderr, inside JSON.
printf '{"token": "%s"}\n' "$(cat secrets/aws)" >&2
# The environment's own secret.
echo "service token is $MY_SERVICE_TOKEN"
# Structured output.
printf '{"key": "%s", "note": "fine"}' "$(cat secrets/anthropic)" > "$BATON_OUTPUT"
'''

[[task]]
id = "downstream"
needs = ["leaky"]
run = '''
cat "$BATON_HANDOFF_FILE"
echo {{ needs.leaky.output }}
echo {{ needs.leaky.json.key }}
'''
"#;
    let out = test
        .graph("g.toml", graph)
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    let root = out.path().to_path_buf();
    assert_eq!(out.json_task("downstream")["state"], "succeeded");

    let files_before = {
        let mut files = Vec::new();
        files_under(&root.join(".baton"), &mut files);
        files
    };
    assert!(files_before.iter().any(|f| f.ends_with("leaky.1.log")));
    let haystacks = everything(
        &out,
        &[
            &["events", "latest", "--json"],
            &["status"],
            &["status", "--json"],
            &["logs", "latest", "leaky"],
            &["logs", "latest", "downstream"],
        ],
        |_| true,
    );
    let mut needles: Vec<(String, String)> = secrets()
        .into_iter()
        .map(|(name, secret)| (name.to_owned(), sensitive(name, &secret)))
        .collect();
    needles.push(("env".into(), env_secret.to_owned()));
    for (what, hay) in &haystacks {
        for (name, needle) in &needles {
            assert!(
                !hay.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "the {name} secret leaked into {what}"
            );
        }
    }
    // What the task said around the secrets did arrive.
    let log = String::from_utf8(
        baton_in(&root, &["logs", "latest", "leaky"])
            .stdout
            .into_bytes(),
    )
    .unwrap();
    assert!(log.contains("[REDACTED:"), "{log}");
    assert!(log.contains("service token is"), "{log}");
    assert_eq!(out.json_task("leaky")["state"], "succeeded");
}

#[test]
fn ordinary_output_comes_through_unchanged() {
    let text = "commit 3f786850e387550fdab836ed7e6dc881de23001b\n\
                id 123e4567-e89b-12d3-a456-426614174000\n\
                max_tokens: 4096, token count 17\n\
                color: #ff00aa; version 1.2.3-beta.4\n\
                aGVsbG8gd29ybGQsIHRoaXMgaXMgYmFzZTY0IGVuY29kZWQgZmlsZSBjb250ZW50Cg==\n";
    let out = Test::new()
        .file("plain.txt", text)
        .graph(
            "g.toml",
            "[[task]]\nid = \"plain\"\nrun = \"cat plain.txt\"\n",
        )
        .args(&["run", "g.toml"])
        .run()
        .status(0);
    let side = baton_in(out.path(), &["logs", "latest", "plain"]);
    assert_eq!(side.stdout, text);
}

/// A variable whose name does not look like a secret is redacted when the graph lists it in
/// `secret_env` (a name, or a prefix ending in `*`); one that is not listed comes through.
#[test]
fn values_of_variables_listed_in_secret_env_are_redacted() {
    let listed = "db7.internal:5432/orders-4f9a1c";
    let by_prefix = "role-8d2e6b0a93c1";
    let plain = "eu-west-3-plain-setting";
    let graph = r#"
[defaults]
secret_env = ["VAULT_*"]

[[task]]
id = "db"
pass_env = ["DATABASE_URL", "REGION_SETTING"]
secret_env = ["DATABASE_URL"]
env = { VAULT_ROLE = "${VAULT_ROLE}" }
run = '''
echo "connecting to $DATABASE_URL"
echo "role $VAULT_ROLE" >&2
echo "region $REGION_SETTING"
'''
"#;
    let out = Test::new()
        .env("DATABASE_URL", listed)
        .env("VAULT_ROLE", by_prefix)
        .env("REGION_SETTING", plain)
        .graph("g.toml", graph)
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    let root = out.path().to_path_buf();
    let logs = baton_in(&root, &["logs", "latest", "db"]);
    let mut haystacks = vec![
        ("run --json".to_owned(), out.stdout.clone().into_bytes()),
        ("logs".to_owned(), logs.stdout.clone().into_bytes()),
    ];
    let mut files = Vec::new();
    files_under(&root.join(".baton"), &mut files);
    for file in files {
        haystacks.push((file.display().to_string(), std::fs::read(&file).unwrap()));
    }
    for (what, hay) in &haystacks {
        for needle in [listed, by_prefix] {
            assert!(
                !hay.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "{needle} leaked into {what}"
            );
        }
    }
    let output = out.json_task("db")["output"].as_str().unwrap().to_owned();
    assert_eq!(
        output,
        format!("connecting to [REDACTED:secret-value]\nregion {plain}")
    );
}

/// Red team 2026-12-01, §3 and §4, and §7 (issue 14, items 8, 9 and 10): secrets hidden by
/// JSON escapes in `$BATON_OUTPUT` and in an agent's stream, and secrets in the names of
/// files a task creates, reach neither the database, nor what is shown, nor a dependent; an
/// agent that printed a password in a tool result and lingers after its result succeeds.
#[test]
fn secrets_behind_json_escapes_and_in_file_names_are_redacted() {
    let token = format!("ghp_{}", "aB3dE5gH7jK9mN1pQ3sT".repeat(2));
    // `ghp_\u0041…`: the token once decoded.
    let escaped = format!("ghp_\\u0041{}", &token[5..]);
    let decoded = format!("ghp_A{}", &token[5..]);
    let slack = "T11111111/B22222222/YYYYYYYYYYYYYYYYYYYYYYYY";
    let fake_claude = format!(
        r#"#!/bin/sh
echo '{{"type":"system","subtype":"init","session_id":"s-1","model":"claude-sonnet-4-5","tools":["Bash"]}}'
echo '{{"type":"user","message":{{"content":[{{"type":"tool_result","content":"DB_PASSWORD=hunter2 from env"}}]}}}}'
echo '{{"type":"result","subtype":"success","is_error":false,"result":"done with {escaped}","num_turns":1,"total_cost_usd":0.01,"usage":{{"input_tokens":1,"output_tokens":1}}}}'
sleep 30
"#
    );
    let test = Test::new().file("fake-claude.sh", fake_claude);
    let claude = test.path().join("fake-claude.sh");
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = format!(
        "[engines.fake]\nkind = \"command\"\ncommand = \"{}\"\noutput = \"claude\"\n",
        claude.display()
    );
    // The secrets are in files the tasks read: a graph file that held one would be refused.
    let json = format!(
        r#"{{"hook":"https:\/\/hooks.slack.com\/services\/{}","tok":"{escaped}","{escaped}":1}}"#,
        slack.replace('/', "\\/")
    );
    let graph = r#"
[[task]]
id = "json"
run = 'cat secrets/out.json > "$BATON_OUTPUT"'

[[task]]
id = "files"
workspace = "worktree"
scope = ["only/**"]
run = 'touch "$(cat secrets/token).txt"'

[[task]]
id = "agent"
engine = "fake"
prompt = "go"
idle_timeout = "8s"

[[task]]
id = "downstream"
needs = ["json", "files", "agent"]
run = '''cat "$BATON_HANDOFF_FILE" > copy.json; echo {{ needs.json.json.tok }} {{ needs.agent.output }}'''
"#;
    let test = test
        .file("baton.toml", config)
        .file("secrets/out.json", json)
        .file("secrets/token", &token)
        .graph("graph.toml", graph);
    crate::workspaces::git(test.path(), &["add", "-A"]);
    crate::workspaces::git(test.path(), &["commit", "-qm", "the user's work"]);
    let started = std::time::Instant::now();
    let out = test.args(&["run", "graph.toml", "--json"]).run();
    let root = out.path().to_path_buf();
    // The agent's result was seen although a password came before it: reaped after it.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        out.json_task("agent")["state"],
        "succeeded",
        "{}",
        out.stdout
    );
    assert_eq!(out.json_task("json")["state"], "succeeded");
    assert_eq!(out.json_task("downstream")["state"], "succeeded");

    let mut haystacks = everything(
        &out,
        &[
            &["events", "latest", "--json"],
            &["events", "latest"],
            &["status"],
            &["status", "--json"],
            &["logs", "latest", "downstream"],
        ],
        |_| true,
    );
    haystacks.push((
        "copy.json".into(),
        std::fs::read(root.join("copy.json")).unwrap(),
    ));
    nowhere(&haystacks, &[&token[4..], &decoded[4..], slack, "hunter2"]);
    let status = baton_in(&root, &["status"]).stdout;
    assert!(status.contains("[REDACTED:github-token].txt"), "{status}");
    let copy = std::fs::read_to_string(root.join("copy.json")).unwrap();
    assert!(copy.contains("[REDACTED:slack-webhook]"), "{copy}");
}

/// A check's command is the graph file's: written with a secret's value in it, what the event
/// log records of it (and shows, and exports) has the value redacted, as its output does.
#[test]
fn a_secret_in_a_check_s_command_is_redacted_in_the_event_log() {
    let secret = "tok-5e1f0c2a9b7d";
    let graph =
        format!("[[task]]\nid = \"b\"\nrun = \"true\"\nverify = [\"echo {secret} > /dev/null\"]\n");
    let out = Test::new()
        .env("DEPLOY_TOKEN", secret)
        .env("BATON_SECRET_ENV", "DEPLOY_TOKEN")
        .graph("g.toml", &graph)
        .args(&["run", "g.toml"])
        .run()
        .status(0);
    let events = baton_in(out.path(), &["events", "latest", "--json"]);
    let checked = events
        .stdout
        .lines()
        .find(|l| l.contains("\"kind\":\"checked\""))
        .unwrap_or_else(|| panic!("{}", events.stdout));
    assert!(!checked.contains(secret), "{checked}");
    assert!(
        checked.contains("echo [REDACTED:secret-value] > /dev/null"),
        "{checked}"
    );
}

/// Red-team findings 6 and 7, end to end: secrets behind JSON escapes in an agent's activity
/// (a tool call's command), in a plan's answer (its `env`, its prompt), in ordinary stdout and
/// stderr (PHP's `json_encode` escapes `/`). Before, each was in the database, `events`,
/// `status` and the logs in clear, and `ghp_\u0041…` in a plan became an invalid escape that
/// failed the plan. Now none of them is anywhere baton writes, and the plan runs.
#[test]
fn secrets_behind_escapes_in_activity_plans_and_output_are_redacted_everywhere() {
    let fake_claude = r#"#!/bin/sh
echo '{"type":"system","subtype":"init","session_id":"s-1","model":"claude-sonnet-4-5","tools":["Bash"]}'
echo '{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","name":"Bash","input":{"command":"psql postgres:\/\/app:activitypw777@db\/x; echo \u0067hp_ESCACTIVITYabcdefghijklmnopqrstuvw12"}}]}}'
sleep 1
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","num_turns":1,"total_cost_usd":0.01,"usage":{"input_tokens":1,"output_tokens":1}}'
"#;
    let plan = r#"{"task":[{"id":"a","run":"echo tok=ghp_\u0041BCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 done","env":{"DBURL":"postgres:\/\/app:planpw98765@db\/x","K":"AKIA\u0049OSFODNN7EXAMPLE"}},{"id":"b","engine":"fake","prompt":"use sk-ant-api03-\u0041bcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-_abcdefghijklmnopqrstuvwx-AAAAAAAA"}]}"#;
    let test = Test::new()
        .file("fake-claude.sh", fake_claude)
        .file("secrets/plan.json", plan)
        .file(
            "secrets/out.json",
            r#"{"db":"postgres:\/\/app:stdoutpw4242@db\/x","hook":"https:\/\/hooks.slack.com\/services\/T11111111\/B22222222\/YYYYYYYYYYYYYYYYYYYYYYYY"}"#,
        )
        .file("secrets/err.json", r#"{"u":"postgres:\/\/app:shellpw321@db\/x"}"#);
    let root = test.path().canonicalize().unwrap();
    std::fs::set_permissions(
        root.join("fake-claude.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let config = format!(
        "[engines.fake]\nkind = \"command\"\ncommand = \"{root}/fake-claude.sh\"\noutput = \"claude\"\n\n\
         [engines.planner]\nkind = \"command\"\ncommand = \"cat\"\nargs = [\"{root}/secrets/plan.json\"]\n",
        root = root.display()
    );
    let graph = r#"
[[task]]
id = "agent"
engine = "fake"
prompt = "go"

[[task]]
id = "php"
run = 'cat secrets/out.json; cat secrets/err.json >&2'

[[task]]
id = "plan"
engine = "planner"
prompt = "plan"
expand = true

[[task]]
id = "downstream"
needs = ["php"]
run = 'echo {{ needs.php.output }}'
"#;
    let test = test.file("baton.toml", config).graph("graph.toml", graph);
    crate::workspaces::git(test.path(), &["add", "-A"]);
    crate::workspaces::git(test.path(), &["commit", "-qm", "the user's work"]);
    // The run exported as a trace too: the export is one more place a secret must not be.
    let (collector, exported) = crate::traces::collector();
    let out = test
        .args(&["run", "graph.toml", "--json", "--otlp", &collector])
        .run();
    for task in ["agent", "php", "plan", "plan/a", "plan/b", "downstream"] {
        assert_eq!(
            out.json_task(task)["state"],
            "succeeded",
            "{task}: {}",
            out.stdout
        );
    }
    let mut haystacks = everything(
        &out,
        &[
            &["events", "latest", "--json"],
            &["events", "latest"],
            &["status"],
            &["status", "--json"],
            &["logs", "latest", "php"],
            &["logs", "latest", "agent"],
            &["logs", "latest", "downstream"],
        ],
        // The secrets' own files, checked out in the worktrees, are the user's.
        |file| !file.to_string_lossy().contains("/secrets/"),
    );
    let (_, _, trace) = exported.join().unwrap();
    assert!(!trace.is_empty());
    haystacks.push(("the OTLP export".into(), trace));
    nowhere(
        &haystacks,
        &[
            "activitypw777",
            "ESCACTIVITYabcdefghijklmnopqrstuvw12",
            "planpw98765",
            "OSFODNN7EXAMPLE",
            "bcdefghijklmnopqrstuvwxyz0123456789ABCDEF",
            "BCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
            "stdoutpw4242",
            "YYYYYYYYYYYYYYYYYYYYYYYY",
            "shellpw321",
        ],
    );
    let events = baton_in(&root, &["events", "latest"]).stdout;
    assert!(events.contains("[REDACTED:url-password]"), "{events}");
}
