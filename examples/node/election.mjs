// fencelock from Node: three candidates take turns as the publisher; an observer sees every change of leader.
// Run: node election.mjs [URL] (default: FENCELOCK_URL, else the SQLite file fencelock.db here).
// Each leader writes its feed through a Fence with its term, so a deposed leader that kept running could not
// overwrite the next leader's output.
import { randomUUID } from 'node:crypto';
import { connect } from 'fencelock';

const url = process.argv[2];
const name = `example-publisher-${randomUUID().slice(0, 8)}`; // a fresh election per run
const client = await connect(url);
const watcher = await connect(url);
try {
  const changes = watcher.election(name).observe();
  const first = await changes.next();
  if (first.value !== null) throw new Error('nobody leads a new election');
  // Each leader stays until the observer has seen its final value (the observer reads every 50 ms).
  const waiting = new Map(); // a leader's final value -> resolves its wait
  const seenBy = (value) => new Promise((resolve) => waiting.set(value, resolve));
  const seen = (async () => {
    const leaders = [];
    for await (const leader of changes) {
      console.log(`observed: ${leader ? `${leader.value} in term ${leader.term}` : 'no leader'}`);
      if (!leader) continue;
      leaders.push(leader);
      waiting.get(leader.value.toString())?.();
    }
    return leaders;
  })();

  const terms = [];
  const candidate = async (host) => {
    const leadership = await client.election(name).campaign(host, { ttlMs: 10_000, timeoutMs: 30_000 });
    try {
      await client.fence(`${name}-feed`).write(leadership.term, Buffer.from(`published by ${host}`));
      const observed = seenBy(`${host}, done`);
      await leadership.proclaim(`${host}, done`);
      await observed;
      terms.push(leadership.term);
      console.log(`${host}: led in term ${leadership.term}`);
    } finally {
      await leadership.resign();
    }
  };
  await Promise.all(['host-0', 'host-1', 'host-2'].map(candidate));

  if (terms.length !== 3 || terms.some((t, i) => i > 0 && t <= terms[i - 1])) {
    throw new Error(`every new leader has a higher term: ${terms}`);
  }
  if ((await client.election(name).leader()) !== null) throw new Error('the last leader resigned');
  const { token, value } = await client.fence(`${name}-feed`).read();
  if (token !== terms[2]) throw new Error(`the feed holds term ${token}, not ${terms[2]}`);
  console.log(`the feed holds "${value}", written in term ${token}`);
  await changes.return();
  const leaders = await seen;
  if (leaders.some((l, i) => i > 0 && l.term < leaders[i - 1].term)) throw new Error('observed terms went back');
  if (new Set(leaders.map((l) => l.term)).size !== 3) throw new Error('the observer saw each of the three leaders');
} finally {
  await watcher.close();
  await client.close();
}
