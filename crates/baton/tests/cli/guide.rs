//! The guide (`docs/guide/`) and the README say what the code does: the graph file reference
//! holds every key the parser takes and the defaults a graph gets, every link resolves (to a
//! page, a heading of it, or a file of the repository), every example is shown in a chapter,
//! and everything the long README of before said has a page.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::test::Test;

fn root() -> PathBuf {
    crate::test::repo_path("").canonicalize().unwrap()
}

fn guide() -> PathBuf {
    root().join("docs/guide/src")
}

fn page(name: &str) -> String {
    std::fs::read_to_string(guide().join(name)).unwrap()
}

fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<_> = std::fs::read_dir(guide())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    pages
}

/// The keys in the first column of each table of `keys.md`, by the heading above the table.
fn documented_keys() -> BTreeMap<String, BTreeSet<String>> {
    let mut keys: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut section = String::new();
    for line in page("keys.md").lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            section = heading.to_owned();
        } else if let Some(row) = line.strip_prefix("| `") {
            let key = row.split('`').next().unwrap();
            keys.entry(section.clone())
                .or_default()
                .insert(key.to_owned());
        }
    }
    keys
}

/// What `baton plan` says a table takes, asked with a field no table has: its "known fields"
/// help, by the table it names.
fn parsed_keys() -> BTreeMap<String, BTreeSet<String>> {
    let odd = "zzzzzzzzzzzzzzzz = 1";
    let graph = format!(
        "{odd}\n[defaults]\n{odd}\n[run]\n{odd}\n[[task]]\nid = \"a\"\nrun = \"true\"\n{odd}\n"
    );
    let out = Test::new()
        .graph("g.toml", &graph)
        .env("NO_COLOR", "1")
        .args(&["plan", "g.toml"])
        .run()
        .status(2);
    let said = out.stderr.clone();
    let mut keys = BTreeMap::new();
    let mut table = None;
    let mut fields: Option<String> = None;
    let mut finish = |table: &Option<String>, fields: &mut Option<String>| {
        if let (Some(table), Some(list)) = (table, fields.take()) {
            let names = list
                .split(',')
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect::<BTreeSet<_>>();
            keys.insert(table.clone(), names);
        }
    };
    for line in said.lines() {
        if let Some(at) = line.find("unknown field `zzzz") {
            finish(&table, &mut fields);
            let place = line[at..].split(" in ").nth(1).unwrap_or_default();
            table = Some(
                match place.trim() {
                    "the graph file" => "The file",
                    other => other,
                }
                .to_owned(),
            );
        } else if let Some(list) = line.trim_start().strip_prefix("help: known fields:") {
            fields = Some(list.to_owned());
        } else if let Some(list) = fields.as_mut() {
            if line.starts_with("        ") && !line.trim_start().starts_with(['×', '╭', '│'])
            {
                list.push(',');
                list.push_str(line.trim());
            } else {
                finish(&table, &mut fields);
            }
        }
    }
    finish(&table, &mut fields);
    keys
}

#[test]
fn the_key_reference_holds_every_key_the_parser_takes_and_no_other() {
    let documented = documented_keys();
    let parsed = parsed_keys();
    assert_eq!(
        parsed.keys().collect::<Vec<_>>(),
        ["The file", "[[task]]", "[defaults]", "[run]"],
        "{parsed:?}"
    );
    for (table, keys) in &parsed {
        let listed = documented
            .get(table)
            .unwrap_or_else(|| panic!("keys.md has no `## {table}` table"));
        let missing: Vec<_> = keys.difference(listed).collect();
        let extra: Vec<_> = listed.difference(keys).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{table}: keys.md lacks {missing:?} and lists {extra:?}, which the parser refuses"
        );
    }
}

