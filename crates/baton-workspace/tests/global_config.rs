//! The user's global config and the caller's `GIT_*` variables change nothing baton does.
//!
//! Its own test binary with one test: it sets environment variables of the process, which
//! no other test may see (or be reading) at the time.

mod common;

use std::os::unix::fs::PermissionsExt;

use baton_workspace::TaskStart;
use common::{Fixture, git, merged, parents};

#[test]
fn a_global_config_and_git_variables_change_nothing() {
    let fx = Fixture::new();
    let home = fx.dir.path().join("home");
    let marker = fx.dir.path().join("ran");
    let hooks = home.join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for hook in ["pre-commit", "post-commit", "post-merge", "post-checkout"] {
        let path = hooks.join(hook);
        std::fs::write(
            &path,
            format!("#!/bin/sh\necho {hook} >> '{}'\n", marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let config = format!(
        "[user]\n\tname = Mallory\n\temail = mallory@example.com\n\
         [alias]\n\tci = !touch '{marker}'\n\tworktree = !touch '{marker}'\n\
         \tmerge = !touch '{marker}'\n\
         [core]\n\thooksPath = {hooks}\n\
         [merge]\n\tff = only\n\
         [commit]\n\tgpgSign = true\n\
         [status]\n\tshowUntrackedFiles = no\n",
        marker = marker.display(),
        hooks = hooks.display(),
    );
    std::fs::write(home.join(".gitconfig"), &config).unwrap();
    std::fs::create_dir_all(home.join(".config/git")).unwrap();
    std::fs::write(home.join(".config/git/config"), &config).unwrap();
    let injected = format!(
        "'user.name'='Injected' 'core.hookspath'='{}'",
        hooks.display()
    );
    // SAFETY: the only test of this binary, set before it starts any thread or process.
    unsafe {
        std::env::set_var("HOME", &home);
        std::env::set_var("XDG_CONFIG_HOME", home.join(".config"));
        std::env::set_var("GIT_CONFIG_PARAMETERS", injected);
        std::env::set_var("GIT_CONFIG_COUNT", "1");
        std::env::set_var("GIT_CONFIG_KEY_0", "user.email");
        std::env::set_var("GIT_CONFIG_VALUE_0", "injected@example.com");
        std::env::set_var("GIT_DIR", fx.dir.path().join("nowhere"));
        std::env::set_var("GIT_INDEX_FILE", fx.dir.path().join("index"));
    }

    let a = fx.task_from_base("a", &[("a.txt", Some("a\n"))]);
    let b = fx.task_from_base("b", &[("b.txt", Some("b\n"))]);
    let c = fx.task(
        "c",
        &TaskStart::Merge(vec![a.clone(), b.clone()]),
        &[("c.txt", Some("c\n"))],
    );
    let result = merged(
        fx.repo
            .merge_into_branch(
                &fx.wt("merge"),
                "baton/r/result",
                &fx.base,
                &[
                    ("a".into(), a.clone()),
                    ("b".into(), b.clone()),
                    ("c".into(), c.clone()),
                ],
            )
            .unwrap(),
    );
    std::fs::write(fx.root().join("new.txt"), "x\n").unwrap();
    assert!(fx.repo.is_dirty().unwrap());
    std::fs::remove_file(fx.root().join("new.txt")).unwrap();
    let applied = merged(fx.repo.apply(&result, "baton: apply", false).unwrap());
    assert_eq!(applied, result, "a fast-forward");

    assert!(!marker.exists());
    let log = git(
        fx.root(),
        &[
            "log",
            "--format=%an <%ae>|%cn <%ce>",
            &format!("{}..{result}", fx.base),
        ],
    );
    assert_eq!(log.lines().count(), 7, "{log}");
    for line in log.lines() {
        assert_eq!(line, "baton <baton@localhost>|baton <baton@localhost>");
    }
    assert_eq!(parents(fx.root(), &parents(fx.root(), &c)[0]), vec![a, b]);
}
