//! What an agent is doing, in a few words, from the tool call it just made: for the live views
//! (`Edit …/src/lib.rs`, `Bash cargo test -p api`).

use serde_json::Value;

use super::str_at;

/// The longest `doing` kept: the live view cuts it to the terminal's width anyway.
const MAX: usize = 120;

/// The inputs that say best what a call is about, most telling first.
const KEYS: [&str; 10] = [
    "file_path",
    "absolute_path",
    "notebook_path",
    "path",
    "command",
    "pattern",
    "query",
    "url",
    "description",
    "prompt",
];

/// `name` and the input that says what it works on.
pub(crate) fn tool(name: &str, input: Option<&Value>) -> String {
    let what = input.and_then(|input| {
        KEYS.iter().find_map(|key| match input.get(key)? {
            Value::String(text) => Some(text.clone()),
            // Codex gives a command as its argv.
            Value::Array(words) => Some(
                words
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        })
    });
    match what {
        Some(what) if !what.trim().is_empty() => phrase(&format!("{name} {}", subject(&what))),
        _ => phrase(name),
    }
}

/// An edit of `path`.
pub(crate) fn edit(path: &str) -> String {
    phrase(&format!("Edit {}", subject(path)))
}

/// A path as its last three parts (worktrees live deep in the state directory), or a
/// command's first line.
fn subject(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.starts_with('/') && !line.contains(' ') {
        let parts: Vec<&str> = line.rsplit('/').take(4).collect();
        if parts.len() == 4 {
            let mut keep: Vec<&str> = parts[..3].to_vec();
            keep.reverse();
            return format!("…/{}", keep.join("/"));
        }
    }
    line.to_owned()
}

/// One line, at most [`MAX`] bytes.
fn phrase(text: &str) -> String {
    let one: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    super::short(one.trim(), MAX)
}

/// The agent retries its model API, which said `error`.
pub(crate) fn waiting_for_the_api(error: &str) -> String {
    phrase(&format!("waiting for the API ({error})"))
}

/// A Codex item that was started: what it is about to do.
pub(crate) fn codex_item(item: &Value) -> Option<String> {
    Some(match str_at(item, "type")? {
        "command_execution" => tool("Run", Some(item).filter(|_| item.get("command").is_some())),
        "file_change" => {
            let paths: Vec<&str> = item
                .get("changes")
                .and_then(Value::as_array)
                .map(|changes| changes.iter().filter_map(|c| str_at(c, "path")).collect())
                .unwrap_or_default();
            match paths.as_slice() {
                [] => "Edit".to_owned(),
                [one] => edit(one),
                [first, rest @ ..] => phrase(&format!("{} (and {} more)", edit(first), rest.len())),
            }
        }
        "mcp_tool_call" => phrase(str_at(item, "tool").unwrap_or("a tool")),
        "web_search" => tool("Search", Some(item)),
        "reasoning" => "thinking".to_owned(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_is_named_by_what_it_works_on() {
        assert_eq!(
            tool(
                "Edit",
                Some(
                    &json!({"file_path": "/root/.baton/wt/run/api/src/lib.rs", "old_string": "x"})
                )
            ),
            "Edit …/api/src/lib.rs"
        );
        assert_eq!(
            tool(
                "Bash",
                Some(&json!({"command": "cargo test\n# and more", "timeout": 5}))
            ),
            "Bash cargo test"
        );
        assert_eq!(tool("TodoWrite", Some(&json!({"todos": []}))), "TodoWrite");
        assert_eq!(
            tool("Read", Some(&json!({"file_path": "src/a.rs"}))),
            "Read src/a.rs"
        );
        assert_eq!(
            codex_item(&json!({"type": "command_execution", "command": "bash -lc 'ls'"})),
            Some("Run bash -lc 'ls'".to_owned())
        );
        assert_eq!(
            codex_item(
                &json!({"type": "file_change", "changes": [{"path": "a.rs"}, {"path": "b.rs"}]})
            ),
            Some("Edit a.rs (and 1 more)".to_owned())
        );
        assert_eq!(codex_item(&json!({"type": "agent_message"})), None);
        let long = tool("Bash", Some(&json!({"command": "x".repeat(500)})));
        assert!(long.len() <= MAX + '…'.len_utf8(), "{long}");
    }
}
