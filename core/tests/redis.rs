//! The Redis backend against a real redis-server: the Redisson RLock wire layout, pub/sub hand-off, token seeding
//! across data loss, and cancel safety.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions};
use redis::AsyncCommands;
use support::redis_tls::{self, TlsServer};
use tokio::time::Instant;

async fn setup() -> Option<(String, redis::aio::MultiplexedConnection)> {
    let url = support::service_url("FENCELOCK_TEST_REDIS")?;
    let raw = redis::Client::open(url.as_str()).unwrap().get_multiplexed_async_connection().await.unwrap();
    Some((url, raw))
}

#[tokio::test]
async fn records_use_the_redisson_layout() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("layout");
    let client = Client::connect(&url).await.unwrap();
    let lease =
        client.lock(&name, &LockOptions::default().owner("worker-7").ttl(Duration::from_secs(20))).await.unwrap();
    let fields: HashMap<String, i64> = raw.hgetall(&name).await.unwrap();
    assert_eq!(fields, HashMap::from([(format!("{}:worker-7", client.id()), 1)]));
    let pttl: i64 = raw.pttl(&name).await.unwrap();
    assert!((15_000..=20_000).contains(&pttl), "pttl {pttl}");
    let counter: u64 = raw.get(format!("redisson_lock_token:{{{name}}}")).await.unwrap();
    assert_eq!(counter, lease.fence());
    lease.release().await.unwrap();
    let exists: bool = raw.exists(&name).await.unwrap();
    assert!(!exists);
    let _: () = raw.del(format!("redisson_lock_token:{{{name}}}")).await.unwrap();
}

#[tokio::test]
async fn a_redisson_holder_excludes_us_and_its_unlock_message_wakes_us() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("redisson");
    // What Redisson's RLock writes: hash field "<uuid>:<thread id>" = hold count, with a TTL.
    let _: () = raw.hset(&name, "3f6c1d2e-redisson:42", 1).await.unwrap();
    let _: () = raw.pexpire(&name, 30_000).await.unwrap();
    let client = Client::connect(&url).await.unwrap();
    assert!(client.try_lock(&name, &LockOptions::default()).await.unwrap().is_none());
    let waiter = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move {
            let lease = client.lock(&name, &LockOptions::default().timeout(Duration::from_secs(20))).await.unwrap();
            (Instant::now(), lease)
        })
    };
    // Let the waiter subscribe: bounded by watching the channel's subscriber count.
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, n): (String, i64) =
            redis::cmd("PUBSUB").arg("NUMSUB").arg(&channel).query_async(&mut raw).await.unwrap();
        if n > 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Redisson's unlock: delete and publish 0 on the channel.
    let released_at = Instant::now();
    let _: () = raw.del(&name).await.unwrap();
    let _: () = raw.publish(&channel, 0).await.unwrap();
    let (acquired_at, lease) = waiter.await.unwrap();
    // Woken by the message, not by the 30 s TTL bound.
    assert!(acquired_at - released_at < Duration::from_secs(2), "hand-off took {:?}", acquired_at - released_at);
    lease.release().await.unwrap();
    let _: () = raw.del(format!("redisson_lock_token:{{{name}}}")).await.unwrap();
}

#[tokio::test]
async fn tokens_keep_rising_after_the_counter_is_lost() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("seed");
    let client = Client::connect(&url).await.unwrap();
    let first = client.lock(&name, &LockOptions::default()).await.unwrap();
    first.release().await.unwrap();
    // A restart without persistence loses the counter; the next grant seeds it from the server clock.
    let _: () = raw.del(format!("redisson_lock_token:{{{name}}}")).await.unwrap();
    let second = client.lock(&name, &LockOptions::default()).await.unwrap();
    assert!(second.fence() > first.fence(), "{} <= {}", second.fence(), first.fence());
    second.release().await.unwrap();
    let _: () = raw.del(format!("redisson_lock_token:{{{name}}}")).await.unwrap();
}

/// The server's TIME in µs.
async fn server_micros(raw: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(raw).await.unwrap();
    s * 1_000_000 + us
}

