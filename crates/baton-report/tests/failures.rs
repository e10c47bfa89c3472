//! The reason line of a failed task, read from real outputs of the tools people run as tasks
//! (saved from real runs: `tests/fixtures/failures/TOOL.stdout` and `.stderr`).

use baton_report::failure_line;

fn read(tool: &str) -> Option<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/failures");
    let stdout = std::fs::read_to_string(dir.join(format!("{tool}.stdout"))).unwrap();
    let stderr = std::fs::read_to_string(dir.join(format!("{tool}.stderr"))).unwrap();
    failure_line(&stdout, &stderr)
}

#[test]
fn each_tool_s_reason_is_found() {
    let cases = [
        ("cargo-test", "1 failed, 1 passed: tests::adds"),
        ("rustc", "error[E0308]: mismatched types at src/lib.rs:1:34"),
        (
            "clippy",
            "error: writing `&Vec` instead of `&[_]` involves a new object where a slice will do at src/lib.rs:1:13",
        ),
        // Its stderr ends with a test server's access log: the summary is on stdout.
        (
            "pytest",
            "2 failed, 1 passed: test_sample.py::test_add - assert (2 + 2) == 5",
        ),
        (
            "go-test",
            "FAIL TestAdd: gt_test.go:9: Add(2, 2) = 0, want 4",
        ),
        (
            "vitest",
            "1 failed | 1 passed: sum.test.js > adds: AssertionError: expected 2 to be 3 // Object.is equality",
        ),
        ("npm", "npm: Missing script: \"tset\""),
        (
            "make",
            "cc1: fatal error: nosuch.c: No such file or directory (make: [Makefile:2: build] Error 1)",
        ),
        ("make-no-rule", "make: No rule to make target 'nosuch'."),
    ];
    for (tool, want) in cases {
        assert_eq!(read(tool).as_deref(), Some(want), "{tool}");
    }
}

#[test]
fn other_output_is_left_to_its_last_line() {
    assert_eq!(
        failure_line("building\ndone\n", "warning: something\n"),
        None
    );
    // Words that look like a tool's, out of its shape.
    assert_eq!(failure_line("error: the disk is full\n", ""), None);
    assert_eq!(failure_line("FAILED to connect\n", ""), None);
}
