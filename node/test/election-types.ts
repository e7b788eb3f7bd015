// Type-checked only (`npm run typecheck`): the election types of index.d.ts, as an application would use them.
import { connect, type Election, type Leader, Lease, Leadership } from 'fencelock';

export async function typed(url: string): Promise<bigint> {
  const client = await connect(url);
  const election: Election = client.election('jobs');
  const ac = new AbortController();
  const won: Leadership = await election.campaign('node-1', { ttlMs: 10_000, timeoutMs: 5_000, signal: ac.signal });
  const lease: Lease = won; // a leadership is a lease
  await won.proclaim(Buffer.from('node-1:8080'));
  await won.proclaim(new Uint8Array([1, 2]));
  const maybe: Leadership | null = await election.tryCampaign('node-2');
  const now: Leader | null = await election.leader();
  let last = 0n;
  for await (const leader of election.observe({ signal: ac.signal })) {
    if (leader === null) break;
    const value: Buffer = leader.value;
    last = leader.term + BigInt(value.length);
  }
  await won.resign();
  await maybe?.release();
  await client.close();
  return last + won.term + lease.fence + (now?.term ?? 0n) + (client.capability.election ? 1n : 0n);
}
