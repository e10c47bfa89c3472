//! The dashboard's security, all of it: the token (in the link once, then a cookie scoped to
//! the instance's path, or an `Authorization: Bearer` header), the act key a request that acts
//! carries in a header, compared in constant time; and the answers to a request without them.

use anyhow::Context;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use super::{App, Shared};
use crate::exit::Failure;

/// The cookie the link's token becomes.
const COOKIE: &str = "baton_token";

/// The header a request that acts carries the act key in.
const ACT_HEADER: &str = "x-baton-token";

/// 128 bits from the kernel's generator, as hex.
pub(super) fn random_hex() -> Result<String, Failure> {
    let mut bytes = [0u8; 16];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").context("cannot open /dev/urandom")?,
        &mut bytes,
    )
    .context("cannot read /dev/urandom")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// A path outside the instance's: nothing of the dashboard is there.
pub(super) async fn not_here() -> Response {
    (
        StatusCode::NOT_FOUND,
        "404: not a page of this dashboard: open the link `baton serve` printed\n",
    )
        .into_response()
}

/// Every request needs the token: in the link (then it becomes a cookie), the cookie, or an
/// `Authorization: Bearer` header. One that acts also carries the act key in [`ACT_HEADER`].
/// No response tells another site where it came from (the path is the instance's).
pub(super) async fn guard(State(app): State<Shared>, request: Request, next: Next) -> Response {
    let mut response = checked(&app, request, next).await;
    response.headers_mut().insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    response
}

async fn checked(app: &App, request: Request, next: Next) -> Response {
    let query = request.uri().query().unwrap_or("");
    let in_link = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="));
    if let Some(given) = in_link {
        if !same(given, &app.token) {
            return unauthorized();
        }
        let rest: Vec<&str> = query
            .split('&')
            .filter(|pair| !pair.starts_with("token="))
            .collect();
        let path = request.uri().path();
        let to = if rest.is_empty() {
            path.to_owned()
        } else {
            format!("{path}?{}", rest.join("&"))
        };
        let cookie = format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path={}",
            app.token, app.base
        );
        return ([(header::SET_COOKIE, cookie)], Redirect::to(&to)).into_response();
    }
    let headers = request.headers();
    let known = cookie_token(headers)
        .or_else(|| bearer_token(headers))
        .is_some_and(|given| same(given, &app.token));
    if !known {
        return unauthorized();
    }
    if request.method() == axum::http::Method::POST {
        let carried = headers
            .get(ACT_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|given| same(given, &app.act_key));
        if !carried {
            return (
                StatusCode::FORBIDDEN,
                "403: a request that acts carries the page's act key in the X-Baton-Token header\n",
            )
                .into_response();
        }
    }
    next.run(request).await
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "401: this dashboard needs its token: open the link `baton serve` printed \
         (http://ADDRESS/?token=…)\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            "theme=dark; baton_token=f00d; other=1".parse().unwrap(),
        );
        assert_eq!(cookie_token(&headers), Some("f00d"));
    }
}
