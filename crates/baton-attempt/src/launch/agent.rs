//! An agent task's ways to run: its own engine, and each engine of its `fallback`, each with
//! its command line, prompt and environment, worked out at the task's first launch.

use std::sync::Arc;

use baton_agent::{AgentOptions, EngineKind};
use baton_exec::Program;
use baton_graph::{Action, EngineChoice};

use super::{Choice, Launcher, PREAMBLE, particulars, schema_args};
use crate::launch_error::LaunchError;
use crate::recipe::PreparedAgent;

impl Launcher {
    /// `task` run by `choice` (`own`: its own engine, whose kind is `own_kind`), told
    /// `prompt`, from a prompt file named after `slot`.
    pub(super) fn agent_choice(
        &self,
        task: u32,
        choice: &EngineChoice,
        (own, own_kind): (bool, Option<EngineKind>),
        prompt: &str,
        slot: &str,
    ) -> Choice {
        let spec_task = self.graph.task(task);
        let Action::Agent { settings, .. } = &spec_task.action else {
            unreachable!("only agent tasks have engines")
        };
        let mut engine = match self.agents.engine(&choice.engine) {
            None => {
                return Choice::failed(Arc::new(LaunchError::UnknownEngine(choice.engine.clone())));
            }
            Some(engine)
                if engine.kind == EngineKind::Http
                    && choice.model.is_none()
                    && engine.model.is_none() =>
            {
                return Choice::failed(Arc::new(LaunchError::NoModel(engine.name.clone())));
            }
            Some(engine) => engine.clone(),
        };
        // What the task passes on besides the run's own list.
        let mut patterns: Vec<String> = spec_task.pass_env.to_vec();
        if engine.command.is_empty() {
            // `http`: baton's own `agent-http` asks the API.
            engine.command = std::env::current_exe()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "baton".to_owned());
        }
        if engine.kind == EngineKind::Http {
            patterns.push(engine.http_endpoint().2.to_owned());
        }
        // What the task says of its CLI's flags is said to its own engine's kind: a
        // fallback of another kind gets its model and turn limit only (Claude Code's
        // `permission_mode` is no Gemini approval mode, nor are its args Codex's).
        let own_flags = own || Some(engine.kind) == own_kind;
        let mut options = AgentOptions {
            model: choice.model.clone(),
            max_turns: settings.max_turns,
            ..AgentOptions::default()
        };
        if own_flags {
            options.allowed_tools = settings.allowed_tools.clone();
            options.permission_mode = settings.permission_mode.clone();
            options.sandbox = settings.sandbox.clone();
            options.args = settings.args.clone();
        }
        // Where the engine can hold the answer to a schema, it does: Claude
        // Code's `--json-schema` has the model answer through a tool whose
        // input is checked against it (its `result` is then that JSON).
        if spec_task.plan.is_some() {
            options.args.extend(schema_args(
                engine.kind,
                crate::planner::PLAN_SCHEMA,
                crate::planner::PLAN_SCHEMA_STRICT,
                &self
                    .dirs
                    .handoff
                    .join(format!("{}.schema.json", spec_task.id.file_name())),
            ));
        }
        // What is the same for every task first, what is the task's own last: siblings'
        // prompts then start with the same bytes, which a provider's prompt cache serves.
        let particulars = particulars(spec_task);
        let preamble = match spec_task.plan {
            Some(_) => {
                let planning = crate::planner::preamble(&self.graph, task, &self.root);
                Some(match particulars {
                    Some(_) => format!("{planning}\n{PREAMBLE}"),
                    None => planning,
                })
            }
            None => particulars.as_ref().map(|_| PREAMBLE.to_owned()),
        };
        let told;
        let prompt = match &particulars {
            Some(particulars) => {
                told = format!("{prompt}\n\n{particulars}");
                told.as_str()
            }
            None => prompt,
        };
        let prompt_file = self.dirs.prompt(&spec_task.id, slot);
        let invocation =
            engine.invocation(prompt, preamble.as_deref(), &options, None, &prompt_file);
        patterns.extend(engine.kind.pass_env().iter().map(|s| (*s).to_owned()));
        patterns.extend(engine.pass_env.iter().cloned());
        let removed = engine.kind.remove_env();
        let program = Program::Exec {
            program: invocation.program,
            args: invocation.args,
        };
        let model = choice.model.clone().or_else(|| engine.model.clone());
        let agent = Arc::new(PreparedAgent {
            engine,
            prompt: invocation.prompt,
            env: invocation.env,
            records: invocation.records,
            idle_timeout: settings.idle_timeout,
            options,
            preamble,
            prompt_file,
            prompt_text: prompt.to_owned(),
            prices: self.agents.prices.clone(),
            model,
            task_limit: settings.budget.clone(),
        });
        Choice {
            program: Ok(program),
            passed: self.passed_for(&patterns, removed),
            agent: Some(agent),
        }
    }
}
