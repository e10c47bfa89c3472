//! `baton report [RUN] [-o FILE]`: the run as one HTML page that needs nothing else (see
//! `baton_report::render_html`), from what the store recorded.

use std::path::PathBuf;

use anyhow::Context;
use baton_view::Gathered;

use super::records;
use crate::cli::ReportArgs;
use crate::exit::{self, Failure};
use crate::out;

pub(crate) fn report(args: ReportArgs, store_url: Option<&str>) -> Result<i32, Failure> {
    let (project, store) = records::open_with_project(store_url)?;
    let run = records::resolve(&*store, args.run.as_deref())?;
    let page = Gathered::of(
        &*store,
        &project.state_dir,
        &run,
        records::effective_state(&run),
    )?
    .render(None)
    .context("cannot lay out the report")?;
    let path = match args.output {
        Some(path) if path.as_os_str() == "-" => {
            out::Stdout::new("the report").task_output(page.as_bytes())?;
            return Ok(exit::SUCCESS);
        }
        Some(path) => path,
        None => project
            .state_dir
            .join("reports")
            .join(format!("{}.html", run.id)),
    };
    write(&path, &page)?;
    out::line(
        "where the report went",
        &format!(
            "baton: wrote the report of run {} to {}",
            run.id,
            path.display()
        ),
    )?;
    Ok(exit::SUCCESS)
}

fn write(path: &std::path::Path, page: &str) -> Result<(), Failure> {
    let bad =
        |e: std::io::Error| Failure::BadInput(format!("cannot write {}: {e}", path.display()));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(bad)?;
    }
    // Whole or not at all: a page half written is worse than none.
    let tmp: PathBuf = path.with_extension("html.partial");
    std::fs::write(&tmp, page).map_err(bad)?;
    std::fs::rename(&tmp, path).map_err(bad)
}
