// fencelock from Node: take a lock, guard a write with its fencing token, cancel a wait with an AbortSignal.
// Run: node basic.mjs [URL] (default: FENCELOCK_URL, else the SQLite file fencelock.db here).
import { connect, LockError } from 'fencelock';

const client = await connect(process.argv[2]);
try {
  // withLock releases in finally, whatever the callback does.
  const token = await client.withLock('orders', { ttlMs: 10_000 }, async (lease) => {
    // A stale holder (one that paused past its TTL) cannot overwrite this: its token is smaller.
    await client.fence('orders-table').write(lease.fence, Buffer.from('state after this run'));
    return lease.fence;
  });
  const { token: stored, value } = await client.fence('orders-table').read();
  console.log(`wrote with token ${token}; the register holds ${stored}: ${value}`);

  // A second contender gives up when its AbortSignal fires, leaving no lock behind.
  const held = await client.lock('orders');
  held.signal.addEventListener('abort', () => console.log('lost the lock!')); // fires only if the lease is lost
  try {
    await client.lock('orders', { signal: AbortSignal.timeout(200) });
  } catch (e) {
    if (!(e instanceof LockError) || e.code !== 'CANCELLED') throw e;
    console.log(`waiting contender: ${e.code}`);
  }
  await held.release();
} finally {
  await client.close();
}
