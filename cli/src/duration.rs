//! Durations as people write them: `45s`, `10m`, `24h`, `1h30m`, `2d`; a bare number is seconds.

use std::time::Duration;

pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration: write e.g. 45s, 10m, 24h or 1h30m".into());
    }
    if let Ok(n) = s.parse::<u64>() {
        return Ok(Duration::from_secs(n));
    }
    let mut total = 0u64;
    let mut num = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            _ => return Err(format!("{s:?}: unknown unit {c:?}; write e.g. 45s, 10m, 24h or 1h30m")),
        };
        let n: u64 = num.parse().map_err(|_| format!("{s:?}: a number must come before {c:?}"))?;
        total += n * unit;
        num.clear();
    }
    if !num.is_empty() {
        return Err(format!("{s:?}: {num} has no unit; write e.g. {num}s or {num}m"));
    }
    Ok(Duration::from_secs(total))
}

/// `3m12s`, `10m0s`, `23h59m`: as the spec's describe output writes them.
pub fn human(secs: i64) -> String {
    let neg = secs < 0;
    let s = secs.unsigned_abs();
    // Days only from two on: a day's lifetime reads "24h0m", as people say it.
    let out = if s >= 2 * 86400 {
        format!("{}d{}h", s / 86400, (s % 86400) / 3600)
    } else if s >= 3600 {
        format!("{}h{}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    };
    if neg { format!("-{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_people_write() {
        assert_eq!(parse("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse("24h"), Ok(Duration::from_secs(86400)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("45"), Ok(Duration::from_secs(45)));
        assert!(parse("10x").unwrap_err().contains("unknown unit"));
        assert!(parse("1h30").unwrap_err().contains("no unit"));
        assert_eq!(human(192), "3m12s");
        assert_eq!(human(600), "10m0s");
        assert_eq!(human(86399), "23h59m");
        assert_eq!(human(86400), "24h0m");
        assert_eq!(human(3 * 86400 + 3600), "3d1h");
    }
}