/// The default a table of `keys.md` gives `key`, as written.
fn documented_default(table: &str, key: &str) -> String {
    let mut section = "";
    for line in page("keys.md").lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            section = heading;
        } else if section == table
            && let Some(row) = line.strip_prefix(&format!("| `{key}` | "))
        {
            return row.split(" | ").next().unwrap().to_owned();
        }
    }
    panic!("keys.md has no row for `{key}` under {table}")
}

#[test]
fn the_key_reference_gives_the_defaults_a_graph_gets() {
    let text = "[[task]]\nid = \"shell\"\nrun = \"true\"\n\n[[task]]\nid = \"nothing\"\nengine = \"noop\"\n";
    let graph = baton_graph::load_str(Path::new("g.toml"), text).unwrap();
    let run = graph.run_settings();
    let shell = &graph.tasks()[0];
    let nothing = &graph.tasks()[1];
    let words = |s: &str| format!("`\"{s}\"`");
    let number = |n: u64| format!("`{n}`");
    let checks: Vec<(&str, &str, String)> = vec![
        ("[run]", "concurrency", number(run.concurrency.into())),
        (
            "[run]",
            "on_failure",
            words(&format!("{:?}", run.on_failure).to_lowercase()),
        ),
        ("[defaults]", "retries", number(shell.retries.into())),
        (
            "[defaults]",
            "backoff",
            words(&format!("{}s", shell.backoff.as_secs())),
        ),
        (
            "[defaults]",
            "handoff_limit",
            words(&format!("{}KiB", shell.handoff_limit / 1024)),
        ),
        (
            "[defaults]",
            "log_limit",
            words(&format!("{}MiB", shell.log_limit / (1024 * 1024))),
        ),
        (
            "[defaults]",
            "fix_attempts",
            number(shell.fix_attempts.into()),
        ),
        (
            "[defaults]",
            "scope_policy",
            words(&format!("{:?}", shell.scope_policy).to_lowercase()),
        ),
        ("[[task]]", "approval", format!("`{}`", shell.approval)),
        (
            "[[task]]",
            "max_subtasks",
            number(baton_graph::DEFAULT_MAX_SUBTASKS.into()),
        ),
        (
            "[[task]]",
            "max_depth",
            number(baton_graph::DEFAULT_MAX_DEPTH.into()),
        ),
        (
            "[[task]]",
            "max_replans",
            number(baton_graph::DEFAULT_MAX_REPLANS.into()),
        ),
    ];
    for (table, key, code) in checks {
        assert_eq!(documented_default(table, key), code, "{table} {key}");
    }
    assert_eq!(shell.timeout, None);
    assert_eq!(documented_default("[defaults]", "timeout"), "none");
    assert_eq!(graph.name(), "g");
    assert_eq!(documented_default("The file", "name"), "the file's name");
    // Where tasks work: the shared checkout for a shell task, nothing for a no-op.
    let workspace = documented_default("[defaults]", "workspace");
    assert!(workspace.contains(&format!(
        "{} for shell tasks",
        words(&format!("{:?}", shell.workspace).to_lowercase())
    )));
    assert!(workspace.contains(&format!(
        "{} for no-op tasks",
        words(&format!("{:?}", nothing.workspace).to_lowercase())
    )));
    let planned = documented_default("[run]", "max_tasks");
    assert!(planned.contains(&format!("and {} more", baton_graph::DEFAULT_PLANNED_TASKS)));
}

/// mdBook's anchor for a heading: lower case, spaces to `-`, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().next().unwrap())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut found = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            found.insert(anchor(line.trim_start_matches('#').trim()));
        }
    }
    found
}

/// Every `](target)` of a Markdown file outside code, and every `{{#include path}}`.
fn links(text: &str) -> Vec<String> {
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let include = regex::Regex::new(r"\{\{#include ([^}\s]+)\}\}").unwrap();
    let mut fenced = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        found.extend(include.captures_iter(line).map(|c| c[1].to_owned()));
        if !fenced {
            let outside_code: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
            found.extend(link.captures_iter(&outside_code).map(|c| c[1].to_owned()));
        }
    }
    found
}

