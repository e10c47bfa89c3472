//! baton's integration tests: one binary that drives the real `baton` through the small builder
//! in `test.rs` (graph file, arguments and environment in; exit code, output and the store
//! out), with fixture programs from `tests/fixtures/` that misbehave on purpose.

mod agents;
mod aider;
mod approval;
mod best_of;
mod custom_engines;
mod docs;
mod doctor;
mod procs;
mod test;

mod checks;
mod confine;
mod conflicts;
mod containment;
mod examples;
mod fallback;
mod fan_out;
mod flags;
mod goal;
mod handoff;
mod history;
mod http_engine;
mod interrupt;
mod kill;
mod legacy;
mod live;
mod mcp;
mod notify;
mod on_failure;
mod output;
mod plan;
mod planning;
mod postgres;
mod prune;
mod redaction;
mod report;
mod resume;
mod retry;
mod review;
mod scheduling;
mod serve;
mod shell;
mod shell_user;
mod stdout;
mod store_access;
mod terminal;
mod timeout;
mod traces;
mod untrusted_plans;
mod user_work;
mod validation;
mod why;
mod workers;
mod workspaces;
