use baton_model::{RunId, civil_from_days};

/// A new run id: `YYYYMMDD-HHMMSS-xxxx` in UTC, so that ids sort by start time and read as a
/// date; four random hex digits tell apart runs started in the same second.
pub fn new_run_id(now_ms: i64) -> RunId {
    let secs = now_ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let id = format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{:04x}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        fastrand::u16(..)
    );
    RunId::new(id).expect("a generated run id is always valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_as_dates() {
        let id = new_run_id(1_764_474_312_000);
        assert!(id.as_str().starts_with("20251130-034512-"), "{id}");
    }
}
