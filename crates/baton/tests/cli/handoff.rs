//! Results handed downstream: template values (quoted, so never shell syntax), the handoff file,
//! structured output, and the handoff limit.

use crate::test::{READING_G_TOML, Test, fixture};

/// Shell syntax in every form a predecessor's output might carry it.
const PAYLOAD: &str =
    r#"$(touch pwned) ; touch pwned2 'x" `touch pwned3` && touch pwned4 | tee pwned5 > pwned6 *"#;

#[test]
fn template_values_cannot_inject_shell_syntax() {
    let out = Test::new()
        .file("payload.txt", PAYLOAD)
        .graph(
            "g.toml",
            r#"
[[task]]
id = "a"
run = "cat payload.txt"

[[task]]
id = "b"
needs = ["a"]
run = "printf '%s' {{ needs.a.output }} > got.txt"
"#,
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("a")["output"], PAYLOAD);
    let got = String::from_utf8(out.read("got.txt")).unwrap();
    assert_eq!(got, PAYLOAD);
    let pwned: Vec<_> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("pwned"))
        .collect();
    assert!(pwned.is_empty(), "the output ran as shell: {pwned:?}");
}

#[test]
fn handoff_file_and_structured_output() {
    let out = Test::new()
        .graph(
            "g.toml",
            r#"
[[task]]
id = "a"
run = '''
echo alpha
printf '{"field": "from a", "n": 7}' > "$BATON_OUTPUT"
'''

[[task]]
id = "b"
run = "echo beta"

[[task]]
id = "c"
needs = ["a", "b"]
run = '''
cp "$BATON_HANDOFF_FILE" handoff.json
echo {{ needs.a.json.field }} {{ needs.a.json.n }} "$BATON_TASK_ID"
'''
"#,
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    assert_eq!(out.json_task("c")["output"], "from a 7 c");

    let handoff: serde_json::Value = serde_json::from_slice(&out.read("handoff.json")).unwrap();
    assert_eq!(handoff["task"], "c");
    assert_eq!(handoff["needs"]["a"]["output"], "alpha");
    assert_eq!(handoff["needs"]["a"]["status"], "succeeded");
    assert_eq!(handoff["needs"]["a"]["json"]["field"], "from a");
    assert_eq!(handoff["needs"]["b"]["output"], "beta");
    assert_eq!(handoff["needs"]["b"]["status"], "succeeded");

    let store = out.store();
    let json: serde_json::Value =
        serde_json::from_str(store.task("a").output_json.as_deref().unwrap()).unwrap();
    assert_eq!(json["n"], 7);
    // The handoff and structured-output files lived only while the run did; the logs stay.
    let run = store.run().id;
    let scratch = out.scratch(run.as_str());
    assert!(
        !scratch.exists(),
        "scratch left behind in {}",
        scratch.display()
    );
    let log = out
        .path()
        .join(".baton/runs")
        .join(run.as_str())
        .join("logs/c.1.log");
    assert!(log.exists(), "no log at {}", log.display());
}

#[test]
fn outputs_over_the_handoff_limit_are_cut_fairly() {
    const LIMIT: usize = 4096;
    let flood = fixture("flood.sh");
    let out = Test::new()
        .graph(
            "g.toml",
            &format!(
                r#"
[[task]]
id = "big1"
run = "sh {flood} 20000"

[[task]]
id = "big2"
run = "sh {flood} 30000"

[[task]]
id = "small"
run = "echo tiny"

[[task]]
id = "reader"
needs = ["big1", "big2", "small"]
handoff_limit = "4KiB"
run = '''
cp "$BATON_HANDOFF_FILE" handoff.json
printf '%s' {{{{ needs.big1.output }}}} > big1.txt
'''
"#
            ),
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    let handoff: serde_json::Value = serde_json::from_slice(&out.read("handoff.json")).unwrap();
    let output = |id: &str| handoff["needs"][id]["output"].as_str().unwrap().to_owned();
    assert_eq!(output("small"), "tiny");
    let (big1, big2) = (output("big1"), output("big2"));
    for big in [&big1, &big2] {
        assert!(
            big.contains(" cut …]"),
            "no cut marker: {}",
            &big[..80.min(big.len())]
        );
        assert!(
            big.starts_with("xxx") && big.ends_with("xxx"),
            "head and tail are kept"
        );
    }
    let total = big1.len() + big2.len() + 4;
    assert!(
        total <= LIMIT,
        "handed {total} bytes over a {LIMIT}-byte limit"
    );
    // Fair: the two long outputs share what the short one left.
    assert!(
        big1.len().abs_diff(big2.len()) <= 8,
        "{} vs {}",
        big1.len(),
        big2.len()
    );
    assert!(total > LIMIT - 64, "only {total} of {LIMIT} bytes used");
    let file = out.read("handoff.json").len();
    assert!(
        file <= LIMIT + 512,
        "the handoff file is {file} bytes for a {LIMIT}-byte limit"
    );
    // The template value is the same cut text.
    assert_eq!(String::from_utf8(out.read("big1.txt")).unwrap(), big1);
    // The predecessor's own record keeps its full size.
    assert_eq!(out.json_task("big1")["output_bytes"], 20000);
}

#[test]
fn environment_cwd_and_baton_variables() {
    let out = Test::new()
        .file("sub/.keep", "")
        .env("GREETING", "hello from outside")
        .graph(
            "g.toml",
            r#"
[[task]]
id = "env"
env = { FROM_FILE = "file value" }
pass_env = ["GREET*"]
cwd = "sub"
run = 'printf "%s|%s|%s|%s|%s|%s" "$FROM_FILE" "$GREETING" "$BATON_TASK_ID" "$BATON_ATTEMPT" "$BATON_RUN_ID" "$(basename "$PWD")"'

[[task]]
id = "not-given"
run = 'printf "[%s] %s" "${GREETING-unset}" "$([ "$PATH" = "$EXPECTED_PATH" ] && echo PATH)"'
env = { EXPECTED_PATH = "${PATH}" }
"#,
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    let run_id = out.json()["run"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        out.json_task("env")["output"],
        format!("file value|hello from outside|env|1|{run_id}|sub")
    );
    // Without `pass_env`, a task gets only PATH, HOME, locale and the like.
    assert_eq!(out.json_task("not-given")["output"], "[unset] PATH");
}

#[test]
fn env_values_name_variables_of_batons_environment_without_storing_them() {
    let secret = "s3cr3t-value-that-must-not-be-stored";
    let graph = r#"
[[task]]
id = "use"
env = { API_TOKEN = "${BATON_TEST_TOKEN}", LITERAL = "$${NOT_EXPANDED}" }
run = 'printf "%s|%s" "$API_TOKEN" "$LITERAL" > got.txt'
"#;
    let out = Test::new()
        .graph("g.toml", graph)
        .env("BATON_TEST_TOKEN", secret)
        .args(&["run", "g.toml"])
        .run()
        .status(0);
    assert_eq!(
        String::from_utf8(out.read("got.txt")).unwrap(),
        format!("{secret}|${{NOT_EXPANDED}}")
    );
    // The store keeps `${BATON_TEST_TOKEN}`, never the value.
    let db = std::fs::read(out.path().join(".baton/baton.db")).unwrap();
    let wal = std::fs::read(out.path().join(".baton/baton.db-wal")).unwrap_or_default();
    for bytes in [&db, &wal] {
        assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()));
    }

    // A variable that is not set stops the run before anything starts.
    let out = Test::new()
        .graph("g.toml", graph)
        .args(&["run", "g.toml"])
        .run()
        .status(2)
        .stderr_contains("BATON_TEST_TOKEN");
    assert!(!out.state_dir_exists(), "nothing was run");
}

#[test]
fn a_cwd_that_escapes_through_a_symlink_is_refused() {
    let test = Test::new().graph(
        "g.toml",
        "[[task]]\nid = \"escape\"\ncwd = \"out\"\nrun = \"touch escaped\"\n",
    );
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), test.path().join("out")).unwrap();
    let out = test.args(&["run", "g.toml", "--json"]).run().status(1);
    let task = out.json_task("escape");
    assert_eq!(task["state"], "failed");
    assert!(
        task["outcome"]["error"]
            .as_str()
            .unwrap()
            .contains("leads outside the repository"),
        "{task}"
    );
    assert!(!outside.path().join("escaped").exists());
}

#[test]
fn a_scope_that_escapes_through_a_symlink_is_bad_input() {
    let test = Test::new().graph(
        "g.toml",
        "[[task]]\nid = \"a\"\nscope = [\"out/**\", \"src/*.rs\"]\nrun = \"true\"\n",
    );
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), test.path().join("out")).unwrap();
    // Every command that reads the graph refuses it alike (`plan` used to pass it).
    let mut out = test.args(&["plan", "g.toml"]).run();
    for args in READING_G_TOML {
        out = out
            .then()
            .args(args)
            .run()
            .status(2)
            .stderr_contains("scope `out/**` leads outside the repository");
        assert!(out.stdout.is_empty(), "{}: {}", args.join(" "), out.stdout);
    }
    assert!(!out.state_dir_exists(), "nothing ran");
}
