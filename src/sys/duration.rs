//! Durations as people write them in flags and `git config`: `90s`, `10m`,
//! `1h30m`, `250ms`.

use std::time::Duration;

/// A duration: seconds (`90`), or numbers with units `h`, `m`, `s`, `ms`,
/// largest first, each at most once (`90s`, `1.5h`, `1h30m`, `2m30s`, `250ms`).
pub fn parse(s: &str) -> Result<Duration, String> {
    const UNITS: [(&str, f64); 4] = [("h", 3600.0), ("m", 60.0), ("s", 1.0), ("ms", 0.001)];
    let s = s.trim();
    let invalid = || format!("'{s}' is not a duration such as 90s, 10m, 1h30m or 1.5h");
    if s.is_empty() {
        return Err(invalid());
    }
    let mut seconds = 0.0;
    let mut rest = s;
    // Index into UNITS of the largest unit still allowed.
    let mut next = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(digits);
        let letters = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(letters);
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let factor = if unit.is_empty() {
            // A bare number is seconds only on its own: in `1h30` it is ambiguous.
            if rest.len() != s.len() {
                return Err(invalid());
            }
            1.0
        } else {
            let Some(i) = UNITS.iter().position(|(u, _)| *u == unit) else {
                return Err(format!("'{s}': unknown unit '{unit}' (use h, m, s or ms)"));
            };
            if i < next {
                return Err(format!(
                    "'{s}': units go from largest to smallest, each once (e.g. 1h30m)"
                ));
            }
            next = i + 1;
            UNITS[i].1
        };
        seconds += value * factor;
        rest = after;
    }
    if seconds <= 0.0 {
        return Err(format!("'{s}' must be a positive duration"));
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("'{s}' is too long a duration"))
}

#[cfg(test)]
mod tests {
    use super::parse;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse("0").is_err());
        assert!(parse("10x").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn compound_durations() {
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("2m30s"), Ok(Duration::from_secs(150)));
        assert_eq!(parse("1h30m15s"), Ok(Duration::from_secs(5415)));
        assert_eq!(parse("1s500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("1h0m"), Ok(Duration::from_secs(3600)));
        for bad in ["30m1h", "1m1m", "1h30", "1h 30m", "h", "1.2.3s", "-5s"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn too_long_a_duration_is_an_error_not_a_panic() {
        assert_eq!(
            parse("99999999999999999999"),
            Err("'99999999999999999999' is too long a duration".into())
        );
        assert!(parse(&"9".repeat(400)).is_err());
    }
}
