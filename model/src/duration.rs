//! Durations as people write and read them: `10m`, `24h`, `1h30m`; printed the way kubectl
//! prints ages (`3m12s`, `5h`, `2d4h`).

/// Parses `90`, `90s`, `10m`, `24h`, `1h30m`, `2d` into seconds.
pub fn parse_seconds(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let bad = || format!("{s:?} is not a duration: write e.g. 90s, 10m, 24h or 1h30m");
    if s.is_empty() {
        return Err(bad());
    }
    if let Ok(n) = s.parse::<i64>() {
        return if n >= 0 { Ok(n) } else { Err(bad()) };
    }
    let (mut total, mut num) = (0i64, String::new());
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
            _ => return Err(bad()),
        };
        let n: i64 = num.parse().map_err(|_| bad())?;
        total = n.checked_mul(unit).and_then(|v| total.checked_add(v)).ok_or_else(bad)?;
        num.clear();
    }
    if !num.is_empty() {
        return Err(bad());
    }
    Ok(total)
}

/// Kubernetes' `duration.HumanDuration`, the AGE column's format.
pub fn human(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

/// Exact `XhYmZs` (as in `idle 3m12s of 10m0s`), never rounded.
pub fn exact(seconds: i64) -> String {
    let (h, m, s) = (seconds / 3600, (seconds % 3600) / 60, seconds % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!(parse_seconds("10m"), Ok(600));
        assert_eq!(parse_seconds("24h"), Ok(86400));
        assert_eq!(parse_seconds("1h30m"), Ok(5400));
        assert_eq!(parse_seconds("45s"), Ok(45));
        assert_eq!(parse_seconds("90"), Ok(90));
        for bad in ["", "10x", "m", "1h3", "-5"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn prints_like_kubectl() {
        assert_eq!(human(5), "5s");
        assert_eq!(human(192), "3m12s");
        assert_eq!(human(600), "10m");
        assert_eq!(human(5 * 3600), "5h");
        assert_eq!(human(23 * 3600), "23h");
        assert_eq!(human(52 * 3600), "2d4h");
        assert_eq!(exact(192), "3m12s");
        assert_eq!(exact(600), "10m0s");
    }
}
