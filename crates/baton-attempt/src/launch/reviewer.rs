//! The agent that reviews a task's work against its `acceptance` criteria, prepared with the
//! task's first launch.

use std::sync::Arc;

use baton_agent::{AgentOptions, EngineKind};
use baton_graph::Action;

use super::Launcher;
use crate::launch_error::LaunchError;
use crate::recipe::PreparedAgent;

impl Launcher {
    /// The agent that reviews `task`'s work against its `acceptance` criteria: `reviewer =
    /// { engine, model }`, else the task's own engine and model (an agent task's), else the
    /// run's default engine. Its process gets what its engine needs of baton's environment,
    /// not the task's variables.
    pub(super) fn reviewer_for(&self, task: u32) -> Result<Arc<crate::recipe::Reviewer>, String> {
        let spec_task = self.graph.task(task);
        let (own_engine, own_model) = match &spec_task.action {
            Action::Agent {
                engine, settings, ..
            } => (Some(engine.as_str()), settings.model.clone()),
            _ => (None, None),
        };
        let wanted = spec_task.reviewer.clone().unwrap_or_default();
        let name = wanted
            .engine
            .as_deref()
            .or(own_engine)
            .or(self.graph.default_engine())
            .unwrap_or("claude");
        let same = Some(name) == own_engine;
        let mut engine = self
            .agents
            .engine(name)
            .cloned()
            .ok_or_else(|| LaunchError::UnknownEngine(name.to_owned()).to_string())?;
        let model = wanted
            .model
            .or(if same { own_model } else { None })
            .or_else(|| engine.model.clone());
        if engine.kind == EngineKind::Http && model.is_none() {
            return Err(LaunchError::NoModel(engine.name.clone()).to_string());
        }
        if engine.command.is_empty() {
            engine.command = std::env::current_exe()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "baton".to_owned());
        }
        let mut patterns: Vec<String> = engine
            .kind
            .pass_env()
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        patterns.extend(engine.pass_env.iter().cloned());
        if engine.kind == EngineKind::Http {
            patterns.push(engine.http_endpoint().2.to_owned());
        }
        let env = self.passed(&patterns, engine.kind.remove_env());
        let mut options = AgentOptions {
            model: model.clone(),
            ..AgentOptions::default()
        };
        // A verdict's schema, where the engine holds an answer to one (see the planner's).
        options.args.extend(super::schema_args(
            engine.kind,
            crate::unit::REVIEW_SCHEMA,
            crate::unit::REVIEW_SCHEMA_STRICT,
            &self
                .dirs
                .handoff
                .join(format!("{}.review-schema.json", spec_task.id.file_name())),
        ));
        Ok(Arc::new(crate::recipe::Reviewer {
            agent: PreparedAgent {
                engine,
                prompt: baton_agent::PromptInput::None,
                env: Vec::new(),
                idle_timeout: None,
                options,
                preamble: None,
                prompt_file: self.dirs.prompt(&spec_task.id, "review"),
                records: None,
                prompt_text: String::new(),
                prices: self.agents.prices.clone(),
                model,
                task_limit: Default::default(),
            },
            env,
        }))
    }
}
