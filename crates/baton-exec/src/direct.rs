//! Simple shell commands run without the shell, as make runs them: `cargo test -p db`, `true`,
//! `./build.sh --release`. Starting `/bin/sh` to parse a line that holds nothing for a shell to
//! do costs more than a small task itself (docs/PERFORMANCE.md).
//!
//! A script is simple when every byte is a letter, digit, space or one of `-_./,:+@%=`, and
//! its first word is neither an assignment, a reserved word nor a shell builtin (whose
//! behaviour may differ from the program of the same name: dash's `echo` reads backslash
//! escapes, coreutils' does not), `true` and `false` excepted (the same either way). The
//! program must be found as an executable file in the `PATH` the child gets; where it is not,
//! the shell runs the line and says `not found` (exit 127) as it always has.
//!
//! Run directly, a program that a signal ends is recorded as ended by that signal rather than
//! as the shell's exit code 128 + N, and it is the attempt's own process (the one in its
//! process group that baton waits for) rather than the shell's child.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Words that, first on a line, mean something to the shell itself.
const SHELL_WORDS: &[&str] = &[
    "!", ".", ":", "[", "alias", "bg", "break", "case", "cd", "chdir", "command", "continue", "do",
    "done", "echo", "elif", "else", "esac", "eval", "exec", "exit", "export", "fc", "fg", "fi",
    "for", "getopts", "hash", "if", "in", "jobs", "kill", "local", "printf", "pwd", "read",
    "readonly", "return", "set", "shift", "source", "test", "then", "times", "trap", "type",
    "ulimit", "umask", "unalias", "unset", "until", "wait", "while", "{", "}",
];

/// The program and arguments of `script` when it can run without a shell (see the module's
/// comment), with the program found in `path` (the child's `PATH`), or, named with a `/`,
/// relative to `cwd` (the child's working directory); `None` for the shell.
pub(crate) fn direct(
    script: &str,
    path: Option<&OsStr>,
    cwd: &Path,
) -> Option<(PathBuf, Vec<OsString>)> {
    let simple = script.bytes().all(|b| {
        b.is_ascii_alphanumeric() || b == b' ' || b == b'\t' || b"-_./,:+@%=".contains(&b)
    });
    if !simple {
        return None;
    }
    let mut words = script.split([' ', '\t']).filter(|w| !w.is_empty());
    let first = words.next()?;
    if first.contains('=') || SHELL_WORDS.contains(&first) {
        return None;
    }
    let program = find(first, path?, cwd)?;
    Some((program, words.map(OsString::from).collect()))
}

/// `name` as the shell would find it: itself (relative to `cwd`) when it holds a `/`, else
/// the first executable regular file `DIR/name` in `path`'s directories. A relative entry
/// (`bin`, or an empty one: the working directory) met before the program is found leaves the
/// search to the shell, which resolves it against the child's directory. Only ever an
/// executable file: what is missing is the shell's to say.
fn find(name: &str, path: &OsStr, cwd: &Path) -> Option<PathBuf> {
    if name.contains('/') {
        return executable(&cwd.join(name)).then(|| PathBuf::from(name));
    }
    if let Some(found) = FOUND.get(path, name) {
        return Some(found);
    }
    for dir in path.as_bytes().split(|&b| b == b':') {
        let dir = Path::new(OsStr::from_bytes(dir));
        if !dir.is_absolute() {
            return None;
        }
        let candidate = dir.join(name);
        if executable(&candidate) {
            FOUND.put(path, name, &candidate);
            return Some(candidate);
        }
    }
    None
}

/// Programs found by a `PATH` search, by the `PATH` searched and their name, as a shell's
/// `hash` remembers them: a graph runs the same few programs thousands of times, and each
/// search is a `stat` per directory before the program's (nine for `true` on a typical
/// `PATH`, ~5% of the dispatcher's CPU on 10,000 `true` tasks: docs/PERFORMANCE.md). What was
/// found is looked at again (one `stat`) before it is used, so a program removed since is
/// searched for anew; one installed since in an earlier directory of the same `PATH` is not
/// seen until baton starts again, as with a shell's `hash`.
static FOUND: Found = Found(std::sync::Mutex::new(None));

