use baton_model::format_utc;
use baton_report::summary;

use super::records;
use crate::cli::StatusArgs;
use crate::exit::{self, Failure};
use crate::out;

pub(super) fn status(args: StatusArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let (project, store) = records::open_with_project(store_url)?;
    let run = records::resolve(&*store, args.run.as_deref())?;
    // As observed: a run recorded as running whose driver is gone is interrupted, and what
    // to type next is for that.
    let state = records::effective_state(&run);
    let result =
        baton_view::build_observed_result(&*store, &run.id, &project.state_dir, Some(state))?;
    if args.json {
        out::json("the run's status", &result)?;
        return Ok(exit::SUCCESS);
    }
    // The name and the graph's path come from a graph file, the reason from what a task did:
    // all shown, never played (the out module makes them terminal-safe).
    let mut text = format!(
        "run {} of `{}` ({}), started {}\n",
        run.id,
        run.name,
        run.graph_path,
        format_utc(run.started_at_ms)
    );
    if let Some(stop) = &run.stop {
        text.push_str(&format!("stopped: {}\n", stop.reason));
    }
    if let Some(driver) = run
        .driver
        .as_ref()
        .filter(|_| run.status == baton_model::RunState::Running)
    {
        text.push_str(&format!(
            "driven by pid {} on {}\n",
            driver.pid, driver.host
        ));
    }
    text.push_str(&summary::render_status(
        &result,
        args.all,
        summary::stdout_width(),
    ));
    out::text("the run's status", &text)?;
    Ok(exit::SUCCESS)
}
