//! Redlock against real Redis: the three shared instances of `FENCELOCK_TEST_REDLOCK` for tests that leave them
//! running, and instances a test starts for itself (on free loopback ports, without persistence) for tests that
//! kill, stop or restart them.

mod support;

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fencelock::{Client, ErrorKind, Lease, LockOptions};
use redis::aio::MultiplexedConnection;
use support::redis_tls::{self, TlsServer};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
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

/// The shared instances, or `None` (skip with a note) when the test command did not start them.
fn shared() -> Option<(String, Vec<u16>)> {
    let url = support::service_url("FENCELOCK_TEST_REDLOCK")?;
    let ports =
        std::env::var("FENCELOCK_TEST_REDLOCK_PORTS").expect("FENCELOCK_TEST_REDLOCK_PORTS is set with the URL");
    Some((url, ports.split_whitespace().map(|p| p.parse().unwrap()).collect()))
}

/// After a test on the shared instances: no lock record under `prefix` is left; the counters it made are removed.
async fn assert_clean(ports: &[u16], prefix: &str) {
    for &port in ports {
        assert_eq!(keys(port, &format!("{prefix}*")).await, Vec::<String>::new(), "lock records left on port {port}");
        for key in keys(port, &format!("*{{{prefix}*")).await {
            del(port, &key).await;
        }
    }
}

/// Redis instances owned by one test, killed when it ends.
struct Instances {
    ports: Vec<u16>,
    children: Vec<Option<Child>>,
}

impl Instances {
    /// `n` fresh instances, or `None` (skip with a note) without redis-server, unless FENCELOCK_REQUIRE_SERVICES=1.
    async fn start(n: usize) -> Option<Self> {
        if std::process::Command::new("redis-server").arg("--version").output().is_err() {
            assert_ne!(
                std::env::var("FENCELOCK_REQUIRE_SERVICES").as_deref(),
                Ok("1"),
                "redis-server is not installed"
            );
            support::skipped("redis-server is not installed");
            return None;
        }
        let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let mut children = Vec::new();
        for &port in &ports {
            children.push(Some(spawn_redis(port).await));
        }
        Some(Instances { ports, children })
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
        self.children[i] = Some(spawn_redis(self.ports[i]).await);
    }

    /// SIGSTOP or SIGCONT: a hung instance keeps its connections open but answers nothing.
    fn signal(&self, i: usize, signal: &str) {
        let pid = self.children[i].as_ref().and_then(Child::id).expect("instance is running");
        let status = std::process::Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status();
        assert!(status.unwrap().success(), "kill -{signal} {pid}");
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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts redis-server on `port` and returns once it says it accepts connections.
async fn spawn_redis(port: u16) -> Child {
    let mut child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("redis-server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("Ready to accept connections") {
                return true;
            }
        }
        false
    };
    let ready = tokio::time::timeout(Duration::from_secs(10), ready).await;
    assert_eq!(ready, Ok(true), "redis-server on port {port} did not become ready");
    // Keep reading its log so a full pipe never blocks it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else { return };
            let ((mut from_client, mut to_client), (mut from_server, mut to_server)) =
                (client.into_split(), server.into_split());
            tokio::spawn(async move { tokio::io::copy(&mut from_client, &mut to_server).await });
            tokio::spawn(async move {
                let mut buf = vec![0; 64 * 1024];
                while let Ok(n @ 1..) = from_server.read(&mut buf).await {
                    tokio::time::sleep(delay).await;
                    if to_client.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    proxy
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
    assert_eq!(instances.lock_records().await, Vec::<String>::new());
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
    assert!(err.message().contains("1 of 3 instances granted"), "{err}");
    // redis-rs's own reconnect loop would take seconds.
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert_eq!(held.renew(None).await.unwrap_err().kind(), ErrorKind::Unavailable);
    let err = Client::connect(&instances.url()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.message().contains("1 of 3 instances connected"), "{err}");
    held.release().await.unwrap_err();
    assert_eq!(instances.lock_records().await, Vec::<String>::new(), "clean-up reached the live instance");
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
    // The hung instance runs the queued acquire and release once resumed; nothing may be left.
    grant(&client, "h").await;
    assert_eq!(instances.lock_records().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_across_restarts_without_persistence() {
    let Some(mut instances) = Instances::start(3).await else { return };
    let url = instances.url();
    let t1 = grant(&Client::connect(&url).await.unwrap(), "t").await;

    // Instance 0 loses its data and re-seeds its counter from its clock: its token is now the largest.
    instances.kill(0).await;
    instances.restart(0).await;
    let t2 = grant(&Client::connect(&url).await.unwrap(), "t").await;
    assert!(t2 > t1 + 1, "the re-seeded instance should give the maximum: {t1} then {t2}");

    // Instance 0 dies again: the others only know t2 because the grant raised their counters to it.
    instances.kill(0).await;
    let t3 = grant(&Client::connect(&url).await.unwrap(), "t").await;
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
    assert_eq!(instances.lock_records().await, Vec::<String>::new());
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