struct Found(std::sync::Mutex<Option<HashMap<OsString, HashMap<String, PathBuf>>>>);

impl Found {
    /// Past this many programs the cache starts over: bounded, whatever a process runs.
    const MAX: usize = 1024;

    fn get(&self, path: &OsStr, name: &str) -> Option<PathBuf> {
        let found = {
            let cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
            cache.as_ref()?.get(path)?.get(name)?.clone()
        };
        executable(&found).then_some(found)
    }

    fn put(&self, path: &OsStr, name: &str, found: &Path) {
        let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let cache = cache.get_or_insert_with(HashMap::new);
        if cache.values().map(HashMap::len).sum::<usize>() >= Self::MAX {
            cache.clear();
        }
        cache
            .entry(path.to_owned())
            .or_default()
            .insert(name.to_owned(), found.to_owned());
    }
}

fn executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direct_in_usr_bin(script: &str) -> Option<Vec<String>> {
        let (program, args) = direct(
            script,
            Some(OsStr::new("/nonexistent:/usr/bin:/bin")),
            Path::new("/usr/bin"),
        )?;
        let mut all = vec![program.display().to_string()];
        all.extend(args.iter().map(|a| a.to_string_lossy().into_owned()));
        Some(all)
    }

    #[test]
    fn simple_commands_skip_the_shell() {
        assert_eq!(
            direct_in_usr_bin("true"),
            Some(vec!["/usr/bin/true".into()])
        );
        assert_eq!(
            direct_in_usr_bin("  sleep   0.5 "),
            Some(vec!["/usr/bin/sleep".into(), "0.5".into()])
        );
        assert_eq!(
            direct_in_usr_bin("env --unset=X A=b"),
            Some(vec![
                "/usr/bin/env".into(),
                "--unset=X".into(),
                "A=b".into()
            ])
        );
        assert_eq!(
            direct_in_usr_bin("./env -i"),
            Some(vec!["./env".into(), "-i".into()])
        );
    }

    #[test]
    fn anything_for_the_shell_keeps_it() {
        for script in [
            "echo hi",
            "echo a; echo b",
            "cat *.txt",
            "ls > out",
            "FOO=1 env",
            "test -e x",
            "cd sub",
            "true && false",
            "sleep $N",
            "printf '%s' x",
            "grep -q x file || true",
            "~/bin/tool",
            "if true",
            "no-such-program-anywhere",
            "./no-such-script.sh",
            "",
            "   ",
            "a\\b",
            "run # comment",
        ] {
            assert_eq!(direct_in_usr_bin(script), None, "{script:?}");
        }
        assert_eq!(
            direct("true", None, Path::new("/")),
            None,
            "no PATH: the shell's"
        );
    }

    /// A relative `PATH` entry is resolved against the child's directory, which only the
    /// shell does: met before the program, it leaves the line to the shell.
    #[test]
    fn a_relative_path_entry_before_the_program_leaves_it_to_the_shell() {
        for path in ["bin:/usr/bin", ":/usr/bin", "/usr/bin::bin"] {
            let got = direct("true", Some(OsStr::new(path)), Path::new("/"));
            let expected = path
                .starts_with('/')
                .then(|| PathBuf::from("/usr/bin/true"));
            assert_eq!(got.map(|(program, _)| program), expected, "{path:?}");
        }
    }

    /// A program found once is remembered; one removed since is searched for anew (and not
    /// found, here: the shell's to say).
    #[test]
    fn a_program_found_is_remembered_until_it_is_gone() {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let path = std::env::join_paths(dirs.iter().map(|d| d.path())).unwrap();
        let program = |dir: &Path| {
            let file = dir.join("tool");
            std::fs::write(&file, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
            file
        };
        let second = program(dirs[1].path());
        let found = || direct("tool -v", Some(&path), Path::new("/")).map(|(p, _)| p);
        assert_eq!(found(), Some(second.clone()));
        // Installed since in an earlier directory: not seen while the first is there.
        let first = program(dirs[0].path());
        assert_eq!(found(), Some(second.clone()));
        std::fs::remove_file(&second).unwrap();
        assert_eq!(found(), Some(first.clone()), "searched anew");
        std::fs::remove_file(&first).unwrap();
        assert_eq!(found(), None);
    }
}
