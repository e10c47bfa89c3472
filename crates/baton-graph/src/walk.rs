//! The native graph format: walks the spanned tree into a [`Spec`], reporting unknown fields,
//! wrong types and bad literals as it goes (and carrying on, so that all are reported at once).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use baton_model::{OnFailure, parse_duration, parse_size};

use crate::diagnostic::Diagnostic;
use crate::graph::{Budget, Confine, Contain, RetryOn, ScopePolicy, Workspace};
use crate::spec::{AgentSpec, At, Defaults, ForEachSpec, RunSpec, Spec, TaskSpec};
use crate::suggest::did_you_mean;
use crate::tree::{Entry, Kind, Node};

mod engines;
mod fields;
pub use engines::{ENGINES, register_engines};
pub(crate) use engines::{all_engines, engine_static};
use fields::{AGENT_FIELDS, AGENT_TASK_FIELDS};
pub(crate) use fields::{BUDGET_FIELDS, DEFAULTS_FIELDS, RUN_FIELDS, TASK_FIELDS, TOP_FIELDS};

/// Walks the document root into a spec.
pub(crate) fn walk(root: &Node, diags: &mut Vec<Diagnostic>) -> Spec {
    let mut w = Walker { diags };
    let mut spec = Spec::default();
    let Some(table) = w.table_node(root, "the graph file") else {
        return spec;
    };
    let mut task_lists = Vec::new();
    w.each_field(table, "the graph file", &[TOP_FIELDS], |w, e| {
        match e.key.as_str() {
            "name" => spec.name = w.string(e).map(|s| s.value),
            "defaults" => spec.defaults = w.defaults(e),
            "run" => spec.run = w.run(e),
            // JSON files naturally say `tasks`; both spellings are accepted.
            "task" | "tasks" => task_lists.push(e),
            "$schema" => {}
            _ => return false,
        }
        true
    });
    if let [first, second, ..] = task_lists[..] {
        w.diags.push(
            Diagnostic::at(second.key_span.clone(), "both `task` and `tasks` are given")
                .related(first.key_span.clone(), "the other list")
                .help("put every task in one list"),
        );
    }
    if let Some(list) = task_lists.first() {
        spec.tasks_span = Some(list.key_span.clone());
        spec.tasks = w.tasks(list);
    }
    spec
}

/// One `[[task]]` table, for documents whose tasks are parsed apart from the rest (see
/// `from_toml::split`): the rest goes through [`walk`], each task through this.
pub(crate) fn task(item: &Node, diags: &mut Vec<Diagnostic>) -> Option<TaskSpec> {
    let mut w = Walker { diags };
    let table = w.table_node(item, "a task")?;
    Some(w.task(item, table))
}

struct Walker<'d> {
    diags: &'d mut Vec<Diagnostic>,
}

