//! Sizing a warm pool from its claims: the pure decision behind a pool's autoscaling.
//!
//! Each claim takes one warm member, and the pool starts a replacement that is warm `refill`
//! seconds later (create, boot, warm-up). So the replacements under way at any moment are the
//! claims of the last refill period, K ~ Poisson(λ·refill), and with N members a claim is served
//! warm when fewer than N are under way: the hit rate is P(K < N) (Palm's theorem, the fill rate
//! of a base-stock inventory). The decision is the smallest N whose hit rate reaches the aim,
//! within the bounds. The rate λ is the larger of the rate over the whole window and over the
//! last few refill periods, so a burst grows the pool within seconds while a quiet spell shrinks
//! it only after the scale-down delay. The aim is the target, lowered while the window's claims
//! were served better than the target: the target holds over the window, not at each moment,
//! and the misses a quiet spell did not spend are spent where members cost most.

/// What the decision is bounded and aimed by (a pool's `spec.autoscale`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub min_replicas: i32,
    pub max_replicas: i32,
    /// Fraction of claims to serve from a warm member, in (0, 1].
    pub target_hit_rate: f64,
    /// How far back arrivals count, in seconds.
    pub window_seconds: i64,
    /// How long the pool must have needed fewer members before it shrinks, in seconds.
    pub scale_down_delay_seconds: i64,
}

/// What the decision reads.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// When (Unix ms) the pool's claims arrived; those outside the window are ignored.
    pub arrivals: &'a [i64],
    /// Of the window's claims, how many were bound from a warm member and how many waited.
    pub warm: usize,
    pub cold: usize,
    /// Seconds from a member's creation until it is warm.
    pub refill_seconds: f64,
    /// The pool's replicas now.
    pub current: i32,
    pub now_ms: i64,
    /// When a decision last needed at least the replicas the pool had then (None: never).
    pub last_needed_ms: Option<i64>,
}

/// The decision, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The replicas to have now.
    pub replicas: i32,
    /// What the arrival rate asks for, within the bounds, before the scale-down delay.
    pub needed: i32,
    /// The arrival rate the decision used, per minute.
    pub claims_per_minute: f64,
    /// The hit rate sized for now ([`aim`]).
    pub aim: f64,
    /// The hit rate `replicas` gives at that rate.
    pub expected_hit_rate: f64,
    /// `last_needed_ms` to pass to the next decision.
    pub last_needed_ms: Option<i64>,
}

impl Decision {
    /// One line for the pool's Event when the replicas change.
    pub fn reason(&self, from: i32, b: &Bounds, refill_seconds: f64) -> String {
        let aim = if self.aim < b.target_hit_rate {
            format!("aiming at {:.3} while the window's claims were served above the target; ", self.aim)
        } else {
            String::new()
        };
        format!(
            "{} {} replicas from {from}: {:.1} claims/min with a {refill_seconds:.1} s refill gives an expected hit \
             rate of {:.3} ({aim}target {}, bounds {}..={})",
            if self.replicas > from { "scaled up to" } else { "scaled down to" },
            self.replicas,
            self.claims_per_minute,
            self.expected_hit_rate,
            b.target_hit_rate,
            b.min_replicas,
            b.max_replicas,
        )
    }
}

/// The share of claims `n` members serve warm when `mean` claims arrive, on average, while one
/// member is refilled: P(K < n) for K ~ Poisson(mean).
pub fn hit_rate(n: i32, mean: f64) -> f64 {
    if mean <= 0.0 {
        return if n > 0 { 1.0 } else { 0.0 };
    }
    // The pmf summed in logs, so that a large mean neither underflows e^-mean nor overflows mean^k.
    let (mut cdf, mut ln_p) = (0.0f64, -mean);
    for k in 0..n.max(0) {
        if k > 0 {
            ln_p += mean.ln() - f64::from(k).ln();
        }
        cdf += ln_p.exp();
    }
    cdf.min(1.0)
}

/// Bound claims a window needs before its hit rate moves the aim.
const BUDGET_MIN_CLAIMS: usize = 20;

/// The hit rate to size for now: the target, lowered by as much as the window's bound claims
/// were served above it (they leave misses unspent), never below `2·target − 1`; the target
/// itself while fewer than [`BUDGET_MIN_CLAIMS`] were bound or they were served below it.
pub fn aim(b: &Bounds, warm: usize, cold: usize) -> f64 {
    let target = b.target_hit_rate;
    let bound = warm + cold;
    if bound < BUDGET_MIN_CLAIMS {
        return target;
    }
    let served = warm as f64 / bound as f64;
    (target - (served - target)).clamp(2.0 * target - 1.0, target)
}

