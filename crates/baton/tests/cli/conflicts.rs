//! A merge that needs a person is explained where people look — the summary, `baton status`
//! and `status --json` — with the commands that resolve it (issue #15, item 1).

use std::process::Command;

use crate::test::{Output, baton_in};
use crate::workspaces::repo_with;

const TWO_WRITERS: &str = r#"
[defaults]
workspace = "worktree"

[[task]]
id = "left"
run = "echo left > shared.txt"

[[task]]
id = "right"
run = "echo right > shared.txt"
"#;

/// What the summary and `status` print below the table from the line starting with
/// `first` up to the timeline, the run id made `RUN` and the repository `ROOT`.
pub(crate) fn block_from(out: &Output, text: &str, first: &str) -> String {
    let run = out.store().run().id.to_string();
    let root = out.path().canonicalize().unwrap();
    let text = text
        .replace(&root.display().to_string(), "ROOT")
        .replace(&out.path().display().to_string(), "ROOT")
        .replace(&run, "RUN");
    let start = text
        .find(&format!("\n{first}"))
        .unwrap_or_else(|| panic!("no `{first}` in\n{text}"))
        + 1;
    let end = text.find("concurrency ").expect("the timeline");
    text[start..end].to_owned()
}

/// `command` typed in `dir` as the user would, git knowing who they are.
fn as_the_user(dir: &std::path::Path, command: &str) -> std::process::Output {
    Command::new("sh")
        .args(["-c", command])
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "user")
        .env("GIT_AUTHOR_EMAIL", "user@example.com")
        .env("GIT_COMMITTER_NAME", "user")
        .env("GIT_COMMITTER_EMAIL", "user@example.com")
        .output()
        .unwrap()
}

fn merge_block(out: &Output, text: &str) -> String {
    block_from(out, text, "the result did not merge")
}

#[test]
fn a_conflict_between_tasks_says_which_files_and_what_to_type() {
    let out = repo_with(TWO_WRITERS)
        .args(&["run", "graph.toml"])
        .run()
        .status(1);
    let summary = merge_block(&out, &out.stdout);
    insta::assert_snapshot!(summary);
    let root = out.path().to_path_buf();
    let status = baton_in(&root, &["status"]).stdout;
    assert_eq!(merge_block(&out, &status), summary, "{status}");

    let json = out.then().args(&["status", "--json"]).run().status(0);
    let doc = json.json();
    let run = doc["run"]["id"].as_str().unwrap().to_owned();
    let conflict = &doc["result"]["conflict"];
    assert_eq!(conflict["task"], "right", "{doc}");
    assert_eq!(conflict["with"], serde_json::json!(["left"]), "{doc}");
    assert_eq!(
        conflict["files"],
        serde_json::json!(["shared.txt"]),
        "{doc}"
    );
    assert_eq!(
        doc["result"]["branch"],
        format!("baton/{run}/result"),
        "{doc}"
    );
    let worktree = conflict["worktree"].as_str().unwrap();
    assert!(
        worktree.ends_with(&format!(".baton/worktrees/{run}/right")),
        "{worktree}"
    );
    let next: Vec<String> = doc["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        next.last(),
        Some(&format!("baton resume {run}")),
        "{next:?}"
    );

    // Typed as told (the file edited between the merge and the commit), they resolve it.
    for command in &next {
        if let Some(args) = command.strip_prefix("baton ") {
            let args: Vec<&str> = args.split(' ').collect();
            let side = baton_in(&root, &args);
            assert_eq!(side.code, Some(0), "{}\n{}", side.stdout, side.stderr);
            continue;
        }
        if command.ends_with("commit -a --no-edit") {
            std::fs::write(
                std::path::Path::new(worktree).join("shared.txt"),
                "left\nright\n",
            )
            .unwrap();
        }
        let ran = as_the_user(&root, command);
        // The merge conflicts: that is what the person resolves.
        assert!(
            ran.status.success() || command.contains(" merge "),
            "{command}: {}",
            String::from_utf8_lossy(&ran.stderr)
        );
    }
    let after = json.then().args(&["status", "--json"]).run().status(0);
    assert_eq!(after.json()["run"]["state"], "succeeded");
    // Resolved: what is left to type is where the work went.
    let run = after.json()["run"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        after.json()["next"],
        serde_json::json!([
            format!("baton diff {run} --stat"),
            format!("baton apply {run}")
        ]),
        "{}",
        after.json()
    );
}

#[test]
fn a_conflict_between_dependencies_counts_the_task_that_needs_a_person() {
    let graph = format!(
        "{TWO_WRITERS}\n[[task]]\nid = \"both\"\nneeds = [\"left\", \"right\"]\nrun = \"true\"\n"
    );
    let out = repo_with(&graph)
        .args(&["run", "graph.toml"])
        .run()
        .status(1);
    let summary = merge_block(&out, &out.stdout);
    let out = out.stdout_contains("3 tasks, 2 ok, 1 need a person, 3 attempts");
    assert!(
        summary
            .starts_with("the result did not merge: `right` conflicts with `left` in shared.txt\n"),
        "{summary}"
    );
    assert!(summary.ends_with("  baton resume RUN\n\n"), "{summary}");
    insta::assert_snapshot!(summary);
    let status = baton_in(out.path(), &["status"]).stdout;
    assert_eq!(merge_block(&out, &status), summary, "{status}");
    // One recipe, and it is enough (the newcomer was given two, and only the second was
    // needed): edit where it says, commit, resume.
    let json: serde_json::Value =
        serde_json::from_str(&baton_in(out.path(), &["status", "--json"]).stdout).unwrap();
    for command in json["next"].as_array().unwrap() {
        let command = command.as_str().unwrap();
        if let Some(rest) = command.strip_prefix("# in ") {
            let dir = rest.split(": edit").next().unwrap();
            std::fs::write(
                std::path::Path::new(dir).join("shared.txt"),
                "left and right\n",
            )
            .unwrap();
            continue;
        }
        if let Some(args) = command.strip_prefix("baton ") {
            let args: Vec<&str> = args.split_whitespace().collect();
            let ran = baton_in(out.path(), &args);
            assert_eq!(ran.code, Some(0), "{command}: {}", ran.stderr);
            continue;
        }
        let ran = as_the_user(out.path(), command);
        assert!(
            ran.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&ran.stderr)
        );
    }
    let after = baton_in(out.path(), &["status", "--json"]);
    let after: serde_json::Value = serde_json::from_str(&after.stdout).unwrap();
    assert_eq!(after["run"]["state"], "succeeded", "{after}");
}
