//! `baton-mock-model --script FILE [--port N] [--dump DIR]`: serve a script until killed.
//! Prints the base URL on stdout line 1, then one line per request on stderr; `--dump DIR`
//! also writes each request body to `DIR/NNN-<api>.json` (for finding out what a CLI sends).

use baton_mock_model::{MockModel, Script};
use std::io::Write;
use std::time::Duration;

fn main() {
    if let Err(e) = run() {
        eprintln!("baton-mock-model: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let (mut script, mut port, mut dump) = (None, 0u16, None);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--script" => script = Some(value("--script")?),
            "--port" => {
                port = value("--port")?
                    .parse()
                    .map_err(|e| format!("--port: {e}"))?
            }
            "--dump" => dump = Some(std::path::PathBuf::from(value("--dump")?)),
            "-h" | "--help" => {
                println!("usage: baton-mock-model --script FILE [--port N] [--dump DIR]");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let path = script.ok_or("--script FILE is required")?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let script = Script::from_json(&text).map_err(|e| format!("{path}: {e}"))?;
    if let Some(d) = &dump {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let server = MockModel::start_on(script, port).map_err(|e| format!("cannot listen: {e}"))?;
    println!("{}", server.url());
    let _ = std::io::stdout().flush();
    let mut seen = 0;
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let reqs = server.requests();
        for (i, r) in reqs.iter().enumerate().skip(seen) {
            let rule = r.rule.map_or("-".to_string(), |n| n.to_string());
            eprintln!(
                "{:>3} {} {} api={:?} rule={rule}",
                i + 1,
                r.method,
                r.path,
                r.api
            );
            if let Some(d) = &dump {
                let rec = serde_json::json!({"method": r.method, "path": r.path, "headers": r.headers, "body": r.body});
                let file = d.join(format!("{:03}-{:?}.json", i + 1, r.api));
                let _ =
                    std::fs::write(file, serde_json::to_string_pretty(&rec).unwrap_or_default());
            }
        }
        seen = reqs.len();
    }
}