#[tokio::test]
async fn tokens_follow_the_server_clock_and_a_counter_ahead_of_it() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("clock");
    let counter = format!("redisson_lock_token:{{{name}}}");
    let client = Client::connect(&url).await.unwrap();
    // A counter behind the clock (a promoted replica that missed grants): the token is the clock, not 8.
    let _: () = raw.set(&counter, 7).await.unwrap();
    let before = server_micros(&mut raw).await;
    let lease = client.lock(&name, &LockOptions::default()).await.unwrap();
    let after = server_micros(&mut raw).await;
    assert!((before..=after).contains(&lease.fence()), "{before} <= {} <= {after}", lease.fence());
    let stored: String = raw.get(&counter).await.unwrap();
    assert_eq!(stored, lease.fence().to_string(), "the counter is the token, in decimal");
    lease.release().await.unwrap();
    // A counter ahead of the clock: +1, and Redisson's INCR still works on what we stored.
    let ahead = after + 10_000_000_000;
    let _: () = raw.set(&counter, ahead).await.unwrap();
    let lease = client.lock(&name, &LockOptions::default()).await.unwrap();
    assert_eq!(lease.fence(), ahead + 1);
    lease.release().await.unwrap();
    let incr: u64 = raw.incr(&counter, 1).await.unwrap();
    assert_eq!(incr, ahead + 2);
    let _: () = raw.del(&counter).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_acquires_leave_no_lock_and_no_subscription() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("abort");
    let holder = Client::connect(&url).await.unwrap();
    let contender = Client::connect(&url).await.unwrap();
    // Half the rounds contend with a holder (aborting waiters), half abort an acquire that would succeed.
    let hold = |i: u32| {
        let (holder, name) = (holder.clone(), name.clone());
        async move {
            if i.is_multiple_of(2) { Some(holder.lock(&name, &LockOptions::default()).await.unwrap()) } else { None }
        }
    };
    let contend = || {
        let (c, n) = (contender.clone(), name.clone());
        async move { c.lock(&n, &LockOptions::default()).await }
    };
    abort_rounds(60, 150, hold, contend).await;
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let exists: bool = raw.exists(&name).await.unwrap();
        let (_, subs): (String, i64) =
            redis::cmd("PUBSUB").arg("NUMSUB").arg(&channel).query_async(&mut raw).await.unwrap();
        if !exists && subs == 0 && contender.local_entries() == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left behind: lock {exists}, subscribers {subs}, local {}",
            contender.local_entries()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _: () = raw.del(format!("redisson_lock_token:{{{name}}}")).await.unwrap();
}

#[tokio::test]
async fn unreachable_server_is_unavailable_quickly() {
    let started = Instant::now();
    let err = Client::connect("redis://127.0.0.1:1").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.message().contains("127.0.0.1:1"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

#[tokio::test]
async fn fence_tokens_above_2_pow_53_compare_exactly() {
    let Some((url, mut raw)) = setup().await else { return };
    let client = Client::connect(&url).await.unwrap();
    const P53: u64 = 1 << 53;
    // Each pair is equal as a double (Lua's tonumber) but not as an integer: the second, older token is fenced.
    for (newer, older) in [(P53 + 2, P53 + 1), (P53 + 1, P53), (P53 + 5, P53 + 4), (u64::MAX, u64::MAX - 1)] {
        let resource = support::unique("fence-2^53");
        let fence = client.fence(&resource);
        fence.write(newer, b"newer").await.unwrap();
        let err = fence.write(older, b"older").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Fenced, "{older} after {newer}: {err}");
        fence.write(newer, b"same token").await.unwrap();
        assert_eq!(fence.read().await.unwrap(), (newer, b"same token".to_vec()));
        let _: () = raw.del(format!("fencelock_fence:{{{resource}}}")).await.unwrap();
    }
    client.close().await;
}

/// `FENCELOCK_TEST_REDIS_TLS` accepts TLS only and requires a password: an ACL user's, or the default user's
/// (`requirepass`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_an_acl_user_or_requirepass_locks_fences_and_wakes() {
    let Some(server) = TlsServer::from_env("FENCELOCK_TEST_REDIS_TLS") else { return };
    redis_tls::locks_fence_and_wake(&server, &server.with_ca(""), false).await;
    let default_user = server.with_ca("").replacen(&format!("fencelock:{}@", redis_tls::PASSWORD), ":default-pw@", 1);
    let client = Client::connect_with(&default_user, &redis_tls::opts()).await.unwrap();
    let lease = client.lock(&support::unique("requirepass"), &LockOptions::default()).await.unwrap();
    lease.release().await.unwrap();
    client.close().await;
}

#[tokio::test]
async fn a_plaintext_url_to_a_tls_port_is_refused_with_a_hint() {
    let Some(server) = TlsServer::from_env("FENCELOCK_TEST_REDIS_TLS") else { return };
    redis_tls::refuses_plaintext(&server, "use rediss://").await;
}

#[tokio::test]
async fn a_wrong_ca_is_refused() {
    let Some(server) = TlsServer::from_env("FENCELOCK_TEST_REDIS_TLS") else { return };
    redis_tls::refuses_a_wrong_ca(&server).await;
}

