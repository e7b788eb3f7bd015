// Type-checked only (`npm run typecheck`): the metrics types of index.d.ts and prometheus.d.ts, reached through the
// package's own "exports" as an application would reach them.
import { Registry } from 'prom-client';

import { connect, type MetricsSnapshot } from 'fencelock';
import { registerFencelockMetrics } from 'fencelock/prometheus';

export async function typed(url: string): Promise<number> {
  const client = await connect(url, { metrics: true, metricsNames: ['hot'] });
  await connect(url, { metricsNames: true });
  const m: MetricsSnapshot = client.metrics();
  const waited: number = m.acquireWait.timeout.sum + m.backendOps.fence_write.ok.count + m.lost.taken;
  const le: number = m.holdTime.buckets[0].le;
  const names: string[] = registerFencelockMetrics(client, new Registry(), { labels: { service: 'x' } });
  registerFencelockMetrics(client);
  await client.close();
  return waited + le + names.length + (m.names.hot?.activeLeases ?? 0) + m.fenceWrites.refused;
}
