//! Waiting on a condition instead of sleeping a fixed time: a check polled until it yields a
//! value, bounded by a timeout.

use std::future::Future;
use std::time::Duration;

use anyhow::bail;
use tokio::time::Instant;

/// Between two checks: short against the timeouts callers use (seconds), long enough not to
/// flood a node with status calls.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Polls `check` until it returns `Some`, and returns that value. For tests: panics with
/// "timed out waiting for {what}" after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match try_eventually(what, timeout, check).await {
        Ok(value) => value,
        Err(err) => panic!("{err}"),
    }
}

/// [`eventually`] for code that reports a timeout instead of panicking (the demo, the bench).
/// `check` runs at least once, also with a zero timeout.
pub async fn try_eventually<T, F, Fut>(
    what: &str,
    timeout: Duration,
    mut check: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!("timed out waiting for {what} ({timeout:?})");
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[tokio::test]
    async fn eventually_returns_the_first_value_the_check_yields() {
        let calls = Cell::new(0);
        let value = eventually("the third call", Duration::from_secs(1), || {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move { (n == 3).then_some(n * 10) }
        })
        .await;
        assert_eq!(value, 30);
    }

    #[tokio::test]
    async fn try_eventually_names_what_it_waited_for() {
        let err = try_eventually("a miracle", Duration::from_millis(100), || async {
            None::<()>
        })
        .await
        .expect_err("never true");
        assert!(
            err.to_string().contains("timed out waiting for a miracle"),
            "{err}"
        );
    }

    #[tokio::test]
    #[should_panic(expected = "timed out waiting for a miracle")]
    async fn eventually_panics_on_timeout() {
        eventually("a miracle", Duration::from_millis(100), || async {
            None::<()>
        })
        .await;
    }
}
