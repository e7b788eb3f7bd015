// Node benchmark (on demand, not part of the test command): fencelock through the Node binding on Redis, next to
// the same through Rust (target/release/fencelock-bench, if built) and the `redlock` npm package (v5 on ioredis,
// installed into a scratch dir), all on the same server in the same run.
//
//   scripts/services.sh start /tmp/bench-svc && source /tmp/bench-svc/env
//   (cd node && npm run build:release)          # a debug addon measures the compiler
//   node bench/node/bench.mjs [--seconds 3] [--workers 4] [--redis URL]
//
// Figures: 1. uncontended acquire+release on one name (cycles/s, p50, p99 of one cycle); 2. contended hand-off:
// W clients contend for one name, each holding it only to release it; gap = next holder's acquire − the previous
// holder's instant before release (p50, p99). Redlock has no release notification, so its waiters poll
// (retryDelay 10 ms ± 5 ms here, 200 ms by default).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const require = createRequire(import.meta.url);

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}
const SECONDS = Number(arg('seconds', '3'));
const WORKERS = Number(arg('workers', '4'));
const REDIS = arg('redis', process.env.FENCELOCK_TEST_REDIS);
if (!REDIS) {
  console.error('no Redis: pass --redis URL or set FENCELOCK_TEST_REDIS (scripts/services.sh start DIR)');
  process.exit(2);
}

const fencelock = require(join(ROOT, 'node'));

