// The same API from TypeScript; the test stage type-checks this file against node/index.d.ts (tsc --noEmit).
import { connect, LockError, type Lease, type LockOptions, type RwLock, type Semaphore } from 'fencelock';

async function main(url?: string): Promise<void> {
  const client = await connect(url);
  const options: LockOptions = { ttlMs: 5_000, timeoutMs: 1_000, watchdog: true, owner: 'job-1' };
  const lease: Lease = await client.lock('reports', options);
  const token: bigint = lease.fence;
  lease.on('lost', (err: LockError) => console.error(err.code, err.retryable));
  const maybe: Lease | null = await client.tryLock('reports');
  if (maybe) await maybe.release();
  await client.fence('reports-table').write(token, Buffer.from('v1'));
  const { token: stored, value }: { token: bigint; value: Buffer } = await client.fence('reports-table').read();
  console.log(stored, value.toString(), lease.signal.aborted);
  await lease.renew(10_000);
  await lease.release();
  const n: number = await client.withLock('reports', async (l) => Number(l.fence % 10n));
  console.log(n);
  const rw: RwLock = client.rwLock('catalog');
  const read: Lease | null = await rw.tryRead({ owner: 'job-1' });
  if (read) await read.release();
  const version: bigint = await rw.withWrite({ timeoutMs: 1_000 }, async (w) => w.fence);
  const pool: Semaphore = client.semaphore('gpus', 4);
  const slot: number | null = await pool.withPermit(async (p) => p.slot);
  const free: number = await pool.available();
  console.log(version, slot, free, pool.permits, client.capability.rwLock, client.capability.semaphore);
  try {
    await client.lock('', {});
  } catch (e) {
    if (e instanceof LockError && e.code === 'INVALID_ARGUMENT') console.log('bad name');
  }
  await client.close();
}

main(process.argv[2]).catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
