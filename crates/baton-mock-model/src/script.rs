//! The script: which reply answers which request. Pure data plus matching; no I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which wire API a request spoke. Decided from the path alone, so a rule can be aimed at one CLI.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `POST /v1/messages` (Claude Code).
    AnthropicMessages,
    /// `POST …/responses` (Codex).
    OpenAiResponses,
    /// `POST …/chat/completions`.
    OpenAiChat,
    /// `POST …/models/M:generateContent` (Gemini CLI, non-streaming).
    GeminiGenerate,
    /// `POST …/models/M:streamGenerateContent` (Gemini CLI, streaming).
    GeminiStream,
    /// Anything else.
    Other,
}

impl Api {
    /// Classify a request path (query string already removed).
    pub fn from_path(path: &str) -> Api {
        if path == "/v1/messages" {
            Api::AnthropicMessages
        } else if path.ends_with("/responses") {
            Api::OpenAiResponses
        } else if path.ends_with("/chat/completions") {
            Api::OpenAiChat
        } else if path.contains(":streamGenerateContent") {
            Api::GeminiStream
        } else if path.contains(":generateContent") {
            Api::GeminiGenerate
        } else {
            Api::Other
        }
    }
}

/// Rules tried in order; the first whose `when` matches the request and that has uses left answers it.
#[derive(Deserialize, Serialize, Clone, Debug, Default)]
pub struct Script {
    pub rules: Vec<Rule>,
}

impl Script {
    pub fn new() -> Script {
        Script::default()
    }

    /// Append a rule (tried after the ones already there).
    pub fn rule(mut self, rule: Rule) -> Script {
        self.rules.push(rule);
        self
    }

    /// Read a script from JSON text (the binary's `--script FILE`).
    pub fn from_json(text: &str) -> serde_json::Result<Script> {
        serde_json::from_str(text)
    }
}

#[derive(Deserialize, Serialize, Clone, Debug)]
pub struct Rule {
    #[serde(default)]
    pub when: Match,
    /// How many requests this rule may answer; `None` = unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
    pub reply: Reply,
}

impl Rule {
    /// A rule answering every request with `reply`.
    pub fn reply(reply: Reply) -> Rule {
        Rule {
            when: Match::default(),
            times: None,
            reply,
        }
    }
    /// A plain assistant answer.
    pub fn text(text: impl Into<String>) -> Rule {
        Rule::reply(Reply::text(text))
    }
    /// One tool call.
    pub fn tool_use(name: impl Into<String>, input: Value) -> Rule {
        Rule::reply(Reply::tool_use(name, input))
    }
    /// An HTTP error in the asking API's error shape.
    pub fn error(status: u16) -> Rule {
        Rule::reply(Reply::error(status))
    }
    pub fn hang() -> Rule {
        Rule::reply(Reply::Hang)
    }
    pub fn when_api(mut self, api: Api) -> Rule {
        self.when.api = Some(api);
        self
    }
    pub fn when_contains(mut self, s: impl Into<String>) -> Rule {
        self.when.contains = Some(s.into());
        self
    }
    pub fn when_last_contains(mut self, s: impl Into<String>) -> Rule {
        self.when.last_contains = Some(s.into());
        self
    }
    pub fn times(mut self, n: u32) -> Rule {
        self.times = Some(n);
        self
    }
    /// Stream this rule's reply with `delay_ms` between events.
    pub fn slow(mut self, delay_ms: u64) -> Rule {
        self.reply = Reply::Slow {
            inner: Box::new(self.reply),
            delay_ms,
        };
        self
    }
}

/// All set conditions must hold; an empty `Match` matches everything.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<Api>,
    /// Substring of the request's conversation text (see [`conversation_text`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// Substring of the text of the LAST message / input item only: tells a first turn from the
    /// turn after a tool result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_contains: Option<String>,
}

