//! Why a task failed, in one line, from what it printed: the summary and first failure of the
//! test runners and compilers people run as tasks, where their output says so, else nothing
//! (and the summary falls back to the last line said).
//!
//! The last line of stderr is often not the reason: pytest's tests may leave a server's access
//! log there, and cargo ends with `could not compile … due to 24 previous errors` after the
//! first error that says what is wrong. Each reader below knows one tool's shape; they are
//! tried in order on stdout and stderr together, and the first that recognises it answers.
//! The shapes are those of real outputs, kept as fixtures in `tests/fixtures/failures/`.

/// The reason a failed task's output gives, in one line, or `None` if no known tool's shape is
/// in it.
pub fn failure_line(stdout: &str, stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stdout.lines().chain(stderr.lines()).collect();
    [rustc, cargo_test, pytest, go_test, vitest, npm, make]
        .iter()
        .find_map(|read| read(&lines))
}

/// rustc and clippy: the first `error: …` or `error[E0308]: …` with where it is, not the
/// closing `could not compile … due to N previous errors`.
fn rustc(lines: &[&str]) -> Option<String> {
    let (at, first) = lines.iter().enumerate().find(|(_, line)| {
        let Some(rest) = line.strip_prefix("error") else {
            return false;
        };
        let rest = match rest.strip_prefix('[') {
            Some(code) => match code.split_once("]: ") {
                Some((code, _)) if code.starts_with('E') => return true,
                _ => return false,
            },
            None => rest,
        };
        let Some(message) = rest.strip_prefix(": ") else {
            return false;
        };
        // cargo's own closing words, not the compiler's diagnosis.
        ![
            "could not compile",
            "aborting",
            "test failed",
            "Recipe",
            "failed to run",
        ]
        .iter()
        .any(|w| message.starts_with(w))
    })?;
    // Only where it is a compiler's: its location follows on the next line.
    let place = lines.get(at + 1)?.trim_start().strip_prefix("--> ")?.trim();
    Some(format!("{first} at {place}"))
}

/// `cargo test`: `test result: FAILED. 1 passed; 1 failed; …` and the first of the failures.
fn cargo_test(lines: &[&str]) -> Option<String> {
    let result = lines
        .iter()
        .find_map(|l| l.strip_prefix("test result: FAILED. "))?;
    let counts = |what: &str| {
        result
            .split(';')
            .map(str::trim)
            .find_map(|part| part.strip_suffix(what)?.trim().parse::<u64>().ok())
    };
    let failed = counts("failed")?;
    let passed = counts("passed").unwrap_or(0);
    // The list under the last `failures:` header: one test per indented line.
    let first = lines
        .iter()
        .rposition(|l| *l == "failures:")
        .and_then(|at| lines[at + 1..].iter().find(|l| l.starts_with("    ")))
        .map(|l| l.trim());
    Some(match first {
        Some(test) => format!("{failed} failed, {passed} passed: {test}"),
        None => format!("{failed} failed, {passed} passed"),
    })
}

/// pytest: `==== 2 failed, 1 passed in 0.03s ====` and its first `FAILED path::test - why`.
fn pytest(lines: &[&str]) -> Option<String> {
    let summary = lines.iter().rev().find_map(|l| {
        let inner = l.trim().trim_matches('=').trim();
        (l.starts_with('=') && (inner.contains(" failed") || inner.contains(" error"))).then(|| {
            inner
                .rsplit_once(" in ")
                .map_or(inner, |(counts, _)| counts)
        })
    })?;
    let first = lines.iter().find_map(|l| {
        l.strip_prefix("FAILED ")
            .or_else(|| l.strip_prefix("ERROR "))
    });
    Some(match first {
        Some(test) => format!("{summary}: {test}"),
        None => summary.to_owned(),
    })
}

/// `go test`: `--- FAIL: TestAdd (0.00s)` and the message under it.
fn go_test(lines: &[&str]) -> Option<String> {
    let at = lines.iter().position(|l| l.starts_with("--- FAIL: "))?;
    let name = lines[at]
        .strip_prefix("--- FAIL: ")?
        .split(" (")
        .next()
        .unwrap_or_default();
    Some(match lines.get(at + 1).map(|l| l.trim()) {
        Some(said) if !said.is_empty() && !said.starts_with("---") && said != "FAIL" => {
            format!("FAIL {name}: {said}")
        }
        _ => format!("FAIL {name}"),
    })
}

/// vitest: `Tests  1 failed | 1 passed (2)`, and the first ` FAIL  file > test` with the
/// error under it.
fn vitest(lines: &[&str]) -> Option<String> {
    let counts = lines.iter().find_map(|l| {
        let rest = l.trim_start().strip_prefix("Tests ")?.trim();
        rest.contains("failed")
            .then(|| rest.rsplit_once(" (").map_or(rest, |(counts, _)| counts))
    })?;
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with("FAIL "));
    let first = at.map(|at| {
        let test = lines[at].trim_start().trim_start_matches("FAIL").trim();
        match lines.get(at + 1).map(|l| l.trim()) {
            Some(error) if !error.is_empty() => format!("{test}: {error}"),
            _ => test.to_owned(),
        }
    });
    Some(match first {
        Some(first) => format!("{counts}: {first}"),
        None => counts.to_owned(),
    })
}

/// npm's own failures (`npm error Missing script: "tset"`): the first line that says what,
/// not its code or where its log is.
fn npm(lines: &[&str]) -> Option<String> {
    lines.iter().find_map(|l| {
        let said = l
            .strip_prefix("npm error ")
            .or_else(|| l.strip_prefix("npm ERR! "))?
            .trim();
        let generic = said.is_empty()
            || ["code ", "errno ", "A complete log", "path ", "syscall "]
                .iter()
                .any(|w| said.starts_with(w));
        (!generic).then(|| format!("npm: {said}"))
    })
}

/// make: `make: *** [Makefile:2: build] Error 1` says only which rule; the line before it in
/// the recipe's output says why. `No rule to make target …` says it itself.
fn make(lines: &[&str]) -> Option<String> {
    let at = lines
        .iter()
        .rposition(|l| l.starts_with("make: *** ") || l.starts_with("make["))?;
    let said = lines[at].split_once("*** ").map_or(lines[at], |(_, s)| s);
    if said.starts_with("No rule") {
        return Some(format!("make: {}", said.trim_end_matches("Stop.").trim()));
    }
    let cause = lines[..at]
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| !l.is_empty() && !l.starts_with("make") && *l != "compilation terminated.");
    Some(match cause {
        Some(cause) => format!("{cause} (make: {said})"),
        None => format!("make: {said}"),
    })
}