#[tokio::test]
async fn a_wrong_password_is_refused_for_good() {
    let Some(server) = TlsServer::from_env("FENCELOCK_TEST_REDIS_TLS") else { return };
    redis_tls::refuses_a_wrong_password(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_credentials_a_wrong_name_and_misplaced_parameters_are_refused() {
    let Some(server) = TlsServer::from_env("FENCELOCK_TEST_REDIS_TLS") else { return };
    let good = server.with_ca("");
    // No credentials at all: the server refuses the first command (NOAUTH), and connect asks one.
    let anonymous = good.replacen(&format!("fencelock:{}@", redis_tls::PASSWORD), "", 1);
    redis_tls::refused(&anonymous, ErrorKind::InvalidArgument, "authentication failed for").await;
    let default_wrong = good.replacen(&format!("fencelock:{}@", redis_tls::PASSWORD), ":wrong-pw-42@", 1);
    redis_tls::refused(&default_wrong, ErrorKind::InvalidArgument, "authentication failed for").await;
    // The right CA, another name: the certificate is for 127.0.0.1 only.
    let other_name = good.replacen("127.0.0.1", "localhost", 1);
    redis_tls::refused(&other_name, ErrorKind::InvalidArgument, "TLS handshake refused").await;
    // TLS files on a plaintext URL are a mistake, found before connecting.
    redis_tls::refused(&redis_tls::plaintext(&good), ErrorKind::InvalidArgument, "ca= given but TLS is off").await;
    redis_tls::refused(&format!("{good}#insecure"), ErrorKind::InvalidArgument, "fragment").await;
    // TLS to a plaintext port: the server takes the handshake for a command that never ends, and answers nothing.
    if let Ok(plain) = std::env::var("FENCELOCK_TEST_REDIS") {
        let tls_to_plain = format!("{}?ca={}", plain.replacen("redis://", "rediss://", 1), server.ca);
        let opts = fencelock::ClientOptions::default().connect_timeout(Duration::from_secs(1));
        redis_tls::refused_with(&tls_to_plain, &opts, ErrorKind::Unavailable, "may be a plaintext port").await;
    }
    redis_tls::refused(&format!("{good}&tls=true"), ErrorKind::InvalidArgument, "unknown parameters [\"tls\"]").await;
}

/// `FENCELOCK_TEST_REDIS_MTLS` requires a client certificate its CA signed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_and_given() {
    let Some(server) = TlsServer::from_env("FENCELOCK_TEST_REDIS_MTLS") else { return };
    let var = |v: &str| std::env::var(v).unwrap_or_else(|_| panic!("{v} is set with FENCELOCK_TEST_REDIS_MTLS"));
    let (cert, key) = (&server.cert, &server.key);
    let (rogue_cert, rogue_key) = (var("FENCELOCK_TEST_ROGUE_CERT"), var("FENCELOCK_TEST_ROGUE_KEY"));
    redis_tls::refused(&server.with_ca(""), ErrorKind::InvalidArgument, "TLS handshake refused").await;
    let rogue = server.with_ca(&format!("&cert={rogue_cert}&key={rogue_key}"));
    redis_tls::refused(&rogue, ErrorKind::InvalidArgument, "TLS handshake refused").await;
    redis_tls::refused(&server.with_ca(&format!("&cert={cert}")), ErrorKind::InvalidArgument, "go together").await;
    redis_tls::locks_fence_and_wake(&server, &server.with_ca(&format!("&cert={cert}&key={key}")), false).await;
}

/// Credentials that stop working after connect (an ACL narrowed, a password changed) are `INVALID_ARGUMENT` on the
/// next request too, never a retryable `UNAVAILABLE` once the connection that still worked is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_revoked_after_connect_are_not_retryable() {
    let Some(server) = TlsServer::from_env("FENCELOCK_TEST_REDIS_TLS") else { return };
    let host = redis_tls::hosts(&server.url).remove(0);
    let mut admin = redis_tls::raw(&server, &host).await;
    let user = support::unique("acl");
    let acl = |args: &[&str]| {
        let mut cmd = redis::cmd("ACL");
        cmd.arg(args);
        cmd
    };
    let _: () =
        acl(&["SETUSER", &user, "on", ">first-pw-1", "~*", "&*", "+@all"]).query_async(&mut admin).await.unwrap();
    let url =
        server.with_ca("").replacen(&format!("fencelock:{}@", redis_tls::PASSWORD), &format!("{user}:first-pw-1@"), 1);
    let client = Client::connect_with(&url, &redis_tls::opts()).await.unwrap();
    client.close().await;
    // The PING that checks the login at connect is not needed by the locks: a user without it still connects.
    let _: () = acl(&["SETUSER", &user, "-ping"]).query_async(&mut admin).await.unwrap();
    let client = Client::connect_with(&url, &redis_tls::opts()).await.unwrap();
    let name = support::unique("revoked");
    client.try_lock(&name, &LockOptions::default()).await.unwrap().unwrap().release().await.unwrap();

    let _: () = acl(&["SETUSER", &user, "-@scripting"]).query_async(&mut admin).await.unwrap();
    let err = client.try_lock(&name, &LockOptions::default()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("may not"), "{err}");

    let _: () = acl(&["SETUSER", &user, "+@all", "resetpass", ">second-pw-2"]).query_async(&mut admin).await.unwrap();
    let _: i64 = redis::cmd("CLIENT").arg("KILL").arg("USER").arg(&user).query_async(&mut admin).await.unwrap();
    // The first request may meet the killed connection; the reconnect then meets the new password. (inspect, not
    // try_lock: the clean-up of a failed acquire holds the name's local queue place until it gives up.)
    let deadline = Instant::now() + Duration::from_secs(10);
    let err = loop {
        let err = client.inspect(&name).await.map(drop).unwrap_err();
        if err.kind() != ErrorKind::Unavailable || Instant::now() > deadline {
            break err;
        }
    };
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("authentication failed for") && !err.message().contains("first-pw-1"), "{err}");
    println!("after the password changed: {err}");
    client.close().await;
    let _: i64 = acl(&["DELUSER", &user]).query_async(&mut admin).await.unwrap();
}

