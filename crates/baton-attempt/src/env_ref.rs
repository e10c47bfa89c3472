//! `${VAR}` in a task's `env` values: taken from baton's own environment when the task starts,
//! so that a graph file (and the copy of it in the store) names a secret without holding it.

/// Why a value could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("refers to `${{{0}}}`, which is not set in baton's environment")]
    Missing(String),
    #[error("{0}")]
    Syntax(String),
}

/// `value` with every `${NAME}` replaced by `lookup(NAME)`; `$${` stands for a literal `${`.
/// Fails with the first name `lookup` does not know.
pub fn expand(
    value: &str,
    mut lookup: impl FnMut(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    if !value.contains("${") {
        return Ok(value.to_owned());
    }
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        if rest[..at].ends_with('$') {
            // `$${`: an escaped `${`.
            out.push_str(&rest[..at - 1]);
            out.push_str("${");
            rest = &rest[at + 2..];
            continue;
        }
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(ExpandError::Syntax(
                "has a `${` without its `}`; write `$${` for a literal `${`".to_owned(),
            ));
        };
        let name = &after[..end];
        if !is_name(name) {
            return Err(ExpandError::Syntax(format!(
                "`${{{name}}}` is not a variable name"
            )));
        }
        match lookup(name) {
            Some(found) => out.push_str(&found),
            None => return Err(ExpandError::Missing(name.to_owned())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Every problem expanding the `env` of `graph`'s tasks would meet, now: what is missing from
/// `lookup`, and what is malformed. Checked before a run starts, so that it fails at once and
/// not task by task.
pub fn check_graph(
    graph: &baton_graph::Graph,
    mut lookup: impl FnMut(&str) -> Option<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for task in graph.tasks() {
        for (key, value) in &task.env {
            if let Err(err) = expand(value, &mut lookup) {
                problems.push(format!("task `{}`: env `{key}` {err}", task.id));
            }
        }
    }
    problems
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cr3t".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_escapes_and_reports() {
        assert_eq!(expand("plain $HOME", env), Ok("plain $HOME".into()));
        assert_eq!(expand("Bearer ${TOKEN}!", env), Ok("Bearer s3cr3t!".into()));
        assert_eq!(expand("${EMPTY}x", env), Ok("x".into()));
        assert_eq!(expand("$${TOKEN}", env), Ok("${TOKEN}".into()));
        assert_eq!(
            expand("${MISSING}", env),
            Err(ExpandError::Missing("MISSING".into()))
        );
        assert!(matches!(
            expand("${TOKEN", env),
            Err(ExpandError::Syntax(_))
        ));
        assert!(matches!(expand("${1X}", env), Err(ExpandError::Syntax(_))));
    }
}
