//! `baton completions SHELL` and `baton man`: generated from the command line's own
//! definition (clap_complete, clap_mangen), so they never drift from it.

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::exit::{self, Failure};
use crate::out;

/// The script that registers baton's completions with a shell: it asks baton itself what to
/// complete at each Tab (`COMPLETE=SHELL baton -- WORDS`), so run and task ids come from the
/// project's store as it is then.
pub(super) fn completions(args: &CompletionsArgs) -> Result<i32, Failure> {
    let name = args.shell.to_string();
    let shells = clap_complete::env::Shells::builtins();
    let shell = shells
        .completer(&name)
        .ok_or_else(|| Failure::BadInput(format!("baton cannot complete for {name}")))?;
    let mut script = Vec::new();
    shell
        .write_registration("COMPLETE", "baton", "baton", "baton", &mut script)
        .context("cannot write the completion script")?;
    out::Stdout::new("the completion script").task_output(&script)?;
    Ok(exit::SUCCESS)
}

pub(super) fn man(args: &ManArgs) -> Result<i32, Failure> {
    let command = Cli::command();
    let Some(dir) = &args.dir else {
        let page = render(command)?;
        out::Stdout::new("the man page").task_output(&page)?;
        return Ok(exit::SUCCESS);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::BadInput(format!("cannot create {}: {e}", dir.display())))?;
    let mut pages = vec![("baton.1".to_owned(), render(command.clone())?)];
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("baton-{}", sub.get_name());
        let page = render(sub.clone().name(name.clone()).display_name(name.clone()))?;
        pages.push((format!("{name}.1"), page));
    }
    for (name, page) in &pages {
        let path = dir.join(name);
        std::fs::write(&path, page)
            .map_err(|e| Failure::BadInput(format!("cannot write {}: {e}", path.display())))?;
    }
    out::line(
        "where the man pages went",
        &format!(
            "baton: wrote {} man pages to {}",
            pages.len(),
            dir.display()
        ),
    )?;
    Ok(exit::SUCCESS)
}

fn render(command: clap::Command) -> Result<Vec<u8>, Failure> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .context("cannot render the man page")?;
    Ok(page)
}
