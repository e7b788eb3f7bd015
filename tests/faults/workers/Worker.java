// The JVM client worker of the safety suite: the same loop and JSON-lines protocol as the Rust worker
// (tests/faults/src/worker.rs, described in tests/faults/README.md), on the jar's FencelockClient.
//
// Timestamps are System.nanoTime(), CLOCK_MONOTONIC on Linux like every worker's (JVM workers never get a faked
// clock). Events go to stdout under one lock: lost signals complete on the common pool. The referee is a TCP
// connection speaking one JSON object per line; its reply is only ever {"ok": ..., "values": [a, b, c]}, so the
// worker reads the three integers without a JSON library. Built by tests/faults/run.sh into target/faults/jworker.

import dev.fencelock.ErrorKind;
import dev.fencelock.FencelockClient;
import dev.fencelock.FencelockElection;
import dev.fencelock.FencelockReadWriteLock;
import dev.fencelock.FencelockSemaphore;
import dev.fencelock.Lease;
import dev.fencelock.LockException;
import dev.fencelock.LockOptions;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public final class Worker {
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    private static final Pattern VALUES = Pattern.compile("\"values\"\\s*:\\s*\\[\\s*(-?\\d+)\\s*,\\s*(-?\\d+)\\s*,\\s*(-?\\d+)\\s*]");

    private static String clientId;
    private static long pid;
    private static long seq;
    private static volatile boolean stopping;

    private final Map<String, String> args;
    private final Random rng;
    private final double ttl;
    private final LockOptions options;
    /** No lost check before a write: the canary's user, whom only fencing protects. */
    private final boolean careless;
    private BufferedReader refereeIn;
    private Writer refereeOut;

    private Worker(Map<String, String> args) {
        this.args = args;
        this.careless = args.containsKey("--careless");
        this.rng = new Random(Long.parseLong(args.get("--seed")) ^ pid);
        long ttlMs = Long.parseLong(args.get("--ttl-ms"));
        this.ttl = ttlMs / 1000.0;
        this.options = LockOptions.defaults()
                .withTtl(Duration.ofMillis(ttlMs))
                .withTimeout(Duration.ofMillis(3 * ttlMs))
                .withOwner(clientId + "-main");
    }

    private static String quote(String s) {
        // Sessions, error kinds and client ids are plain ASCII; escape the two characters JSON requires anyway.
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    /** One event; session, error and hold may be null, token 0 and slot -1 mean absent. */
    private static void emit(String kind, String f, String session, long token, String error, String hold, int slot) {
        synchronized (OUT) {
            StringBuilder e = new StringBuilder(192);
            e.append("{\"src\":\"worker\",\"type\":").append(quote(kind)).append(",\"f\":").append(quote(f))
                    .append(",\"client\":").append(quote(clientId)).append(",\"lang\":\"java\",\"pid\":").append(pid)
                    .append(",\"seq\":").append(seq++).append(",\"t_ref\":").append(System.nanoTime());
            if (session != null) e.append(",\"session\":").append(quote(session));
            if (token != 0) e.append(",\"token\":").append(Long.toUnsignedString(token));
            if (error != null) e.append(",\"error\":").append(quote(error));
            if (hold != null) e.append(",\"hold\":").append(quote(hold));
            if (slot >= 0) e.append(",\"slot\":").append(slot);
            OUT.println(e.append('}'));
            OUT.flush();
        }
    }

    private static String code(LockException e) {
        ErrorKind kind = e.kind();
        return kind == null ? "INTERNAL" : kind.name();
    }

    private double uniform(double lo, double hi) {
        return lo + (hi - lo) * rng.nextDouble();
    }

    private static void sleep(double seconds) throws InterruptedException {
        Thread.sleep((long) (seconds * 1000));
    }

    private void connectReferee() throws Exception {
        String addr = args.get("--referee");
        int colon = addr.lastIndexOf(':');
        Socket socket = new Socket(addr.substring(0, colon), Integer.parseInt(addr.substring(colon + 1)));
        refereeIn = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
        refereeOut = new OutputStreamWriter(socket.getOutputStream(), StandardCharsets.UTF_8);
    }

    private long[] call(String request) throws Exception {
        refereeOut.write(request);
        refereeOut.write('\n');
        refereeOut.flush();
        String reply = refereeIn.readLine();
        if (reply == null) throw new IllegalStateException("referee: connection closed");
        Matcher m = VALUES.matcher(reply);
        if (!m.find()) throw new IllegalStateException("referee reply without three values: " + reply);
        return new long[] {Long.parseLong(m.group(1)), Long.parseLong(m.group(2)), Long.parseLong(m.group(3))};
    }

    private static String request(String key, String session, long token, String hold, String op) {
        StringBuilder r = new StringBuilder(160);
        r.append("{\"key\":").append(quote(key)).append(",\"client\":").append(quote(clientId))
                .append(",\"session\":").append(quote(session)).append(",\"token\":")
                .append(Long.toUnsignedString(token)).append(",\"op\":").append(quote(op));
        if (hold != null) r.append(",\"hold\":").append(quote(hold));
        return r.toString();
    }

    private static void renew(Lease lease, String session) {
        emit("invoke", "renew", session, lease.fence(), null, null, -1);
        try {
            lease.renew();
            emit("ok", "renew", session, lease.fence(), null, null, -1);
        } catch (LockException e) {
            emit("fail", "renew", session, lease.fence(), code(e), null, -1);
        }
    }

    /** A write of the hold's token to the SDK's own register {@code key}: true accepted, false refused (FENCED),
     *  null unknown (any other error says nothing of what the register did). */
    private static Boolean fenceWrite(FencelockClient client, String key, long token, int slot, String session) {
        emit("invoke", "fence-write", session, token, null, null, slot);
        try {
            client.fence(key).write(token, session.getBytes(StandardCharsets.UTF_8));
        } catch (LockException e) {
            boolean refused = e.kind() == ErrorKind.FENCED;
            emit(refused ? "fail" : "info", "fence-write", session, token, code(e), null, slot);
            return refused ? Boolean.FALSE : null;
        }
        emit("ok", "fence-write", session, token, null, null, slot);
        return Boolean.TRUE;
    }

    private void criticalSection(FencelockClient client, Lease lease, String hold, String session) throws Exception {
        long token = lease.fence();
        int slot = lease.slot().orElse(-1);
        String name = args.get("--name");
        if (hold == null && rng.nextDouble() < 0.2) {
            // Reentrancy: the same owner gets the same grant back (P8).
            emit("invoke", "nested-acquire", session, token, null, null, -1);
            try {
                Lease inner = client.lock(name, options);
                emit("ok", "nested-acquire", session, inner.fence(), null, null, -1);
                try {
                    inner.release();
                    emit("ok", "nested-release", session, token, null, null, -1);
                } catch (LockException e) {
                    emit("fail", "nested-release", session, token, code(e), null, -1);
                }
            } catch (LockException e) {
                emit(e.kind() == ErrorKind.TIMEOUT ? "fail" : "info", "nested-acquire", session, 0, code(e), null, -1);
            }
        }
        // Each semaphore slot is a register of its own, fenced by the slot's token.
        String key = slot < 0 ? args.get("--key") : args.get("--key") + ".slot" + slot;
        // A refused read does not end the cycle: the shadow and cas registers must see what an unfenced resource would.
        long[] values = call(request(key, session, token, hold, "read") + "}");
        sleep(ttl * uniform(0.1, 1.5)); // work; the long tail crosses the TTL
        if ("read".equals(hold)) {
            // A reader reads again at the end (the checker: no write in between), then renews once (P6).
            if (lease.isLost()) return;
            call(request(key, session, token, hold, "read") + "}");
            renew(lease, session);
            return;
        }
        int writes = rng.nextDouble() < 0.3 ? 2 : 1;
        for (int i = 0; i < writes; i++) {
            if (!careless && lease.isLost()) return; // a careful user; a pause after this is what fencing is for
            // The SDK's own register on the backend decides the fenced write; the referee only records its answer.
            Boolean fenced = fenceWrite(client, key, token, slot, session);
            values = call(request(key, session, token, hold, "write") + ",\"fenced\":" + fenced + ",\"values\":["
                    + (values[0] + 1) + "," + (values[1] + 1) + "," + (values[2] + 1) + "]}");
            if (i == 0) {
                renew(lease, session);
                if (writes > 1) sleep(ttl * uniform(0.0, 0.3));
            }
        }
    }

    private void run() throws Exception {
        connectReferee();
        FencelockClient client;
        while (true) {
            try {
                client = FencelockClient.connect(args.get("--url"));
                break;
            } catch (LockException e) {
                if (stopping) throw e;
                sleep(0.2);
            }
        }
        String workload = args.get("--workload");
        String name = args.get("--name");
        FencelockReadWriteLock rw = client.readWriteLock(name);
        FencelockSemaphore sem = client.semaphore(name, Integer.parseInt(args.get("--permits")));
        FencelockElection election = client.election(name);
        for (long n = 1; !stopping; ) {
            // The rw workload: 60 % reads. The mutex's events carry no hold kind.
            String hold = switch (workload) {
                case "mutex" -> null;
                case "rwlock" -> rng.nextDouble() < 0.6 ? "read" : "write";
                case "semaphore" -> "permit";
                case "election" -> "leader";
                default -> throw new IllegalArgumentException("unknown workload " + workload);
            };
            emit("invoke", "acquire", null, 0, null, hold, -1);
            Lease lease;
            try {
                lease = hold == null ? client.lock(name, options)
                        : switch (hold) {
                            case "read" -> rw.read(options);
                            case "write" -> rw.write(options);
                            case "permit" -> sem.acquire(options);
                            default -> election.campaign(clientId, options);
                        };
            } catch (LockException e) {
                emit(e.kind() == ErrorKind.TIMEOUT ? "fail" : "info", "acquire", null, 0, code(e), null, -1);
                sleep(0.1);
                continue;
            }
            String session = clientId + "." + pid + "." + n++;
            long token = lease.fence();
            emit("ok", "acquire", session, token, null, hold, lease.slot().orElse(-1));
            lease.lost().thenRun(() -> emit("lost", "lost", session, token, "LOCK_LOST", null, -1));
            criticalSection(client, lease, hold, session);
            emit("invoke", "release", session, token, null, null, -1);
            try {
                lease.release();
                emit("ok", "release", session, token, null, null, -1);
            } catch (LockException e) {
                emit("fail", "release", session, token, code(e), null, -1);
            }
            sleep(ttl * uniform(0.0, 0.1));
        }
        client.close();
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>(Map.of(
                "--name", "locktest", "--key", "register", "--workload", "mutex", "--ttl-ms", "2000",
                "--permits", "2", "--seed", "0"));
        for (int i = 0; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) throw new IllegalArgumentException("unknown option " + argv[i]);
            if (argv[i].equals("--careless")) {
                args.put(argv[i--], "");
                continue;
            }
            if (i + 1 >= argv.length) throw new IllegalArgumentException(argv[i] + " needs a value");
            args.put(argv[i], argv[i + 1]);
        }
        for (String required : new String[] {"--url", "--referee", "--client"}) {
            if (!args.containsKey(required)) throw new IllegalArgumentException(required + " is required");
        }
        clientId = args.get("--client");
        pid = ProcessHandle.current().pid();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // the orchestrator closes stdin to stop the worker
                }
            } catch (java.io.IOException ignored) {
                // a broken pipe stops the worker all the same
            }
            stopping = true;
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();
        new Worker(args).run();
        System.exit(0);
    }
}