#[test]
fn every_link_of_the_guide_and_the_readme_resolves() {
    let mut docs = pages();
    docs.push(root().join("README.md"));
    docs.push(root().join("docs/ARCHITECTURE.md"));
    docs.push(root().join("docs/PERFORMANCE.md"));
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for target in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            checked += 1;
            let (file, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            if !path.exists() {
                broken.push(format!("{}: {target}: no such file", doc.display()));
            } else if !fragment.is_empty()
                && path.extension().is_some_and(|x| x == "md")
                && !anchors(&std::fs::read_to_string(&path).unwrap()).contains(fragment)
            {
                broken.push(format!("{}: {target}: no such heading", doc.display()));
            }
        }
    }
    assert!(checked > 50, "only {checked} links: is the pattern right?");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_is_in_the_summary_and_every_example_in_a_page() {
    let summary = page("SUMMARY.md");
    for path in pages() {
        let name = path.file_name().unwrap().to_str().unwrap();
        if name != "SUMMARY.md" {
            assert!(
                summary.contains(&format!("({name})")),
                "{name} is not in SUMMARY.md"
            );
        }
    }
    let shown: String = pages()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let examples = root().join("examples");
    for dir in [examples.clone(), examples.join("offline")] {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = path.strip_prefix(&examples).unwrap().display().to_string();
            if path.extension().is_some_and(|x| x == "toml") && !name.ends_with("baton.toml") {
                assert!(
                    shown.contains(&format!("examples/{name}")),
                    "examples/{name} is shown in no chapter of the guide"
                );
            }
        }
    }
}

/// The README is short: what baton is, the two commands, a tour and where to read on.
#[test]
fn the_readme_is_short_and_its_old_sections_have_a_page() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 250, "README.md is {lines} lines");
    // The two commands: the main job on the embedded store, and the whole suite as CI runs it.
    assert!(readme.contains("$ cargo run --release -- run examples/quickstart.toml"));
    assert!(readme.contains("$ ./scripts/test "));
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(ci.lines().any(|l| l == "exec ./scripts/test"), "{ci}");
    // Each part of the README of before (1,000 lines), and a sentence of it that must be found
    // on the page that holds it now.
    let homes = [
        (
            "Install",
            "getting-started.md",
            "cargo install --locked --path crates/baton",
        ),
        (
            "A graph file",
            "graph-files.md",
            "JSON with the same fields works too",
        ),
        (
            "Defaults",
            "graph-files.md",
            "for what a graph file does not set",
        ),
        (
            "Handing results downstream",
            "shell-tasks.md",
            "BATON_HANDOFF_FILE",
        ),
        ("Secrets", "security.md", "An escape hides nothing"),
        (
            "What a task sees",
            "security.md",
            "`BATON_*` are baton's to set",
        ),
        (
            "Secrets in env",
            "security.md",
            "`$${` writes a literal `${`",
        ),
        ("Task ids", "graph-files.md", "at most 100 bytes of UTF-8"),
        ("Errors", "graph-files.md", "printed as `a -> b -> a`"),
        (
            "Agent tasks",
            "agents.md",
            "The prompt never touches a shell or argv",
        ),
        ("Budgets", "budgets.md", "agents start **one at a time**"),
        (
            "Soft limit",
            "budgets.md",
            "`baton approve RUN` lets it go on",
        ),
        ("Fallback engines", "agents.md", "fallback_on = \"any\""),
        (
            "Best of N",
            "agents.md",
            "baton diff RUN TASK --candidate 2",
        ),
        ("aider", "engines.md", "--no-auto-commits"),
        ("Configuration", "engines.md", "~/.config/baton/config.toml"),
        ("Notifications", "seeing.md", "task-waiting"),
        ("The http engine", "engines.md", "baton agent-http"),
        ("Engines of your own", "engines.md", "kind    = \"command\""),
        (
            "Trying agents offline",
            "agents.md",
            "examples/offline/try.sh",
        ),
        (
            "Planner tasks",
            "planning.md",
            "A plan is code a model wrote",
        ),
        ("Re-planning", "planning.md", "max_replans"),
        ("for_each", "planning.md", "for_each = { from = \"find\" }"),
        ("Worktrees", "worktrees.md", "baton/RUN/result"),
        ("apply", "worktrees.md", "never deletes or replaces a file"),
        (
            "A retry starts from where the task started",
            "worktrees.md",
            "attempt-N",
        ),
        ("Sandbox", "security.md", "Landlock ABI 6"),
        ("What baton shows you", "security.md", "shown, never played"),
        ("Processes", "security.md", "subreaper"),
        ("Commands", "commands.md", "| `baton worker"),
        ("While a run goes", "seeing.md", "quiet for 2m"),
        ("baton report", "seeing.md", "self-contained"),
        ("baton serve", "seeing.md", "at most 16 open at once"),
        ("What the dashboard protects", "seeing.md", "--allow-remote"),
        ("Traces", "seeing.md", "gen_ai.usage.input_tokens"),
        ("Why a task failed", "operating.md", "go test's `--- FAIL`"),
        ("When a run does not succeed", "operating.md", "next:"),
        (
            "When baton dies mid-run",
            "operating.md",
            "renewed every 10 s",
        ),
        ("Keeping runs", "operating.md", "BATON_KEEP_RUNS"),
        ("Ctrl-C", "operating.md", "exits 130"),
        ("Exit codes", "exit-codes.md", "baton runs | head -1"),
        ("baton inside the agents", "mcp.md", "max_budget_usd"),
        ("Where things are kept", "files.md", ".git/info/exclude"),
        ("A shared store", "many-machines.md", "advisory lock"),
        ("Workers", "many-machines.md", "LISTEN/NOTIFY"),
        ("Status", "status.md", "Working:"),
        ("Development", "development.md", "cargo +nightly fuzz run"),
    ];
    for (section, name, sentence) in homes {
        assert!(
            page(name).contains(sentence),
            "the README's \"{section}\" has no home: {name} lacks {sentence:?}"
        );
    }
}

