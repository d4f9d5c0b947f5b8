//! Timestamps as Kerf stores and shows them: milliseconds since the Unix epoch, written as
//! RFC 3339 in UTC; and the dates a user types to filter by (`2026-11-22`, a full timestamp, or
//! an age such as `3d`).

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `2026-11-22T09:30:05Z` for a time in milliseconds since the epoch (seconds precision).
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Year, month, day from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days since 1970-01-01 of a civil date (the inverse of `civil_from_days`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A moment a user named, in milliseconds since the epoch: `2026-11-22` (midnight UTC),
/// `2026-11-22T09:30:00Z` (or with `+02:00`), or an age before `now_ms`: `90s`, `30m`, `12h`,
/// `7d`, `2w`. The error says which forms are accepted.
pub fn parse_moment(text: &str, now_ms: i64) -> Result<i64, String> {
    let t = text.trim();
    let bad = || {
        format!(
            "`{text}` is not a date: use YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ, or an age such as 30m, 12h, 7d"
        )
    };
    let age = t.char_indices().last().filter(|(i, c)| {
        *i > 0 && c.is_ascii_alphabetic() && t[..*i].bytes().all(|b| b.is_ascii_digit())
    });
    if let Some((i, unit)) = age {
        let n: i64 = t[..i].parse().map_err(|_| bad())?;
        let secs = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 7 * 86_400,
            _ => return Err(bad()),
        };
        // Checked: `99999999999999999w` is not a date, not an overflow.
        return n
            .checked_mul(secs * 1000)
            .and_then(|back| now_ms.checked_sub(back))
            .ok_or_else(bad);
    }
    let num = |s: &str| s.parse::<i64>().map_err(|_| bad());
    // Split at byte 10 only where that is a character boundary (`2026-11-2é` is not a date).
    let cut = t.len().min(10);
    if !t.is_char_boundary(cut) {
        return Err(bad());
    }
    let (date, rest) = t.split_at(cut);
    let parts: Vec<&str> = date.split('-').collect();
    if parts.len() != 3 || parts[0].len() != 4 {
        return Err(bad());
    }
    let (y, m, d) = (num(parts[0])?, num(parts[1])?, num(parts[2])?);
    if y < 0 {
        return Err(bad());
    }
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(bad());
    }
    let mut secs = days_from_civil(y, m, d) * 86_400;
    if let Some(time) = rest.strip_prefix('T').or_else(|| rest.strip_prefix(' ')) {
        let (clock, offset) = match time.find(['Z', 'z', '+', '-']) {
            Some(i) => time.split_at(i),
            None => (time, ""),
        };
        let hms: Vec<&str> = clock.split('.').next().unwrap_or("").split(':').collect();
        if hms.len() < 2 {
            return Err(bad());
        }
        // Each field within its clock range, so no sum below can overflow.
        let field = |s: &str, max: i64| {
            num(s).and_then(|n| {
                if (0..=max).contains(&n) {
                    Ok(n)
                } else {
                    Err(bad())
                }
            })
        };
        secs += field(hms[0], 23)? * 3600
            + field(hms[1], 59)? * 60
            + hms.get(2).map_or(Ok(0), |s| field(s, 60))?;
        if let Some(off) = offset.strip_prefix(['+', '-']) {
            let sign = if offset.starts_with('-') { -1 } else { 1 };
            let (h, mi) = off.split_once(':').ok_or_else(bad)?;
            secs -= sign * (field(h, 23)? * 3600 + field(mi, 59)? * 60);
        }
    } else if !rest.is_empty() {
        return Err(bad());
    }
    Ok(secs * 1000)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Security review, finding 12: `--since 2026-11-2é` sliced a string inside a character and
    /// panicked; huge ages and clock fields overflowed.
    #[test]
    fn malformed_dates_are_errors_not_panics() {
        for text in [
            "2026-11-2é",
            "2026-11-é2",
            "éééééééééé",
            "99999999999999999w",
            "9223372036854775807s",
            "2026-11-22T99999999999999999:00",
            "2026-11-22T10:00+99999999999999999:00",
            "-001-11-22",
        ] {
            let e = parse_moment(text, 0).unwrap_err();
            assert!(e.contains("is not a date"), "{text}: {e}");
        }
    }

    #[test]
    fn dates_round_trip_and_ages_count_back() {
        let ms = parse_moment("2026-11-22T09:30:05Z", 0).unwrap();
        assert_eq!(rfc3339(ms), "2026-11-22T09:30:05Z");
        assert_eq!(
            parse_moment("2026-11-22", 0).unwrap(),
            parse_moment("2026-11-22T00:00:00Z", 0).unwrap()
        );
        assert_eq!(parse_moment("2026-11-22T11:30:05+02:00", 0).unwrap(), ms);
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(parse_moment("2000-02-29", 0).unwrap()),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(parse_moment("7d", ms).unwrap(), ms - 7 * 86_400_000);
        assert_eq!(parse_moment("30m", ms).unwrap(), ms - 1_800_000);
        for bad in ["yesterday", "2026-13-01", "7y", "22/11/2026", ""] {
            assert!(parse_moment(bad, ms).is_err(), "{bad}");
        }
    }
}