impl Match {
    pub fn matches(&self, api: Api, body: &Value, raw: &str) -> bool {
        if self.api.is_some_and(|a| a != api) {
            return false;
        }
        if let Some(needle) = &self.contains
            && !conversation_text(api, body, raw).contains(needle.as_str())
        {
            return false;
        }
        if let Some(needle) = &self.last_contains
            && !last_item_text(api, body, raw).contains(needle.as_str())
        {
            return false;
        }
        true
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// A plain assistant answer that ends the turn.
    Text {
        text: String,
        #[serde(default = "default_input_tokens")]
        input_tokens: u64,
        #[serde(default = "default_output_tokens")]
        output_tokens: u64,
    },
    /// One tool call, rendered as the asking CLI expects it (Anthropic `tool_use` block, Responses
    /// `function_call` / `custom_tool_call` depending on how the request declared the tool, Chat
    /// `tool_calls`, Gemini `functionCall`).
    ToolUse {
        name: String,
        input: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default = "default_input_tokens")]
        input_tokens: u64,
        #[serde(default = "default_output_tokens")]
        output_tokens: u64,
    },
    /// An HTTP error. `body: null` means "the asking API's usual error shape for this status".
    Error {
        status: u16,
        #[serde(default)]
        body: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after: Option<u64>,
    },
    /// The inner reply, with `delay_ms` before each streamed event (or before a JSON answer).
    Slow { inner: Box<Reply>, delay_ms: u64 },
    /// Send the response headers, then nothing, until the client goes away or the server stops.
    Hang,
}

fn default_input_tokens() -> u64 {
    10
}
fn default_output_tokens() -> u64 {
    5
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text {
            text: text.into(),
            input_tokens: default_input_tokens(),
            output_tokens: default_output_tokens(),
        }
    }
    pub fn tool_use(name: impl Into<String>, input: Value) -> Reply {
        Reply::ToolUse {
            name: name.into(),
            input,
            text: None,
            input_tokens: default_input_tokens(),
            output_tokens: default_output_tokens(),
        }
    }

    /// This reply, billed as `input_tokens` and `output_tokens` (text and tool calls; the
    /// other replies bill nothing).
    pub fn costing(mut self, input: u64, output: u64) -> Reply {
        if let Reply::Text {
            input_tokens,
            output_tokens,
            ..
        }
        | Reply::ToolUse {
            input_tokens,
            output_tokens,
            ..
        } = &mut self
        {
            (*input_tokens, *output_tokens) = (input, output);
        }
        self
    }
    pub fn error(status: u16) -> Reply {
        Reply::Error {
            status,
            body: Value::Null,
            retry_after: None,
        }
    }
    /// Anthropic's "overloaded" (HTTP 529).
    pub fn overloaded() -> Reply {
        Reply::error(529)
    }
    /// HTTP 429 with a `retry-after` header.
    pub fn rate_limited(retry_after_secs: u64) -> Reply {
        Reply::Error {
            status: 429,
            body: Value::Null,
            retry_after: Some(retry_after_secs),
        }
    }
    /// Claude Code: write `content` to `file_path` (absolute) with its `Write` tool.
    pub fn claude_write(file_path: &str, content: &str) -> Reply {
        Reply::tool_use(
            "Write",
            serde_json::json!({"file_path": file_path, "content": content}),
        )
    }
    /// Codex: run `cmd` with its `exec_command` tool (the shell tool codex 0.171 declares for a
    /// model it has no metadata for; it declares no `apply_patch` then). Writing needs
    /// `--sandbox workspace-write` (or `--dangerously-bypass-approvals-and-sandbox`).
    pub fn codex_exec(cmd: &str) -> Reply {
        Reply::tool_use("exec_command", serde_json::json!({"cmd": cmd}))
    }
    /// Codex: write `content` to `path` (relative to its cwd, or absolute) via `exec_command`.
    pub fn codex_write(path: &str, content: &str) -> Reply {
        let q = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
        Reply::codex_exec(&format!("printf %s {} > {}", q(content), q(path)))
    }
    /// Gemini CLI: write `content` to `file_path` with its `write_file` tool.
    pub fn gemini_write(file_path: &str, content: &str) -> Reply {
        Reply::tool_use(
            "write_file",
            serde_json::json!({"file_path": file_path, "content": content}),
        )
    }
}

