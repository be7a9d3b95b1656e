//! Where a request's time goes: every span named `hop.*` (a claim's commit, a runtime call, a
//! freezer thaw, an agent round trip, ...) adds its wall time to two counters on `/metrics`,
//! `kairon_hop_seconds_total{hop}` and `kairon_hop_count_total{hop}`, so a benchmark reads the
//! mean of each hop from two scrapes. Only `hop.*` spans are built for this layer: the rest of
//! the tracing stays as cheap as the log filter makes it.
//!
//! Hop spans are TRACE spans (`trace_span!("hop.…")`): the log layer's filter (`info` by
//! default) then never takes them. Built at INFO, enabled for both layers, most of them were
//! never closed in `kairon up` (measured: no `store.commit` at all after 100 claims), so
//! nothing was counted.

use std::time::Instant;

use tracing::Subscriber;
use tracing::span::{Attributes, Id};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{FilterFn, Filtered};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

pub const SECONDS: &str = "kairon_hop_seconds_total";
pub const COUNT: &str = "kairon_hop_count_total";

/// Records the hops; built with [`layer`].
pub struct HopTimings;

/// The layer, filtered to `hop.*` spans.
pub fn layer<S>() -> Filtered<HopTimings, FilterFn, S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let m = kairon_reconciler::metrics::global();
    m.describe(SECONDS, "Wall time spent in each hop of the request paths (tracing spans named hop.*).");
    m.describe(COUNT, "How many times each hop ran.");
    HopTimings.with_filter(FilterFn::new(|meta| meta.is_span() && meta.name().starts_with("hop.")))
}

struct Started(Instant);

impl<S> Layer<S> for HopTimings
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, _: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Started(Instant::now()));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(started) = span.extensions().get::<Started>().map(|s| s.0) else { return };
        let hop = span.name().trim_start_matches("hop.");
        let m = kairon_reconciler::metrics::global();
        m.add(SECONDS, &[("hop", hop)], started.elapsed().as_secs_f64());
        m.add(COUNT, &[("hop", hop)], 1.0);
    }
}

#[cfg(test)]
mod tests {
    use tracing::Instrument;

    use super::*;

    #[tokio::test]
    async fn a_hop_span_adds_its_wall_time_and_other_spans_add_nothing() {
        // The subscriber `kairon` runs with, its log filter at the default.
        let _guard = tracing::subscriber::set_default(crate::subscriber(crate::default_log_filter()));
        let m = kairon_reconciler::metrics::global();
        let before = (m.get(SECONDS, &[("hop", "test.sleep")]), m.get(COUNT, &[("hop", "test.sleep")]));
        async { tokio::time::sleep(std::time::Duration::from_millis(20)).await }
            .instrument(tracing::trace_span!("hop.test.sleep"))
            .await;
        async {}.instrument(tracing::info_span!("not.a.hop")).await;
        let after = (m.get(SECONDS, &[("hop", "test.sleep")]), m.get(COUNT, &[("hop", "test.sleep")]));
        assert_eq!(after.1 - before.1, 1.0);
        assert!(after.0 - before.0 >= 0.020, "{before:?} {after:?}");
        assert!(!m.render().contains("not.a.hop"));
    }
}
