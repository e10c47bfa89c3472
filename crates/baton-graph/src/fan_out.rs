//! `for_each`: a task that stands for one task per item. When it becomes ready, its items are
//! known (a list, paths of the checkout, a predecessor's JSON array) and [`Graph::instances`]
//! makes its instances, which join the graph as a planner's tasks do ([`Graph::extended`]).

use baton_model::TaskId;

use crate::graph::{Graph, Task, TaskIndex};

impl Graph {
    /// The instances of `for_each` task `task` for `items`: its fields, each with its item
    /// (`{{ item }}` in `run` and `prompt`, written into `scope`), id `TASK/KEY` (the item, or
    /// the last part of a path, made a valid id; repeated keys numbered), needing what the task
    /// needs and the task itself. `Err` says why they cannot be made.
    pub fn instances(
        &self,
        task: TaskIndex,
        items: &[serde_json::Value],
    ) -> Result<Vec<Task>, String> {
        let template = self.task(task);
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let room = self.room();
        if items.len() > room && !self.fans_out_over_the_checkout(task) {
            return Err(format!(
                "{} items would make the run hold {} tasks; it may hold at most {} (`[run] max_tasks`)",
                items.len(),
                self.len() + items.len(),
                self.len() + room
            ));
        }
        let mut keys: Vec<String> = Vec::with_capacity(items.len());
        let mut out = Vec::with_capacity(items.len());
        for (n, item) in items.iter().enumerate() {
            let mut key = item_key(item, n);
            if keys.contains(&key) {
                let mut k = 2;
                while keys.contains(&format!("{key}-{k}")) {
                    k += 1;
                }
                key = format!("{key}-{k}");
            }
            let id = TaskId::nested(&template.id, &key).map_err(|e| {
                format!(
                    "item {} cannot name a task (`{}/{key}`): {e}",
                    n + 1,
                    template.id
                )
            })?;
            keys.push(key);
            let text = item_text(item);
            let mut scope = Vec::with_capacity(template.scope.len());
            for entry in &template.scope {
                let entry = with_item(entry, &text);
                crate::glob::parse_scope(&entry)
                    .map_err(|e| format!("`{id}`'s scope `{entry}` is not valid: {e}"))?;
                scope.push(entry);
            }
            let mut needs = template.needs.clone();
            needs.push(task);
            out.push(Task {
                id,
                needs,
                scope,
                for_each: None,
                item: Some(Box::new(item.clone())),
                parent: Some(task),
                depth: template.depth + 1,
                ..template.clone()
            });
        }
        Ok(out)
    }
}

/// An item as text: a string as it is, anything else as JSON.
pub fn item_text(item: &serde_json::Value) -> String {
    match item {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `{{ item }}` (spaces inside the braces or not) in a scope entry replaced by the item.
fn with_item(entry: &str, item: &str) -> String {
    let mut out = String::with_capacity(entry.len());
    let mut rest = entry;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open..].find("}}") else {
            break;
        };
        if rest[open + 2..open + close].trim() == "item" {
            out.push_str(&rest[..open]);
            // A directory's item ends in `/`: `{{ item }}**` means what is under it.
            out.push_str(item);
            rest = &rest[open + close + 2..];
        } else {
            out.push_str(&rest[..open + close + 2]);
            rest = &rest[open + close + 2..];
        }
    }
    out.push_str(rest);
    out
}

/// The name an item gives its task: a string's last path part (`crates/api/` → `api`), a
/// table's `id` or `name`, else the item's position; made a valid id segment.
fn item_key(item: &serde_json::Value, n: usize) -> String {
    let raw = match item {
        serde_json::Value::String(s) => s
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_owned(),
        serde_json::Value::Object(fields) => fields
            .get("id")
            .or_else(|| fields.get("name"))
            .map(item_text)
            .unwrap_or_default(),
        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => item.to_string(),
        _ => String::new(),
    };
    if raw.trim().is_empty() {
        return (n + 1).to_string();
    }
    let key = crate::legacy::sanitize(&raw);
    if key.is_empty() || TaskId::new(key.as_str()).is_err() {
        (n + 1).to_string()
    } else {
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_name_their_tasks_and_fill_in_scopes() {
        assert_eq!(item_key(&"crates/api/".into(), 0), "api");
        assert_eq!(item_key(&"a b".into(), 0), "a-b");
        assert_eq!(item_key(&"".into(), 4), "5");
        assert_eq!(item_key(&serde_json::json!({"name": "db"}), 0), "db");
        assert_eq!(item_key(&serde_json::json!(7), 0), "7");
        assert_eq!(with_item("{{ item }}**", "crates/api/"), "crates/api/**");
        assert_eq!(with_item("src/{{item}}/*.rs", "x"), "src/x/*.rs");
        assert_eq!(with_item("{a,b}/{{ other }}", "x"), "{a,b}/{{ other }}");
    }
}
