//! `baton mcp`: baton as an MCP server over stdio, spoken to as an agent's client would
//! (JSON-RPC lines on its stdin and stdout), in a real repository, with real runs.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::test::BATON;
use crate::workspaces::repo_with;

/// A client of one `baton mcp` process.
struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Client {
    fn start(dir: &std::path::Path) -> Self {
        let mut child = Command::new(BATON)
            .arg("mcp")
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut client = Self {
            child,
            stdin,
            stdout,
            next: 1,
        };
        let init = client.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": { "name": "test", "version": "1" },
            }),
        );
        assert_eq!(init["serverInfo"]["name"], "baton", "{init}");
        assert!(init["capabilities"]["tools"].is_object(), "{init}");
        assert!(
            init["instructions"]
                .as_str()
                .unwrap()
                .contains("plan_graph")
        );
        client.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        client
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The result of request `method`.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "baton mcp closed"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                assert!(message["error"].is_null(), "{message}");
                return message["result"].clone();
            }
        }
    }

    /// Tool `name`'s structured result, or its error text.
    fn call(&mut self, name: &str, arguments: Value) -> Result<Value, String> {
        let result = self.request(
            "tools/call",
            json!({ "name": name, "arguments": arguments }),
        );
        if result["isError"] == true {
            return Err(result["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned());
        }
        Ok(result["structuredContent"].clone())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const GRAPH: &str = r#"
[[task]]
id = "write"
run = "echo written > out.txt; echo wrote out.txt"

[[task]]
id = "read"
needs = ["write"]
run = "cat out.txt; echo '{{ needs.write.output }}'"
"#;

#[test]
fn an_agent_plans_starts_and_follows_a_run_through_baton_mcp() {
    let test = repo_with("");
    let mut client = Client::start(test.path());

    let tools = client.request("tools/list", json!({}));
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for name in [
        "validate_graph",
        "plan_graph",
        "start_run",
        "run_status",
        "run_events",
        "task_log",
        "list_runs",
        "cancel_run",
        "approve",
        "reject",
        "run_diff",
        "retry",
        "resume",
        "apply",
    ] {
        assert!(names.contains(&name), "{name} missing: {names:?}");
    }
    for tool in tools["tools"].as_array().unwrap() {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert!(
            tool["description"].as_str().is_some_and(|d| d.len() > 20),
            "{tool}"
        );
    }

    // Every problem at once, in `baton plan`'s words.
    let bad = "[[task]]\nid = \"a\"\nrun = \"true\"\nneeds = [\"b\"]\n\n[[task]]\nid = \"b\"\nrun = \"true\"\nneeds = [\"a\"]\nrunn = 1\n";
    let checked = client
        .call("validate_graph", json!({ "graph": bad }))
        .unwrap();
    assert_eq!(checked["valid"], false, "{checked}");
    let problems = checked["problems"].as_str().unwrap();
    assert!(problems.contains("cycle"), "{problems}");
    assert!(problems.contains("runn"), "{problems}");
    let good = client
        .call("validate_graph", json!({ "graph": GRAPH }))
        .unwrap();
    assert_eq!(good, json!({ "valid": true, "tasks": 2, "notes": [] }));
    let plan = client
        .call("plan_graph", json!({ "graph": GRAPH }))
        .unwrap();
    assert_eq!(plan["levels"], json!([["write"], ["read"]]), "{plan}");
    let refused = client
        .call("plan_graph", json!({ "graph": bad }))
        .unwrap_err();
    assert!(refused.contains("cycle"), "{refused}");
    // A graph baton refuses does not start, and says why.
    let refused = client
        .call("start_run", json!({ "graph": bad }))
        .unwrap_err();
    assert!(refused.contains("cycle"), "{refused}");
    let outside = client
        .call("start_run", json!({ "file": "../elsewhere.toml" }))
        .unwrap_err();
    assert!(outside.contains("elsewhere.toml"), "{outside}");

    // Started, it goes on after the call, and is followed to its end.
    let started = client
        .call(
            "start_run",
            json!({ "graph": GRAPH, "name": "write and read" }),
        )
        .unwrap();
    let run = started["run"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let status = client.call("run_status", json!({ "run": run })).unwrap();
        if status["run"]["state"] == "succeeded" {
            break status;
        }
        assert!(Instant::now() < deadline, "{status}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status["totals"]["succeeded"], 2, "{status}");
    assert_eq!(status["tasks"].as_array().unwrap().len(), 2, "{status}");

    // Events a page at a time, from where the last page ended.
    let first = client
        .call("run_events", json!({ "run": run, "limit": 3 }))
        .unwrap();
    assert_eq!(first["events"].as_array().unwrap().len(), 3, "{first}");
    assert_eq!(first["more"], true);
    let after = first["last_seq"].as_u64().unwrap();
    let rest = client
        .call(
            "run_events",
            json!({ "run": run, "after_seq": after, "limit": 200 }),
        )
        .unwrap();
    assert_eq!(rest["more"], false);
    let seqs: Vec<u64> = rest["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs.first(), Some(&(after + 1)), "{rest}");
    assert!(
        rest["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "run-finished"),
        "{rest}"
    );

    let log = client
        .call(
            "task_log",
            json!({ "run": run, "task": "read", "tail_bytes": 12 }),
        )
        .unwrap();
    assert_eq!(log["truncated"], true, "{log}");
    assert_eq!(log["tail"].as_str().unwrap().len(), 12, "{log}");
    let whole = client
        .call("task_log", json!({ "run": run, "task": "read" }))
        .unwrap();
    assert!(
        whole["tail"].as_str().unwrap().contains("written"),
        "{whole}"
    );

    let runs = client.call("list_runs", json!({})).unwrap();
    assert_eq!(runs["runs"][0]["id"], run.as_str(), "{runs}");
    assert_eq!(runs["runs"][0]["name"], "write-and-read", "{runs}");
    let unknown = client
        .call("run_status", json!({ "run": "20990101-000000-0000" }))
        .unwrap_err();
    assert!(unknown.contains("20990101-000000-0000"), "{unknown}");
}

/// A run started over MCP is driven by a process of its own: it goes on, and ends, after the
/// server (and the agent session that started it) is gone.
#[test]
fn a_run_started_over_mcp_outlives_the_server() {
    let test = repo_with("");
    let mut client = Client::start(test.path());
    let graph = "[[task]]\nid = \"slow\"\nrun = \"sleep 1; echo done\"\n";
    let started = client.call("start_run", json!({ "graph": graph })).unwrap();
    let run = started["run"].as_str().unwrap().to_owned();
    drop(client);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = crate::test::baton_in(test.path(), &["status", &run, "--json"]);
        let state: Value = serde_json::from_str(&status.stdout).unwrap_or(Value::Null);
        if state["run"]["state"] == "succeeded" {
            assert_eq!(state["tasks"][0]["output"], "done", "{state}");
            break;
        }
        assert!(Instant::now() < deadline, "{}", status.stdout);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The Claude Code plugin in the repository (`plugin/`, listed by `.claude-plugin/`) is what
/// the pinned Claude Code accepts: its validator passes both strictly, and loaded, the plugin
/// has the three commands and registers `baton mcp`.
#[test]
fn the_claude_code_plugin_validates_and_loads_with_its_commands_and_server() {
    let claude = crate::agents::agent_bin("claude");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(&claude)
            .args(args)
            .current_dir(&repo)
            .env("HOME", home.path())
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "claude {args:?}: {text}");
        text
    };
    assert!(run(&["plugin", "validate", "plugin", "--strict"]).contains("Validation passed"));
    assert!(run(&["plugin", "validate", ".", "--strict"]).contains("Validation passed"));
    let details = run(&["--plugin-dir", "plugin", "plugin", "details", "baton"]);
    assert!(details.contains("do, runs, status"), "{details}");
    assert!(details.contains("MCP servers (1)  baton"), "{details}");
    let mcp: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join("plugin/.mcp.json")).unwrap())
            .unwrap();
    assert_eq!(
        mcp["mcpServers"]["baton"],
        json!({ "command": "baton", "args": ["mcp"] })
    );
}

/// What a run changed, shown and applied; a failed task run again, over MCP.
#[test]
fn an_agent_sees_the_change_applies_it_and_retries_a_failure() {
    let test = repo_with("");
    let mut client = Client::start(test.path());
    let graph = r#"
[[task]]
id = "hello"
workspace = "worktree"
run = "echo hello > hello.txt"

[[task]]
id = "flaky"
run = "test -e ok || { touch ok; exit 1; }"
"#;
    let run = client.call("start_run", json!({ "graph": graph })).unwrap()["run"]
        .as_str()
        .unwrap()
        .to_owned();
    let ended = |client: &mut Client| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let status = client.call("run_status", json!({ "run": run })).unwrap();
            let state = status["run"]["state"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if state != "running" {
                return status;
            }
            assert!(Instant::now() < deadline, "{status}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let status = ended(&mut client);
    assert_eq!(status["run"]["state"], "failed", "{status}");
    let failed: Vec<&Value> = status["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["state"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{status}");
    assert_eq!(failed[0]["id"], "flaky");

    let diff = client
        .call("run_diff", json!({ "run": run, "task": "hello" }))
        .unwrap();
    assert!(
        diff["stat"].as_str().unwrap().contains("hello.txt"),
        "{diff}"
    );
    assert!(diff["patch"].as_str().unwrap().contains("+hello"), "{diff}");

    let again = client.call("retry", json!({ "run": run })).unwrap();
    assert_eq!(again["run"], run.as_str(), "{again}");
    let status = ended(&mut client);
    assert_eq!(status["run"]["state"], "succeeded", "{status}");

    let applied = client.call("apply", json!({ "run": run })).unwrap();
    assert!(
        applied["said"].as_str().unwrap().contains(&run),
        "{applied}"
    );
    assert_eq!(
        std::fs::read_to_string(test.path().join("hello.txt")).unwrap(),
        "hello\n"
    );
}

/// The whole way a user takes: in Claude Code (the pinned CLI, headless, against the scripted
/// model), `/baton:do GOAL` from the plugin; the model plans the graph with baton, starts the
/// run, polls it until it ends and says so. The run really ran: its result branch has the file.
#[test]
fn claude_code_runs_a_goal_with_baton_do_through_the_plugins_server() {
    use baton_mock_model::{MockModel, Rule, Script};
    const TOOL: &str = "mcp__plugin_baton_baton__";
    let graph =
        "[[task]]\nid = \"hello\"\nworkspace = \"worktree\"\nrun = \"echo hello > hello.txt\"\n";
    // Each step answers what the conversation holds by then (the request's last message is
    // not the tool's result in this CLI: it appends its environment after it), once.
    let script = Script::new()
        .rule(
            Rule::tool_use(format!("{TOOL}plan_graph"), json!({ "graph": graph }))
                .when_contains("The user wants this done with baton: write hello.txt")
                .times(1),
        )
        .rule(
            Rule::tool_use(
                format!("{TOOL}start_run"),
                json!({ "graph": graph, "name": "hello" }),
            )
            .when_contains("critical_path")
            .times(1),
        )
        .rule(Rule::text("Done: the run wrote hello.txt.").when_contains("\"state\":\"succeeded\""))
        .rule(
            Rule::tool_use(format!("{TOOL}run_status"), json!({}))
                .when_contains("until the run ends"),
        );
    let model = MockModel::start(script).unwrap();
    let test = repo_with("");
    let home = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(BATON).parent().unwrap();
    let plugin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugin");
    let allowed = ["plan_graph", "start_run", "run_status"]
        .map(|t| format!("{TOOL}{t}"))
        .join(",");
    let out = Command::new(crate::agents::agent_bin("claude"))
        .args(["--plugin-dir", plugin.to_str().unwrap()])
        .args(["-p", "/baton:do write hello.txt saying hello"])
        .args(["--output-format", "json", "--allowedTools", &allowed])
        .current_dir(test.path())
        .env("HOME", home.path())
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("ANTHROPIC_BASE_URL", model.url())
        .env(
            "ANTHROPIC_API_KEY",
            "sk-ant-api03-test-key-for-the-mock-model-only",
        )
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        // MCP tools offered whole, not behind the ToolSearch tool (the scripted model calls
        // them directly, as a model that knows them would).
        .env("ENABLE_TOOL_SEARCH", "false")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    // On failure: the end of the conversation the model saw last.
    let last = model.requests().last().map(|r| {
        let messages = r.body["messages"].as_array().cloned().unwrap_or_default();
        let n = messages.len();
        messages[n.saturating_sub(3)..].to_vec()
    });
    assert!(
        out.status.success() && !said.contains("\"is_error\":true"),
        "{said}\n{}\nthe last messages: {last:#?}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_str(said.trim()).unwrap_or_else(|_| panic!("{said}"));
    assert_eq!(
        result["result"], "Done: the run wrote hello.txt.",
        "{result}"
    );

    // The run baton drove: named as the model asked, succeeded, its work on the result branch.
    let runs = crate::test::baton_in(test.path(), &["runs", "--json"]);
    let runs: Value = serde_json::from_str(&runs.stdout).unwrap();
    let run = &runs["runs"][0];
    assert_eq!(run["name"], "hello", "{runs}");
    assert_eq!(run["state"], "succeeded", "{runs}");
    let id = run["id"].as_str().unwrap();
    assert_eq!(
        crate::workspaces::git(
            test.path(),
            &["show", &format!("baton/{id}/result:hello.txt")]
        ),
        "hello"
    );
    // The model was asked with the command's own text (the first rule answered the first
    // request), then planned, started and polled: baton's answers reached it.
    let asked = model.requests();
    assert_eq!(
        asked[0].rule,
        Some(0),
        "the command's text was not in the first request"
    );
    let rules: Vec<Option<usize>> = asked.iter().map(|r| r.rule).collect();
    assert!(
        rules.contains(&Some(1)) && rules.contains(&Some(3)),
        "{rules:?}"
    );
    assert_eq!(rules.last(), Some(&Some(2)), "{rules:?}");
}

/// `baton mcp` against the official MCP TypeScript SDK's client (pinned in tests/agents):
/// the protocol as other hosts speak it, and the tools end to end (`mcp-client.mjs` says what
/// it does).
#[test]
fn the_official_typescript_client_lists_validates_starts_approves_follows_and_cancels() {
    let test = repo_with("");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/agents/mcp-client.mjs")
        .canonicalize()
        .unwrap();
    let out = Command::new("node")
        .arg(&script)
        .arg(BATON)
        .current_dir(test.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(said.trim()).unwrap_or_else(|_| panic!("{said}"));
    assert_eq!(seen["server"]["name"], "baton", "{seen}");
    let tools = seen["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 14, "{seen}");
    // Every problem of the bad graph at once.
    assert_eq!(seen["bad"]["valid"], false, "{seen}");
    let problems = seen["bad"]["problems"].as_str().unwrap();
    assert!(problems.contains("ghost"), "{problems}");
    assert!(problems.contains("`run`"), "{problems}");
    // The run waited for the approval, went on with it, and ended.
    assert_eq!(seen["ended"]["run"]["state"], "succeeded", "{seen}");
    let kinds: Vec<&str> = seen["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    let waiting = kinds.iter().position(|k| *k == "task-waiting").unwrap();
    let decided = kinds.iter().position(|k| *k == "task-decided").unwrap();
    assert!(waiting < decided, "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"run-finished"), "{kinds:?}");
    assert!(
        seen["log"]["tail"].as_str().unwrap().contains("deployed"),
        "{seen}"
    );
    assert_eq!(seen["cancelled"], "cancelled", "{seen}");
    assert!(
        seen["missing"]["error"]
            .as_str()
            .unwrap()
            .contains("20990101-000000-0000"),
        "{seen}"
    );
}

/// What the repository's `baton.toml` lets an agent's graph ask for (`[mcp]`) holds over
/// MCP: a graph without a budget, or over it, or with too many tasks, is refused with each
/// reason; the concurrency asked is lowered to the limit.
#[test]
fn an_agent_s_graph_cannot_ask_for_more_than_the_repository_allows() {
    let test = repo_with("").file(
        "baton.toml",
        "[mcp]\nmax_budget_usd = 2.5\nmax_tasks = 2\nmax_concurrency = 1\n",
    );
    let mut client = Client::start(test.path());
    let three = "[[task]]\nid = \"a\"\nrun = \"true\"\n\n[[task]]\nid = \"b\"\nrun = \"true\"\n\n[[task]]\nid = \"c\"\nrun = \"true\"\n";
    let refused = client
        .call("start_run", json!({ "graph": three }))
        .unwrap_err();
    assert!(refused.contains("sets no budget"), "{refused}");
    assert!(refused.contains("has 3 tasks; at most 2"), "{refused}");
    let rich = format!("[run]\nbudget = {{ usd = 9 }}\n\n{three}");
    let refused = client
        .call("start_run", json!({ "graph": rich }))
        .unwrap_err();
    assert!(
        refused.contains("budget would be $9; at most $2.5"),
        "{refused}"
    );
    // Nor through the call's own budget.
    let one = "[[task]]\nid = \"a\"\nrun = \"true\"\n";
    let refused = client
        .call("start_run", json!({ "graph": one, "budget_usd": 3 }))
        .unwrap_err();
    assert!(
        refused.contains("budget would be $3; at most $2.5"),
        "{refused}"
    );
    // A glob fans out over however many paths it matches: the graph must cap itself.
    let globbed = "[run]\nbudget = { usd = 1 }\n\n[[task]]\nid = \"each\"\n\
                   for_each = { glob = \"*.txt\" }\nrun = \"true\"\n";
    let refused = client
        .call("start_run", json!({ "graph": globbed }))
        .unwrap_err();
    assert!(
        refused.contains("a `for_each` glob fans out over every path it matches"),
        "{refused}"
    );
    let runs = client.call("list_runs", json!({})).unwrap();
    assert_eq!(
        runs["runs"],
        json!([]),
        "a refused graph started a run: {runs}"
    );

    // A graph with no budget of its own runs with the call's, within the limit.
    let fits = "[run]\nconcurrency = 4\n\n[[task]]\nid = \"a\"\nrun = \"true\"\n\n[[task]]\nid = \"b\"\nrun = \"true\"\n";
    let started = client
        .call(
            "start_run",
            json!({ "graph": fits, "concurrency": 8, "budget_usd": 1.5 }),
        )
        .unwrap();
    assert_eq!(started["concurrency"], 1, "{started}");
    let run = started["run"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = client.call("run_status", json!({ "run": run })).unwrap();
        if status["run"]["state"] == "succeeded" {
            assert_eq!(status["run"]["concurrency"], 1, "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "{status}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The guide's registrations of `baton mcp` for Codex (`config.toml`) and Gemini CLI
/// (`settings.json`), as written there, are what the pinned CLIs read: each lists the server.
#[test]
fn the_guide_s_codex_and_gemini_registrations_are_read_by_their_clis() {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/src/mcp.md"),
    )
    .unwrap();
    let section = &page[..];
    let block = |fence: &str| -> String {
        let start = section.find(&format!("```{fence}\n")).unwrap() + fence.len() + 4;
        section[start..][..section[start..].find("```").unwrap()].to_owned()
    };
    let (toml, json_text) = (block("toml"), block("json"));
    let dir = tempfile::tempdir().unwrap();
    let (home, codex_home, project) = (
        dir.path().join("home"),
        dir.path().join("codex-home"),
        dir.path().join("project"),
    );
    for d in [&home, &codex_home, &project.join(".gemini")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(codex_home.join("config.toml"), &toml).unwrap();
    std::fs::write(project.join(".gemini/settings.json"), &json_text).unwrap();
    let list = |cli: &str| {
        let out = Command::new(crate::agents::agent_bin(cli))
            .args(["mcp", "list"])
            .current_dir(&project)
            .env("HOME", &home)
            .env("CODEX_HOME", &codex_home)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{cli}: {out:?}");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let codex = list("codex");
    let row = codex
        .lines()
        .find(|l| l.starts_with("baton "))
        .unwrap_or_else(|| panic!("{codex}"));
    assert!(row.contains(" mcp ") && row.contains("enabled"), "{codex}");
    let gemini = list("gemini");
    assert!(gemini.contains("baton: baton mcp (stdio)"), "{gemini}");
}