/// A TLS URL to a server that accepts the connection and never answers: the connect timeout bounds the handshake.
#[tokio::test]
async fn a_silent_server_costs_the_connect_timeout_not_forever() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let opts = fencelock::ClientOptions::default().connect_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let err = Client::connect_with(&format!("rediss://u:sekrit@{}", silent.local_addr().unwrap()), &opts).await;
    let err = err.map(drop).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(!err.message().contains("sekrit"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
}

// Read-write locks and semaphores: Redisson RReadWriteLock's and RPermitExpirableSemaphore's layouts.

/// Waits (bounded) until `channel` has a subscriber: a waiter is then listening.
async fn wait_subscribed(raw: &mut redis::aio::MultiplexedConnection, channel: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, n): (String, i64) = redis::cmd("PUBSUB").arg("NUMSUB").arg(channel).query_async(raw).await.unwrap();
        if n > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "nobody subscribed to {channel}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Rounds of a contender's acquire aborted after a jittered delay, while `hold(round)` holds (or not): whatever the
/// contender was granted is released, so what is left on the server is what the aborted attempts left.
async fn abort_rounds<H, HF, C, CF>(rounds: u32, step_us: u64, hold: H, contend: C)
where
    H: Fn(u32) -> HF,
    HF: Future<Output = Option<fencelock::Lease>>,
    C: Fn() -> CF,
    CF: Future<Output = fencelock::Result<fencelock::Lease>> + Send + 'static,
{
    for i in 0..rounds {
        let held = hold(i).await;
        let task = tokio::spawn(contend());
        tokio::time::sleep(Duration::from_micros(u64::from(i % 10) * step_us)).await;
        task.abort();
        if let Ok(Ok(lease)) = task.await {
            lease.release().await.unwrap();
        }
        if let Some(h) = held {
            h.release().await.unwrap();
        }
    }
}

/// Deletes the side keys a read-write lock or semaphore test leaves (the counters live on by design).
async fn clean(raw: &mut redis::aio::MultiplexedConnection, name: &str) {
    let keys: Vec<String> = [
        "redisson_lock_token",
        "fencelock_rw_epoch",
        "fencelock_rw_writers",
        "fencelock_sem_slots",
        "fencelock_sem_tokens",
        "fencelock_sem_permits",
    ]
    .iter()
    .map(|p| format!("{p}:{{{name}}}"))
    .chain([name.to_string(), format!("{{{name}}}:timeout")])
    .collect();
    let _: () = raw.del(keys).await.unwrap();
}

#[tokio::test]
async fn rw_locks_use_the_redisson_layout() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("rw-layout");
    let client = Client::connect(&url).await.unwrap();
    let rw = client.rw_lock(&name);
    let read = rw.read(&LockOptions::default().owner("r").ttl(Duration::from_secs(20))).await.unwrap();
    let fields: HashMap<String, String> = raw.hgetall(&name).await.unwrap();
    let reader = format!("{}:r", client.id());
    assert_eq!(read.holder(), reader);
    assert_eq!(fields, HashMap::from([("mode".into(), "read".into()), (reader.clone(), "1".into())]));
    let timeout = format!("{{{name}}}:{reader}:rwlock_timeout:1");
    let pttl: i64 = raw.pttl(&timeout).await.unwrap();
    assert!((15_000..=20_000).contains(&pttl), "timeout key pttl {pttl}");
    let epoch: u64 = raw.get(format!("fencelock_rw_epoch:{{{name}}}")).await.unwrap();
    assert_eq!(epoch, read.fence());
    read.release().await.unwrap();
    let exists: bool = raw.exists(&name).await.unwrap();
    let timeout_left: bool = raw.exists(&timeout).await.unwrap();
    assert!(!exists && !timeout_left);

    let write = rw.write(&LockOptions::default().owner("w").ttl(Duration::from_secs(20))).await.unwrap();
    let fields: HashMap<String, String> = raw.hgetall(&name).await.unwrap();
    let writer = format!("{}:w:write", client.id());
    assert_eq!(fields, HashMap::from([("mode".into(), "write".into()), (writer, "1".into())]));
    let pttl: i64 = raw.pttl(&name).await.unwrap();
    assert!((15_000..=20_000).contains(&pttl), "pttl {pttl}");
    assert!(write.fence() > read.fence());
    let info = client.inspect(&name).await.unwrap();
    assert_eq!(info.holder.as_deref(), Some(write.holder()));
    write.release().await.unwrap();
    clean(&mut raw, &name).await;
}

