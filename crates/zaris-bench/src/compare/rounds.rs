//! `--rounds N`: a workload measured N times on each system, the two systems' runs alternating
//! which goes first, and the row taken from the run pair whose ratio is the median.
//!
//! On a shared 2-core VM a workload's rate moves by a fifth from one run to the next, for either
//! system, while the ratio of two runs seconds apart moves less but still enough to put a row on
//! either side of its target. Alternating the order cancels a drift across the pairs (the
//! machine getting busier or quieter), and the median ignores one odd run in three. Every pair's
//! ratio is listed beside it, so the spread is in the table too.

use std::future::Future;

use super::cost::Spent;
use crate::load::Sample;

/// One system's run of a workload, and what it cost.
pub(crate) type Measured = (Sample, Spent);

/// One run of a workload on each system.
#[derive(Debug)]
pub(crate) struct Pair {
    pub zaris: Measured,
    pub etcd: Measured,
}

/// Which way a row's ratio (Zaris's figure over etcd's) is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Better {
    /// A rate: the higher the ratio, the better for Zaris.
    Higher,
    /// A latency: the lower, the better.
    Lower,
}

/// Runs `rounds` (at least one) pairs, in order: round 0 runs Zaris first, round 1 etcd first,
/// and so on. Each closure gets the round's number (for what it must name apart, such as a
/// fresh cluster's directory).
pub(crate) async fn alternating<Z, ZF, E, EF>(
    rounds: usize,
    mut zaris: Z,
    mut etcd: E,
) -> anyhow::Result<Vec<Pair>>
where
    Z: FnMut(usize) -> ZF,
    ZF: Future<Output = anyhow::Result<Measured>>,
    E: FnMut(usize) -> EF,
    EF: Future<Output = anyhow::Result<Measured>>,
{
    let mut pairs = Vec::with_capacity(rounds.max(1));
    for round in 0..rounds.max(1) {
        let pair = if round % 2 == 0 {
            let zaris = zaris(round).await?;
            Pair {
                zaris,
                etcd: etcd(round).await?,
            }
        } else {
            let etcd = etcd(round).await?;
            Pair {
                zaris: zaris(round).await?,
                etcd,
            }
        };
        pairs.push(pair);
    }
    Ok(pairs)
}

/// The pair whose ratio (`ratio`) is the median of `pairs` (of an even number, the middle one
/// less favourable to Zaris, by `better`), and every pair's ratio in the order run.
/// `None` if there is no pair.
pub(crate) fn median_pair(
    pairs: Vec<Pair>,
    better: Better,
    ratio: impl Fn(&Pair) -> f64,
) -> Option<(Pair, Vec<f64>)> {
    let ratios: Vec<f64> = pairs.iter().map(&ratio).collect();
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    // Worst for Zaris first: then the lower middle of an even count is the less favourable one.
    order.sort_by(|&a, &b| {
        let (a, b) = (ratios[a], ratios[b]);
        match better {
            Better::Higher => a.total_cmp(&b),
            Better::Lower => b.total_cmp(&a),
        }
    });
    let median = *order.get(order.len().checked_sub(1)? / 2)?;
    let pair = pairs.into_iter().nth(median)?;
    Some((pair, ratios))
}

/// The ratios of several pairs, for a row's detail ("" for a single pair: the row is the run).
pub(crate) fn ratios_note(ratios: &[f64]) -> String {
    if ratios.len() < 2 {
        return String::new();
    }
    let listed: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    format!(
        "; zaris / etcd in {} alternating runs: {} (the median's run shown)",
        ratios.len(),
        listed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A pair whose rates are `zaris` and `etcd` calls per second.
    fn pair(zaris: u64, etcd: u64) -> Pair {
        let run = |ok| {
            (
                Sample {
                    ok,
                    elapsed: Duration::from_secs(1),
                    ..Sample::default()
                },
                Spent::default(),
            )
        };
        Pair {
            zaris: run(zaris),
            etcd: run(etcd),
        }
    }

    fn rate_ratio(p: &Pair) -> f64 {
        p.zaris.0.rate() / p.etcd.0.rate()
    }

    #[test]
    fn the_median_ratio_is_chosen_and_every_ratio_kept_in_run_order() {
        let pairs = vec![pair(100, 100), pair(300, 100), pair(200, 100)];
        let (chosen, ratios) = median_pair(pairs, Better::Higher, rate_ratio).expect("pairs");
        assert_eq!(chosen.zaris.0.ok, 200);
        assert_eq!(ratios, vec![1.0, 3.0, 2.0]);
    }

    #[test]
    fn of_an_even_count_the_middle_pair_less_favourable_to_zaris_is_chosen() {
        let pairs = || {
            vec![
                pair(400, 100),
                pair(100, 100),
                pair(300, 100),
                pair(200, 100),
            ]
        };
        let (higher, _) = median_pair(pairs(), Better::Higher, rate_ratio).expect("pairs");
        assert_eq!(higher.zaris.0.ok, 200, "ratios 1, 2, 3, 4: a rate takes 2");
        let (lower, _) = median_pair(pairs(), Better::Lower, rate_ratio).expect("pairs");
        assert_eq!(lower.zaris.0.ok, 300, "as a latency, 3 is the worse middle");
    }

    #[test]
    fn one_pair_is_its_own_median_and_none_is_nothing() {
        let (chosen, ratios) =
            median_pair(vec![pair(5, 10)], Better::Higher, rate_ratio).expect("one pair");
        assert_eq!(chosen.zaris.0.ok, 5);
        assert_eq!(ratios, vec![0.5]);
        assert_eq!(ratios_note(&ratios), "");
        assert!(median_pair(Vec::new(), Better::Higher, rate_ratio).is_none());
        assert_eq!(
            ratios_note(&[1.0, 2.5]),
            "; zaris / etcd in 2 alternating runs: 1.00, 2.50 (the median's run shown)"
        );
    }

    #[tokio::test]
    async fn the_systems_take_turns_going_first() {
        let order = std::sync::Mutex::new(Vec::new());
        let run = |who: &'static str, round: usize| {
            order.lock().expect("order").push((who, round));
            std::future::ready(Ok((Sample::default(), Spent::default())))
        };
        let pairs = alternating(3, |r| run("zaris", r), |r| run("etcd", r))
            .await
            .expect("runs");
        assert_eq!(pairs.len(), 3);
        assert_eq!(
            order.into_inner().expect("order"),
            vec![
                ("zaris", 0),
                ("etcd", 0),
                ("etcd", 1),
                ("zaris", 1),
                ("zaris", 2),
                ("etcd", 2)
            ]
        );
    }

    #[tokio::test]
    async fn zero_rounds_run_one() {
        let run = |_| std::future::ready(Ok((Sample::default(), Spent::default())));
        let pairs = alternating(0, run, run).await.expect("runs");
        assert_eq!(pairs.len(), 1, "at least one round");
    }
}
