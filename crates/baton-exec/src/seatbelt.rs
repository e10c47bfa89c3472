//! The write sandbox on macOS: Seatbelt, through `sandbox-exec` with a profile that allows
//! everything but writing, and writing only beneath the attempt's allowed paths and to a few
//! device files — what [`crate::WriteSandbox`] asks of Landlock on Linux.
//!
//! As the Codex CLI's Seatbelt policy does, the paths are not written into the profile's text
//! but passed as parameters (`-D WRITABLE_ROOT_0=/path`), so that no path can change the
//! profile's meaning whatever it holds. Seatbelt matches real paths (`/tmp` is
//! `/private/tmp`): each is resolved first. Later rules win over earlier ones, so the denial of
//! every write comes before the writes allowed.
//!
//! Only a Mac runs it; the profile's text and the arguments are tested on every platform.

use std::ffi::OsString;
use std::path::Path;

use crate::WriteSandbox;

/// Where macOS keeps `sandbox-exec`.
#[cfg(target_os = "macos")]
pub(crate) const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The device files a confined process may still write, as on Linux.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/dtracehelper",
];

/// The profile for `roots` writable paths, named `WRITABLE_ROOT_0` … in its parameters.
pub(crate) fn profile(roots: usize) -> String {
    let mut text = String::from("(version 1)\n(allow default)\n(deny file-write*)\n");
    for i in 0..roots {
        text.push_str(&format!(
            "(allow file-write* (subpath (param \"WRITABLE_ROOT_{i}\")))\n"
        ));
    }
    text.push_str("(allow file-write-data\n");
    for device in DEVICES {
        text.push_str(&format!("    (literal \"{device}\")\n"));
    }
    // Pseudo-terminals a program opens for a child (`script`, node-pty).
    text.push_str("    (regex #\"^/dev/ttys[0-9]+$\"))\n");
    text
}

/// `sandbox-exec`'s arguments before the program: the profile, then each writable path, as it
/// resolves (a path that does not exist is left out, as Landlock leaves it out).
pub(crate) fn arguments(sandbox: &WriteSandbox) -> Vec<OsString> {
    let roots: Vec<_> = sandbox
        .allowed()
        .iter()
        .filter_map(|path| resolved(path))
        .collect();
    let mut args = vec![OsString::from("-p"), OsString::from(profile(roots.len()))];
    for (i, root) in roots.into_iter().enumerate() {
        let mut define = OsString::from(format!("WRITABLE_ROOT_{i}="));
        define.push(root);
        args.push(OsString::from("-D"));
        args.push(define);
    }
    args
}

fn resolved(path: &Path) -> Option<OsString> {
    path.canonicalize().ok().map(OsString::from)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn the_profile_denies_every_write_then_allows_its_roots_and_devices() {
        let text = profile(2);
        let deny = text.find("(deny file-write*)").unwrap();
        let first = text
            .find("(allow file-write* (subpath (param \"WRITABLE_ROOT_0\")))")
            .unwrap();
        let second = text
            .find("(allow file-write* (subpath (param \"WRITABLE_ROOT_1\")))")
            .unwrap();
        assert!(deny < first && first < second, "{text}");
        assert!(text.starts_with("(version 1)\n(allow default)\n"), "{text}");
        assert!(!text.contains("WRITABLE_ROOT_2"), "{text}");
        assert!(text.contains("(literal \"/dev/null\")"), "{text}");
        // Nothing else is allowed to be written: the only allows of writes are these.
        assert_eq!(text.matches("(allow file-write").count(), 3, "{text}");
        // The parentheses balance: sandbox-exec would refuse a profile that does not parse.
        let depth = text.chars().fold(0i32, |depth, c| match c {
            '(' => depth + 1,
            ')' => depth - 1,
            _ => depth,
        });
        assert_eq!(depth, 0, "{text}");
    }

    #[test]
    fn each_existing_root_is_a_parameter_resolved_and_none_is_in_the_profile_text() {
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join("a \"quoted\") (allow default");
        std::fs::create_dir(&odd).unwrap();
        let missing = dir.path().join("not-there");
        let sandbox = WriteSandbox::new([odd.clone(), missing, PathBuf::from(dir.path())]);
        let args = arguments(&sandbox);
        assert_eq!(args[0], "-p");
        let text = args[1].to_str().unwrap();
        assert!(text.contains("WRITABLE_ROOT_1") && !text.contains("WRITABLE_ROOT_2"));
        assert!(
            !text.contains("quoted"),
            "a path never enters the profile: {text}"
        );
        let defines: Vec<_> = args[2..].chunks(2).collect();
        assert_eq!(defines.len(), 2);
        assert_eq!(defines[0][0], "-D");
        let mut first = OsString::from("WRITABLE_ROOT_0=");
        first.push(odd.canonicalize().unwrap());
        assert_eq!(defines[0][1], first);
        let mut second = OsString::from("WRITABLE_ROOT_1=");
        second.push(dir.path().canonicalize().unwrap());
        assert_eq!(defines[1][1], second);
    }
}
