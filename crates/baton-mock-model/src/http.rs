//! Just enough HTTP/1.1 for the agent CLIs: request line, headers, a `Content-Length` or chunked
//! body; responses either with `Content-Length` (JSON) or chunked (SSE streams), so connections
//! can be kept alive the way Node's and Rust's HTTP clients like to.

use std::io;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Requests larger than this are refused: Claude Code's requests with all tool definitions are
/// a few hundred KB, so 64 MiB is "never" for a test but still bounds a runaway client.
const MAX_BODY: usize = 64 << 20;
const MAX_HEAD_LINE: usize = 64 << 10;

pub(crate) struct Request {
    pub method: String,
    /// Path with the query string, as sent.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// The path without the query string.
    pub(crate) fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
    /// HTTP/1.1 keeps the connection unless told otherwise.
    pub(crate) fn wants_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

pub(crate) struct Conn {
    reader: BufReader<TcpStream>,
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

impl Conn {
    pub(crate) fn new(stream: TcpStream) -> Conn {
        Conn {
            reader: BufReader::new(stream),
        }
    }

    async fn line(&mut self) -> io::Result<Option<String>> {
        let mut buf = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_HEAD_LINE as u64)
            .read_until(b'\n', &mut buf)
            .await?;
        if n == 0 {
            return Ok(None);
        }
        if buf.last() != Some(&b'\n') {
            return Err(bad("header line too long or truncated"));
        }
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        String::from_utf8(buf)
            .map(Some)
            .map_err(|_| bad("header line is not UTF-8"))
    }

    /// The next request, or `None` when the client closed the connection between requests.
    pub(crate) async fn read_request(&mut self) -> io::Result<Option<Request>> {
        let first = loop {
            match self.line().await? {
                None => return Ok(None),
                Some(l) if l.is_empty() => continue, // stray CRLF between requests is allowed
                Some(l) => break l,
            }
        };
        let mut parts = first.split_whitespace();
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
            return Err(bad("bad request line"));
        };
        let (method, target) = (method.to_string(), target.to_string());
        let mut headers = Vec::new();
        loop {
            let Some(l) = self.line().await? else {
                return Err(bad("eof in headers"));
            };
            if l.is_empty() {
                break;
            }
            let Some((k, v)) = l.split_once(':') else {
                return Err(bad("bad header"));
            };
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
        let mut req = Request {
            method,
            target,
            headers,
            body: Vec::new(),
        };
        if req
            .header("expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
        {
            self.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        let chunked = req
            .header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        if chunked {
            req.body = self.read_chunked().await?;
        } else if let Some(len) = req.header("content-length") {
            let len: usize = len.parse().map_err(|_| bad("bad content-length"))?;
            if len > MAX_BODY {
                return Err(bad("body too large"));
            }
            let mut body = vec![0; len];
            self.reader.read_exact(&mut body).await?;
            req.body = body;
        }
        Ok(Some(req))
    }

    async fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let Some(size_line) = self.line().await? else {
                return Err(bad("eof in chunked body"));
            };
            let hex = size_line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(hex, 16).map_err(|_| bad("bad chunk size"))?;
            if size == 0 {
                // Trailers, then the empty line.
                while let Some(l) = self.line().await? {
                    if l.is_empty() {
                        break;
                    }
                }
                return Ok(body);
            }
            if body.len() + size > MAX_BODY {
                return Err(bad("body too large"));
            }
            let start = body.len();
            body.resize(start + size, 0);
            self.reader.read_exact(&mut body[start..]).await?;
            let mut crlf = [0u8; 2];
            self.reader.read_exact(&mut crlf).await?;
        }
    }

    pub(crate) async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        let s = self.reader.get_mut();
        s.write_all(bytes).await?;
        s.flush().await
    }

    /// A complete response with a `Content-Length` body.
    pub(crate) async fn respond(
        &mut self,
        status: u16,
        content_type: &str,
        extra: &[(String, String)],
        body: &[u8],
        close: bool,
    ) -> io::Result<()> {
        let mut head = head(status, content_type, extra, close);
        head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        let mut out = head.into_bytes();
        out.extend_from_slice(body);
        self.write_all(&out).await
    }

    /// The head of a chunked response; follow with [`Conn::chunk`]s and [`Conn::end_chunks`].
    pub(crate) async fn start_chunked(
        &mut self,
        status: u16,
        content_type: &str,
        close: bool,
    ) -> io::Result<()> {
        let mut head = head(status, content_type, &[], close);
        head.push_str("cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n");
        self.write_all(head.as_bytes()).await
    }

    pub(crate) async fn chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(()); // an empty chunk would end the body
        }
        let mut out = format!("{:x}\r\n", data.len()).into_bytes();
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
        self.write_all(&out).await
    }

    pub(crate) async fn end_chunks(&mut self) -> io::Result<()> {
        self.write_all(b"0\r\n\r\n").await
    }

    /// Wait until the client closes its side (reads and drops whatever it sends meanwhile).
    pub(crate) async fn wait_for_eof(&mut self) {
        let mut buf = [0u8; 4096];
        loop {
            match self.reader.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }
}

fn head(status: u16, content_type: &str, extra: &[(String, String)], close: bool) -> String {
    let mut h = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\n",
        reason(status)
    );
    for (k, v) in extra {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str(if close {
        "connection: close\r\n"
    } else {
        "connection: keep-alive\r\n"
    });
    h
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}
