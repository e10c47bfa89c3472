//! Reading what an attempt produced: its stdout and the `$BATON_OUTPUT` file it may have
//! written, redacted as decoded.

use std::sync::Mutex;

use baton_exec::AttemptReport;
use baton_exec::handoff::read_structured_output_from;
use baton_layout::RunDirs;
use baton_redact::Redactor;

use crate::launch::HeldOutput;
use crate::out_dir::OutDir;

/// Largest `$BATON_OUTPUT` file read back.
const STRUCTURED_OUTPUT_LIMIT: u64 = 1024 * 1024;

/// Reads what an attempt produced: its stdout and, if it wrote one, its `$BATON_OUTPUT`
/// file (redacted after it is decoded). A problem with that file is returned as a note for
/// the attempt's record.
pub fn collect_output(
    out_dir: &Mutex<OutDir>,
    dirs: &RunDirs,
    redactor: &Redactor,
    (id, attempt, own): (&baton_model::TaskId, u32, Option<&std::path::Path>),
    report: &AttemptReport,
) -> (HeldOutput, Option<String>) {
    let opened = match own {
        Some(own) => std::fs::File::open(own),
        None => OutDir::lock(out_dir).open_output(dirs, id, attempt),
    };
    let (json, note) = match opened {
        // Most tasks write none.
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => (None, None),
        opened => {
            let path = own.map_or_else(|| dirs.structured_output(id, attempt), Into::into);
            let read =
                read_structured_output_from(opened, &path, STRUCTURED_OUTPUT_LIMIT, Some(redactor));
            // Its content now lives in the store (or its problem in the attempt's record). An
            // empty one goes too: the attempt's fix round may write the same file again.
            let _ = std::fs::remove_file(&path);
            match read {
                Ok(json) => (json, None),
                Err(err) => (None, Some(format!("baton: ignored $BATON_OUTPUT: {err}"))),
            }
        }
    };
    (
        HeldOutput {
            text: report.stdout.text.clone(),
            json,
            files_changed: Vec::new(),
        },
        note,
    )
}
