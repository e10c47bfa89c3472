use anyhow::Context;
use baton_model::format_utc;
use baton_report::summary;

use super::records;
use crate::cli::StatusArgs;
use crate::exit::{self, Failure};

pub fn status(args: StatusArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let store = records::open(store_url)?;
    let run = records::resolve(&*store, args.run.as_deref())?;
    let mut result = baton_runner::build_result(&*store, &run.id)?;
    result.run.state = records::effective_state(&run);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&result).context("cannot serialize the run")?
        );
        return Ok(exit::SUCCESS);
    }
    println!(
        "run {} of `{}` ({}), started {}",
        run.id,
        run.name,
        run.graph_path,
        format_utc(run.started_at_ms)
    );
    if let Some(reason) = &run.stop_reason {
        println!("stopped: {reason}");
    }
    if let Some(driver) = run
        .driver
        .as_ref()
        .filter(|_| run.status == baton_model::RunState::Running)
    {
        println!("driven by pid {} on {}", driver.pid, driver.host);
    }
    print!("{}", summary::render_status(&result));
    Ok(exit::SUCCESS)
}
