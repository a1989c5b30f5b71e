//! The clock as records, log lines and names read it, and times as people read them.

use std::time::Duration;

/// Time since the Unix epoch: the one reading of the clock behind every
/// record, log line and name that carries a time.
pub fn since_epoch() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Seconds since the Unix epoch.
pub fn now() -> i64 {
    since_epoch().as_secs() as i64
}

/// Seconds since the Unix epoch, and milliseconds past them.
pub fn now_ms() -> (i64, u32) {
    let now = since_epoch();
    (now.as_secs() as i64, now.subsec_millis())
}

/// Milliseconds since the Unix epoch.
pub fn now_millis() -> u64 {
    since_epoch().as_millis().try_into().unwrap_or(u64::MAX)
}

/// Nanoseconds since the Unix epoch.
pub fn now_nanos() -> u64 {
    since_epoch().as_nanos() as u64
}

/// `YYYY-MM-DD HH:MM:SS` UTC, without pulling in a date crate for one format.
pub fn format_time(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A wall time in milliseconds as `1.2s` (or `2m05s` from a minute on).
pub fn format_ms(ms: u64) -> String {
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        let secs = ms / 1000;
        format!("{}m{:02}s", secs / 60, secs % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_and_wall_times() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00");
        assert_eq!(format_time(1_767_225_600), "2026-01-01 00:00:00");
        assert_eq!(format_time(951_782_400 + 3661), "2000-02-29 01:01:01");
        assert_eq!(format_ms(1234), "1.2s");
        assert_eq!(format_ms(125_000), "2m05s");
    }
}