impl Walker<'_> {
    /// Calls `visit` on each non-null entry; an entry it does not take is an unknown field.
    /// Also reports keys given twice (JSON allows it; TOML's parser already refuses).
    fn each_field<'n>(
        &mut self,
        table: &'n [Entry],
        place: &str,
        known: &[&[&str]],
        mut visit: impl FnMut(&mut Self, &'n Entry) -> bool,
    ) {
        // A task's handful of fields is searched: a map for each of 100,000 tasks costs more.
        let small = table.len() <= 16;
        let mut seen: HashMap<&str, &Entry> = HashMap::new();
        for (k, entry) in table.iter().enumerate() {
            // The latest earlier one, as the map (which keeps the latest) would say.
            let earlier = if small {
                table[..k].iter().rev().find(|e| e.key == entry.key)
            } else {
                seen.insert(&entry.key, entry)
            };
            if let Some(first) = earlier {
                self.diags.push(
                    Diagnostic::at(
                        entry.key_span.clone(),
                        format!("`{}` is given twice in {place}", entry.key),
                    )
                    .related(first.key_span.clone(), "first given here")
                    .help("remove one of them"),
                );
                continue;
            }
            if entry.value.kind == Kind::Null {
                continue;
            }
            if !visit(self, entry) {
                let mut d = Diagnostic::at(
                    entry.key_span.clone(),
                    format!("unknown field `{}` in {place}", entry.key),
                )
                .label("unknown field");
                let names = || known.iter().flat_map(|group| group.iter().copied());
                d.help = Some(match did_you_mean(&entry.key, names()) {
                    Some(hint) => hint,
                    None => format!("known fields: {}", names().collect::<Vec<_>>().join(", ")),
                });
                self.diags.push(d);
            }
        }
    }

    fn wrong_type(&mut self, e: &Entry, expected: &str) {
        self.wrong_type_node(&e.key, &e.value, expected);
    }

    fn wrong_type_node(&mut self, key: &str, node: &Node, expected: &str) {
        self.diags.push(
            Diagnostic::at(
                node.span.clone(),
                format!("`{key}` must be {expected}, not {}", node.kind.type_name()),
            )
            .label(format!("this is {}", node.kind.type_name())),
        );
    }

    fn table_node<'n>(&mut self, node: &'n Node, place: &str) -> Option<&'n [Entry]> {
        match &node.kind {
            Kind::Table(entries) => Some(entries),
            other => {
                self.diags.push(
                    Diagnostic::at(node.span.clone(), format!("{place} must be a table, not {}", other.type_name()))
                        .help("a graph file holds a table with `name`, `[defaults]`, `[run]` and `[[task]]` entries"),
                );
                None
            }
        }
    }

    fn string(&mut self, e: &Entry) -> Option<At<String>> {
        match &e.value.kind {
            Kind::Str(s) => Some(At::new(s.clone(), e.value.span.clone())),
            _ => {
                self.wrong_type(e, "a string");
                None
            }
        }
    }

    /// A list of strings; a single string is a list of one.
    fn strings(&mut self, e: &Entry) -> Vec<At<String>> {
        match &e.value.kind {
            Kind::Str(s) => vec![At::new(s.clone(), e.value.span.clone())],
            Kind::Array(items) => items
                .iter()
                .filter_map(|item| match &item.kind {
                    Kind::Str(s) => Some(At::new(s.clone(), item.span.clone())),
                    _ => {
                        self.wrong_type_node(&format!("{}[]", e.key), item, "a string");
                        None
                    }
                })
                .collect(),
            _ => {
                self.wrong_type(e, "an array of strings");
                Vec::new()
            }
        }
    }

    /// Names of environment variables, each possibly ending in `*` (`AWS_*`).
    fn env_names(&mut self, e: &Entry) -> Vec<String> {
        let mut names = Vec::new();
        for s in self.strings(e) {
            let base = s.value.strip_suffix('*').unwrap_or(&s.value);
            let valid = !base.is_empty() || s.value == "*";
            let valid = valid
                && base.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !base.starts_with(|c: char| c.is_ascii_digit());
            if valid && s.value != "*" {
                names.push(s.value);
            } else {
                self.diags.push(
                    Diagnostic::at(
                        s.span.clone(),
                        format!("`{}` is not an environment variable name", s.value),
                    )
                    .label("not a name")
                    .help("write a name like `AWS_REGION`, or a prefix ending in `*` like `AWS_*`"),
                );
            }
        }
        names
    }

    /// `shell = "bash -eo pipefail"` (words split at spaces) or `["bash", "-eo", "pipefail"]`:
    /// the program that runs a script after `-c`, and its arguments.
    fn shell(&mut self, e: &Entry) -> Option<Vec<String>> {
        let words: Vec<String> = match &e.value.kind {
            Kind::Str(text) => text.split_whitespace().map(str::to_owned).collect(),
            Kind::Array(_) => self.plain_strings(e),
            _ => {
                self.wrong_type(e, "a string or a list of strings");
                return None;
            }
        };
        if words.is_empty() || words.iter().any(String::is_empty) {
            self.diags.push(
                Diagnostic::at(e.value.span.clone(), "`shell` names no program").help(
                    "write the program and its arguments, like `shell = \"bash -eo pipefail\"`",
                ),
            );
            return None;
        }
        Some(words)
    }

    fn plain_strings(&mut self, e: &Entry) -> Vec<String> {
        self.strings(e).into_iter().map(|s| s.value).collect()
    }

    fn count(&mut self, e: &Entry, min: u32) -> Option<u32> {
        match e.value.kind {
            Kind::Int(n) => match u32::try_from(n) {
                Ok(n) if n >= min => Some(n),
                _ => {
                    self.diags.push(
                        Diagnostic::at(
                            e.value.span.clone(),
                            format!(
                                "`{}` must be a whole number from {min} to {}, not {n}",
                                e.key,
                                u32::MAX
                            ),
                        )
                        .label("out of range"),
                    );
                    None
                }
            },
            _ => {
                self.wrong_type(e, "a whole number");
                None
            }
        }
    }

    fn boolean(&mut self, e: &Entry) -> Option<bool> {
        match e.value.kind {
            Kind::Bool(b) => Some(b),
            _ => {
                self.wrong_type(e, "`true` or `false`");
                None
            }
        }
    }

    fn duration(&mut self, e: &Entry) -> Option<Duration> {
        match &e.value.kind {
            Kind::Str(s) => match parse_duration(s) {
                Ok(d) => Some(d),
                Err(err) => {
                    self.diags.push(
                        Diagnostic::at(
                            e.value.span.clone(),
                            format!("bad duration for `{}`", e.key),
                        )
                        .label("not a duration")
                        .help(err.to_string()),
                    );
                    None
                }
            },
            Kind::Int(n) => {
                self.diags.push(
                    Diagnostic::at(e.value.span.clone(), format!("`{}` needs a unit", e.key))
                        .label("a bare number")
                        .help(format!(
                            "write a string with a unit, like `{} = \"{n}s\"` or `\"{n}m\"`",
                            e.key
                        )),
                );
                None
            }
            _ => {
                self.wrong_type(e, "a duration string like \"30s\"");
                None
            }
        }
    }

    fn size(&mut self, e: &Entry) -> Option<u64> {
        match &e.value.kind {
            Kind::Str(s) => match parse_size(s) {
                Ok(n) => Some(n),
                Err(err) => {
                    self.diags.push(
                        Diagnostic::at(e.value.span.clone(), format!("bad size for `{}`", e.key))
                            .label("not a size")
                            .help(err.to_string()),
                    );
                    None
                }
            },
            Kind::Int(n) => match u64::try_from(*n) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.diags.push(
                        Diagnostic::at(
                            e.value.span.clone(),
                            format!("`{}` cannot be negative", e.key),
                        )
                        .label("out of range"),
                    );
                    None
                }
            },
            _ => {
                self.wrong_type(e, "a size like \"8KiB\" or a number of bytes");
                None
            }
        }
    }

    /// One of a fixed set of names.
    fn choice<T>(
        &mut self,
        e: &Entry,
        names: &[&str],
        parse: impl Fn(&str) -> Option<T>,
    ) -> Option<T> {
        let s = self.string(e)?;
        if let Some(v) = parse(&s.value) {
            return Some(v);
        }
        let mut d = Diagnostic::at(
            s.span,
            format!("unknown {} `{}`", e.key.replace('_', " "), s.value),
        )
        .label(format!("not one of: {}", names.join(", ")));
        d.help = Some(match did_you_mean(&s.value, names.iter().copied()) {
            Some(hint) => hint,
            None => format!("use one of: {}", names.join(", ")),
        });
        self.diags.push(d);
        None
    }

    fn engine(&mut self, e: &Entry) -> Option<At<&'static str>> {
        let s = self.string(e)?;
        if let Some(&engine) = ENGINES.iter().find(|&&engine| engine == s.value) {
            return Some(At::new(engine, s.span));
        }
        let engines = all_engines();
        if let Some(&engine) = engines.iter().find(|&&engine| engine == s.value) {
            return Some(At::new(engine, s.span));
        }
        let mut d =
            Diagnostic::at(s.span, format!("unknown engine `{}`", s.value)).label("unknown engine");
        d.help = Some(match did_you_mean(&s.value, engines.iter().copied()) {
            Some(hint) => hint,
            None => format!(
                "engines: {}; define others under [engines.NAME] in baton.toml",
                engines.join(", ")
            ),
        });
        self.diags.push(d);
        None
    }

    /// `reviewer = { engine = "…", model = "…" }`: who judges the task's acceptance criteria.
    fn reviewer(&mut self, e: &Entry) -> Option<At<crate::graph::Reviewer>> {
        let table = self.table_node(&e.value, "`reviewer`")?;
        let mut reviewer = crate::graph::Reviewer::default();
        self.each_field(table, "reviewer", &[&["engine", "model"]], |w, f| {
            match f.key.as_str() {
                "engine" => reviewer.engine = w.engine(f).map(|e| e.value.to_owned()),
                "model" => reviewer.model = w.string(f).map(|s| s.value),
                _ => return false,
            }
            true
        });
        Some(At::new(reviewer, e.key_span.clone()))
    }

    /// `fallback = ["codex", { engine = "gemini", model = "gemini-2.5-pro" }]` (or
    /// `candidates`): agent engines, each a name or a table with its model; `one` names an
    /// entry in messages.
    fn engine_list(&mut self, e: &Entry, one: &str) -> Option<Vec<crate::graph::EngineChoice>> {
        let Kind::Array(items) = &e.value.kind else {
            self.wrong_type(
                e,
                "an array of engines (names, or `{ engine, model }` tables)",
            );
            return None;
        };
        let mut list = Vec::with_capacity(items.len());
        for item in items {
            let entry = Entry {
                key: format!("{}[]", e.key),
                key_span: item.span.clone(),
                value: item.clone(),
            };
            let choice = match &item.kind {
                Kind::Str(_) => {
                    self.agent_engine(&entry, one)
                        .map(|engine| crate::graph::EngineChoice {
                            engine,
                            model: None,
                        })
                }
                Kind::Table(table) => {
                    let (mut engine, mut model) = (None, None);
                    self.each_field(table, one, &[&["engine", "model"]], |w, f| {
                        match f.key.as_str() {
                            "engine" => engine = w.agent_engine(f, one),
                            "model" => model = w.string(f).map(|s| s.value),
                            _ => return false,
                        }
                        true
                    });
                    if engine.is_none() && !table.iter().any(|f| f.key == "engine") {
                        self.diags.push(
                            Diagnostic::at(item.span.clone(), format!("{one} needs its `engine`"))
                                .help("write `{ engine = \"codex\", model = \"…\" }`"),
                        );
                    }
                    engine.map(|engine| crate::graph::EngineChoice { engine, model })
                }
                _ => {
                    self.wrong_type_node(&entry.key, item, "an engine's name or a table");
                    None
                }
            };
            list.extend(choice);
        }
        Some(list)
    }

    /// An engine that is an agent: not `shell` or `noop`.
    fn agent_engine(&mut self, e: &Entry, one: &str) -> Option<String> {
        let engine = self.engine(e)?;
        if matches!(engine.value, "shell" | "noop") {
            self.diags.push(
                Diagnostic::at(engine.span, format!("{one} is an agent, not `{}`", engine.value))
                    .label("not an agent")
                    .help("name an agent engine (claude, codex, gemini, aider, http, or one of baton.toml)"),
            );
            return None;
        }
        Some(engine.value.to_owned())
    }

    /// `for_each`: a list of items, `{ glob = "…" }` or `{ from = "TASK" }`.
    fn for_each(&mut self, e: &Entry) -> Option<At<ForEachSpec>> {
        let help = "write `for_each = [\"a\", \"b\"]`, `for_each = { glob = \"crates/*/\" }` or `for_each = { from = \"TASK\" }`";
        let spec = match &e.value.kind {
            Kind::Array(items) => {
                let mut list = Vec::with_capacity(items.len());
                for item in items {
                    match &item.kind {
                        Kind::Str(_)
                        | Kind::Int(_)
                        | Kind::Float(_)
                        | Kind::Bool(_)
                        | Kind::Table(_) => list.push(item.to_json()),
                        other => {
                            self.diags.push(
                                Diagnostic::at(
                                    item.span.clone(),
                                    format!("a `for_each` item cannot be {}", other.type_name()),
                                )
                                .help("items are strings, numbers, booleans or tables"),
                            );
                        }
                    }
                }
                if items.is_empty() {
                    self.diags.push(
                        Diagnostic::at(e.value.span.clone(), "`for_each` has no items")
                            .help("list the items, or remove `for_each`"),
                    );
                }
                ForEachSpec::List(list)
            }
            Kind::Table(fields) => match fields.as_slice() {
                [f] if f.key == "glob" => ForEachSpec::Glob(self.string(f)?.value),
                [f] if f.key == "from" => ForEachSpec::From(self.string(f)?),
                _ => {
                    self.diags.push(
                        Diagnostic::at(
                            e.value.span.clone(),
                            "`for_each` takes one of `glob` or `from`",
                        )
                        .help(help),
                    );
                    return None;
                }
            },
            other => {
                self.diags.push(
                    Diagnostic::at(
                        e.value.span.clone(),
                        format!(
                            "`for_each` must be a list or a table, not {}",
                            other.type_name()
                        ),
                    )
                    .help(help),
                );
                return None;
            }
        };
        Some(At::new(spec, e.key_span.clone()))
    }

    fn env(&mut self, e: &Entry) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        let Kind::Table(entries) = &e.value.kind else {
            self.wrong_type(e, "a table of strings");
            return env;
        };
        for var in entries {
            // A NUL in a name or a value is refused with every other string's (`refuse_nul`).
            if var.key.is_empty() || var.key.contains('=') {
                self.diags.push(
                    Diagnostic::at(
                        var.key_span.clone(),
                        format!("`{}` is not an environment variable name", var.key),
                    )
                    .help("names are non-empty and contain neither `=` nor NUL"),
                );
                continue;
            }
            if let Some(refusal) = reserved_env(&var.key) {
                self.diags
                    .push(Diagnostic::at(var.key_span.clone(), refusal.0).help(refusal.1));
                continue;
            }
            match &var.value.kind {
                Kind::Str(s) => {
                    env.insert(var.key.clone(), s.clone());
                }
                _ => {
                    self.wrong_type_node(&var.key, &var.value, "a string");
                    if let Some(last) = self.diags.last_mut() {
                        last.help = Some("quote it: environment values are strings".into());
                    }
                }
            }
        }
        env
    }

    fn defaults(&mut self, e: &Entry) -> Defaults {
        let mut d = Defaults::default();
        let Some(table) = self.table_node(&e.value, "[defaults]") else {
            return d;
        };
        self.each_field(table, "[defaults]", DEFAULTS_FIELDS, |w, e| {
            match e.key.as_str() {
                "engine" => d.engine = w.engine(e),
                "timeout" => d.timeout = w.duration(e),
                "retries" => d.retries = w.count(e, 0),
                "backoff" => d.backoff = w.duration(e),
                "workspace" => d.workspace = w.choice(e, Workspace::NAMES, Workspace::parse),
                "handoff_limit" => d.handoff_limit = w.size(e),
                "log_limit" => d.log_limit = w.size(e),
                "env" => d.env = w.env(e),
                "pass_env" => d.pass_env = w.env_names(e),
                "secret_env" => d.secret_env = w.env_names(e),
                "scope_policy" => {
                    d.scope_policy = w.choice(e, ScopePolicy::NAMES, ScopePolicy::parse)
                }
                "fix_attempts" => d.fix_attempts = w.count(e, 0),
                "setup" => d.setup = Some(w.plain_strings(e)),
                "shell" => d.shell = w.shell(e),
                "worktree_include" => d.worktree_include = Some(w.strings(e)),
                "runs_on" => d.runs_on = Some(w.strings(e)),
                "confine" => d.confine = w.choice(e, Confine::NAMES, Confine::parse),
                "contain" => d.contain = w.choice(e, Contain::NAMES, Contain::parse),
                _ => return w.agent_field(e, &mut d.agent),
            }
            true
        });
        d
    }

    fn run(&mut self, e: &Entry) -> RunSpec {
        let mut r = RunSpec::default();
        let Some(table) = self.table_node(&e.value, "[run]") else {
            return r;
        };
        self.each_field(table, "[run]", &[RUN_FIELDS], |w, e| {
            match e.key.as_str() {
                "concurrency" => r.concurrency = w.count(e, 1),
                "on_failure" => r.on_failure = w.choice(e, OnFailure::NAMES, OnFailure::parse),
                "base" => r.base = w.string(e).map(|s| s.value),
                "remote" => r.remote = w.string(e).map(|s| s.value),
                "budget" => r.budget = w.budget(e),
                "verify" => r.verify = w.plain_strings(e),
                "max_tasks" => r.max_tasks = w.count(e, 1),
                "planned_commands" => {
                    r.planned_commands = w.choice(
                        e,
                        crate::graph::PlannedCommands::NAMES,
                        crate::graph::PlannedCommands::parse,
                    )
                }
                _ => return false,
            }
            true
        });
        r
    }

    /// Codex's own `--sandbox` mode. The issue that asked for baton's write sandbox called it
    /// `sandbox = "workspace"`; baton names that `confine` (as `sandbox` was codex's already),
    /// so those values are pointed there rather than handed to codex.
    fn codex_sandbox(&mut self, e: &Entry) -> Option<String> {
        let value = self.string(e)?;
        if matches!(value.value.as_str(), "workspace" | "require" | "none") {
            self.diags.push(
                Diagnostic::at(
                    value.span.clone(),
                    format!(
                        "`sandbox` is codex's own sandbox mode, which has no `{}`",
                        value.value
                    ),
                )
                .label("not a codex sandbox mode")
                .help(format!(
                    "baton's write sandbox is `confine = \"{}\"`; codex's modes are \
                     `read-only`, `workspace-write` and `danger-full-access`",
                    value.value
                )),
            );
            return None;
        }
        Some(value.value)
    }

    /// The fields of [`AgentSpec`]: `false` for any other key.
    fn agent_field(&mut self, e: &Entry, a: &mut AgentSpec) -> bool {
        match e.key.as_str() {
            "model" => a.model = self.string(e).map(|s| s.value),
            "max_turns" => a.max_turns = self.count(e, 1),
            "allowed_tools" => a.allowed_tools = Some(self.plain_strings(e)),
            "permission_mode" => a.permission_mode = self.string(e).map(|s| s.value),
            "sandbox" => a.sandbox = self.codex_sandbox(e),
            "args" => a.args = Some(self.plain_strings(e)),
            "idle_timeout" => a.idle_timeout = self.duration(e),
            "retry_on" => a.retry_on = self.choice(e, RetryOn::NAMES, RetryOn::parse),
            "budget" => a.budget = Some(self.budget_in(e, "a task's budget")),
            "fallback" => a.fallback = self.engine_list(e, "a fallback"),
            "fallback_on" => a.fallback_on = self.choice(e, RetryOn::NAMES, RetryOn::parse),
            _ => return false,
        }
        true
    }

    fn budget(&mut self, e: &Entry) -> Budget {
        self.budget_in(e, "[run] budget")
    }

    /// `estimate = { minutes = 10, usd = 0.5 }`.
    fn estimate(&mut self, e: &Entry) -> Option<crate::graph::Estimate> {
        let table = self.table_node(&e.value, "`estimate`")?;
        let mut estimate = crate::graph::Estimate::default();
        self.each_field(table, "estimate", &[&["minutes", "usd"]], |w, f| {
            let value = match f.value.kind {
                Kind::Int(n) if n >= 0 => Some(n as f64),
                Kind::Float(x) if x >= 0.0 && x.is_finite() => Some(x),
                _ => {
                    w.wrong_type(f, "a number of at least 0");
                    return true;
                }
            };
            match f.key.as_str() {
                "minutes" => estimate.minutes = value,
                "usd" => estimate.usd = value,
                _ => return false,
            }
            true
        });
        Some(estimate)
    }

    fn budget_in(&mut self, e: &Entry, place: &str) -> Budget {
        let mut b = Budget::default();
        let Some(table) = self.table_node(&e.value, place) else {
            return b;
        };
        self.each_field(table, place, &[BUDGET_FIELDS], |w, e| {
            if e.key.starts_with("soft_") && place != "[run] budget" {
                w.diags.push(
                    Diagnostic::at(e.key_span.clone(), format!("`{}` in {place}", e.key))
                        .label("soft limit")
                        .help("a soft limit pauses the whole run: it belongs in `[run] budget`"),
                );
                return true;
            }
            match (e.key.as_str(), &e.value.kind) {
                ("tokens", Kind::Int(n)) if *n >= 0 => b.tokens = Some(*n as u64),
                ("soft_tokens", Kind::Int(n)) if *n >= 0 => b.soft_tokens = Some(*n as u64),
                ("usd", Kind::Int(n)) if *n >= 0 => b.usd = Some(*n as f64),
                ("usd", Kind::Float(x)) if *x >= 0.0 && x.is_finite() => b.usd = Some(*x),
                ("soft_usd", Kind::Int(n)) if *n >= 0 => b.soft_usd = Some(*n as f64),
                ("soft_usd", Kind::Float(x)) if *x >= 0.0 && x.is_finite() => b.soft_usd = Some(*x),
                ("tokens" | "soft_tokens", _) => w.wrong_type(e, "a whole number of at least 0"),
                ("usd" | "soft_usd", _) => w.wrong_type(e, "an amount of at least 0"),
                _ => return false,
            }
            true
        });
        b
    }

    fn tasks(&mut self, list: &Entry) -> Vec<TaskSpec> {
        let items = match &list.value.kind {
            Kind::Array(items) => items,
            Kind::Table(_) => {
                self.diags.push(
                    Diagnostic::at(list.value.span.clone(), "`task` must be an array of tables")
                        .label("a single table")
                        .help("write `[[task]]` (double brackets) above each task"),
                );
                return Vec::new();
            }
            _ => {
                self.wrong_type(list, "an array of tables");
                return Vec::new();
            }
        };
        let mut tasks = Vec::with_capacity(items.len());
        for item in items {
            if let Some(table) = self.table_node(item, "a task") {
                tasks.push(self.task(item, table));
            }
        }
        tasks
    }

    fn task(&mut self, node: &Node, table: &[Entry]) -> TaskSpec {
        let mut t = TaskSpec {
            span: node.span.clone(),
            ..TaskSpec::default()
        };
        self.each_field(table, "[[task]]", TASK_FIELDS, |w, e| {
            match e.key.as_str() {
                "id" => t.id = w.string(e),
                "needs" => t.needs = w.strings(e),
                "run" => t.run = w.string(e),
                "prompt" => t.prompt = w.string(e),
                "engine" => t.engine = w.engine(e),
                "timeout" => t.more_mut().timeout = w.duration(e),
                "retries" => t.more_mut().retries = w.count(e, 0),
                "backoff" => t.more_mut().backoff = w.duration(e),
                "scope" => t.more_mut().scope = w.strings(e),
                "env" => t.more_mut().env = w.env(e),
                "cwd" => t.more_mut().cwd = w.string(e),
                "handoff_limit" => t.more_mut().handoff_limit = w.size(e),
                "log_limit" => t.more_mut().log_limit = w.size(e),
                "verify" => t.more_mut().verify = w.plain_strings(e),
                "approval" => t.more_mut().approval = w.boolean(e),
                "pass_env" => t.more_mut().pass_env = w.env_names(e),
                "secret_env" => t.more_mut().secret_env = w.env_names(e),
                "scope_policy" => {
                    t.more_mut().scope_policy = w.choice(e, ScopePolicy::NAMES, ScopePolicy::parse)
                }
                "fix_attempts" => t.more_mut().fix_attempts = w.count(e, 0),
                "setup" => t.more_mut().setup = Some(w.plain_strings(e)),
                "shell" => t.more_mut().shell = w.shell(e),
                "worktree_include" => t.more_mut().worktree_include = Some(w.strings(e)),
                "runs_on" => t.more_mut().runs_on = Some(w.strings(e)),
                "confine" => t.more_mut().confine = w.choice(e, Confine::NAMES, Confine::parse),
                "contain" => t.more_mut().contain = w.choice(e, Contain::NAMES, Contain::parse),
                "workspace" => {
                    t.more_mut().workspace = w.choice(e, Workspace::NAMES, Workspace::parse)
                }
                "expand" => {
                    t.more_mut().expand = w.boolean(e).map(|b| At::new(b, e.key_span.clone()))
                }
                "max_subtasks" => {
                    t.more_mut().max_subtasks =
                        w.count(e, 1).map(|n| At::new(n, e.key_span.clone()))
                }
                "for_each" => t.more_mut().for_each = w.for_each(e),
                "acceptance" => t.more_mut().acceptance = w.plain_strings(e),
                "on_failure" => t.more_mut().on_failure = w.string(e),
                "estimate" => t.more_mut().estimate = w.estimate(e),
                "max_replans" => {
                    t.more_mut().max_replans = w.count(e, 0).map(|n| At::new(n, e.key_span.clone()))
                }
                "reviewer" => t.more_mut().reviewer = w.reviewer(e),
                "best_of" => {
                    t.more_mut().best_of = w.count(e, 2).map(|n| At::new(n, e.key_span.clone()))
                }
                "candidates" => {
                    t.more_mut().candidates = w
                        .engine_list(e, "a candidate")
                        .map(|list| At::new(list, e.key_span.clone()))
                }
                "max_depth" => {
                    t.more_mut().max_depth = w.count(e, 1).map(|n| At::new(n, e.key_span.clone()))
                }
                _ => {
                    let key = e.key.as_str();
                    if !AGENT_FIELDS.contains(&key) && !AGENT_TASK_FIELDS.contains(&key) {
                        return false;
                    }
                    let agent = &mut t.more_mut().agent;
                    agent.first_span.get_or_insert_with(|| e.key_span.clone());
                    return w.agent_field(e, agent);
                }
            }
            true
        });
        t
    }
}

/// Why a task's `env` may not set `name`, and what to do instead: `BATON_*` are baton's to
/// set (the run, task and attempt ids that the sweep of leftover processes goes by, where its
/// output goes), and the dynamic loader's variables would load code into every program the
/// task starts, baton's helpers included.
pub(crate) fn reserved_env(name: &str) -> Option<(String, String)> {
    if name.starts_with("BATON_") {
        return Some((
            format!("`{name}` is baton's to set"),
            "`BATON_*` variables tell a task its run, task, attempt and output file; \
             name yours otherwise"
                .to_owned(),
        ));
    }
    if name.starts_with("LD_") || name.starts_with("DYLD_") {
        return Some((
            format!("`{name}` is the dynamic loader's, and a task may not set it"),
            format!(
                "it would load code into every program the task starts; if your tools need \
                 it, set it where baton runs and name it in `pass_env = [\"{name}\"]`"
            ),
        ));
    }
    None
}