function quantile(sorted, q) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : NaN;
}
const fmtMs = (ms) => (ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`);

/** Runs `cycle` back to back for SECONDS after `warmup` cycles; cycles/s and latency quantiles. */
async function timed(cycle, warmup = 200) {
  for (let i = 0; i < warmup; i++) await cycle();
  const lat = [];
  const end = performance.now() + SECONDS * 1000;
  const t0 = performance.now();
  while (performance.now() < end) {
    const s = performance.now();
    await cycle();
    lat.push(performance.now() - s);
  }
  const elapsed = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  return { rate: lat.length / elapsed, p50: quantile(lat, 0.5), p99: quantile(lat, 0.99) };
}

/** W contenders for one name: `acquire()` resolves to a release function. Gap quantiles and acquisition count. */
async function handoff(makeWorker) {
  const workers = await Promise.all(Array.from({ length: WORKERS }, (_, i) => makeWorker(i)));
  const gaps = [];
  let lastRelease = null;
  let lastWorker = -1;
  let count = 0;
  let toAnother = 0;
  const end = performance.now() + SECONDS * 1000;
  await Promise.all(
    workers.map(async (w, i) => {
      while (performance.now() < end) {
        const release = await w.acquire();
        const now = performance.now();
        if (lastRelease !== null) gaps.push(now - lastRelease);
        if (lastWorker !== -1 && lastWorker !== i) toAnother++;
        lastWorker = i;
        count++;
        lastRelease = performance.now();
        await release();
      }
    }),
  );
  await Promise.all(workers.map((w) => w.close()));
  gaps.sort((a, b) => a - b);
  return { count, toAnother: toAnother / Math.max(1, count - 1), p50: quantile(gaps, 0.5), p99: quantile(gaps, 0.99) };
}

/** The `redlock` package (v5 on ioredis), installed once into a scratch dir from the npm registry. */
function loadRedlock() {
  const dir = join(tmpdir(), 'fencelock-bench-redlock');
  if (!existsSync(join(dir, 'node_modules/redlock'))) {
    mkdirSync(dir, { recursive: true });
    execFileSync('npm', ['init', '-y'], { cwd: dir, stdio: 'ignore' });
    execFileSync('npm', ['install', '--no-audit', '--no-fund', 'redlock@5.0.0-beta.2', 'ioredis@5'], {
      cwd: dir,
      stdio: 'inherit',
    });
  }
  const req = createRequire(join(dir, 'package.json'));
  const Redlock = req('redlock').default ?? req('redlock');
  const ioredis = req('ioredis');
  return { Redlock, Redis: ioredis.default ?? ioredis.Redis ?? ioredis };
}

/** Figure 1 and the hand-off gap p50 from the Rust bench on the same server. */
function rustFigures() {
  const bin = join(ROOT, 'target/release/fencelock-bench');
  if (!existsSync(bin)) return null;
  const r = spawnSync(bin, ['--backend', 'redis', '--redis', REDIS, '--seconds', String(SECONDS)], {
    encoding: 'utf8',
    timeout: 300_000,
  });
  const out = r.stdout ?? '';
  const num = (re) => {
    const m = re.exec(out);
    return m ? m[1] : undefined;
  };
  return {
    rate: num(/cycles\/s\s+(\d+)\/s/),
    p50: num(/p50 cycle latency\s+([\d.]+ [µm]s)/),
    gap: num(/hand-off gap p50 \(in raw RTTs\)\s+([\d.]+ [µm]s)/),
    workers: num(/contended hand-off: (\d+) workers/),
  };
}

async function main() {
  const addonFile = execFileSync(process.execPath, [join(ROOT, 'node/native.js')], { encoding: 'utf8' }).trim();
  const addonMb = statSync(addonFile).size / 1e6;
  console.log(`Redis ${REDIS}; ${SECONDS} s per phase; addon ${addonFile} (${addonMb.toFixed(1)} MB${addonMb > 15 ? ', looks like a DEBUG build: npm run build:release' : ''})`);

  const { Redlock, Redis } = loadRedlock();
  const url = new URL(REDIS);

  // 1. Uncontended.
  const client = await fencelock.connect(REDIS);
  const node1 = await timed(async () => {
    const lease = await client.lock('bench-node-uncontended');
    await lease.release();
  });
  const redis = new Redis({ host: url.hostname, port: Number(url.port || 6379), lazyConnect: false });
  const redlock = new Redlock([redis], { retryCount: 0 });
  const red1 = await timed(async () => {
    const lock = await redlock.acquire(['bench-node-redlock-uncontended'], 30_000);
    await lock.release();
  });
  await client.close();

  // 2. Contended hand-off.
  const node2 = await handoff(async () => {
    const c = await fencelock.connect(REDIS);
    return {
      acquire: async () => {
        const lease = await c.lock('bench-node-handoff');
        return () => lease.release();
      },
      close: () => c.close(),
    };
  });
  const red2 = await handoff(async () => {
    const r = new Redis({ host: url.hostname, port: Number(url.port || 6379) });
    const rl = new Redlock([r], { retryCount: -1, retryDelay: 10, retryJitter: 5 });
    return {
      acquire: async () => {
        const lock = await rl.acquire(['bench-node-redlock-handoff'], 30_000);
        return () => lock.release();
      },
      close: async () => r.quit(),
    };
  });
  await redis.quit();

  const rust = rustFigures();
  const row = (label, a, b, c) => console.log(`  ${label.padEnd(34)}${String(a).padStart(16)}${String(b).padStart(16)}${String(c).padStart(16)}`);
  console.log('\n1. uncontended acquire+release (one client, one name, back to back)');
  row('', 'fencelock node', 'fencelock rust', 'redlock npm');
  row('cycles/s', `${node1.rate.toFixed(0)}/s`, rust?.rate ? `${rust.rate}/s` : 'n/a', `${red1.rate.toFixed(0)}/s`);
  row('p50 cycle', fmtMs(node1.p50), rust?.p50 ?? 'n/a', fmtMs(red1.p50));
  row('p99 cycle', fmtMs(node1.p99), '', fmtMs(red1.p99));
  console.log(`  ratio node/rust cycles/s: ${rust?.rate ? (node1.rate / Number(rust.rate)).toFixed(2) : 'n/a'}; node/redlock: ${(node1.rate / red1.rate).toFixed(2)}`);
  console.log(`\n2. contended hand-off (${WORKERS} clients in one process; rust: ${rust?.workers ?? '?'} workers)`);
  row('', 'fencelock node', 'fencelock rust', 'redlock npm');
  row('acquisitions', node2.count, '', red2.count);
  row('gap between holders p50', fmtMs(node2.p50), rust?.gap ?? 'n/a', fmtMs(red2.p50));
  row('gap p99', fmtMs(node2.p99), '', fmtMs(red2.p99));
  row('hand-offs to another client', `${(node2.toAnother * 100).toFixed(0)} %`, '', `${(red2.toAnother * 100).toFixed(0)} %`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