/// `baton --help` and every command's help end by naming the guide's page for it, a page that
/// exists and speaks of the command.
#[test]
fn every_command_s_help_names_its_page_of_the_guide() {
    let help = |args: &[&str]| {
        let out = std::process::Command::new(crate::test::BATON)
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let page_named = |text: &str| -> String {
        let named = text
            .lines()
            .find_map(|l| l.strip_prefix("Guide: docs/guide/src/"))
            .unwrap_or_else(|| panic!("no guide page in:\n{text}"));
        named.split(".md").next().unwrap().to_owned() + ".md"
    };
    let top = help(&["--help"]);
    assert!(guide().join(page_named(&top)).exists());
    let commands = crate::test::commands_in_help(&top);
    assert!(commands.len() > 20, "{commands:?}");
    for command in commands {
        let named = page_named(&help(&[&command, "--help"]));
        let text = page(&named);
        assert!(
            text.contains(&format!("baton {command}")),
            "`baton {command} --help` names {named}, which does not speak of it"
        );
    }
}

/// The docs give dates and commits, not the project's working sessions ("session 5", "this
/// session"): a reader has no way to know what those were. (An agent's session is another
/// thing, and stays.)
#[test]
fn no_doc_dates_its_figures_by_working_session() {
    let diary = regex::Regex::new(
        r"(?i)\bsessions? \d+|\bsession-\d+|\bthis session\b|\bthe session's (first|start)",
    )
    .unwrap();
    let mut docs = pages();
    for name in ["README.md", "docs/ARCHITECTURE.md", "docs/PERFORMANCE.md"] {
        docs.push(root().join(name));
    }
    let mut found = Vec::new();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (n, line) in text.lines().enumerate() {
            if let Some(m) = diary.find(line) {
                found.push(format!("{}:{}: {}", doc.display(), n + 1, m.as_str()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