/// The smallest replicas in `[lo, hi]` whose hit rate at `mean` reaches `aim` (`hi` when none does).
fn smallest_reaching(aim: f64, mean: f64, lo: i32, hi: i32) -> i32 {
    (lo..=hi).find(|n| hit_rate(*n, mean) >= aim).unwrap_or(hi)
}

/// Claims per second arriving in the last `seconds` before `now_ms`.
fn rate(arrivals: &[i64], now_ms: i64, seconds: f64) -> f64 {
    let since = now_ms - (seconds * 1000.0) as i64;
    arrivals.iter().filter(|t| **t > since && **t <= now_ms).count() as f64 / seconds
}

/// The span, in seconds, of the recent rate: a burst shows in the last few refill periods long
/// before it moves the window's average.
fn recent_seconds(window: f64, refill: f64) -> f64 {
    (4.0 * refill).clamp(20.0_f64.min(window), window)
}

/// Claims per second the decision reads: the larger of the window's and the recent span's rates.
fn arrival_rate(b: &Bounds, o: &Observed) -> f64 {
    let window = b.window_seconds.max(1) as f64;
    let recent = recent_seconds(window, o.refill_seconds.max(0.1));
    rate(o.arrivals, o.now_ms, window).max(rate(o.arrivals, o.now_ms, recent))
}

/// How many replicas the pool should have now.
pub fn decide(b: &Bounds, o: &Observed) -> Decision {
    let refill = o.refill_seconds.max(0.1);
    let per_second = arrival_rate(b, o);
    let mean = per_second * refill;
    let (lo, hi) = (b.min_replicas.max(0), b.max_replicas.max(b.min_replicas.max(0)));
    let aim = aim(b, o.warm, o.cold);
    let needed = smallest_reaching(aim, mean, lo, hi);
    let current = o.current.clamp(lo, hi);
    let (replicas, last_needed_ms) = if needed >= current {
        (needed, Some(o.now_ms))
    } else {
        let waited = o.last_needed_ms.is_none_or(|t| o.now_ms - t >= b.scale_down_delay_seconds * 1000);
        (if waited { needed } else { current }, o.last_needed_ms)
    };
    Decision {
        replicas,
        needed,
        claims_per_minute: per_second * 60.0,
        aim,
        expected_hit_rate: hit_rate(replicas, mean),
        last_needed_ms,
    }
}

/// When (Unix ms) the decision `d`, made on `o`, can next change with no new claim: an arrival
/// leaving the recent span or the window, or the scale-down delay ending. None: not until a
/// claim arrives (or is bound, which moves the aim).
pub fn next_change_ms(b: &Bounds, o: &Observed, d: &Decision) -> Option<i64> {
    let window_ms = b.window_seconds.max(1) * 1000;
    let recent_ms = (recent_seconds(window_ms as f64 / 1000.0, o.refill_seconds.max(0.1)) * 1000.0) as i64;
    let leaving = o.arrivals.iter().flat_map(|t| [t + recent_ms, t + window_ms]).filter(|at| *at > o.now_ms).min();
    let delay_ends = (d.replicas > d.needed)
        .then(|| d.last_needed_ms.map(|t| t + b.scale_down_delay_seconds * 1000))
        .flatten()
        .filter(|at| *at > o.now_ms);
    leaving.into_iter().chain(delay_ends).min()
}

/// Seconds a new member takes to become warm: the median over `members` that have been (from
/// creation to their warm-up stamp, plus the warm-up), else a first guess of the warm-up and a
/// sandbox's boot.
pub fn refill_seconds(members: &[crate::warm::MemberView], warmup_seconds: i64) -> f64 {
    let warmup = warmup_seconds.max(0) as f64;
    let mut boots: Vec<f64> =
        members.iter().filter_map(|m| m.warm_since_ms.map(|w| (w - m.created_ms).max(0) as f64 / 1000.0)).collect();
    if boots.is_empty() {
        return warmup + FIRST_BOOT_GUESS_SECONDS;
    }
    boots.sort_by(f64::total_cmp);
    warmup + boots[boots.len() / 2]
}

