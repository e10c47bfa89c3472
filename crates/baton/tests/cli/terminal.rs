//! Terminal safety: a string from a graph file (its `name`, an invalid id, a scope, the file's
//! own text in an error's snippet) or from a task reaches the terminal shown (`^[`), never
//! played, whatever prints it: listings, plans, graphs, JSON, errors.

use crate::test::{Output, READING_G_TOML, Test};

/// Clears the screen, sets the window title, rings the bell; the C1 forms of OSC and CSI too.
const NAME: &str = r#"x\u001b[2J\u001b]0;pwned\u0007\u009d0;c1\u009c\u009b31m"#;

/// An OSC 52 clipboard write.
const BAD_ID: &str = r#"a\u001b]52;c;aGVsbG8=\u0007"#;

/// Fails the test if baton printed a control character other than newline and tab, or a C1
/// control: an escape sequence from the input would then be played by the terminal.
#[track_caller]
fn assert_inert(out: &Output, what: &str) {
    for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let bad = text
            .char_indices()
            .find(|&(_, c)| c.is_control() && c != '\n' && c != '\t');
        if let Some((at, c)) = bad {
            let from = text[..at]
                .char_indices()
                .rev()
                .nth(30)
                .map_or(0, |(i, _)| i);
            panic!(
                "{what}: {stream} holds U+{:04X} at byte {at}: {:?}",
                c as u32,
                &text[from..(at + 30).min(text.len())]
            );
        }
    }
}

fn graph_named(name: &str) -> String {
    format!("name = \"{name}\"\n\n[[task]]\nid = \"a\"\nrun = \"true\"\n")
}

#[test]
fn a_name_with_escapes_is_shown_not_played_everywhere() {
    let mut test = Test::new()
        .graph("g.toml", &graph_named(NAME))
        .args(&["run", "g.toml"])
        .run()
        .status(0);
    assert_inert(&test, "run");
    for args in [
        ["status"].as_slice(),
        &["status", "--json"],
        &["runs"],
        &["runs", "--json"],
        &["events", "latest"],
        &["events", "latest", "--json"],
        &["plan", "g.toml"],
        &["plan", "g.toml", "--json"],
        &["run", "g.toml", "--dry-run"],
        &["run", "g.toml", "--dry-run", "--json"],
        &["graph", "g.toml"],
        &["graph", "g.toml", "--format", "mermaid"],
        &["run", "g.toml", "--json"],
        &["run", "g.toml", "--quiet"],
    ] {
        let out = test.then().args(args).run().status(0);
        assert_inert(&out, &args.join(" "));
        if !args.contains(&"--json") && !args.contains(&"mermaid") {
            // Shown: the user can still see what the name holds (a Mermaid chart has none).
            assert!(
                out.stdout.contains("^[]0;pwned^G"),
                "{}: the name is not shown\n{}",
                args.join(" "),
                out.stdout
            );
        }
        test = out;
    }
    // JSON says exactly what the name is, in escapes.
    let out = test.then().args(&["status", "--json"]).run().status(0);
    assert_eq!(
        out.json()["run"]["name"],
        "x\u{1b}[2J\u{1b}]0;pwned\u{7}\u{9d}0;c1\u{9c}\u{9b}31m"
    );
}

#[test]
fn an_invalid_id_is_quoted_safely_in_errors() {
    let graph = format!("name = \"x\"\n\n[[task]]\nid = \"{BAD_ID}\"\nrun = \"true\"\n");
    let test = Test::new().graph("g.toml", &graph);
    let mut out = test.args(&["plan", "g.toml"]).run().status(2);
    for args in READING_G_TOML {
        out = out
            .then()
            .args(args)
            .run()
            .status(2)
            .stderr_contains("g.toml:4:6:")
            .stderr_contains("^[]52;c;aGVsbG8=^G");
        assert_inert(&out, &args.join(" "));
    }
}

#[test]
fn raw_control_bytes_in_the_file_are_not_echoed_by_the_error_snippet() {
    // Not valid TOML (a raw ESC in a string), nor JSON: the parser's error shows the line.
    let out = Test::new()
        .graph(
            "g.toml",
            "name = \"ok\"\n\n[[task]]\nid = \"a\"\nrun = \"echo \u{1b}]52;c;aGVsbG8=\u{7}\" oops\n",
        )
        .args(&["plan", "g.toml"])
        .run()
        .status(2)
        .stderr_contains("g.toml:5:");
    assert_inert(&out, "plan of a file with raw escapes");
    insta::assert_snapshot!(out.stderr);

    let out = Test::new()
        .graph(
            "g.json",
            "{\"name\": \"ok\", \"task\": [{\"id\": \"a\u{1b}[2J\", \"run\": \"true\"}]}",
        )
        .args(&["plan", "g.json"])
        .run()
        .status(2);
    assert_inert(&out, "plan of a JSON file with raw escapes");
}

#[test]
fn a_scope_with_escapes_is_refused_and_shown_safely() {
    let out = Test::new()
        .graph(
            "g.toml",
            "[[task]]\nid = \"a\"\nscope = [\"out\\u001b]0;x\\u0007/**\"]\nrun = \"true\"\n",
        )
        .args(&["run", "g.toml"])
        .run()
        .status(2)
        .stderr_contains("g.toml:3:14:");
    assert_inert(&out, "run");
}

#[test]
fn every_error_message_is_shown_safely() {
    // Whatever an error quotes (here what it was given on the command line) passes the same
    // way out as every other text.
    let out = recorded()
        .then()
        .args(&["logs", "latest", "a\u{1b}]52;c;aGVsbG8=\u{7}"])
        .run()
        .status(2)
        .stderr_contains("^[]52;c;aGVsbG8=^G");
    assert_inert(&out, "logs");
    let out = out
        .then()
        .args(&["status", "\u{1b}[2J"])
        .run()
        .status(2)
        .stderr_contains("^[[2J");
    assert_inert(&out, "status");
}

fn recorded() -> Output {
    Test::new()
        .graph("g.toml", &graph_named("plain"))
        .args(&["run", "g.toml"])
        .run()
        .status(0)
}
