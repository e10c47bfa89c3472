use std::time::Duration;

use baton_model::{Event, EventKind};

use super::records;
use crate::cli::EventsArgs;
use crate::exit::{self, Failure};
use crate::out;

const POLL: Duration = Duration::from_millis(100);
const PAGE: u32 = 1000;

pub(crate) fn events(args: EventsArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let store = records::open(store_url)?;
    let run = records::resolve(&*store, Some(&args.run))?;
    let mut out = out::Stdout::new("the run's events");
    let mut after = 0;
    loop {
        let page = store.events(&run.id, after, PAGE)?;
        let finished = print(&mut out, &page, args.json)?;
        if let Some(last) = page.last() {
            after = last.seq;
        }
        if page.len() as u32 == PAGE {
            continue;
        }
        if !args.follow || finished {
            return Ok(exit::SUCCESS);
        }
        let current = store.run(&run.id)?.unwrap_or_else(|| run.clone());
        if !records::goes_on(&current) {
            // Finished, or its driver died: read what is left once more, then stop.
            let rest = store.events(&run.id, after, u32::MAX)?;
            print(&mut out, &rest, args.json)?;
            return Ok(exit::SUCCESS);
        }
        std::thread::sleep(POLL);
    }
}

/// Prints `events`, one a line; whether the run finished among them. A reader that went away
/// (a closed pipe) ends the command quietly, one that cannot be written (a full disk) is an
/// error: either way nothing more is read.
fn print(out: &mut out::Stdout, events: &[Event], json: bool) -> Result<bool, Failure> {
    let mut finished = false;
    for event in events {
        finished |= matches!(event.kind, EventKind::RunFinished { .. });
        if json {
            out.json_line(&JsonEvent::of(event))?;
        } else {
            out.line(&baton_view::describe(event))?;
        }
    }
    Ok(finished)
}

/// An event as `baton events --json` prints it (and the dashboard streams it).
#[derive(serde::Serialize)]
pub(crate) struct JsonEvent<'a> {
    schema: u32,
    #[serde(flatten)]
    event: &'a Event,
}

impl<'a> JsonEvent<'a> {
    pub(crate) fn of(event: &'a Event) -> Self {
        Self {
            schema: baton_model::EVENT_SCHEMA_VERSION,
            event,
        }
    }
}
