//! "Did you mean …?": the closest known name to a misspelt one.

/// Names people reach for that baton calls something else.
const ALIASES: &[(&str, &str)] = &[
    ("deps", "needs"),
    ("depends_on", "needs"),
    ("dependencies", "needs"),
    ("after", "needs"),
    ("blockedBy", "needs"),
    ("requires", "needs"),
    ("command", "run"),
    ("cmd", "run"),
    ("script", "run"),
    ("shell", "run"),
    ("goal", "prompt"),
    ("instructions", "prompt"),
    ("files", "scope"),
    ("paths", "scope"),
    ("expectedFiles", "scope"),
    ("agent", "engine"),
    ("agentKind", "engine"),
    ("tasks", "task"),
    ("jobs", "concurrency"),
    ("parallelism", "concurrency"),
    ("retry", "retries"),
];

/// The candidate closest to `name`, if any is close enough to be a plausible typo.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let candidates: Vec<&str> = candidates.into_iter().collect();
    let alias = ALIASES
        .iter()
        .find(|(from, _)| from.eq_ignore_ascii_case(name))
        .map(|&(_, to)| to);
    if let Some(c) = alias.and_then(|to| candidates.iter().copied().find(|&c| c == to)) {
        return Some(c);
    }
    let lower = name.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::osa_distance(&lower, &c.to_ascii_lowercase()), c))
        .filter(|&(d, c)| d <= (c.len().max(name.len()) / 3).max(1))
        .min_by_key(|&(d, c)| (d, c))
        .map(|(_, c)| c)
}

/// `"; did you mean `x`?"`, or nothing.
pub(crate) fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    closest(name, candidates).map(|c| format!("did you mean `{c}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_aliases_and_nothing() {
        let fields = ["id", "needs", "run", "prompt", "scope", "timeout"];
        assert_eq!(closest("need", fields), Some("needs"));
        assert_eq!(closest("Prompt", fields), Some("prompt"));
        assert_eq!(closest("timout", fields), Some("timeout"));
        assert_eq!(closest("deps", fields), Some("needs"));
        assert_eq!(closest("command", fields), Some("run"));
        assert_eq!(closest("banana", fields), None);
        assert_eq!(closest("x", fields), None);
    }
}