#[tokio::test]
async fn readers_share_an_epoch_a_writer_excludes_them_and_each_epoch_is_later() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("rw-epoch");
    let (a, b) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());
    let opts = LockOptions::default();
    let r1 = a.rw_lock(&name).read(&opts).await.unwrap();
    let r2 = b.rw_lock(&name).try_read(&opts).await.unwrap().expect("readers share");
    assert_eq!(r1.fence(), r2.fence(), "one run of overlapping reads, one token");
    assert!(b.rw_lock(&name).try_write(&opts).await.unwrap().is_none());
    r1.release().await.unwrap();
    // The run goes on while r2 holds: a reader joining it still shares the token.
    let r3 = a.rw_lock(&name).try_read(&opts).await.unwrap().unwrap();
    assert_eq!(r3.fence(), r2.fence());
    assert!(a.try_lock(&name, &opts).await.unwrap().is_none(), "a mutex of the same name is excluded too");
    r2.release().await.unwrap();
    r3.release().await.unwrap();
    let w = b.rw_lock(&name).try_write(&opts).await.unwrap().unwrap();
    assert!(w.fence() > r3.fence());
    assert!(a.rw_lock(&name).try_read(&opts).await.unwrap().is_none());
    assert!(a.rw_lock(&name).try_write(&opts).await.unwrap().is_none());
    w.release().await.unwrap();
    let r4 = a.rw_lock(&name).try_read(&opts).await.unwrap().unwrap();
    assert!(r4.fence() > w.fence(), "a new run of reads draws a new token");
    // A stale writer is fenced by the later read epoch.
    a.fence(&name).write(r4.fence(), b"r4").await.unwrap();
    let err = b.fence(&name).write(w.fence(), b"w").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced);
    r4.release().await.unwrap();
    let _: () = raw.del(format!("fencelock_fence:{{{name}}}")).await.unwrap();
    clean(&mut raw, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writer_blocks_new_readers_of_another_client_until_it_has_written() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("rw-pref");
    let (a, b) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());
    let r = a.rw_lock(&name).read(&LockOptions::default()).await.unwrap();
    let writer = {
        let (b, name) = (b.clone(), name.clone());
        tokio::spawn(
            async move { b.rw_lock(&name).write(&LockOptions::default().timeout(Duration::from_secs(20))).await },
        )
    };
    // The writer's mark, with a server-clock deadline: the event that it waits.
    let marks = format!("fencelock_rw_writers:{{{name}}}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while raw.zcard::<_, i64>(&marks).await.unwrap() == 0 {
        assert!(Instant::now() < deadline, "the writer never marked itself as waiting");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(a.rw_lock(&name).try_read(&LockOptions::default()).await.unwrap().is_none(), "a new reader passed");
    assert_eq!(a.inspect(&name).await.unwrap().waiters, Some(1), "the writer listens on the rw lock's channel");
    let released = Instant::now();
    r.release().await.unwrap();
    let w = writer.await.unwrap().unwrap();
    assert!(released.elapsed() < Duration::from_secs(2), "woken after {:?}", released.elapsed());
    assert!(w.fence() > r.fence());
    let left: i64 = raw.zcard(&marks).await.unwrap();
    assert_eq!(left, 0, "a granted writer removes its mark");
    w.release().await.unwrap();
    clean(&mut raw, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_readers_and_writers_exclude_us_and_their_unlock_wakes_us() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("rw-redisson");
    let client = Client::connect(&url).await.unwrap();
    // What Redisson's read lock writes for a holder "<uuid>:<thread>".
    let reader = "5e1f-redisson:7";
    let timeout = format!("{{{name}}}:{reader}:rwlock_timeout:1");
    let _: () = raw.hset_multiple(&name, &[("mode", "read"), (reader, "1")]).await.unwrap();
    let _: () = raw.pset_ex(&timeout, 1, 30_000).await.unwrap();
    let _: () = raw.pexpire(&name, 30_000).await.unwrap();
    let rw = client.rw_lock(&name);
    let ours = rw.try_read(&LockOptions::default()).await.unwrap().expect("readers share with Redisson's");
    ours.release().await.unwrap();
    let fields: HashMap<String, String> = raw.hgetall(&name).await.unwrap();
    assert_eq!(fields.get(reader).map(String::as_str), Some("1"), "our release left Redisson's reader alone");
    let writer = {
        let rw = rw.clone();
        tokio::spawn(async move {
            let lease = rw.write(&LockOptions::default().timeout(Duration::from_secs(20))).await.unwrap();
            (Instant::now(), lease)
        })
    };
    let channel = format!("redisson_rwlock:{{{name}}}");
    wait_subscribed(&mut raw, &channel).await;
    // Redisson's read unlock of the last reader: delete, publish 0.
    let released_at = Instant::now();
    let _: () = raw.del(&[name.as_str(), timeout.as_str()]).await.unwrap();
    let _: () = raw.publish(&channel, 0).await.unwrap();
    let (acquired_at, w) = writer.await.unwrap();
    assert!(acquired_at - released_at < Duration::from_secs(2), "hand-off took {:?}", acquired_at - released_at);
    w.release().await.unwrap();
    // Redisson's write lock excludes our readers.
    let _: () = raw.hset_multiple(&name, &[("mode", "write"), ("5e1f-redisson:7:write", "1")]).await.unwrap();
    let _: () = raw.pexpire(&name, 30_000).await.unwrap();
    assert!(rw.try_read(&LockOptions::default()).await.unwrap().is_none());
    assert!(rw.try_write(&LockOptions::default()).await.unwrap().is_none());
    assert!(client.force_release(&name).await.unwrap());
    assert!(rw.try_write(&LockOptions::default()).await.unwrap().unwrap().release().await.is_ok());
    clean(&mut raw, &name).await;
}

#[tokio::test]
async fn a_crashed_reader_frees_the_lock_at_its_ttl() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("rw-crash");
    let (a, b) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());
    let ttl = Duration::from_millis(800);
    // A reader that stops renewing: its lease is forgotten, as a crashed process's would be.
    let crashed = a.rw_lock(&name).read(&LockOptions::default().ttl(ttl).watchdog(false)).await.unwrap();
    let live = b.rw_lock(&name).read(&LockOptions::default()).await.unwrap();
    std::mem::forget(crashed);
    live.release().await.unwrap();
    let started = Instant::now();
    let w = b.rw_lock(&name).write(&LockOptions::default().timeout(Duration::from_secs(10))).await.unwrap();
    let waited = started.elapsed();
    assert!(waited < ttl + Duration::from_secs(1), "waited {waited:?}");
    assert!(w.fence() > live.fence());
    w.release().await.unwrap();
    clean(&mut raw, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_rw_acquires_leave_no_hold_and_no_mark() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("rw-abort");
    let (holder, contender) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());
    let hold = |_| async { Some(holder.rw_lock(&name).read(&LockOptions::default()).await.unwrap()) };
    let contend = || {
        let (c, n) = (contender.clone(), name.clone());
        async move { c.rw_lock(&n).write(&LockOptions::default()).await }
    };
    abort_rounds(40, 300, hold, contend).await;
    let marks = format!("fencelock_rw_writers:{{{name}}}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let exists: bool = raw.exists(&name).await.unwrap();
        let marked: i64 = raw.zcard(&marks).await.unwrap();
        if !exists && marked == 0 && contender.local_entries() == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "left behind: lock {exists}, marks {marked}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    clean(&mut raw, &name).await;
}

