//! Redlock against real Redis: the three shared instances of `FENCELOCK_TEST_REDLOCK` for tests that leave them
//! running, and instances a test starts for itself (on free loopback ports, without persistence) for tests that
//! kill, stop or restart them.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use fencelock::{Client, ErrorKind, Lease, LockOptions};
use redis::aio::MultiplexedConnection;
use support::own_redis;
use support::redis_tls::{self, TlsServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Child;
use tokio::time::Instant;

/// Keys that outlive every lock by design: fence counters and fence registers.
fn kept_by_design(key: &str) -> bool {
    key.starts_with("redisson_lock_token:") || key.starts_with("fencelock_fence:")
}

fn opts(ttl_ms: u64) -> LockOptions {
    LockOptions::default().ttl(Duration::from_millis(ttl_ms))
}

async fn raw(port: u16) -> MultiplexedConnection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
    client.get_multiplexed_async_connection().await.unwrap_or_else(|e| panic!("port {port}: {e}"))
}

async fn keys(port: u16, pattern: &str) -> Vec<String> {
    redis::cmd("KEYS").arg(pattern).query_async(&mut raw(port).await).await.unwrap()
}

async fn del(port: u16, key: &str) {
    let _: i64 = redis::cmd("DEL").arg(key).query_async(&mut raw(port).await).await.unwrap();
}

/// Takes and releases `name` once, returning the token.
async fn grant(client: &Client, name: &str) -> u64 {
    let lease = client.try_lock(name, &opts(5_000)).await.unwrap().expect("the lock is free");
    lease.release().await.unwrap();
    lease.fence()
}

/// Takes `name` waiting up to 10 s, releases it and returns the token: for a round after an instance hung, whose
/// late-run acquire may leave a record there until its 5 s TTL (the release meant for it waits for a probe that a
/// dropped client never sends).
async fn grant_waiting(client: &Client, name: &str) -> u64 {
    let lease = client.lock(name, &opts(5_000).timeout(Duration::from_secs(10))).await.unwrap();
    lease.release().await.unwrap();
    lease.fence()
}

/// The shared instances, or `None` (skip with a note) when the test command did not start them.
fn shared() -> Option<(String, Vec<u16>)> {
    let url = support::service_url("FENCELOCK_TEST_REDLOCK")?;
    let ports =
        std::env::var("FENCELOCK_TEST_REDLOCK_PORTS").expect("FENCELOCK_TEST_REDLOCK_PORTS is set with the URL");
    Some((url, ports.split_whitespace().map(|p| p.parse().unwrap()).collect()))
}

/// How long the deletes a round leaves to the slower instances may take to land; less than any TTL a test uses, so a
/// record nobody deletes is still there when it runs out.
const CATCH_UP: Duration = Duration::from_secs(3);

