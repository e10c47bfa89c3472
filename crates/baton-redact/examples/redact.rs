//! Redacts stdin to stdout, streaming, with the secret-looking variables of this process's
//! environment as literal secrets: `some-command | cargo run -p baton-redact --example redact`.

use std::io::{Read, Write};

use baton_redact::{Redactor, RedactorConfig, secret_env_values};

fn main() -> std::io::Result<()> {
    let redactor = Redactor::new(RedactorConfig {
        secret_values: secret_env_values(std::env::vars_os(), &[]),
    });
    let mut stream = redactor.stream();
    let (mut stdin, mut stdout) = (std::io::stdin().lock(), std::io::stdout().lock());
    let mut buf = vec![0; 64 << 10];
    let mut out = Vec::new();
    loop {
        let n = stdin.read(&mut buf)?;
        if n == 0 {
            break;
        }
        stream.push(&buf[..n], &mut out);
        stdout.write_all(&out)?;
        out.clear();
    }
    stream.finish(&mut out);
    stdout.write_all(&out)
}
