//! The JSON task graphs of the earlier JavaScript orchestrators, recognised by shape and
//! converted to a [`Spec`], with notes saying what became what.
//!
//! - `nodes`: `{ "id", "nodes": [{ "id", "goal", "scope", "deps", "agentKind",
//!   "estimatedTokens" }] }`
//! - `subtasks`: `{ "id"?, "title"?, "subtasks": [{ "id", "title", "description" | "goal",
//!   "blockedBy", "expectedFiles", "acceptance" }] }`
//!
//! These files were written by programs, not people, so fields baton has no use for are
//! skipped with a note rather than refused.

use std::collections::BTreeSet;

use baton_model::TaskId;

use crate::diagnostic::Diagnostic;
use crate::spec::{At, Spec, TaskSpec};
use crate::tree::{Entry, Kind, Node};

/// Which legacy shape a document has, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Nodes,
    Subtasks,
}

pub(crate) fn detect(root: &Node) -> Option<Shape> {
    if root.get("task").is_some() || root.get("tasks").is_some() {
        return None;
    }
    if root
        .get("nodes")
        .is_some_and(|e| matches!(e.value.kind, Kind::Array(_)))
    {
        Some(Shape::Nodes)
    } else if root
        .get("subtasks")
        .is_some_and(|e| matches!(e.value.kind, Kind::Array(_)))
    {
        Some(Shape::Subtasks)
    } else {
        None
    }
}

pub(crate) fn convert(root: &Node, shape: Shape, diags: &mut Vec<Diagnostic>) -> Spec {
    let mut c = Converter {
        diags,
        spec: Spec::default(),
        ignored: BTreeSet::new(),
        renamed: Default::default(),
        estimated_tokens: (0, 0),
        acceptance: 0,
    };
    let (list_key, kind) = match shape {
        Shape::Nodes => ("nodes", "node"),
        Shape::Subtasks => ("subtasks", "subtask"),
    };
    c.spec.legacy = true;
    c.spec.notes.push(format!(
        "converted from the legacy `{list_key}` format; `baton plan --json` shows the result"
    ));
    for entry in root.table().unwrap_or_default() {
        match entry.key.as_str() {
            "id" => {
                if let Some(name) = c.text(&entry.value) {
                    c.spec.name = Some(name);
                    c.spec.notes.push("id → name".into());
                }
            }
            "title" if shape == Shape::Subtasks => {
                if c.spec.name.is_none() {
                    c.spec.name = c.text(&entry.value);
                    c.spec.notes.push("title → name".into());
                }
            }
            key if key == list_key => {
                c.spec.tasks_span = Some(entry.key_span.clone());
                if let Kind::Array(items) = &entry.value.kind {
                    for item in items {
                        match shape {
                            Shape::Nodes => c.node(item),
                            Shape::Subtasks => c.subtask(item),
                        }
                    }
                }
            }
            other => {
                c.ignored.insert(other.to_owned());
            }
        }
    }
    c.finish(kind, list_key)
}

struct Converter<'d> {
    diags: &'d mut Vec<Diagnostic>,
    spec: Spec,
    /// Field names skipped, for one note each.
    ignored: BTreeSet<String>,
    /// Legacy id → the task id it became.
    renamed: std::collections::BTreeMap<String, String>,
    /// (tasks with an estimate, total tokens).
    estimated_tokens: (usize, u64),
    acceptance: usize,
}