#[tokio::test]
async fn semaphores_use_the_redisson_layout_and_count_redisson_permits() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("sem-layout");
    let client = Client::connect(&url).await.unwrap();
    let sem = client.semaphore(&name, 3);
    let p = sem.acquire(&LockOptions::default().ttl(Duration::from_secs(20))).await.unwrap();
    assert_eq!(p.slot(), Some(0));
    let count: String = raw.get(&name).await.unwrap();
    assert_eq!(count, "2", "the count string holds the permits available");
    let ids: Vec<(String, f64)> = raw.zrange_withscores(format!("{{{name}}}:timeout"), 0, -1).await.unwrap();
    assert_eq!(ids.len(), 1);
    let (time_s, _): (u64, u64) = redis::cmd("TIME").query_async(&mut raw).await.unwrap();
    let expires_in = ids[0].1 / 1000.0 - time_s as f64;
    assert!((14.0..=21.0).contains(&expires_in), "expiry {expires_in} s from now");
    // The member is the holder id's bytes; Redisson's API shows a member as its bytes in hex.
    assert_eq!(ids[0].0, p.holder());
    let slots: HashMap<String, String> = raw.hgetall(format!("fencelock_sem_slots:{{{name}}}")).await.unwrap();
    assert_eq!(slots, HashMap::from([("0".to_string(), ids[0].0.clone())]));
    let n: u32 = raw.get(format!("fencelock_sem_permits:{{{name}}}")).await.unwrap();
    assert_eq!(n, 3);
    // A Redisson client's permit: decrement the count, add the id with its expiry.
    let _: () = raw.decr(&name, 1).await.unwrap();
    let redisson_id: &[u8] = &[0xc0, 0xff, 0xee, 0x01];
    let _: () = raw.zadd(format!("{{{name}}}:timeout"), redisson_id, (time_s + 30) * 1000).await.unwrap();
    assert_eq!(sem.available().await.unwrap(), 1);
    let q = sem.try_acquire(&LockOptions::default()).await.unwrap().unwrap();
    assert_eq!(q.slot(), Some(1), "Redisson's permit occupies no slot");
    assert!(sem.try_acquire(&LockOptions::default()).await.unwrap().is_none(), "Redisson's permit counts");
    // Our release publishes the new count on Redisson's channel, as Redisson's does.
    let mut pubsub = redis::Client::open(url.as_str()).unwrap().get_async_pubsub().await.unwrap();
    pubsub.subscribe(format!("redisson_sc:{{{name}}}")).await.unwrap();
    p.release().await.unwrap();
    let msg = futures::StreamExt::next(&mut pubsub.on_message()).await.unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), "1");
    q.release().await.unwrap();
    let count: String = raw.get(&name).await.unwrap();
    assert_eq!(count, "2");
    clean(&mut raw, &name).await;
}

