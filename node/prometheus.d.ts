// Type declarations for fencelock/prometheus (hand-written; node/prometheus.js is the implementation).
import type { Registry } from 'prom-client';

import type { Client } from './index';

export interface PrometheusOptions {
  /** Labels added to every fencelock series (e.g. `{ service: 'billing' }`). */
  labels?: Record<string, string>;
}

/**
 * Registers `client`'s metrics (core's families: `fencelock_acquire_wait_seconds`, `fencelock_lost_total`, …) in
 * `registry`, prom-client's default registry if omitted. Returns the names of the metrics registered.
 */
export declare function registerFencelockMetrics(
  client: Client,
  registry?: Registry,
  options?: PrometheusOptions,
): string[];
