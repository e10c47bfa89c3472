//! What tells a secret from ordinary text once a pattern has matched.

/// Accepts every match: the pattern alone is specific enough.
pub(crate) fn always(_: &[&[u8]]) -> bool {
    true
}

fn last<'a>(groups: &[&'a [u8]]) -> &'a [u8] {
    groups.last().copied().unwrap_or_default()
}

pub(crate) fn has_digit(groups: &[&[u8]]) -> bool {
    last(groups).iter().any(u8::is_ascii_digit)
}

/// Digits, upper and lower case: a random token, not a kebab-case word.
pub(crate) fn mixed(groups: &[&[u8]]) -> bool {
    let v = last(groups);
    v.iter().any(u8::is_ascii_digit)
        && v.iter().any(u8::is_ascii_uppercase)
        && v.iter().any(u8::is_ascii_lowercase)
}

/// The 40 characters after an access key id are its secret only if they look random (a
/// random 40-character base64 string lacks one of these one time in a thousand).
pub(crate) fn aws_secret(groups: &[&[u8]]) -> bool {
    mixed(groups)
}

/// The text where a lone AWS secret key would start: its run of base64 bytes (after an
/// escaped line break or tab) must be 40 long and look random. Anything else (a colour
/// sequence before it) is left to the full match.
pub(crate) fn aws_secret_alone(text: &[u8]) -> bool {
    let text = match text {
        [b'\\', b'n' | b'r' | b't', rest @ ..] => rest,
        [b'\x1b', ..] => return true,
        _ => text,
    };
    let run = text
        .iter()
        .take(41)
        .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'/' || b == b'+')
        .count();
    run == 40 && mixed(&[&text[..40]])
}

/// A value that stands for a secret rather than being one: `${VAR}`, `<password>`, `***`,
/// `null`, one holding a redaction marker, the start of a PEM block (which its own rule takes
/// whole).
fn placeholder(v: &[u8]) -> bool {
    let lower = v.to_ascii_lowercase();
    let var = |rest: &[u8]| {
        rest.first()
            .is_some_and(|b| matches!(b, b'{' | b'(' | b'_' | b'A'..=b'Z'))
    };
    v.is_empty()
        // `$` alone: the value was `${VAR}` or `$(command)`, cut at the bracket.
        || v == b"$"
        // A value around a marker was not redacted whole the first time, so it is not now:
        // redacting twice changes nothing.
        || v.windows(10).any(|w| w == b"[REDACTED:")
        || v.starts_with(b"-----")
        || v.starts_with(b"{{")
        || v.starts_with(b"<")
        || v.starts_with(b"%(")
        || v.strip_prefix(b"$").is_some_and(var)
        || v.iter().all(|b| matches!(b, b'*' | b'.' | b'#' | b'x' | b'X'))
        || matches!(
            &lower[..],
            b"null" | b"none" | b"nil" | b"true" | b"false" | b"undefined" | b"redacted"
        )
}

/// A password or a secret: any value but a placeholder.
pub(crate) fn strong(groups: &[&[u8]]) -> bool {
    !placeholder(last(groups))
}

/// An API key: at least 8 bytes.
pub(crate) fn medium(groups: &[&[u8]]) -> bool {
    let v = last(groups);
    v.len() >= 8 && !placeholder(v)
}

/// A token or credential named by a common word (`auth`, `token`): at least 8 bytes with a
/// digit, or 16 with both cases, so `auth: required` and `token: Kind::Ident` stay.
pub(crate) fn weak(groups: &[&[u8]]) -> bool {
    let v = last(groups);
    let digit = v.iter().any(u8::is_ascii_digit);
    let cases = v.iter().any(u8::is_ascii_uppercase) && v.iter().any(u8::is_ascii_lowercase);
    v.len() >= 8 && (digit || (cases && v.len() >= 16)) && !placeholder(v)
}

/// `-u user:password`, but not `docker run -u 1000:1000`.
pub(crate) fn not_numeric(groups: &[&[u8]]) -> bool {
    let v = last(groups);
    !v.iter().all(u8::is_ascii_digit) && strong(groups)
}

/// An Authorization header's credentials: anything but a placeholder or a bare scheme name
/// (`Authorization: Bearer` with nothing after it).
pub(crate) fn authorization(groups: &[&[u8]]) -> bool {
    let v = last(groups);
    let scheme = matches!(
        &v.to_ascii_lowercase()[..],
        b"bearer" | b"basic" | b"token" | b"digest" | b"negotiate" | b"ntlm" | b"bot"
    );
    !scheme && !placeholder(v)
}

/// `Basic x` where `x` decodes to `user:password`.
pub(crate) fn basic_auth(groups: &[&[u8]]) -> bool {
    let v = last(groups);
    v.len().is_multiple_of(4) && decode_base64(v).is_some_and(|d| d.contains(&b':'))
}

/// Standard base64 with padding; `None` if `v` is not.
fn decode_base64(v: &[u8]) -> Option<Vec<u8>> {
    fn sextet(b: u8) -> Option<u32> {
        Some(
            match b {
                b'A'..=b'Z' => b - b'A',
                b'a'..=b'z' => b - b'a' + 26,
                b'0'..=b'9' => b - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                _ => return None,
            }
            .into(),
        )
    }
    let body = v
        .strip_suffix(b"==")
        .or_else(|| v.strip_suffix(b"="))
        .unwrap_or(v);
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for quad in body.chunks(4) {
        let mut n = 0u32;
        for (i, &b) in quad.iter().enumerate() {
            n |= sextet(b)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..quad.len()]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes() {
        assert_eq!(decode_base64(b"dXNlcjpwYXNz").unwrap(), b"user:pass");
        assert_eq!(decode_base64(b"dXNlcjpwYXM=").unwrap(), b"user:pas");
        assert_eq!(decode_base64(b"dXNlcjpwYQ==").unwrap(), b"user:pa");
        assert!(decode_base64(b"dXN!cjpw").is_none());
    }

    #[test]
    fn placeholders() {
        for v in [
            &b"${DB_PASSWORD}"[..],
            b"$DB",
            b"<password>",
            b"****",
            b"null",
            b"{{ x }}",
        ] {
            assert!(placeholder(v), "{}", String::from_utf8_lossy(v));
        }
        for v in [&b"hunter2"[..], b"$ecret-word", b"p@ss"] {
            assert!(!placeholder(v), "{}", String::from_utf8_lossy(v));
        }
    }
}