impl Converter<'_> {
    fn finish(mut self, kind: &str, list_key: &str) -> Spec {
        let notes = &mut self.spec.notes;
        const SHOWN: usize = 20;
        for (raw, id) in self.renamed.iter().take(SHOWN) {
            notes.push(format!(
                "{kind} id `{raw}` → `{id}` (task ids are letters, digits, `_`, `-`, `.`)"
            ));
        }
        if self.renamed.len() > SHOWN {
            notes.push(format!(
                "… and {} more {kind} ids rewritten",
                self.renamed.len() - SHOWN
            ));
        }
        let (count, total) = self.estimated_tokens;
        if count > 0 {
            notes.push(format!(
                "{list_key}[].estimatedTokens: {count} {kind}s estimate {total} tokens in total; not enforced (budgets come later)"
            ));
        }
        if self.acceptance > 0 {
            notes.push(format!(
                "{list_key}[].acceptance: criteria of {} {kind}s appended to their prompts under \"Acceptance criteria:\"",
                self.acceptance
            ));
        }
        for field in &self.ignored {
            notes.push(format!("`{field}` ignored: baton has no use for it"));
        }
        self.spec
    }

    /// A string, or a number written as one (legacy ids are sometimes numbers).
    fn text(&mut self, node: &Node) -> Option<String> {
        match &node.kind {
            Kind::Str(s) => Some(s.clone()),
            Kind::Int(n) => Some(n.to_string()),
            other => {
                self.diags.push(Diagnostic::at(
                    node.span.clone(),
                    format!("expected a string, found {}", other.type_name()),
                ));
                None
            }
        }
    }

    fn id(&mut self, node: &Node) -> Option<At<String>> {
        let raw = self.text(node)?;
        let id = sanitize(&raw);
        if id != raw {
            self.renamed.insert(raw, id.clone());
        }
        Some(At::new(id, node.span.clone()))
    }

    fn ids(&mut self, node: &Node) -> Vec<At<String>> {
        match &node.kind {
            Kind::Array(items) => items.iter().filter_map(|i| self.id(i)).collect(),
            _ => self.id(node).into_iter().collect(),
        }
    }

    fn strings(&mut self, node: &Node) -> Vec<At<String>> {
        match &node.kind {
            Kind::Array(items) => items
                .iter()
                .filter_map(|i| self.text(i).map(|s| At::new(s, i.span.clone())))
                .collect(),
            _ => self
                .text(node)
                .map(|s| At::new(s, node.span.clone()))
                .into_iter()
                .collect(),
        }
    }

    fn fields<'n>(&mut self, item: &'n Node) -> Option<&'n [Entry]> {
        match &item.kind {
            Kind::Table(entries) => Some(entries),
            other => {
                self.diags.push(Diagnostic::at(
                    item.span.clone(),
                    format!("expected a task object, found {}", other.type_name()),
                ));
                None
            }
        }
    }

    fn node(&mut self, item: &Node) {
        let Some(fields) = self.fields(item) else {
            return;
        };
        let mut t = TaskSpec {
            span: item.span.clone(),
            ..TaskSpec::default()
        };
        let mut goal: Option<At<String>> = None;
        let mut kind: Option<At<String>> = None;
        for e in fields {
            match (e.key.as_str(), &e.value.kind) {
                (_, Kind::Null) => {}
                ("id", _) => t.id = self.id(&e.value),
                ("goal", _) => {
                    goal = self
                        .text(&e.value)
                        .map(|s| At::new(s, e.value.span.clone()))
                }
                ("deps", _) => t.needs = self.ids(&e.value),
                ("scope", _) => t.more_mut().scope = self.strings(&e.value),
                ("agentKind", _) => {
                    kind = self
                        .text(&e.value)
                        .map(|s| At::new(s, e.value.span.clone()))
                }
                ("estimatedTokens", Kind::Int(n)) => {
                    self.estimated_tokens.0 += 1;
                    self.estimated_tokens.1 += u64::try_from(*n).unwrap_or(0);
                }
                ("estimatedTokens", Kind::Float(x)) if *x >= 0.0 => {
                    self.estimated_tokens.0 += 1;
                    self.estimated_tokens.1 += *x as u64;
                }
                (other, _) => {
                    self.ignored.insert(format!("nodes[].{other}"));
                }
            }
        }
        self.note_once("nodes[].goal → prompt (or run, for shell nodes); nodes[].deps → needs");
        let engine: &'static str = kind.as_ref().map_or("claude", |k| match k.value.as_str() {
            "claude" | "claude-code" => "claude",
            "codex" => "codex",
            "gemini" => "gemini",
            "shell" | "command" => "shell",
            _ => "unknown",
        });
        if let Some(k) = &kind {
            if engine == "unknown" {
                self.spec.notes.push(format!(
                    "nodes[].agentKind `{}` is not an engine baton knows; that node runs with claude",
                    k.value
                ));
            } else {
                self.note_once("nodes[].agentKind → engine");
            }
        }
        match engine {
            "shell" => t.run = goal,
            "unknown" => t.prompt = goal,
            engine => {
                t.prompt = goal;
                if let Some(k) = kind {
                    t.engine = Some(At::new(engine, k.span));
                }
            }
        }
        self.spec.tasks.push(t);
    }

    fn subtask(&mut self, item: &Node) {
        let Some(fields) = self.fields(item) else {
            return;
        };
        let mut t = TaskSpec {
            span: item.span.clone(),
            ..TaskSpec::default()
        };
        let mut title: Option<At<String>> = None;
        let mut description: Option<At<String>> = None;
        let mut acceptance: Vec<String> = Vec::new();
        for e in fields {
            match (e.key.as_str(), &e.value.kind) {
                (_, Kind::Null) => {}
                ("id", _) => t.id = self.id(&e.value),
                ("title", _) => {
                    title = self
                        .text(&e.value)
                        .map(|s| At::new(s, e.value.span.clone()))
                }
                ("description" | "goal", _) => {
                    description = self
                        .text(&e.value)
                        .map(|s| At::new(s, e.value.span.clone()));
                }
                ("blockedBy", _) => t.needs = self.ids(&e.value),
                ("expectedFiles", _) => t.more_mut().scope = self.strings(&e.value),
                ("acceptance", _) => {
                    acceptance = self
                        .strings(&e.value)
                        .into_iter()
                        .map(|s| s.value)
                        .collect()
                }
                (other, _) => {
                    self.ignored.insert(format!("subtasks[].{other}"));
                }
            }
        }
        self.note_once("subtasks[].description → prompt; blockedBy → needs; expectedFiles → scope");
        let mut prompt = description.or(title);
        if !acceptance.is_empty() {
            self.acceptance += 1;
            let criteria: String = acceptance.iter().map(|a| format!("\n- {a}")).collect();
            match &mut prompt {
                Some(p) => p
                    .value
                    .push_str(&format!("\n\nAcceptance criteria:{criteria}")),
                None => {
                    prompt = Some(At::new(
                        format!("Acceptance criteria:{criteria}"),
                        item.span.clone(),
                    ))
                }
            }
        }
        t.prompt = prompt;
        self.spec.tasks.push(t);
    }

    fn note_once(&mut self, note: &str) {
        if !self.spec.notes.iter().any(|n| n == note) {
            self.spec.notes.push(note.to_owned());
        }
    }
}