#[tokio::test]
async fn slot_tokens_rise_and_a_mismatched_permit_count_is_refused() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("sem-slots");
    let (a, b) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());
    let mut last = 0;
    for _ in 0..5 {
        let p = a.semaphore(&name, 2).acquire(&LockOptions::default()).await.unwrap();
        assert_eq!(p.slot(), Some(0));
        assert!(p.fence() > last, "slot 0's token went from {last} to {}", p.fence());
        last = p.fence();
        p.release().await.unwrap();
    }
    let held = a.semaphore(&name, 2).acquire(&LockOptions::default()).await.unwrap();
    let err = b.semaphore(&name, 3).try_acquire(&LockOptions::default()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains('2') && err.message().contains('3'), "{err}");
    let err = b.semaphore(&name, 3).available().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(b.semaphore(&name, 2).available().await.unwrap(), 1);
    held.release().await.unwrap();
    // A semaphore's name is no read-write lock.
    let err = b.rw_lock(&name).try_write(&LockOptions::default()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    // A name that holds a mutex is no semaphore, and the mutex is left alone.
    clean(&mut raw, &name).await;
    let lock = a.lock(&name, &LockOptions::default()).await.unwrap();
    let err = b.semaphore(&name, 2).try_acquire(&LockOptions::default()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("not a semaphore"), "{err}");
    assert!(b.rw_lock(&name).try_read(&LockOptions::default()).await.unwrap().is_none());
    lock.release().await.unwrap();
    clean(&mut raw, &name).await;
}

