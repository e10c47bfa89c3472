//! Duration and size literals as written in graph files and on the command line: `"20m"`,
//! `"1h30m"`, `"500ms"`, `"8KiB"`, `"2MB"`.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiteralError {
    #[error(
        "`{0}` is not a duration; write a number and a unit, like `30s`, `20m`, `1h30m` or `500ms`"
    )]
    Duration(String),
    #[error(
        "`{0}` is not a size; write a number and a unit, like `8KiB`, `64KB`, `1MiB` or `512` (bytes)"
    )]
    Size(String),
}

/// Parses `"90s"`, `"20m"`, `"1h30m"`, `"500ms"`, `"2d"`. A bare number is not accepted: a
/// reader cannot tell whether `30` means seconds or minutes.
pub fn parse_duration(text: &str) -> Result<Duration, LiteralError> {
    let err = || LiteralError::Duration(text.to_owned());
    let s = text.trim();
    if s.is_empty() {
        return Err(err());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        if digits == 0 {
            return Err(err());
        }
        let number: f64 = rest[..digits].parse().map_err(|_| err())?;
        rest = rest[digits..].trim_start();
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" | "sec" | "secs" => 1.0,
            "m" | "min" | "mins" => 60.0,
            "h" | "hr" | "hrs" => 3600.0,
            "d" => 86400.0,
            _ => return Err(err()),
        };
        rest = rest[unit_len..].trim_start();
        let secs = number * unit;
        if !secs.is_finite() || secs > 1e12 {
            return Err(err());
        }
        total += Duration::from_secs_f64(secs);
    }
    Ok(total)
}

/// Parses `"8KiB"`, `"8KB"`, `"8k"`, `"1MiB"`, `"512"` (bytes). Decimal units (KB, MB) are
/// powers of 1000, binary ones (KiB, MiB) and single letters (k, m) powers of 1024.
pub fn parse_size(text: &str) -> Result<u64, LiteralError> {
    let err = || LiteralError::Size(text.to_owned());
    let s = text.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if digits == 0 {
        return Err(err());
    }
    let number: u64 = s[..digits].parse().map_err(|_| err())?;
    let factor: u64 = match s[digits..].trim() {
        "" | "B" | "b" => 1,
        "KB" | "kB" => 1000,
        "MB" => 1000 * 1000,
        "GB" => 1000 * 1000 * 1000,
        "K" | "k" | "KiB" => 1 << 10,
        "M" | "m" | "MiB" => 1 << 20,
        "G" | "g" | "GiB" => 1 << 30,
        _ => return Err(err()),
    };
    number.checked_mul(factor).ok_or_else(err)
}

/// A short human form: `850ms`, `12.3s`, `4m05s`, `2h03m`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

/// Dollars with enough digits to tell small amounts apart: `$0.0056`, not `$0.01`; `$0.123`,
/// `$12.30`, `$0.00`. The one form every report, board, page and message uses.
pub fn format_usd(usd: f64) -> String {
    if usd == 0.0 {
        "$0.00".to_owned()
    } else if usd.abs() < 1.0 {
        // Up to four significant digits, trailing zeros dropped down to cents.
        let digits = (4 - (usd.abs().log10().floor() as i32 + 1)).clamp(2, 8) as usize;
        let mut text = format!("{usd:.digits$}");
        let cents = text.find('.').map_or(text.len(), |dot| dot + 3);
        while text.len() > cents && text.ends_with('0') {
            text.pop();
        }
        format!("${text}")
    } else {
        format!("${usd:.2}")
    }
}

/// How far the clock this process follows is ahead of its machine's ([`follow_clock`]).
static CLOCK_OFFSET_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// From now on [`now_ms`] is a clock `offset_ms` ahead of this machine's: a shared store's
/// (PostgreSQL's), so that the times machines with skewed clocks record of one run agree (a
/// run submitted on one, coordinated on another, its attempts on a third). Set once, when the
/// store is opened, before anything is stamped.
pub fn follow_clock(offset_ms: i64) {
    CLOCK_OFFSET_MS.store(offset_ms, std::sync::atomic::Ordering::Relaxed);
}

/// Now, in milliseconds since the Unix epoch: the clock events, records and views share
/// (the shared store's, when the process follows one: [`follow_clock`]).
pub fn now_ms() -> i64 {
    let local = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    local.saturating_add(CLOCK_OFFSET_MS.load(std::sync::atomic::Ordering::Relaxed))
}

/// A short human form of a byte count: `512B`, `8.0KiB`, `1.5MiB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1}{}", UNITS[unit])
}

/// A wall-clock time (milliseconds since the Unix epoch) as `2026-11-30 04:01:41Z`: UTC, so
/// that it means the same on every machine of a team.
pub fn format_utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day), by Howard Hinnant's
/// `civil_from_days`.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The line that stands in for bytes dropped from the middle of an output: `[… 12.3MiB cut …]`.
/// One form everywhere (captured output, handoff), so a reader learns it once.
pub fn cut_marker(bytes: u64) -> String {
    format!("\n[… {} cut …]\n", format_size(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("20m"), Ok(Duration::from_secs(1200)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        for bad in ["", "30", "s", "3x", "-1s", "1e999s", "m30"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8KiB"), Ok(8192));
        assert_eq!(parse_size("8KB"), Ok(8000));
        assert_eq!(parse_size("8k"), Ok(8192));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("512"), Ok(512));
        for bad in ["", "KiB", "8 parsecs", "-1", "99999999999999999999GiB"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_422), (2025, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(format_utc(1_764_474_312_000), "2025-11-30 03:45:12Z");
        assert_eq!(format_utc(0), "1970-01-01 00:00:00Z");
    }

    #[test]
    fn formatting() {
        assert_eq!(format_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(format_duration(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(format_duration(Duration::from_secs(245)), "4m05s");
        assert_eq!(format_duration(Duration::from_secs(7380)), "2h03m");
        assert_eq!(format_size(512), "512B");
        assert_eq!(format_size(8192), "8.0KiB");
    }
}
