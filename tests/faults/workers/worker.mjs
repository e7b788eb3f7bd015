// The Node client worker of the safety suite: the same loop and JSON-lines protocol as the Rust worker
// (tests/faults/src/worker.rs, described in tests/faults/README.md), on the fencelock npm package.
//
// Timestamps: Node has no syscall access, so this worker is never given libfaketime; process.hrtime.bigint() then
// reads the same CLOCK_MONOTONIC as the raw syscall of the other workers (the clock-jump fault targets Rust and
// Python workers only).
import { createConnection } from 'node:net';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    referee: { type: 'string' },
    client: { type: 'string' },
    'ttl-ms': { type: 'string', default: '2000' },
    name: { type: 'string', default: 'locktest' },
    key: { type: 'string', default: 'register' },
    seed: { type: 'string', default: '0' },
    module: { type: 'string' },
    workload: { type: 'string', default: 'mutex' },
    permits: { type: 'string', default: '2' },
    careless: { type: 'boolean', default: false }, // no lost check before a write: the canary's user
  },
});
for (const need of ['url', 'referee', 'client', 'module']) {
  if (!args[need]) throw new Error(`worker.mjs: --${need} is required`);
}
const { connect } = await import(args.module);

// Tokens are bigints: written as bare JSON numbers (they exceed 2^53 on some backends).
const toJson = (o) => JSON.stringify(o, (_, v) => (typeof v === 'bigint' ? `#big${v}` : v)).replace(/"#big(\d+)"/g, '$1');

let seq = 0;
function emit(type, f, session, token, error, hold, slot) {
  const e = { src: 'worker', type, f, client: args.client, lang: 'node', pid: process.pid, seq: seq++, t_ref: process.hrtime.bigint() };
  if (session !== undefined) e.session = session;
  if (token !== undefined) e.token = token;
  if (error !== undefined) e.error = error;
  if (hold !== undefined) e.hold = hold;
  if (slot !== undefined && slot !== null) e.slot = slot;
  process.stdout.write(toJson(e) + '\n');
}

// A tiny seeded PRNG (mulberry32): reproducible choices per seed and pid.
let state = (Number(args.seed) ^ process.pid) >>> 0;
function random() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const uniform = (a, b) => a + (b - a) * random();

class Referee {
  constructor(addr) {
    const i = addr.lastIndexOf(':');
    this.sock = createConnection({ host: addr.slice(0, i), port: Number(addr.slice(i + 1)) });
    this.lines = createInterface({ input: this.sock })[Symbol.asyncIterator]();
  }
  async call(req) {
    this.sock.write(toJson(req) + '\n');
    const { value, done } = await this.lines.next();
    if (done) throw new Error('referee closed');
    const reply = JSON.parse(value);
    return [reply.ok, reply.values];
  }
}

let stop = false;
process.stdin.on('data', () => {});
process.stdin.on('end', () => { stop = true; });

const referee = new Referee(args.referee);
let client;
for (;;) {
  try {
    client = await connect(args.url);
    break;
  } catch (e) {
    if (stop) throw e;
    await sleep(200);
  }
}
const ttlMs = Number(args['ttl-ms']);
const opts = { ttlMs, timeoutMs: 3 * ttlMs, owner: `${args.client}-main` };
const code = (e) => e.code ?? e.name;
if (!['mutex', 'rwlock', 'semaphore', 'election'].includes(args.workload)) throw new Error(`worker.mjs: unknown workload ${args.workload}`);
const rw = client.rwLock(args.name);
const sem = client.semaphore(args.name, Number(args.permits));
const election = client.election(args.name);
let n = 0;
while (!stop) {
  // The rw workload: 60 % reads. The mutex's events carry no hold kind.
  const hold = args.workload === 'rwlock' ? (random() < 0.6 ? 'read' : 'write') : { semaphore: 'permit', election: 'leader' }[args.workload];
  emit('invoke', 'acquire', undefined, undefined, undefined, hold);
  let lease;
  try {
    if (hold === 'read') lease = await rw.read(opts);
    else if (hold === 'write') lease = await rw.write(opts);
    else if (hold === 'permit') lease = await sem.acquire(opts);
    else if (hold === 'leader') lease = await election.campaign(args.client, opts);
    else lease = await client.lock(args.name, opts);
  } catch (e) {
    emit(code(e) === 'TIMEOUT' ? 'fail' : 'info', 'acquire', undefined, undefined, code(e));
    await sleep(100);
    continue;
  }
  n += 1;
  const session = `${args.client}.${process.pid}.${n}`;
  const token = lease.fence;
  emit('ok', 'acquire', session, token, undefined, hold, lease.slot);
  lease.once('lost', () => emit('lost', 'lost', session, token, 'LOCK_LOST'));
  await criticalSection(lease, session, hold);
  emit('invoke', 'release', session, token);
  try {
    await lease.release();
    emit('ok', 'release', session, token);
  } catch (e) {
    emit('fail', 'release', session, token, code(e));
  }
  await sleep(ttlMs * uniform(0, 0.1));
}
await client.close();
process.exit(0);

