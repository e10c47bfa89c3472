//! `baton doctor`: the installed engines, their versions, the config files, what is missing.

use crate::agents::agent_bin;
use crate::test::Test;

#[test]
fn doctor_names_what_is_installed_and_what_is_missing() {
    let config = format!(
        "[engines.claude]\ncommand = \"{}\"\n\n[engines.codex]\ncommand = \"/nonexistent/codex\"\n",
        agent_bin("claude").display()
    );
    let test = Test::new().file("baton.toml", &config);
    let out = test
        .env("ANTHROPIC_API_KEY", "sk-ant-api03-not-a-real-key-at-all")
        .args(&["doctor", "--json"])
        .run()
        .status(0);
    let json = out.json();
    let engine = |name: &str| {
        json["engines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {json}"))
            .clone()
    };
    let claude = engine("claude");
    assert_eq!(claude["ok"], true, "{claude}");
    assert_eq!(claude["version"], "2.1.332", "{claude}");
    assert_eq!(claude["env"]["ANTHROPIC_API_KEY"], true, "{claude}");
    let codex = engine("codex");
    assert_eq!(codex["ok"], false, "{codex}");
    assert!(
        codex["problem"]
            .as_str()
            .unwrap()
            .starts_with("`/nonexistent/codex` is not installed"),
        "{codex}"
    );
    let files = json["config_files"].as_array().unwrap();
    assert_eq!(files.last().unwrap()["present"], true, "{json}");
    // Never a key's value.
    assert!(!json.to_string().contains("not-a-real-key"));

    out.then()
        .args(&["doctor"])
        .run()
        .status(0)
        .stdout_contains("claude  ✓ 2.1.332")
        .stdout_contains("codex   ✗ `/nonexistent/codex` is not installed");
}

#[test]
fn a_broken_config_file_is_bad_input_naming_its_line() {
    Test::new()
        .file("baton.toml", "[engines.claude]\ncomand = \"claude\"\n")
        .args(&["doctor"])
        .run()
        .status(2)
        .stderr_contains("baton.toml: line 2, column 1: unknown field `comand`");
}

/// `baton doctor` says what the kernel gives baton to hold tasks in — the write sandbox,
/// cgroups, the subreaper — and, where one is missing, what baton does instead.
#[test]
fn doctor_reports_the_sandbox_the_cgroups_and_the_subreaper() {
    let json = Test::new()
        .env("BATON_PLATFORM", "linux")
        .args(&["doctor", "--json"])
        .run()
        .status(0)
        .json();
    let isolation = &json["isolation"];
    assert_eq!(isolation["platform"], "linux", "{json}");
    assert!(isolation["subreaper"].is_boolean(), "{json}");
    assert!(isolation["cgroups"].is_boolean(), "{json}");
    // Without them (as on a kernel that has neither): said, with what happens instead.
    let out = Test::new()
        .env("BATON_PLATFORM", "linux")
        .env("BATON_NO_LANDLOCK", "1")
        .env("BATON_NO_CGROUP", "1")
        .args(&["doctor"])
        .run()
        .status(0);
    assert!(
        out.stdout.contains(
            "\n  landlock   ✗ BATON_NO_LANDLOCK is set: tasks run without the write sandbox"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("  cgroup v2  ✗ not writable here: tasks are held by their process group"),
        "{}",
        out.stdout
    );
    let json = out
        .then()
        .env("BATON_NO_LANDLOCK", "1")
        .args(&["doctor", "--json"])
        .run()
        .status(0)
        .json();
    assert_eq!(
        json["isolation"]["landlock"],
        serde_json::Value::Null,
        "{json}"
    );
    assert_eq!(
        json["isolation"]["landlock_problem"],
        "BATON_NO_LANDLOCK is set"
    );
}

/// On the portable process layer (`BATON_PLATFORM=portable`, what macOS runs), `baton doctor`
/// says so, and that it has no cgroups, no Landlock and no subreaper.
#[test]
fn doctor_says_which_process_layer_is_in_use() {
    let out = Test::new()
        .env("BATON_PLATFORM", "portable")
        .args(&["doctor"])
        .run()
        .status(0);
    assert!(
        out.stdout.contains("isolation\n  platform   portable (BATON_PLATFORM=portable): attempts start with std's Command"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("  landlock   ✗ BATON_PLATFORM=portable is set"),
        "{}",
        out.stdout
    );
    let json = out
        .then()
        .env("BATON_PLATFORM", "portable")
        .args(&["doctor", "--json"])
        .run()
        .status(0)
        .json();
    let isolation = &json["isolation"];
    assert_eq!(isolation["platform"], "portable", "{json}");
    assert_eq!(isolation["cgroups"], false, "{json}");
    assert_eq!(isolation["subreaper"], false, "{json}");
    assert_eq!(isolation["landlock"], serde_json::Value::Null, "{json}");
}

/// With no agent CLI installed and no key, `doctor` says no agent can answer yet and how to try
/// agent tasks without one (the offline example's command engine); with one installed it says
/// nothing of it.
#[test]
fn doctor_with_no_agent_says_how_to_try_agents_offline() {
    let none = "[engines.claude]\ncommand = \"/nonexistent/claude\"\n\n\
                [engines.codex]\ncommand = \"/nonexistent/codex\"\n\n\
                [engines.gemini]\ncommand = \"/nonexistent/gemini\"\n\n\
                [engines.aider]\ncommand = \"/nonexistent/aider\"\n";
    let out = Test::new()
        .file("baton.toml", none)
        .args(&["doctor"])
        .run()
        .status(0)
        .stdout_contains("no agent can answer here yet")
        .stdout_contains("examples/offline/try.sh");
    let installed = format!(
        "[engines.claude]\ncommand = \"{}\"\n",
        agent_bin("claude").display()
    );
    let out = out
        .then()
        .file("baton.toml", &installed)
        .args(&["doctor"])
        .run()
        .status(0);
    assert!(
        !out.stdout.contains("no agent can answer"),
        "{}",
        out.stdout
    );
}
