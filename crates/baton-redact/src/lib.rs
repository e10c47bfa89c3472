//! The one redactor that everything baton stores or prints passes through.
//!
//! [`Redactor::redact`] takes a whole text, [`Redactor::stream`] a stream cut anywhere; both
//! give the same bytes. A secret is replaced by `[REDACTED:<rule>]`, and what surrounds it and
//! is not secret stays: the `KEY=` of an assignment, the user and host of a URL, the `BEGIN`
//! and `END` lines of a private key block. [`Redactor::find`] says what `redact` would replace,
//! where and with which label, without redacting (the graph loader refuses a graph file that
//! holds a secret with it).
//!
//! ```
//! use baton_redact::{Redactor, RedactorConfig, secret_env_values};
//!
//! let env = [("DEPLOY_TOKEN", "d3ploy-t0ken-value"), ("HOME", "/home/me")];
//! let redactor = Redactor::new(RedactorConfig {
//!     secret_values: secret_env_values(env, &[]),
//! });
//! assert_eq!(
//!     redactor.redact_str("push with d3ploy-t0ken-value to https://ci:hunter22@git.example.com"),
//!     "push with [REDACTED:secret-value] to https://ci:[REDACTED:url-password]@git.example.com",
//! );
//!
//! // A stream cut inside a secret gives the same bytes.
//! let mut stream = redactor.stream();
//! let mut out = Vec::new();
//! stream.push(b"DB_PASSWORD=hun", &mut out);
//! stream.push(b"ter2\n", &mut out);
//! stream.finish(&mut out);
//! assert_eq!(out, b"DB_PASSWORD=[REDACTED:password]\n");
//! ```
//!
//! # Rules
//!
//! | rule | what |
//! | --- | --- |
//! | `secret-value` | a configured secret value (an environment variable's), verbatim |
//! | `private-key` | the body of a PEM / OpenSSH / PGP private key block, however long |
//! | `jwt` | `eyJ….eyJ….…` |
//! | `anthropic-api-key` | `sk-ant-…` |
//! | `openai-api-key` | `sk-…`, `sk-proj-…`, `sk-svcacct-…`, `sk-admin-…` (random-looking) |
//! | `github-token` | `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_` |
//! | `gitlab-token` | `glpat-`, `gldt-`, `glrt-`, `glptt-`, `glcbt-`, `gloas-`, … |
//! | `aws-access-key-id` | `AKIA…`, `ASIA…`, `ABIA…`, `ACCA…` |
//! | `aws-secret-access-key` | 40 random base64 characters right after an access key id, or standing alone (not lower-case hex, not the end of a longer base64 run) |
//! | `google-api-key` | `AIza…` |
//! | `slack-token`, `slack-webhook` | `xoxb-`, `xoxp-`, `xoxa-`, …, `xapp-`; `hooks.slack.com/services/…` |
//! | `stripe-key` | `sk_live_`, `rk_live_`, `sk_test_`, `rk_test_`, `whsec_` |
//! | `npm-token`, `pypi-token`, `huggingface-token` | `npm_…`, `pypi-AgEIcHlwaS5vcmc…`, `hf_…` |
//! | `bearer-token`, `basic-auth`, `authorization` | `Authorization: <scheme> …`; `Bearer …` with a digit; `Basic …` that decodes to `user:password` |
//! | `url-password` | `scheme://user:password@host` |
//! | `password`, `secret`, `private-key`, `api-key`, `token`, `credential` | `NAME=value`, `NAME: value`, `"name": "value"` where the name ends in `password`/`passwd`/`passphrase`, `secret`/`client_secret`/`secret_key`, `private_key`, `api_key`/`apikey`/`access_key`, `token`, `auth`/`credentials` (any case, any prefix: `DB_PASSWORD`, `GITHUB_TOKEN`) |
//!
//! Assignments skip empty values and placeholders (`${VAR}`, `<password>`, `***`, `null`);
//! `token` and `auth` values must have 8 bytes and a digit or both cases, `api_key` values 8
//! bytes. An unquoted value ends at white space or punctuation (`,;&<>(){}[]`), a quoted one
//! at its closing quote. Redacting is idempotent: a marker is never redacted again.
//!
//! # Limits
//!
//! - Secret values shorter than [`MIN_SECRET_LEN`] bytes are not redacted verbatim.
//! - Tokens are matched on bytes, ASCII only, as printed — and, in a line that holds JSON
//!   escapes (`\/`, `\u0067`, `\"`, `\n`), decoded too, up to three levels (JSON in a JSON
//!   string in a stream line), each secret found there redacted as the whole escapes it came
//!   from, so that valid JSON stays valid. A secret split over lines or base64-encoded is not
//!   recognised; nor is one escaped in a line longer than 1 MiB, or in a line that goes on
//!   from a secret of the lines before it (an AWS key id at a line's end), or one whose escape
//!   comes after a [release](StreamRedactor::release) in the middle of its line.
//! - A stream holds each line until its end (`\n` or `\r`) or a release, to decode it whole.
//! - A stream that is [released](StreamRedactor::release) in a pause judges what it holds up
//!   to its last line break on its own: a secret spanning a line break and a pause (an AWS
//!   key id at a line's end, its secret key on the next line later) is seen as two pieces.
//! - A private key block is swallowed from its `BEGIN` line to its `END` line, or to the first
//!   byte that cannot stand in one (a key without its `END` line is still redacted).

mod byteset;
mod engine;
mod env;
mod escaped;
mod redactor;
mod rules;
mod stream;
mod validate;

pub use env::{is_secret_name, secret_env_values};
pub use redactor::{Finding, MIN_SECRET_LEN, Redactor, RedactorConfig};
pub use stream::StreamRedactor;