#[tokio::test]
async fn a_crashed_permit_frees_at_its_ttl_and_not_before() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("sem-crash");
    let (a, b) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());
    let ttl = Duration::from_millis(800);
    let started = Instant::now();
    let crashed = a.semaphore(&name, 1).acquire(&LockOptions::default().ttl(ttl).watchdog(false)).await.unwrap();
    let token = crashed.fence();
    std::mem::forget(crashed);
    let p = b.semaphore(&name, 1).acquire(&LockOptions::default().timeout(Duration::from_secs(10))).await.unwrap();
    let waited = started.elapsed();
    assert!(waited >= ttl - ttl / 100 - Duration::from_millis(2), "freed after {waited:?}, before its TTL");
    assert!(waited < ttl + Duration::from_secs(1), "freed after {waited:?}");
    assert_eq!(p.slot(), Some(0));
    assert!(p.fence() > token);
    p.release().await.unwrap();
    assert_eq!(b.semaphore(&name, 1).available().await.unwrap(), 1);
    clean(&mut raw, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_permit_acquires_leave_nothing() {
    let Some((url, mut raw)) = setup().await else { return };
    let name = support::unique("sem-abort");
    let (holder, contender) = (Client::connect(&url).await.unwrap(), Client::connect(&url).await.unwrap());
    // Half the rounds abort a waiter, half an acquire that would succeed.
    let sem = holder.semaphore(&name, 1);
    let hold = |i: u32| {
        let sem = sem.clone();
        async move { if i.is_multiple_of(2) { Some(sem.acquire(&LockOptions::default()).await.unwrap()) } else { None } }
    };
    let contend = || {
        let (c, n) = (contender.clone(), name.clone());
        async move { c.semaphore(&n, 1).acquire(&LockOptions::default()).await }
    };
    abort_rounds(40, 150, hold, contend).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let count: String = raw.get(&name).await.unwrap();
        let out: i64 = raw.zcard(format!("{{{name}}}:timeout")).await.unwrap();
        if count == "1" && out == 0 && contender.local_entries() == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "left behind: count {count}, permits out {out}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    clean(&mut raw, &name).await;
}

/// A renewal after the server restarted empty says the lock is lost, though the connection it goes out on died with
/// the old server: the failure that finds the connection dead remakes it, and the renewal is tried again at once
/// rather than a retry later, when the network may be gone too (a faults run lost a notification that way).
#[tokio::test]
async fn a_renewal_after_the_server_restarted_empty_says_lost() {
    if !support::own_redis::installed() {
        return;
    }
    let port = support::own_redis::free_port();
    let mut server = support::own_redis::spawn_granting(port).await;
    let client = Client::connect(&format!("redis://127.0.0.1:{port}")).await.unwrap();
    let lease = client.lock("restarted", &LockOptions::default().watchdog(false)).await.unwrap();
    server.kill().await.unwrap();
    let _server = support::own_redis::spawn(port).await;
    let err = lease.renew(None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert!(lease.is_lost(), "the lease knows it is lost");
}

/// A register fails closed across a restart without persistence: the write of the newer grant is lost with the
/// data, and the paused older holder's write is refused all the same, since its token is below the restarted
/// server's start floor. Without the floor the empty register takes it. A grant made after the restart writes.
#[tokio::test]
async fn a_register_refuses_tokens_from_before_a_restart_that_lost_it() {
    if !support::own_redis::installed() {
        return;
    }
    let port = support::own_redis::free_port();
    let mut server = support::own_redis::spawn_granting(port).await;
    let url = format!("redis://127.0.0.1:{port}");
    let client = Client::connect(&url).await.unwrap();
    let opts = LockOptions::default().watchdog(false);
    let older = client.lock("reg", &opts).await.unwrap().fence();
    // The older holder is deposed (its record deleted, as an expiry would), and the newer one writes.
    let mut raw = redis::Client::open(url.as_str()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let _: () = raw.del("reg").await.unwrap();
    let newer = client.lock("reg", &opts).await.unwrap().fence();
    let register = client.fence("reg-register");
    register.write(newer, b"newer").await.unwrap();
    let err = register.write(older, b"stale").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");

    support::own_redis::past_first_second(port).await;
    server.kill().await.unwrap();
    let _server = support::own_redis::spawn(port).await;
    for (token, who) in [(older, "the deposed holder"), (newer, "the holder whose record the restart lost")] {
        support::refused_after_loss(&register, token, who).await;
    }
    support::own_redis::past_first_second(port).await;
    let after = client.lock("reg", &opts).await.unwrap();
    assert!(after.fence() > newer, "{} <= {newer}", after.fence());
    register.write(after.fence(), b"after").await.unwrap();
    assert_eq!(register.read().await.unwrap(), (after.fence(), b"after".to_vec()));
    after.release().await.unwrap();
}

/// A grant, retried (bounded) while the server refuses it in its first second: the refusals' messages.
async fn grant_when_ready(client: &Client, name: &str) -> (u64, Vec<String>) {
    let opts = LockOptions::default().watchdog(false);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut refusals = Vec::new();
    loop {
        match client.lock(name, &opts).await {
            Ok(lease) => {
                let token = lease.fence();
                lease.release().await.unwrap();
                return (token, refusals);
            }
            Err(e) if e.kind() == ErrorKind::Unavailable && Instant::now() < deadline => {
                refusals.push(e.message().to_string());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// No token twice across two starts of a server within one wall-clock second. Both starts have the same start
/// floor (whole seconds: INFO's uptime), so the server grants nothing while its clock is below the floor: before,
/// the first grant after a start was the floor itself, ahead of the clock, and the successor granted it again
/// (the faults suite's seed 7: a server-kill half a second after a restart gave readers a writer's token).
#[tokio::test]
async fn two_starts_within_one_second_never_grant_a_token_twice() {
    if !support::own_redis::installed() {
        return;
    }
    // Early in a wall-clock second, so that the restart below most likely falls within the same one.
    let ms = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_millis();
    let deadline = Instant::now() + Duration::from_secs(2);
    while ms() > 100 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let port = support::own_redis::free_port();
    let mut server = support::own_redis::spawn(port).await;
    let client = Client::connect(&format!("redis://127.0.0.1:{port}")).await.unwrap();
    let (first, refused) = grant_when_ready(&client, "same-second").await;
    for m in &refused {
        assert!(m.contains("started less than a second ago") || m.contains("connect"), "{m}");
    }
    server.kill().await.unwrap();
    let _server = support::own_redis::spawn(port).await;
    let (second, _) = grant_when_ready(&client, "same-second").await;
    assert!(second > first, "a token again after a restart: {first} then {second}");
}