async function criticalSection(lease, session, hold) {
  const token = lease.fence;
  if (hold === undefined && random() < 0.2) {
    // Reentrancy: the same owner gets the same grant back (P8).
    emit('invoke', 'nested-acquire', session, token);
    try {
      const inner = await client.lock(args.name, opts);
      emit('ok', 'nested-acquire', session, inner.fence);
      try {
        await inner.release();
        emit('ok', 'nested-release', session, token);
      } catch (e) {
        emit('fail', 'nested-release', session, token, code(e));
      }
    } catch (e) {
      emit(code(e) === 'TIMEOUT' ? 'fail' : 'info', 'nested-acquire', session, undefined, code(e));
    }
  }
  // Each semaphore slot is a register of its own, fenced by the slot's token.
  const key = lease.slot === null || lease.slot === undefined ? args.key : `${args.key}.slot${lease.slot}`;
  const base = { key, client: args.client, session, token, ...(hold === undefined ? {} : { hold }) };
  // A refused read does not end the cycle: the shadow and cas registers must see what an unfenced resource would.
  let [, values] = await referee.call({ ...base, op: 'read' });
  await sleep(ttlMs * uniform(0.1, 1.5)); // work; the long tail crosses the TTL
  if (hold === 'read') {
    // A reader reads again at the end (the checker: no write in between), then renews once (P6).
    if (!lease.valid) return; // checks the validity by our clock too, so a pause past the TTL shows here
    await referee.call({ ...base, op: 'read' });
    await renew(lease, session);
    return;
  }
  const writes = random() < 0.3 ? 2 : 1;
  for (let i = 0; i < writes; i++) {
    if (!args.careless && !lease.valid) return; // a careful user; a pause after this is what fencing is for
    // The SDK's own register on the backend decides the fenced write; the referee only records its answer.
    const fenced = await fenceWrite(key, token, lease.slot, session);
    [, values] = await referee.call({ ...base, op: 'write', fenced, values: values.map((v) => v + 1) });
    if (i === 0) {
      await renew(lease, session);
      if (writes > 1) await sleep(ttlMs * uniform(0, 0.3));
    }
  }
}

async function renew(lease, session) {
  emit('invoke', 'renew', session, lease.fence);
  try {
    await lease.renew();
    emit('ok', 'renew', session, lease.fence);
  } catch (e) {
    emit('fail', 'renew', session, lease.fence, code(e));
  }
}

// A write of the hold's token to the SDK's own Fence register `key` on the backend: whether it was accepted, null
// when the answer is unknown (an indeterminate error is no refusal).
async function fenceWrite(key, token, slot, session) {
  emit('invoke', 'fence-write', session, token, undefined, undefined, slot);
  try {
    await client.fence(key).write(token, Buffer.from(session));
  } catch (e) {
    const refused = code(e) === 'FENCED';
    emit(refused ? 'fail' : 'info', 'fence-write', session, token, code(e), undefined, slot);
    return refused ? false : null;
  }
  emit('ok', 'fence-write', session, token, undefined, undefined, slot);
  return true;
}
