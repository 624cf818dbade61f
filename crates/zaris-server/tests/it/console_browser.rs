//! The console in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`,
//! which `.ci/run` installs) driven over WebDriver against a real 3-node cluster. Screenshots
//! of each page go to `target/console-screenshots/`.
//!
//! Without chromedriver on PATH the test says so and passes, unless `ZARIS_REQUIRE_BROWSER` is
//! set (as `.ci/run` sets it): there it fails.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client as Browser, ClientBuilder, Locator};
use zaris_client::{LockOutcome, PutOptions};
use zaris_core::LeaseId;
use zaris_testkit::eventually;

/// A chromedriver process of this test's own, killed when dropped.
struct Driver {
    child: tokio::process::Child,
    port: u16,
}

impl Driver {
    async fn start() -> Option<Driver> {
        let Some(binary) = find_on_path("chromedriver") else {
            assert!(
                std::env::var_os("ZARIS_REQUIRE_BROWSER").is_none(),
                "chromedriver is not on PATH: install Debian's chromium and chromium-driver"
            );
            eprintln!(
                "SKIPPED: chromedriver is not on PATH (apt-get install chromium chromium-driver)"
            );
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = tokio::process::Command::new(binary)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        eventually(
            "chromedriver to listen",
            Duration::from_secs(20),
            || async {
                tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .ok()
                    .map(drop)
            },
        )
        .await;
        Some(Driver { child, port })
    }

    async fn browser(&self) -> Browser {
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": find_on_path("chromium").unwrap_or_else(|| "/usr/bin/chromium".into()),
                "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                         "--disable-gpu", "--window-size=1280,860"],
            }),
        );
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a Chromium session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

fn screenshots_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/console-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot directory");
    dir
}

async fn screenshot(browser: &Browser, name: &str) {
    let png = browser.screenshot().await.expect("screenshot");
    std::fs::write(screenshots_dir().join(format!("{name}.png")), png).expect("save screenshot");
}

/// The text of the first element `css` finds, once one exists (the pages render asynchronously).
async fn text_of(browser: &Browser, css: &str) -> String {
    let element = tokio::time::timeout(
        Duration::from_secs(15),
        browser.wait().for_element(Locator::Css(css)),
    )
    .await
    .unwrap_or_else(|_| panic!("no {css} on the page"))
    .unwrap_or_else(|e| panic!("{css}: {e}"));
    element.text().await.expect("text")
}

