//! Human-friendly durations on the command line: `250ms`, `5s`, `1.5s`, `2m`, `1h`, `1m30s`.

use std::time::Duration;

/// Parses one or more `<number><unit>` parts (units `ms`, `s`, `m`, `h`; the number may have a
/// fractional part) and adds them up. A bare number, an unknown unit and a zero total are
/// rejected: every duration this CLI takes (TTL, timeout) must be positive and explicit.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration (expected e.g. 500ms, 5s, 2m, 1h)".to_owned());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        let unit_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        if number.is_empty() {
            return Err(format!(
                "invalid duration {text:?}: expected a number before {rest:?}"
            ));
        }
        let value: f64 = number
            .parse()
            .map_err(|_| format!("invalid duration {text:?}: {number:?} is not a number"))?;
        let unit_ms = match unit {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "" => {
                return Err(format!(
                    "invalid duration {text:?}: missing unit after {number} (use ms, s, m or h)"
                ));
            }
            other => {
                return Err(format!(
                    "invalid duration {text:?}: unknown unit {other:?} (use ms, s, m or h)"
                ));
            }
        };
        let part = Duration::try_from_secs_f64(value * unit_ms / 1_000.0)
            .map_err(|_| format!("invalid duration {text:?}: out of range"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("invalid duration {text:?}: out of range"))?;
        rest = after;
    }
    if total.is_zero() {
        return Err(format!(
            "invalid duration {text:?}: must be greater than zero"
        ));
    }
    Ok(total)
}

/// Whole milliseconds of a duration (saturating), for the JSON output and [`format_ms`].
pub(crate) fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Formats milliseconds for people, in the units `parse_duration` reads: `250ms`, `1.5s`,
/// `10s`, `2m`, `1m30s`, `2h`, `167h59m26.362s`. Exact (a value reads back as itself), and a
/// duration of hours reads in hours whatever its last digits, so a TTL of `168h` and its remaining
/// time `167h59m26.362s` can be compared at a glance.
pub(crate) fn format_ms(ms: u64) -> String {
    const HOUR: u64 = 3_600_000;
    const MINUTE: u64 = 60_000;
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let (hours, rest) = (ms / HOUR, ms % HOUR);
    let (minutes, rest) = (rest / MINUTE, rest % MINUTE);
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    // Under a minute, and not whole minutes: seconds (90s reads better as 1m30s only once
    // minutes are involved anyway).
    if hours == 0 && minutes == 1 && rest > 0 {
        return format_seconds(MINUTE + rest);
    }
    if rest > 0 {
        out.push_str(&format_seconds(rest));
    }
    out
}

/// `ms` as seconds with up to three decimals: `1s`, `1.5s`, `26.362s`.
fn format_seconds(ms: u64) -> String {
    if ms.is_multiple_of(1_000) {
        format!("{}s", ms / 1_000)
    } else {
        let text = format!("{}.{:03}", ms / 1_000, ms % 1_000);
        format!("{}s", text.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> u128 {
        parse_duration(text)
            .unwrap_or_else(|err| panic!("{text:?}: {err}"))
            .as_millis()
    }

    #[test]
    fn parses_each_unit() {
        assert_eq!(ms("250ms"), 250);
        assert_eq!(ms("5s"), 5_000);
        assert_eq!(ms("2m"), 120_000);
        assert_eq!(ms("1h"), 3_600_000);
    }

    #[test]
    fn parses_fractions_compounds_and_whitespace() {
        assert_eq!(ms("1.5s"), 1_500);
        assert_eq!(ms("0.25s"), 250);
        assert_eq!(ms("1m30s"), 90_000);
        assert_eq!(ms("1h2m3s4ms"), 3_723_004);
        assert_eq!(ms(" 10s "), 10_000);
    }

    #[test]
    fn rejects_bad_input_with_a_reason() {
        let err = |text: &str| parse_duration(text).expect_err(text);
        assert!(err("").contains("empty"));
        assert!(err("10").contains("missing unit"));
        assert!(err("10d").contains("unknown unit \"d\""));
        assert!(err("s").contains("expected a number"));
        assert!(err("1..5s").contains("not a number"));
        assert!(err("0s").contains("greater than zero"));
        assert!(err("-5s").contains("expected a number"));
        assert!(err("5 s").contains("missing unit"));
        assert!(err("99999999999999999999999h").contains("out of range"));
    }

    #[test]
    fn formats_for_people() {
        assert_eq!(format_ms(0), "0ms");
        assert_eq!(format_ms(250), "250ms");
        assert_eq!(format_ms(1_000), "1s");
        assert_eq!(format_ms(1_500), "1.5s");
        assert_eq!(format_ms(1_250), "1.25s");
        assert_eq!(format_ms(10_000), "10s");
        assert_eq!(format_ms(90_000), "90s");
        assert_eq!(format_ms(120_000), "2m");
        assert_eq!(format_ms(7_200_000), "2h");
        assert_eq!(format_ms(150_000), "2m30s");
        assert_eq!(format_ms(3_690_500), "1h1m30.5s");
        // A week's TTL and what remains of it read in the same units.
        assert_eq!(format_ms(604_800_000), "168h");
        assert_eq!(format_ms(604_766_362), "167h59m26.362s");
        for value in [1_500, 90_000, 150_000, 3_690_500, 604_766_362, 7_200_001] {
            let text = format_ms(value);
            assert_eq!(ms(&text), u128::from(value), "{text} reads back");
        }
    }
}