/// After a test on the shared instances: no lock record under `prefix` is left once the background deletes have
/// landed; the counters it made are removed.
async fn assert_clean(ports: &[u16], prefix: &str) {
    let until = Instant::now() + CATCH_UP;
    for &port in ports {
        loop {
            let left = keys(port, &format!("{prefix}*")).await;
            if left.is_empty() {
                break;
            }
            assert!(Instant::now() < until, "lock records left on port {port}: {left:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for key in keys(port, &format!("*{{{prefix}*")).await {
            del(port, &key).await;
        }
    }
}

/// Polls `check` every 10 ms until it holds; fails with `what` if it does not within `limit`.
async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < until, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether `holder` has a record of `name` on the instance at `port`.
async fn holds(port: u16, name: &str, holder: &str) -> bool {
    redis::cmd("HEXISTS").arg(name).arg(holder).query_async(&mut raw(port).await).await.unwrap()
}

/// Gives `name` to another holder on the instance at `port`, for `ttl_ms`, in the Redisson layout.
async fn plant(port: u16, name: &str, ttl_ms: u64) {
    let mut conn = raw(port).await;
    let _: () = redis::pipe()
        .hset(name, "someone-else:1", 1)
        .pexpire(name, ttl_ms as i64)
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// Held by every test that starts its own instances: those tests stop, slow down and time instances on a 50 to 200
/// ms scale, which the tests of this file running beside each other on two cores could otherwise upset.
static OWN_INSTANCES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Redis instances owned by one test, killed when it ends.
struct Instances {
    ports: Vec<u16>,
    children: Vec<Option<Child>>,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Instances {
    /// `n` fresh instances, or `None` (skip with a note) without redis-server, unless FENCELOCK_REQUIRE_SERVICES=1.
    async fn start(n: usize) -> Option<Self> {
        if !own_redis::installed() {
            return None;
        }
        let turn = OWN_INSTANCES.lock().await;
        let ports: Vec<u16> = (0..n).map(|_| own_redis::free_port()).collect();
        let mut children = Vec::new();
        for &port in &ports {
            children.push(Some(own_redis::spawn(port).await));
        }
        // A server grants nothing in its first second (redis.rs START_FLOOR); the waits overlap.
        for &port in &ports {
            own_redis::past_first_second(port).await;
        }
        Some(Instances { ports, children, _turn: turn })
    }

    fn url(&self) -> String {
        let hosts: Vec<String> = self.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!("redlock://{}", hosts.join(","))
    }

    /// SIGKILL, like a crash: the instance's data is gone.
    async fn kill(&mut self, i: usize) {
        let mut child = self.children[i].take().expect("instance is running");
        child.kill().await.unwrap();
    }

    /// Starts instance `i` again on its port, empty.
    async fn restart(&mut self, i: usize) {
        assert!(self.children[i].is_none(), "instance {i} is still running");
        self.children[i] = Some(own_redis::spawn_granting(self.ports[i]).await);
    }

    /// SIGSTOP or SIGCONT: a hung instance keeps its connections open but answers nothing.
    fn signal(&self, i: usize, signal: &str) {
        let pid = self.children[i].as_ref().and_then(Child::id).expect("instance is running");
        let status = std::process::Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status();
        assert!(status.unwrap().success(), "kill -{signal} {pid}");
    }

    /// Waits until the running instances hold no lock record, as background deletes land; fails with what is left
    /// after [`CATCH_UP`].
    async fn assert_no_records(&self) {
        let until = Instant::now() + CATCH_UP;
        loop {
            let left = self.lock_records().await;
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < until, "lock records left: {left:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Lock records on the running instances (fence counters and registers are kept by design).
    async fn lock_records(&self) -> Vec<String> {
        let mut left = Vec::new();
        for (port, child) in self.ports.iter().zip(&self.children) {
            if child.is_some() {
                left.extend(keys(*port, "*").await.into_iter().filter(|k| !kept_by_design(k)));
            }
        }
        left
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_holder_at_a_time_and_waiters_are_woken() {
    let Some((url, ports)) = shared() else { return };
    let prefix = support::unique("redlock-exclusion");
    let name = format!("{prefix}/L");
    let (a, b) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());
    assert!(a.capability().fencing && a.capability().native_wait);

    let first = a.try_lock(&name, &opts(5_000)).await.unwrap().expect("free");
    assert!(b.try_lock(&name, &opts(5_000)).await.unwrap().is_none(), "a second holder got in");
    assert_eq!(b.inspect(&name).await.unwrap().holder.as_deref(), Some(first.holder()));

    let waiter = {
        let (b, name) = (b.clone(), name.clone());
        tokio::spawn(async move { b.lock(&name, &opts(5_000).timeout(Duration::from_secs(10))).await })
    };
    let released = Instant::now();
    first.release().await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    let handoff = released.elapsed();
    println!("redlock hand-off after release: {handoff:?}");
    // Without a release message the waiter would sleep out the holder's 5 s TTL.
    assert!(handoff < Duration::from_millis(2_500), "hand-off took {handoff:?}");
    assert!(second.fence() > first.fence());
    second.release().await.unwrap();
    assert!(a.inspect(&name).await.unwrap().holder.is_none());
    assert_clean(&ports, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contenders_take_turns_with_rising_tokens() {
    let Some((url, ports)) = shared() else { return };
    let prefix = support::unique("redlock-contention");
    let name = Arc::new(format!("{prefix}/L"));
    let inside = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let client = Client::connect(&url).await.unwrap();
        let (name, inside) = (name.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let mut tokens = Vec::new();
            for _ in 0..5 {
                let lease = client.lock(&name, &opts(5_000).timeout(Duration::from_secs(20))).await.unwrap();
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                tokens.push(lease.fence());
                inside.store(false, Ordering::SeqCst);
                lease.release().await.unwrap();
            }
            tokens
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        let tokens = task.await.unwrap();
        assert!(tokens.is_sorted(), "one client's tokens went backwards: {tokens:?}");
        all.extend(tokens);
    }
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 15, "every grant has its own token");
    assert_clean(&ports, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_and_release_follow_the_majority() {
    let Some((url, ports)) = shared() else { return };
    let prefix = support::unique("redlock-majority");
    let name = format!("{prefix}/L");
    let client = Client::connect(&url).await.unwrap();
    let no_watchdog = opts(5_000).watchdog(false);

    let lease = client.lock(&name, &no_watchdog).await.unwrap();
    // `lock` returns on a majority: the last instance's grant may land after it, and would undo a delete before it.
    eventually(CATCH_UP, "every instance has the record", || async {
        let mut all = true;
        for &port in &ports {
            all &= holds(port, &name, lease.holder()).await;
        }
        all
    })
    .await;
    del(ports[0], &name).await;
    lease.renew(None).await.expect("a majority still has the record");
    del(ports[1], &name).await;
    assert_eq!(lease.renew(None).await.unwrap_err().kind(), ErrorKind::LockLost, "only a minority has it");
    assert!(lease.is_lost());
    let _ = lease.release().await;
    del(ports[2], &name).await;

    let lease = client.lock(&name, &no_watchdog).await.unwrap();
    del(ports[2], &name).await;
    lease.release().await.expect("a majority deleted our record");
    assert_clean(&ports, &prefix).await;
}

/// A loopback proxy to `port` that holds every reply for `delay`: a network where latency, not CPU, dominates.
async fn delayed(port: u16, delay: Duration) -> u16 {
    relay(port, delay, "").await.0
}

/// A loopback proxy to `port` that holds every reply for `delay` and counts the requests that name `needle`
/// (each chunk the client sends that contains it once, which is one request at the rates of these tests).
async fn relay(port: u16, delay: Duration, needle: &'static str) -> (u16, Arc<AtomicUsize>) {
    let (proxy, seen, _) = relay_with_delay(port, delay, needle).await;
    (proxy, seen)
}

/// [`relay`] whose reply delay, in ms, can be changed through the third value.
async fn relay_with_delay(port: u16, delay: Duration, needle: &'static str) -> (u16, Arc<AtomicUsize>, Arc<AtomicU64>) {
    let delay_ms = Arc::new(AtomicU64::new(delay.as_millis() as u64));
    let shared_delay = delay_ms.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = listener.local_addr().unwrap().port();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else { return };
            let ((mut from_client, mut to_client), (mut from_server, mut to_server)) =
                (client.into_split(), server.into_split());
            let counter = counter.clone();
            let delay = shared_delay.clone();
            tokio::spawn(async move {
                let mut buf = vec![0; 64 * 1024];
                while let Ok(n @ 1..) = from_client.read(&mut buf).await {
                    let chunk = &buf[..n];
                    if !needle.is_empty() && chunk.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                        counter.fetch_add(1, Ordering::SeqCst);
                    }
                    if to_server.write_all(chunk).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                let mut buf = vec![0; 64 * 1024];
                while let Ok(n @ 1..) = from_server.read(&mut buf).await {
                    tokio::time::sleep(Duration::from_millis(delay.load(Ordering::SeqCst))).await;
                    if to_client.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (proxy, seen, delay_ms)
}

/// The median time of `try_lock` on a free lock.
async fn acquire_median(client: &Client, name: &str, samples: usize) -> Duration {
    let mut took = Vec::new();
    for i in 0..samples + 10 {
        let started = Instant::now();
        let lease = client.try_lock(name, &opts(5_000)).await.unwrap().expect("free");
        if i >= 10 {
            took.push(started.elapsed()); // the first 10 warm connections and script caches
        }
        lease.release().await.unwrap();
    }
    took.sort();
    took[took.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_are_asked_in_parallel() {
    let Some((url, ports)) = shared() else { return };
    let prefix = support::unique("redlock-latency");
    // Separate names: the single server's grants would put one Redlock counter ahead and cost a raise round.
    let (single, majority) = (format!("{prefix}/single"), format!("{prefix}/redlock"));
    let one =
        acquire_median(&Client::connect(&format!("redis://127.0.0.1:{}", ports[0])).await.unwrap(), &single, 200).await;
    let three = acquire_median(&Client::connect(&url).await.unwrap(), &majority, 200).await;
    println!("acquire median on loopback: redis:// {one:?}, redlock:// over 3 instances {three:?}");

    // On loopback the figure is CPU time; behind 5 ms of reply latency it is round trips.
    let delay = Duration::from_millis(5);
    let mut proxies = Vec::new();
    for &port in &ports {
        proxies.push(format!("127.0.0.1:{}", delayed(port, delay).await));
    }
    let one = acquire_median(&Client::connect(&format!("redis://{}", proxies[0])).await.unwrap(), &single, 40).await;
    let three =
        acquire_median(&Client::connect(&format!("redlock://{}", proxies.join(","))).await.unwrap(), &majority, 40)
            .await;
    println!(
        "acquire median with {delay:?} reply latency: redis:// {one:?}, redlock:// over 3 instances {three:?} \
         ({:.2}×; asked one by one it would be 3×)",
        three.as_secs_f64() / one.as_secs_f64()
    );
    assert_clean(&ports, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minority_down_changes_nothing() {
    let Some(mut instances) = Instances::start(3).await else { return };
    let client = Client::connect(&instances.url()).await.unwrap();
    instances.kill(2).await;

    let started = Instant::now();
    let lease = client.lock("m", &opts(5_000)).await.unwrap();
    println!("lock with one instance of 3 dead: {:?}", started.elapsed());
    let other = Client::connect(&instances.url()).await.expect("connect succeeds with a minority down");
    assert!(other.try_lock("m", &opts(5_000)).await.unwrap().is_none());
    assert_eq!(other.inspect("m").await.unwrap().holder.as_deref(), Some(lease.holder()));
    lease.renew(None).await.unwrap();
    client.fence("r").write(lease.fence(), b"v").await.unwrap();
    assert_eq!(other.fence("r").read().await.unwrap(), (lease.fence(), b"v".to_vec()));
    let waiter = {
        let other = other.clone();
        tokio::spawn(async move { other.lock("m", &opts(5_000).timeout(Duration::from_secs(10))).await })
    };
    lease.release().await.unwrap();
    let next = waiter.await.unwrap().unwrap();
    assert!(next.fence() > lease.fence());
    next.release().await.unwrap();
    println!("acquire median with one instance of 3 dead: {:?}", acquire_median(&client, "m", 20).await);
    instances.assert_no_records().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_down_is_unavailable_at_once() {
    let Some(mut instances) = Instances::start(3).await else { return };
    let client = Client::connect(&instances.url()).await.unwrap();
    let held: Lease = client.lock("m", &opts(5_000)).await.unwrap();
    instances.kill(0).await;
    instances.kill(1).await;

    let started = Instant::now();
    let err = client.try_lock("other", &opts(5_000)).await.unwrap_err();
    let took = started.elapsed();
    println!("try_lock with 2 of 3 instances dead: {took:?}: {err}");
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    // Two failures decide it, whether or not the live instance's grant is in yet.
    assert!(err.message().contains("of 3 instances granted, 2 needed"), "{err}");
    // redis-rs's own reconnect loop would take seconds.
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert_eq!(held.renew(None).await.unwrap_err().kind(), ErrorKind::Unavailable);
    let err = Client::connect(&instances.url()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.message().contains("1 of 3 instances connected"), "{err}");
    held.release().await.unwrap_err();
    // The clean-up reached the live instance.
    instances.assert_no_records().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_instance_costs_only_its_timeout() {
    let Some(instances) = Instances::start(3).await else { return };
    let client = Client::connect(&instances.url()).await.unwrap();
    grant(&client, "h").await;
    instances.signal(1, "STOP");
    let started = Instant::now();
    let lease = client.try_lock("h", &opts(5_000)).await.unwrap().expect("a majority answers");
    let took = started.elapsed();
    lease.release().await.unwrap();
    instances.signal(1, "CONT");
    println!("try_lock with one instance of 3 hung (SIGSTOP): {took:?}");
    // Two rounds, each waiting out the 50 ms instance timeout; the 5 s request timeout must not apply.
    assert!(took < Duration::from_secs(1), "took {took:?}");
    // The hung instance runs the queued acquire once resumed, and the release kept for it when it answers again;
    // nothing may be left.
    grant(&client, "h").await;
    instances.assert_no_records().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_returns_on_a_majority_and_the_slow_instance_catches_up() {
    let Some(instances) = Instances::start(3).await else { return };
    // Instance 2 answers after 500 ms, within its 5 s instance timeout: slow, never down.
    let slow = delayed(instances.ports[2], Duration::from_millis(500)).await;
    let url = format!(
        "redlock://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{slow}?instance_timeout_ms=5000",
        instances.ports[0], instances.ports[1]
    );
    let client = Client::connect(&url).await.unwrap();
    let long = opts(30_000).watchdog(false);
    let quick = Duration::from_millis(400);

    // A grant returns on the two fast instances; the slow one's grant lands later and is ours too.
    let started = Instant::now();
    let lease = client.try_lock("s", &long).await.unwrap().expect("free");
    let took = started.elapsed();
    println!("try_lock with one instance 500 ms behind: {took:?}");
    assert!(took < quick, "the acquire waited for the slow instance: {took:?}");
    let slow_port = instances.ports[2];
    // Every reply of the slow instance takes 500 ms, those of its first dial (handshake, script loads) included: its
    // first grant lands some round trips later, more of them than CATCH_UP allows on a loaded machine.
    let slow_catch_up = CATCH_UP + 20 * Duration::from_millis(500);
    eventually(slow_catch_up, "the late grant reaches the slow instance", || holds(slow_port, "s", lease.holder()))
        .await;
    // The release returns on the fast two too, and deletes the late grant in the background.
    let started = Instant::now();
    lease.release().await.unwrap();
    assert!(started.elapsed() < quick, "the release waited for the slow instance: {:?}", started.elapsed());
    let released = || async { !holds(slow_port, "s", lease.holder()).await };
    eventually(slow_catch_up, "the late grant is released", released).await;

    // Busy on the fast two: the vote is decided without the slow one, whose late grant is deleted afterwards.
    plant(instances.ports[0], "f", 30_000).await;
    plant(instances.ports[1], "f", 30_000).await;
    let started = Instant::now();
    assert!(client.try_lock("f", &long).await.unwrap().is_none(), "another holds a majority");
    assert!(started.elapsed() < quick, "the busy vote waited for the slow instance: {:?}", started.elapsed());
    let gone = || async { keys(slow_port, "f").await.is_empty() };
    eventually(slow_catch_up, "the failed attempt's late grant is deleted", gone).await;
    del(instances.ports[0], "f").await;
    del(instances.ports[1], "f").await;
    client.close().await;
    instances.assert_no_records().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_instance_is_marked_down_and_rejoins_when_resumed() {
    let Some(instances) = Instances::start(3).await else { return };
    // Requests to instance 1 pass a proxy that counts those naming the lock.
    let (proxy, requests) = relay(instances.ports[1], Duration::ZERO, "d-lock").await;
    // 200 ms, not the default 50: on a loaded machine a resumed instance working off its backlog must not be marked
    // down again at once, which is not what this test is about.
    let url = format!(
        "redlock://127.0.0.1:{},127.0.0.1:{proxy},127.0.0.1:{}?instance_timeout_ms=200",
        instances.ports[0], instances.ports[2]
    );
    let client = Client::connect(&url).await.unwrap();
    let long = opts(30_000).watchdog(false);
    let cycle = || async {
        let lease = client.try_lock("d-lock", &long).await.unwrap().expect("a majority is up and free");
        lease.release().await.unwrap();
    };
    cycle().await;
    // The cycle returned on a majority; instance 1's requests may still be on their way.
    eventually(CATCH_UP, "the proxy sees the lock's requests", || async { requests.load(Ordering::SeqCst) > 0 }).await;

    // The first requests after SIGSTOP go out, get no answer within 200 ms, and mark the instance down.
    instances.signal(1, "STOP");
    let limit = Duration::from_secs(5);
    let until = Instant::now() + limit;
    // Five quiet cycles in a row, not one: a cycle returns on the majority, so on a loaded machine its request to
    // instance 1 may reach the proxy only after the count was read. And quiet for three instance timeouts: cycles
    // take a millisecond, so five can pass while the hung request still waits out its timeout, the instance not
    // yet down.
    let (mut quiet, mut last_asked) = (0, Instant::now());
    while quiet < 5 || last_asked.elapsed() < Duration::from_millis(600) {
        let before = requests.load(Ordering::SeqCst);
        cycle().await;
        if requests.load(Ordering::SeqCst) == before {
            quiet += 1;
        } else {
            (quiet, last_asked) = (0, Instant::now());
        }
        assert!(Instant::now() < until, "instance 1 is still asked {limit:?} after SIGSTOP");
    }
    // From then on it is not asked, and locks work on the other two. One request of the cycles before may still
    // be on its way (queued behind the hung one when the instance was marked down); 20 more cycles add none.
    let asked = requests.load(Ordering::SeqCst);
    for _ in 0..20 {
        cycle().await;
    }
    let more = requests.load(Ordering::SeqCst) - asked;
    assert!(more <= 1, "a down instance was asked {more} more times in 20 cycles");

    // Its vote is needed when another holds instance 0: a down instance answers at once, not after its timeout.
    plant(instances.ports[0], "busy-lock", 30_000).await;
    let started = Instant::now();
    for _ in 0..20 {
        assert!(client.try_lock("busy-lock", &long).await.unwrap().is_none());
    }
    let took = started.elapsed();
    println!("20 busy votes with one instance of 3 down: {took:?}");
    // Waiting out the 200 ms timeout, they would take at least 4 s.
    assert!(took < Duration::from_secs(1), "20 busy votes took {took:?}");
    del(instances.ports[0], "busy-lock").await;

    // Resumed, it answers a probe, runs the deletes kept for it, and grants again.
    instances.signal(1, "CONT");
    let port = instances.ports[1];
    let rejoin = Duration::from_secs(15);
    let until = Instant::now() + rejoin;
    loop {
        let lease = client.try_lock("d-lock", &long).await.unwrap().expect("free");
        // The vote returned on a majority: give instance 1's grant a moment to land.
        let mut granted = false;
        for _ in 0..100 {
            granted = holds(port, "d-lock", lease.holder()).await;
            if granted {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        lease.release().await.unwrap();
        if granted {
            break;
        }
        assert!(Instant::now() < until, "instance 1 grants nothing {rejoin:?} after SIGCONT");
    }
    assert!(requests.load(Ordering::SeqCst) > asked);
    // The acquires queued in its socket while it was stopped ran on SIGCONT; the deletes kept for it undid them.
    instances.assert_no_records().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_cut_short_by_a_hang_runs_again_when_the_instance_answers() {
    let Some(instances) = Instances::start(3).await else { return };
    let url = format!("{}?instance_timeout_ms=100", instances.url());
    let client = Client::connect(&url).await.unwrap();
    let lease = client.lock("cut", &opts(30_000).watchdog(false)).await.unwrap();
    let port = instances.ports[1];
    eventually(CATCH_UP, "instance 1 has the grant", || async { holds(port, "cut", lease.holder()).await }).await;
    // Fresh instances know no release script yet: the release sent to the hung one gets NOSCRIPT when it resumes,
    // and the script would follow only if the request were still being waited for.
    instances.signal(1, "STOP");
    lease.release().await.unwrap();
    // The length of the fault, not a synchronisation: longer than the 100 ms the release there is given.
    tokio::time::sleep(Duration::from_millis(500)).await;
    instances.signal(1, "CONT");
    // Its record goes long before its 30 s TTL.
    eventually(CATCH_UP, "the released record is deleted on the resumed instance", || async {
        !holds(port, "cut", lease.holder()).await
    })
    .await;
    client.close().await;
    instances.assert_no_records().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_retried_across_a_hang_is_not_refused_by_its_own_deletes() {
    let Some(instances) = Instances::start(3).await else { return };
    let client = Client::connect(&instances.url()).await.unwrap();
    let lease = client.lock("r", &opts(5_000).watchdog(false)).await.unwrap();
    // Hung: the first release times out on two instances (they run it on SIGCONT), the lease retries it while
    // they are down (their deletes kept for their return), and after SIGCONT every instance says "not ours".
    instances.signal(1, "STOP");
    instances.signal(2, "STOP");
    let release = tokio::spawn(async move { lease.release().await });
    // The length of the fault, not a synchronisation: long enough for several retries.
    tokio::time::sleep(Duration::from_millis(300)).await;
    instances.signal(1, "CONT");
    instances.signal(2, "CONT");
    release.await.unwrap().expect("the deletes were this lease's own");
    instances.assert_no_records().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_instance_gathers_no_backlog_of_votes() {
    let Some(instances) = Instances::start(3).await else { return };
    let (slow, requests, delay_ms) = relay_with_delay(instances.ports[2], Duration::ZERO, "backlog-lock").await;
    let url = format!(
        "redlock://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{slow}?instance_timeout_ms=150",
        instances.ports[0], instances.ports[1]
    );
    let client = Client::connect(&url).await.unwrap();
    // Connected to all three (a round on a free lock that every instance granted), instance 2 then answers after
    // 80 ms, within its 150 ms timeout, and another holds instances 0 and 1.
    let lease = client.try_lock("backlog-lock", &opts(30_000)).await.unwrap().expect("free");
    let slow_port = instances.ports[2];
    eventually(CATCH_UP, "all three grant", || holds(slow_port, "backlog-lock", lease.holder())).await;
    lease.release().await.unwrap();
    eventually(CATCH_UP, "all three release", || async { keys(slow_port, "backlog-lock").await.is_empty() }).await;
    let before = requests.load(Ordering::SeqCst);
    delay_ms.store(80, Ordering::SeqCst);
    plant(instances.ports[0], "backlog-lock", 30_000).await;
    plant(instances.ports[1], "backlog-lock", 30_000).await;
    // Each vote is decided by the fast two; the slow one's vote and clean-up queue behind each other.
    for _ in 0..20 {
        assert!(client.try_lock("backlog-lock", &opts(30_000)).await.unwrap().is_none());
    }
    client.close().await; // waits for every request in flight
    let sent = requests.load(Ordering::SeqCst) - before;
    println!("requests sent to the slow instance for 20 votes: {sent}");
    // Sending them all would be 20 votes and 20 clean-ups, 3.2 s of the slow instance's time.
    assert!(sent <= 10, "{sent} requests reached the slow instance");
    del(instances.ports[0], "backlog-lock").await;
    del(instances.ports[1], "backlog-lock").await;
    instances.assert_no_records().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_across_restarts_without_persistence() {
    let Some(mut instances) = Instances::start(3).await else { return };
    let url = instances.url();
    let t1 = grant(&Client::connect(&url).await.unwrap(), "t").await;

    // Instance 0 loses its data and re-seeds its counter from its clock: its token is now the largest. Instance 2
    // is hung meanwhile, so the grant is a vote of 0 and 1 (a round returns on the first majority to answer).
    instances.kill(0).await;
    instances.restart(0).await;
    instances.signal(2, "STOP");
    let t2 = grant(&Client::connect(&url).await.unwrap(), "t").await;
    instances.signal(2, "CONT");
    assert!(t2 > t1 + 1, "the re-seeded instance should give the maximum: {t1} then {t2}");

    // Instance 0 dies again: instance 1 only knows t2 because the grant raised its counter to it (instance 2 is
    // still at t1).
    instances.kill(0).await;
    let t3 = grant_waiting(&Client::connect(&url).await.unwrap(), "t").await;
    assert!(t3 > t2, "tokens went backwards when the instance with the largest counter died: {t2} then {t3}");

    // Every instance loses its data: clock seeds exceed every earlier token.
    instances.restart(0).await;
    for i in 1..3 {
        instances.kill(i).await;
        instances.restart(i).await;
    }
    let t4 = grant(&Client::connect(&url).await.unwrap(), "t").await;
    assert!(t4 > t3, "tokens went backwards after every instance restarted empty: {t3} then {t4}");
    println!("tokens across restarts: {t1} → {t2} → {t3} → {t4}");
    instances.assert_no_records().await;
}

/// A register fails closed when a minority of instances lose their data. The newer grant's write reached only
/// instances 0 and 1 (instance 2's copy is deleted, as if the write never got there), then instance 0 restarts
/// empty. The deposed holder's older token is refused by instance 1 (it holds the newer) and by instance 0 (below
/// its start floor), so only instance 2 accepts: no majority, `FENCED`. Without the floor instances 0 and 2 would
/// make a majority for the stale write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_register_refuses_an_older_token_after_a_minority_lost_its_data() {
    let Some(mut instances) = Instances::start(3).await else { return };
    let client = Client::connect(&instances.url()).await.unwrap();
    let older = grant(&client, "wiped").await;
    let newer = grant(&client, "wiped").await;
    let register = client.fence("wiped-register");
    register.write(newer, b"newer").await.unwrap();
    // The write returns on a majority; the third instance's copy may land just after.
    let key = "fencelock_fence:{wiped-register}";
    eventually(CATCH_UP, "the write reaches every instance", || async {
        keys(instances.ports[2], key).await.len() == 1
    })
    .await;
    del(instances.ports[2], key).await;
    instances.kill(0).await;
    instances.restart(0).await;
    // The first call after the restart may meet instance 0 still marked down: a few tries, each bounded.
    let deadline = Instant::now() + Duration::from_secs(10);
    let err = loop {
        match register.write(older, b"stale").await {
            Err(e) if e.kind() == ErrorKind::Unavailable && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            other => break other.expect_err("the deposed holder's token was accepted after a minority lost its data"),
        }
    };
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    // A grant made now is above every floor and every stored token, and writes.
    let after = grant(&client, "wiped").await;
    register.write(after, b"after").await.unwrap();
    assert_eq!(register.read().await.unwrap(), (after, b"after".to_vec()));
    instances.assert_no_records().await;
}

/// `FENCELOCK_TEST_REDLOCK_TLS`: three instances that accept TLS only and require a password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_authentication_on_every_instance() {
    let Some(server) = TlsServer::from_env("FENCELOCK_TEST_REDLOCK_TLS") else { return };
    redis_tls::locks_fence_and_wake(&server, &server.with_ca(""), false).await;
    let files_without_tls = redis_tls::plaintext(&server.with_ca(""));
    redis_tls::refused(&files_without_tls, ErrorKind::InvalidArgument, "ca= given but TLS is off").await;
}

#[tokio::test]
async fn a_plaintext_url_a_wrong_ca_and_a_wrong_password_are_refused() {
    let Some(server) = TlsServer::from_env("FENCELOCK_TEST_REDLOCK_TLS") else { return };
    redis_tls::refuses_plaintext(&server, "add tls=true").await;
    redis_tls::refuses_a_wrong_ca(&server).await;
    redis_tls::refuses_a_wrong_password(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphores_and_rw_locks_are_unsupported_and_say_why() {
    let Some(instances) = Instances::start(3).await else { return };
    let client = Client::connect(&instances.url()).await.unwrap();
    let caps = client.capability();
    assert!(!caps.semaphore && !caps.rw_lock, "{caps:?}");
    let name = support::unique("redlock-kinds");
    let err = client.semaphore(&name, 2).try_acquire(&opts(5_000)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    for says in ["semaphore", "majority", "count without a shared order"] {
        assert!(err.message().contains(says), "{err}");
    }
    let err = client.semaphore(&name, 2).available().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    for attempt in
        [client.rw_lock(&name).try_read(&opts(5_000)).await, client.rw_lock(&name).try_write(&opts(5_000)).await]
    {
        let err = attempt.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        assert!(err.message().contains("read-write") && err.message().contains("majority"), "{err}");
    }
    // Nothing reached the instances.
    for &port in &instances.ports {
        assert!(keys(port, &format!("*{name}*")).await.is_empty(), "port {port}");
    }
    client.close().await;
}