/// The closest valid task id: invalid characters become `-`, and leading punctuation, `..`,
/// a trailing `.` or `.lock` are removed.
pub(crate) fn sanitize(raw: &str) -> String {
    if !raw.contains('/') && TaskId::new(raw).is_ok() {
        return raw.to_owned();
    }
    let mut id: String = raw
        .chars()
        .map(|c| {
            if baton_model::is_id_letter(c) || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    while id.contains("..") {
        id = id.replace("..", ".");
    }
    let id = id.trim_start_matches(|c: char| !baton_model::is_id_letter(c));
    // At most 100 bytes, cut at a character.
    let mut id: String = id
        .char_indices()
        .take_while(|(at, c)| at + c.len_utf8() <= 100)
        .map(|(_, c)| c)
        .collect();
    loop {
        if id.ends_with('.') {
            id.pop();
        } else if let Some(stripped) = id.strip_suffix(".lock") {
            id = format!("{stripped}-lock");
        } else {
            break;
        }
    }
    if id.is_empty() { "task".to_owned() } else { id }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_to_valid_ids() {
        for (raw, want) in [
            ("ok-id", "ok-id"),
            ("add auth", "add-auth"),
            ("src/db: schema", "src-db--schema"),
            ("..hidden", "hidden"),
            ("a..b", "a.b"),
            ("x.lock", "x-lock"),
            ("end.", "end"),
            ("§", "task"),
            ("über", "über"),
            ("日本語 タスク", "日本語-タスク"),
            ("«quoted»", "quoted-"),
        ] {
            let id = sanitize(raw);
            assert_eq!(id, want, "{raw}");
            assert!(TaskId::new(&id).is_ok(), "{id}");
        }
        assert!(TaskId::new(sanitize(&"x".repeat(300))).is_ok());
        // Cut at 100 bytes, at a character: 33 three-byte ones.
        assert_eq!(sanitize(&"日".repeat(50)), "日".repeat(33));
    }
}
