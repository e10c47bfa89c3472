//! Diagnostics as the user reads them: each names the file, line and column, and says what
//! to do.

use super::*;

#[test]
fn unknown_field_with_suggestion() {
    let e = err(
        "g.toml",
        r#"
[[task]]
id = "a"
need = ["b"]
run = "x"

[defaults]
timout = "5m"
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r"
    g.toml:4:1: error: unknown field `need` in [[task]]
      help: did you mean `needs`?
    g.toml:8:1: error: unknown field `timout` in [defaults]
      help: did you mean `timeout`?
    ");
}

#[test]
fn cycle() {
    let e = err(
        "g.toml",
        r#"
[[task]]
id = "a"
needs = ["c"]
run = "x"
[[task]]
id = "b"
needs = ["a"]
run = "x"
[[task]]
id = "c"
needs = ["b"]
run = "x"
[[task]]
id = "d"
needs = ["e"]
run = "x"
[[task]]
id = "e"
needs = ["d", "a"]
run = "x"
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:8:10: error: dependency cycle: a -> c -> b -> a
    g.toml:4:10: note: `a` needs `c`
    g.toml:12:10: note: `c` needs `b`
      help: `a -> b` means a needs b; remove one of these `needs` entries to break the cycle
    g.toml:20:10: error: dependency cycle: d -> e -> d
    g.toml:16:10: note: `d` needs `e`
      help: `a -> b` means a needs b; remove one of these `needs` entries to break the cycle
    "#);
}

#[test]
fn duplicate_id() {
    let e = err(
        "g.toml",
        "[[task]]\nid = \"a\"\nrun = \"x\"\n\n[[task]]\nid = \"a\"\nrun = \"y\"\n",
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:6:6: error: duplicate task id `a`
    g.toml:2:6: note: first defined here
      help: task ids must be unique; rename one of them
    "#);
}

#[test]
fn unknown_dependency() {
    let e = err(
        "g.toml",
        "[[task]]\nid = \"build\"\nrun = \"x\"\n[[task]]\nid = \"test\"\nneeds = [\"biuld\", \"test\", \"zzz\"]\nrun = \"y\"\n",
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:6:10: error: unknown dependency `biuld`
      help: did you mean `build`?
    g.toml:6:19: error: task `test` needs itself
      help: remove it from `needs`
    g.toml:6:27: error: unknown dependency `zzz`
      help: `needs` lists ids of other tasks in this file
    "#);
}

#[test]
fn bad_duration() {
    let e = err(
        "g.toml",
        "[defaults]\ntimeout = \"20 minutes\"\nbackoff = 30\n[[task]]\nid = \"a\"\nrun = \"x\"\nhandoff_limit = \"lots\"\n",
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:2:11: error: bad duration for `timeout`
      help: `20 minutes` is not a duration; write a number and a unit, like `30s`, `20m`, `1h30m` or `500ms`
    g.toml:3:11: error: `backoff` needs a unit
      help: write a string with a unit, like `backoff = "30s"` or `"30m"`
    g.toml:7:17: error: bad size for `handoff_limit`
      help: `lots` is not a size; write a number and a unit, like `8KiB`, `64KB`, `1MiB` or `512` (bytes)
    "#);
}

#[test]
fn scope_escape() {
    let e = err(
        "g.toml",
        r#"
[[task]]
id = "a"
run = "x"
scope = ["src/**", "../other/**", "/etc/passwd", 'src\main.rs', "src/[a"]
cwd = "../.."
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:5:20: error: scope `../other/**` escapes the repository: it contains `..`
      help: paths are relative to the repository root, like `src/db/**`
    g.toml:5:35: error: scope `/etc/passwd` escapes the repository: it is absolute; write it relative to the repository root
      help: paths are relative to the repository root, like `src/db/**`
    g.toml:5:54: error: scope `src\\main.rs` contains U+005C REVERSE SOLIDUS, which separates directories on Windows only; git and globs read it otherwise
      help: write the path with plain characters, with `/` between directories
    g.toml:5:65: error: invalid scope `src/[a`: `[` without `]`
      help: globs use `*`, `?`, `**`, `[a-z]` and `{a,b}`
    g.toml:6:7: error: cwd `../..` escapes the repository: it contains `..`
      help: paths are relative to the repository root, like `src/db/**`
    "#);
}

#[test]
fn many_errors_at_once_sorted() {
    let e = err(
        "g.toml",
        r#"
name = 3

[run]
concurrency = 0
on_failure = "explode"

[[task]]
id = "bad id"
run = "x"
prompt = "y"

[[task]]
id = "a"
engine = "claud"
retries = -1
approval = "yes"

[[task]]
id = "b"
needs = ["a"]
run = "echo {{ needs.c.output }}"

[[task]]
id = "c"
prompt = "{% if %}"

[[task]]
run = "no id"
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:2:8: error: `name` must be a string, not an integer
    g.toml:5:15: error: `concurrency` must be a whole number from 1 to 4294967295, not 0
    g.toml:6:14: error: unknown on failure `explode`
      help: use one of: block, continue, stop
    g.toml:9:6: error: invalid task id `bad id`: id contains ` `; use letters and digits of any script, `_`, `-` and single dots
      help: ids become file names and git branch names: letters and digits of any script, `_`, `-` and single dots; starting with a letter or digit, not ending in `.` or `.lock`, at most 100 bytes (UTF-8)
    g.toml:11:10: error: task `bad id` has both `run` and `prompt`
      help: a task runs a shell command (`run`) or prompts an agent (`prompt`), not both; split it into two tasks
    g.toml:14:6: error: task `a` has neither `run` nor `prompt`
      help: add `run = "…"` for a shell command or `prompt = "…"` for an agent
    g.toml:15:10: error: unknown engine `claud`
      help: did you mean `claude`?
    g.toml:16:11: error: `retries` must be a whole number from 0 to 4294967295, not -1
    g.toml:17:12: error: `approval` must be `true` or `false`, not a string
    g.toml:22:22: error: in `run`: `needs.c` refers to a task that is not in this task's `needs`
      help: `c` is a task in this file; add it to this task's `needs`: only the tasks in `needs` are handed over
    g.toml:26:17: error: in `prompt`: syntax error: unexpected end of block
      help: templates refer to predecessors as `{{ needs.ID.output }}` (also `.status`, `.files_changed`, `.json`); ID must be in `needs`
    g.toml:28:1: error: task has no `id`
      help: give every task a unique `id`, like `id = "build"`
    "#);
}

#[test]
fn wrong_shapes() {
    let e = err("g.toml", "[task]\nid = \"a\"\n");
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:1:1: error: `task` must be an array of tables
      help: write `[[task]]` (double brackets) above each task
    "#);
    let e = err("g.json", "[1, 2]");
    insta::assert_snapshot!(e.to_string(), @r"
    g.json:1:1: error: the graph file must be a table, not an array
      help: a graph file holds a table with `name`, `[defaults]`, `[run]` and `[[task]]` entries
    ");
    let e = err(
        "g.json",
        r#"{"task": [{"id": "a", "run": "x", "id": "b"}]}"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.json:1:35: error: `id` is given twice in [[task]]
    g.json:1:12: note: first given here
      help: remove one of them
    "#);
}

#[test]
fn engines_and_actions() {
    let e = err(
        "g.toml",
        r#"
[defaults]
engine = "shell"
[[task]]
id = "a"
prompt = "hi"
[[task]]
id = "b"
engine = "claude"
run = "make"
[[task]]
id = "c"
engine = "noop"
prompt = "x"
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:6:10: error: engine `shell` does not take a `prompt`
      help: [defaults] sets this engine; set `engine` on the task to an agent, or write a shell command as `run`
    g.toml:9:10: error: engine `claude` does not take `run`
      help: `claude` is an agent: write the instructions as `prompt`, or remove `engine` to run `run` with the shell
    g.toml:13:10: error: engine `noop` does not take a `prompt`
      help: set an agent engine (claude, codex, gemini, aider, http), or write a shell command as `run`
    "#);
}

#[test]
fn syntax_errors() {
    insta::assert_snapshot!(err("g.toml", "[[task]]\nid = \"a\nrun = 1\n").to_string(), @r#"
    g.toml:2:8: error: invalid basic string, expected `"`
      help: this is not valid TOML; see https://toml.io
    "#);
    insta::assert_snapshot!(err("g.json", "{\"task\": [}").to_string(), @r"
    g.json:1:11: error: Unexpected close brace
      help: this is not valid JSON: a `.json` graph file is strict JSON; name it `.jsonc` to allow comments and trailing commas
    ");
}

#[test]
fn template_refers_to_a_task_it_does_not_need() {
    let e = err(
        "g.toml",
        r#"
[[task]]
id = "fetch.v2"
run = "x"
[[task]]
id = "lint"
needs = ["fetch.v2"]
run = "y"
[[task]]
id = "report"
needs = ["lint"]
run = "echo {{ needs.lint.output }} {{ needs.fetch.v2.json.records }}"
"#,
    );
    insta::assert_snapshot!(e.to_string(), @r#"
    g.toml:12:46: error: in `run`: `needs.fetch` refers to a task that is not in this task's `needs`
      help: `fetch.v2` is a task in this file; add it to this task's `needs`: only the tasks in `needs` are handed over
    "#);
}

#[test]
fn empty_graph() {
    insta::assert_snapshot!(err("g.toml", "name = \"nothing\"\n").to_string(), @r#"
    g.toml: error: the graph has no tasks
      help: add a `[[task]]` table with an `id` and a `run` command or a `prompt`
    "#);
}

#[test]
fn diagnostics_carry_spans_and_labels_for_miette() {
    let text = "[[task]]\nid = \"a\"\nrun = \"x\"\nneeds = [\"nope\"]\n";
    let e = err("g.toml", text);
    let d = &e.diagnostics[0];
    let span = d.span.clone().unwrap();
    assert_eq!(&text[span.clone()], "\"nope\"");
    assert_eq!(d.label.as_deref(), Some("no task has this id"));
    assert_eq!(e.line_col(span.start), (4, 10));
}