/// The conversation text `contains` looks at: every string (and object key) in the system
/// prompt / instructions and in the messages (or input items, or contents), one a line. Tool
/// definitions are left out on purpose: their long descriptions would make `contains` match by
/// accident. Requests that are not JSON (or of an unknown API) use the raw body.
pub fn conversation_text(api: Api, body: &Value, raw: &str) -> String {
    let keys: &[&str] = match api {
        Api::AnthropicMessages => &["system", "messages"],
        Api::OpenAiResponses => &["instructions", "input"],
        Api::OpenAiChat => &["messages"],
        Api::GeminiGenerate | Api::GeminiStream => &["systemInstruction", "contents"],
        Api::Other => &[],
    };
    if keys.is_empty() || !body.is_object() {
        return raw.to_string();
    }
    let mut out = String::new();
    for k in keys {
        if let Some(v) = body.get(*k) {
            push_strings(v, &mut out);
        }
    }
    out
}

/// The text of the last message / input item / content only.
pub fn last_item_text(api: Api, body: &Value, raw: &str) -> String {
    let key = match api {
        Api::AnthropicMessages | Api::OpenAiChat => "messages",
        Api::OpenAiResponses => "input",
        Api::GeminiGenerate | Api::GeminiStream => "contents",
        Api::Other => return raw.to_string(),
    };
    let mut out = String::new();
    match body.get(key) {
        Some(Value::Array(items)) => {
            if let Some(last) = items.last() {
                push_strings(last, &mut out);
            }
        }
        // Responses `input` may be a bare string.
        Some(v) => push_strings(v, &mut out),
        None => {}
    }
    out
}

fn push_strings(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(a) => a.iter().for_each(|x| push_strings(x, out)),
        // Keys count too: `functionResponse` (Gemini) or `tool_use_id` are the natural markers
        // of "this is a tool result".
        Value::Object(m) => {
            for (k, x) in m {
                out.push_str(k);
                out.push('\n');
                push_strings(x, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scripts_round_trip_as_json() {
        let s = Script::new()
            .rule(Rule::reply(Reply::claude_write("/tmp/a", "hi")).times(1))
            .rule(Rule::reply(Reply::codex_write("a b", "it's")))
            .rule(
                Rule::text("done")
                    .when_last_contains("tool_result")
                    .when_api(Api::AnthropicMessages),
            )
            .rule(Rule::reply(Reply::rate_limited(1)).slow(5))
            .rule(Rule::hang());
        let text = serde_json::to_string(&s).unwrap();
        let back = Script::from_json(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        let Reply::ToolUse { input, .. } = &s.rules[1].reply else {
            panic!()
        };
        assert_eq!(input["cmd"], r"printf %s 'it'\''s' > 'a b'");
        let minimal =
            Script::from_json(r#"{"rules":[{"reply":{"type":"text","text":"x"}}]}"#).unwrap();
        assert_eq!(minimal.rules[0].reply, Reply::text("x"));
    }

    #[test]
    fn matching_looks_at_conversation_and_last_item() {
        let body = json!({"system":"sys","tools":[{"description":"marker"}],
            "messages":[{"role":"user","content":"first"},{"role":"user","content":[{"type":"tool_result","content":"wrote it"}]}]});
        let api = Api::AnthropicMessages;
        let m = |c: Option<&str>, l: Option<&str>| {
            Match {
                api: None,
                contains: c.map(str::to_string),
                last_contains: l.map(str::to_string),
            }
            .matches(api, &body, "")
        };
        assert!(m(Some("first"), None));
        assert!(m(Some("sys"), Some("wrote")));
        assert!(
            !m(Some("marker"), None),
            "tool definitions are not conversation"
        );
        assert!(!m(None, Some("first")));
        assert!(
            !Match {
                api: Some(Api::OpenAiChat),
                ..Match::default()
            }
            .matches(api, &body, "")
        );
    }

    #[test]
    fn apis_from_paths() {
        assert_eq!(Api::from_path("/v1/messages"), Api::AnthropicMessages);
        assert_eq!(Api::from_path("/v1/responses"), Api::OpenAiResponses);
        assert_eq!(Api::from_path("/v1/chat/completions"), Api::OpenAiChat);
        assert_eq!(
            Api::from_path("/v1beta/models/g:generateContent"),
            Api::GeminiGenerate
        );
        assert_eq!(
            Api::from_path("/v1beta/models/g:streamGenerateContent"),
            Api::GeminiStream
        );
        assert_eq!(Api::from_path("/v1/messages/count_tokens"), Api::Other);
    }
}