/// Waits until the first element `css` finds has a text `accept` takes, re-reading it as the
/// page refreshes; returns that text.
async fn wait_for_text(
    browser: &Browser,
    css: &str,
    what: &str,
    accept: impl Fn(&str) -> bool,
) -> String {
    let started = std::time::Instant::now();
    loop {
        if let Ok(element) = browser.find(Locator::Css(css)).await
            && let Ok(text) = element.text().await
            && accept(&text)
        {
            return text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what} ({css})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Seconds shown by a countdown cell ("9.4s", "12s", "1m 5s").
fn shown_seconds(text: &str) -> f64 {
    let text = text.trim();
    if let Some((minutes, seconds)) = text.split_once("m ") {
        let minutes: f64 = minutes.parse().expect("minutes");
        return minutes * 60.0 + shown_seconds(seconds);
    }
    text.trim_end_matches('s')
        .parse()
        .unwrap_or_else(|_| panic!("countdown {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_holders_queues_expiries_and_the_new_leader() {
    let Some(driver) = Driver::start().await else {
        return;
    };
    let mut cluster = crate::console_api::with_http(3).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;

    // The holder: a lease kept alive by a renewal loop of our own (killed below), bound to a key
    // and a presence entry, holding a lock; a second lease queued for the lock.
    let ttl = Duration::from_secs(4);
    let holder = client.grant(ttl).await.expect("grant").id;
    let keeper = {
        let client = client.clone();
        tokio::spawn(async move {
            loop {
                let _ = client.keep_alive_once([holder]).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    let waiter = client
        .grant(Duration::from_secs(120))
        .await
        .expect("grant")
        .id;
    let bound = |lease: LeaseId| PutOptions {
        lease: Some(lease),
        ..PutOptions::default()
    };
    client
        .put("svc/api", "10.0.0.7:80", bound(holder))
        .await
        .expect("put");
    client
        .put("presence/workers/w-1", "10.0.0.7", bound(holder))
        .await
        .expect("join");
    let held = client
        .lock("jobs/nightly", holder, false, Duration::ZERO)
        .await
        .expect("lock");
    assert!(matches!(held, LockOutcome::Held { .. }), "{held:?}");
    let queued = client
        .lock("jobs/nightly", waiter, true, Duration::from_millis(50))
        .await
        .expect("queue");
    assert!(matches!(queued, LockOutcome::Queued { .. }), "{queued:?}");

    // The console of a follower, which reads through the leader.
    let follower = cluster.followers(leader)[0];
    let console = format!(
        "http://{}",
        cluster.node(follower).http_addr.expect("http address")
    );
    let browser = driver.browser().await;

    browser
        .goto(&format!("{console}/#/cluster"))
        .await
        .expect("cluster page");
    let shown_leader = text_of(&browser, "#leader-id").await;
    assert_eq!(shown_leader, format!("node {leader}"));
    let rows = browser
        .find_all(Locator::Css("tr[data-member]"))
        .await
        .expect("member rows");
    assert_eq!(rows.len(), 3);
    let charts = browser
        .find_all(Locator::Css(".charts canvas"))
        .await
        .expect("charts");
    assert_eq!(
        charts.len(),
        5,
        "grants, renewals, expiries, revocations, commit latency"
    );
    // The keeper's renewals show in the renewals chart within a sample or two.
    wait_for_text(
        &browser,
        "strong.chart-latest[data-series=\"renewals_per_s\"]",
        "renewals in the chart",
        |t| t.ends_with("/s") && t != "0.0 /s",
    )
    .await;
    screenshot(&browser, "cluster").await;

    browser
        .goto(&format!("{console}/#/leases"))
        .await
        .expect("leases page");
    let row = format!("tr[data-lease=\"{}\"]", holder.get());
    let remaining = format!("{row} td.countdown");
    // The remaining TTL counts down between the page's refreshes (and renewals push it back up):
    // some later reading within a refresh is lower than an earlier one.
    let mut counted_down = false;
    for _ in 0..20 {
        let first = shown_seconds(&text_of(&browser, &remaining).await);
        tokio::time::sleep(Duration::from_millis(400)).await;
        let second = shown_seconds(&text_of(&browser, &remaining).await);
        assert!(
            second <= 4.0 && first <= 4.0,
            "{first} / {second}: over the TTL"
        );
        if second < first {
            counted_down = true;
            break;
        }
    }
    assert!(counted_down, "the remaining TTL never counted down");
    let keys = text_of(&browser, &format!("{row} td:nth-child(4)")).await;
    assert_eq!(keys, "2");
    screenshot(&browser, "leases").await;

    browser
        .goto(&format!("{console}/#/leases/{}", holder.get()))
        .await
        .expect("lease page");
    let bound_keys = text_of(&browser, "#keys").await;
    assert!(bound_keys.contains("svc/api"), "{bound_keys}");
    assert!(bound_keys.contains("presence/workers/w-1"), "{bound_keys}");
    assert_eq!(text_of(&browser, "#locks-held").await, "jobs/nightly");
    screenshot(&browser, "lease").await;

    browser
        .goto(&format!("{console}/#/locks"))
        .await
        .expect("locks page");
    let lock_row = "tr[data-lock=\"jobs/nightly\"]";
    assert_eq!(
        text_of(&browser, &format!("{lock_row} td.holder")).await,
        holder.get().to_string()
    );
    assert_eq!(
        text_of(&browser, &format!("{lock_row} td.waiters")).await,
        waiter.get().to_string()
    );
    screenshot(&browser, "locks").await;

    browser
        .goto(&format!("{console}/#/presence?group=workers"))
        .await
        .expect("presence page");
    let member = text_of(&browser, "tr[data-member=\"w-1\"]").await;
    assert!(member.contains(&holder.get().to_string()), "{member}");
    screenshot(&browser, "presence").await;

    // The holder dies: its renewals stop, the leader expires it, the feed shows the EXPIRE of
    // its keys (with its lease id), and the lock passes to the waiter.
    browser
        .goto(&format!("{console}/#/events?prefix="))
        .await
        .expect("events page");
    wait_for_text(&browser, "#feed-state", "the feed to open", |t| t == "live").await;
    keeper.abort();
    let expired = wait_for_text(&browser, "tr.event.EXPIRE", "the EXPIRE", |t| {
        t.contains("svc/api") || t.contains("presence/workers/w-1")
    })
    .await;
    assert!(expired.contains(&holder.get().to_string()), "{expired}");
    screenshot(&browser, "events").await;
    browser
        .goto(&format!("{console}/#/locks"))
        .await
        .expect("locks page");
    wait_for_text(
        &browser,
        &format!("{lock_row} td.holder"),
        "the waiter to hold the lock",
        |t| t == waiter.get().to_string(),
    )
    .await;

    // Revoking from the console, confirmed: the waiter's lease ends and its lock is freed.
    browser
        .goto(&format!("{console}/#/leases/{}", waiter.get()))
        .await
        .expect("lease page");
    text_of(&browser, "#remaining").await;
    browser
        .find(Locator::Css("#revoke"))
        .await
        .expect("revoke button")
        .click()
        .await
        .expect("click revoke");
    let question = browser.get_alert_text().await.expect("a confirmation");
    assert!(question.contains(&waiter.get().to_string()), "{question}");
    browser.accept_alert().await.expect("confirm");
    eventually(
        "the revoked lease to end",
        Duration::from_secs(10),
        || async {
            client
                .time_to_live(waiter, false)
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
    assert!(
        client
            .lock_list("jobs/", "", 0)
            .await
            .expect("locks")
            .locks
            .is_empty()
    );

    // The leader dies: a surviving member's console names the new one.
    cluster.stop(leader).await;
    browser
        .goto(&format!("{console}/#/cluster"))
        .await
        .expect("cluster page");
    let new_leader = wait_for_text(&browser, "#leader-id", "a new leader", |t| {
        t.starts_with("node ") && t != format!("node {leader}")
    })
    .await;
    assert_ne!(new_leader, format!("node {leader}"));
    screenshot(&browser, "cluster-after-failover").await;

    browser.close().await.expect("close the browser");
    drop(driver);
    cluster.shutdown().await;
}