/// What a member's boot is taken to be before any has booted.
const FIRST_BOOT_GUESS_SECONDS: f64 = 5.0;

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    fn bounds(min: i32, max: i32) -> Bounds {
        Bounds {
            min_replicas: min,
            max_replicas: max,
            target_hit_rate: 0.95,
            window_seconds: 600,
            scale_down_delay_seconds: 300,
        }
    }

    /// 20 minutes of one claim every 2 s, and the time of the last.
    fn every_two_seconds() -> (i64, Vec<i64>) {
        let now = 20 * MIN;
        (now, (0..600).map(|i| now - i * 2000).collect())
    }

    /// A pool of one member that has seen `arrivals` (none bound yet) and never needed more.
    fn quiet_pool(arrivals: &[i64], refill_seconds: f64, now_ms: i64) -> Observed<'_> {
        Observed { arrivals, warm: 0, cold: 0, refill_seconds, current: 1, now_ms, last_needed_ms: None }
    }

    #[test]
    fn hit_rate_matches_its_definition() {
        assert_eq!(hit_rate(3, 0.0), 1.0);
        assert_eq!(hit_rate(0, 0.0), 0.0, "no member serves nothing warm");
        assert_eq!(hit_rate(0, 2.0), 0.0);
        // One member, mean 1: warm when no other claim is being refilled, P(K = 0) = e^-1.
        assert!((hit_rate(1, 1.0) - (-1.0f64).exp()).abs() < 1e-12);
        // Two members, mean 2: P(K <= 1) = 3e^-2.
        assert!((hit_rate(2, 2.0) - 3.0 * (-2.0f64).exp()).abs() < 1e-12);
        // Grows with n towards 1, and a large mean does not underflow.
        let rates: Vec<f64> = (0..14).map(|n| hit_rate(n, 4.0)).collect();
        assert!(rates.windows(2).all(|w| w[1] > w[0]), "{rates:?}");
        assert!(rates[13] > 0.999);
        assert!((hit_rate(1000, 1000.0) - 0.4916).abs() < 0.01, "{}", hit_rate(1000, 1000.0));
        assert!(hit_rate(1100, 1000.0) > 0.999);
    }

    #[test]
    fn no_claims_keeps_the_minimum_and_the_bounds_hold() {
        let o = Observed {
            arrivals: &[],
            warm: 0,
            cold: 0,
            refill_seconds: 5.0,
            current: 4,
            now_ms: 10 * MIN,
            last_needed_ms: None,
        };
        assert_eq!(decide(&bounds(1, 10), &o).replicas, 1);
        let many: Vec<i64> = (0..600).map(|i| 10 * MIN - i * 100).collect();
        let o = Observed { arrivals: &many, ..o };
        let d = decide(&bounds(1, 10), &o);
        assert_eq!((d.replicas, d.needed), (10, 10), "never beyond maxReplicas");
        assert!(d.expected_hit_rate < 0.95);
    }

    #[test]
    fn a_steady_rate_gets_the_smallest_pool_that_reaches_the_target() {
        // One claim every 2 s with a 6 s refill: 3 claims per refill on average.
        let (now, arrivals) = every_two_seconds();
        let o = quiet_pool(&arrivals, 6.0, now);
        let d = decide(&bounds(0, 50), &o);
        assert!((d.claims_per_minute - 30.0).abs() < 0.2, "{d:?}");
        assert!(hit_rate(d.replicas, 3.0) >= 0.95 && hit_rate(d.replicas - 1, 3.0) < 0.95, "{d:?}");
        assert_eq!(d.last_needed_ms, Some(now));
    }

    #[test]
    fn a_burst_grows_the_pool_at_once_and_it_shrinks_only_after_the_delay() {
        let b = bounds(1, 40);
        let burst_end = 30 * MIN;
        // Quiet for half an hour, then 40 claims in 20 s.
        let arrivals: Vec<i64> = (0..40).map(|i| burst_end - i * 500).collect();
        let mut o = Observed {
            arrivals: &arrivals,
            warm: 0,
            cold: 0,
            refill_seconds: 5.0,
            current: 1,
            now_ms: burst_end,
            last_needed_ms: None,
        };
        let up = decide(&b, &o);
        assert!(up.replicas >= 5, "a burst of 2 claims/s with a 5 s refill needs members now: {up:?}");
        // A minute later the window still remembers the burst, but the recent rate is zero:
        // the pool would shrink, and waits for the delay.
        o.current = up.replicas;
        o.last_needed_ms = up.last_needed_ms;
        o.now_ms = burst_end + MIN;
        let held = decide(&b, &o);
        assert!(held.needed < up.replicas, "{held:?}");
        assert_eq!(held.replicas, up.replicas, "held within the scale-down delay: {held:?}");
        o.now_ms = burst_end + 4 * MIN;
        assert_eq!(decide(&b, &o).replicas, up.replicas, "still within the delay");
        o.now_ms = burst_end + 11 * MIN;
        let down = decide(&b, &o);
        assert_eq!(down.replicas, 1, "the burst left the window and the delay passed: {down:?}");
    }

    #[test]
    fn the_next_change_is_an_arrival_leaving_or_the_delay_ending() {
        let b = bounds(1, 40);
        let now = 30 * MIN;
        let arrivals = [now - 10_000, now - 5_000];
        // Refill 5 s: the recent span is 20 s, the window 600 s.
        let o = Observed {
            arrivals: &arrivals,
            warm: 0,
            cold: 0,
            refill_seconds: 5.0,
            current: 1,
            now_ms: now,
            last_needed_ms: None,
        };
        let d = decide(&b, &o);
        assert_eq!(next_change_ms(&b, &o, &d), Some(now - 10_000 + 20_000), "the first leaves the recent span");
        // Held by the delay: whichever comes first.
        let held = Decision { replicas: 5, needed: 2, last_needed_ms: Some(now - 295_000), ..d.clone() };
        assert_eq!(next_change_ms(&b, &o, &held), Some(now + 5_000), "the delay ends in 5 s");
        let quiet = Observed { arrivals: &[], ..o };
        assert_eq!(next_change_ms(&b, &quiet, &decide(&b, &quiet)), None, "nothing until a claim arrives");
    }

    #[test]
    fn refill_is_the_median_boot_plus_the_warmup() {
        let m = |created: i64, warm: Option<i64>| crate::warm::MemberView {
            name: "m".into(),
            created_ms: created,
            claimed: false,
            deleting: false,
            phase: None,
            power_state: crate::PowerState::Running,
            warm_since_ms: warm,
        };
        assert_eq!(refill_seconds(&[], 30), 35.0, "a first guess");
        assert_eq!(refill_seconds(&[m(0, None)], 1), 6.0, "no member has booted yet");
        let members = [m(0, Some(2_000)), m(0, Some(60_000)), m(1_000, Some(4_000)), m(0, None)];
        assert_eq!(refill_seconds(&members, 1), 4.0, "the median of 2, 3 and 60 s, plus 1 s");
    }

    /// How a simulated claim was served: when it arrived, and whether a member was warm.
    type Served = Vec<(i64, bool)>;

    /// Replays an arrival trace against a simulated pool (a member taken by a claim is refilled
    /// `refill` seconds later; a claim finding no warm member waits for the next one), deciding
    /// on each claim and every second, and returns (hit rate, member-seconds held, booting or
    /// warm: what `kairon-bench autoscale` counts).
    fn replay(
        arrivals: &[i64],
        refill: f64,
        size: impl Fn(i32, &[i64], &Served, i64, &mut Option<i64>) -> i32,
    ) -> (f64, f64) {
        let refill_ms = (refill * 1000.0) as i64;
        let (mut warm, mut refilling, mut served, mut held) = (0i32, Vec::<i64>::new(), Served::new(), 0.0);
        let (mut replicas, mut last_needed, mut waiting) = (0i32, None, std::collections::VecDeque::new());
        let end = *arrivals.last().unwrap_or(&0) + 10 * MIN;
        let (mut next, mut t, mut decided) = (0, 0, -1_000);
        while t <= end {
            // Refills that finished by now become warm; waiting claims take them first.
            let done = refilling.iter().filter(|d| **d <= t).count() as i32;
            refilling.retain(|d| *d > t);
            warm += done;
            while warm > 0 && !waiting.is_empty() {
                warm -= 1;
                served.push((waiting.pop_front().unwrap(), false));
                refilling.push(t + refill_ms);
            }
            let before = next;
            while next < arrivals.len() && arrivals[next] <= t {
                if warm > 0 {
                    warm -= 1;
                    served.push((arrivals[next], true));
                    refilling.push(t + refill_ms);
                } else {
                    waiting.push_back(arrivals[next]);
                }
                next += 1;
            }
            if next > before || t - decided >= 1_000 {
                replicas = size(warm + refilling.len() as i32, &arrivals[..next], &served, t, &mut last_needed);
                decided = t;
            }
            // Members past the replicas are trimmed, booting ones first; missing ones are created.
            let have = warm + refilling.len() as i32;
            if have < replicas {
                refilling.extend((have..replicas).map(|_| t + refill_ms));
            } else if have > replicas {
                let surplus = (have - replicas) as usize;
                let booting = surplus.min(refilling.len());
                refilling.truncate(refilling.len() - booting);
                warm -= (surplus - booting) as i32;
            }
            held += f64::from(warm + refilling.len() as i32) * 0.05;
            t += 50;
        }
        (served.iter().filter(|s| s.1).count() as f64 / arrivals.len().max(1) as f64, held)
    }

    fn fixed(n: i32) -> impl Fn(i32, &[i64], &Served, i64, &mut Option<i64>) -> i32 {
        move |_, _, _, _, _| n
    }

    fn autoscaled(b: Bounds, refill: f64) -> impl Fn(i32, &[i64], &Served, i64, &mut Option<i64>) -> i32 {
        move |current, arrivals, served, now_ms, last_needed| {
            let since = now_ms - b.window_seconds * 1000;
            let warm = served.iter().filter(|s| s.0 > since && s.1).count();
            let cold = served.iter().filter(|s| s.0 > since && !s.1).count();
            let o = Observed {
                arrivals,
                warm,
                cold,
                refill_seconds: refill,
                current,
                now_ms,
                last_needed_ms: *last_needed,
            };
            let d = decide(&b, &o);
            *last_needed = d.last_needed_ms;
            d.replicas
        }
    }

    /// A day-shaped trace: Poisson arrivals whose rate follows a sine between 0.5 and 20 claims
    /// a minute over 2 h (a compressed day), from a fixed seed.
    fn diurnal() -> Vec<i64> {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut uniform = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let (mut out, mut t, end) = (Vec::new(), 0.0f64, 120.0 * 60.0);
        loop {
            // Thinning: candidates at the peak rate, kept with the rate's share at their time.
            t += -(1.0 - uniform()).ln() * 60.0 / 20.0;
            if t >= end {
                return out;
            }
            let per_minute = 0.5 + 19.5 * (0.5 - 0.5 * (2.0 * std::f64::consts::PI * t / end).cos());
            if uniform() < per_minute / 20.0 {
                out.push((t * 1000.0) as i64);
            }
        }
    }

    #[test]
    fn on_a_daily_trace_autoscaling_reaches_the_target_with_fewer_member_seconds_than_a_fixed_pool() {
        let trace = diurnal();
        let refill = 8.0;
        let b = Bounds { window_seconds: 300, scale_down_delay_seconds: 120, ..bounds(1, 30) };
        let (auto_hit, auto_held) = replay(&trace, refill, autoscaled(b, refill));
        let smallest_fixed = (1..=30)
            .find(|n| replay(&trace, refill, fixed(*n)).0 >= auto_hit.min(b.target_hit_rate))
            .expect("some fixed size reaches it");
        let (fixed_hit, fixed_held) = replay(&trace, refill, fixed(smallest_fixed));
        eprintln!(
            "{} claims: autoscaled {auto_hit:.3} hit with {auto_held:.0} member-s; smallest fixed pool reaching it: \
             {smallest_fixed}, {fixed_hit:.3} with {fixed_held:.0}",
            trace.len()
        );
        assert!(auto_hit >= 0.9, "autoscaled hit rate {auto_hit:.3}");
        assert!(
            auto_held < fixed_held,
            "autoscaled {auto_hit:.3} hit with {auto_held:.0} member-s; fixed {smallest_fixed} {fixed_hit:.3} with {fixed_held:.0}"
        );
    }

    /// Claims per minute over a compressed day of `kairon-bench autoscale` (`at` is the share of
    /// it elapsed): night, a morning ramp, the day with a busier spell, an evening ramp, night.
    fn compressed_day(at: f64) -> f64 {
        let ramp = |from: f64, to: f64, a: f64, b: f64| from + (to - from) * ((at - a) / (b - a));
        match at {
            a if a < 0.15 => 2.0,
            a if a < 0.3 => ramp(2.0, 30.0, 0.15, 0.3),
            a if a < 0.45 => 30.0,
            a if a < 0.55 => 45.0,
            a if a < 0.7 => 30.0,
            a if a < 0.85 => ramp(30.0, 2.0, 0.7, 0.85),
            _ => 2.0,
        }
    }

    /// Poisson arrivals over `seconds` at [`compressed_day`], from a fixed seed (thinning at the
    /// peak rate).
    fn day_trace(seed: u64, seconds: f64) -> Vec<i64> {
        let mut state = seed;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let (mut out, mut t) = (Vec::new(), 0.0f64);
        loop {
            t += -(1.0 - uniform()).ln() * 60.0 / 45.0;
            if t >= seconds {
                return out;
            }
            if uniform() < compressed_day(t / seconds) / 45.0 {
                out.push((t * 1000.0) as i64);
            }
        }
    }

    #[test]
    fn on_a_compressed_day_autoscaling_reaches_the_target_with_fewer_member_seconds_than_a_fixed_pool() {
        let refill = 3.0;
        let b = Bounds { window_seconds: 120, scale_down_delay_seconds: 30, ..bounds(1, 12) };
        for seed in [0x9e37_79b9_7f4a_7c15u64, 7, 42, 1234] {
            let trace = day_trace(seed, 600.0);
            let (auto_hit, auto_held) = replay(&trace, refill, autoscaled(b, refill));
            let smallest = (1..=12).find(|n| replay(&trace, refill, fixed(*n)).0 >= b.target_hit_rate).unwrap_or(12);
            let (fixed_hit, fixed_held) = replay(&trace, refill, fixed(smallest));
            eprintln!(
                "seed {seed}: {} claims: autoscaled {auto_hit:.3} hit with {auto_held:.0} member-s; smallest fixed \
                 pool reaching the target: {smallest}, {fixed_hit:.3} with {fixed_held:.0}",
                trace.len()
            );
            assert!(auto_hit >= b.target_hit_rate, "seed {seed}: autoscaled hit rate {auto_hit:.3}");
            assert!(auto_held < fixed_held, "seed {seed}: {auto_held:.0} member-s against {fixed_held:.0}");
        }
    }

    #[test]
    fn the_aim_spends_the_misses_the_window_left_unspent() {
        let b = bounds(1, 40);
        assert_eq!(aim(&b, 19, 0), 0.95, "too few bound claims to say");
        assert_eq!(aim(&b, 15, 5), 0.95, "served below the target: the target");
        assert!((aim(&b, 39, 1) - 0.925).abs() < 1e-9, "0.975 served: 0.025 to spend");
        assert!((aim(&b, 100, 0) - 0.90).abs() < 1e-9, "never below 2·target − 1");
        // A steady 3 claims per refill: 7 members reach 0.95; with the window served perfectly
        // the pool sizes for 0.90, and 6 do.
        let (now, arrivals) = every_two_seconds();
        let o = quiet_pool(&arrivals, 6.0, now);
        let fresh = decide(&b, &o);
        let spent = decide(&b, &Observed { warm: 300, ..o });
        assert_eq!((fresh.replicas, fresh.aim), (7, 0.95), "{fresh:?}");
        assert!(spent.replicas == 6 && (spent.aim - 0.9).abs() < 1e-9, "{spent:?}");
    }

    #[test]
    fn the_reason_says_what_changed_and_why() {
        let d = Decision {
            replicas: 6,
            needed: 6,
            claims_per_minute: 30.0,
            aim: 0.95,
            expected_hit_rate: 0.9612,
            last_needed_ms: None,
        };
        assert_eq!(
            d.reason(2, &bounds(1, 10), 6.0),
            "scaled up to 6 replicas from 2: 30.0 claims/min with a 6.0 s refill gives an expected hit rate of 0.961 \
             (target 0.95, bounds 1..=10)"
        );
        let budget = Decision { replicas: 4, aim: 0.925, expected_hit_rate: 0.93, ..d };
        assert_eq!(
            budget.reason(6, &bounds(1, 10), 6.0),
            "scaled down to 4 replicas from 6: 30.0 claims/min with a 6.0 s refill gives an expected hit rate of 0.930 \
             (aiming at 0.925 while the window's claims were served above the target; target 0.95, bounds 1..=10)"
        );
    }
}
