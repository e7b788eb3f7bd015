'use strict';
// fencelock metrics in a prom-client registry: one custom metric per family of core's mapping
// (fencelock::metrics::families_json), converted to prom-client's shape at each scrape. prom-client is an optional
// peer dependency: this module is the only one that needs it.

let promClient;
try {
  promClient = require('prom-client');
} catch (e) {
  if (e && e.code === 'MODULE_NOT_FOUND' && String(e.message).includes("'prom-client'")) {
    const err = new Error(
      "fencelock/prometheus needs the prom-client package, which is not installed: `npm install prom-client`",
      { cause: e },
    );
    err.code = 'MODULE_NOT_FOUND';
    throw err;
  }
  throw e;
}

const { Client } = require('./index.js');
const { invalid } = require('./errors.js');

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** `{ labels }` checked: label names Prometheus accepts, string values. */
function constLabels(options) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object') throw invalid(`options must be an object, got ${typeof options}`);
  const { labels } = options;
  if (labels === undefined || labels === null) return {};
  if (typeof labels !== 'object' || Array.isArray(labels)) {
    const got = Array.isArray(labels) ? 'an array' : typeof labels;
    throw invalid(`labels must be an object of label names to strings, got ${got}`);
  }
  for (const [name, value] of Object.entries(labels)) {
    if (!LABEL_NAME.test(name) || name.startsWith('__') || name === 'le') {
      throw invalid(`labels: ${JSON.stringify(name)} is not a label name Prometheus accepts`);
    }
    if (typeof value !== 'string') throw invalid(`labels.${name} must be a string, got ${typeof value}`);
  }
  return { ...labels };
}

/** One sample's prom-client values: a counter's or gauge's value, or a histogram's buckets, sum and count. */
function values(family, sample, extra) {
  const labels = { ...sample.labels };
  for (const [k, v] of Object.entries(extra)) {
    if (k in labels) throw invalid(`the label ${JSON.stringify(k)} of ${family.name} clashes with labels`);
    labels[k] = v;
  }
  const h = sample.histogram;
  if (!h) return [{ labels, value: sample.value }];
  return [
    ...h.buckets.map((b) => ({
      metricName: `${family.name}_bucket`,
      labels: { ...labels, le: b.le === null ? '+Inf' : b.le },
      value: b.count,
    })),
    { metricName: `${family.name}_sum`, labels, value: h.sum },
    { metricName: `${family.name}_count`, labels, value: h.count },
  ];
}

/**
 * Registers `client`'s metrics in `registry` (prom-client's default registry if omitted), with `labels` added to every
 * series. Returns the names of the metrics registered.
 */
function registerFencelockMetrics(client, registry = promClient.register, options = undefined) {
  if (!(client instanceof Client)) throw invalid('client must be a fencelock Client (from connect())');
  if (!registry || typeof registry.registerMetric !== 'function') {
    throw invalid('registry must be a prom-client Registry');
  }
  const extra = constLabels(options);
  // One snapshot per scrape: prom-client calls every metric's get() in one turn, so the families read by the first
  // are kept until the microtasks run, and all the families of one scrape agree.
  let current = null;
  const families = () => {
    if (!current) {
      current = new Map(client.metricFamilies().map((f) => [f.name, f]));
      queueMicrotask(() => {
        current = null;
      });
    }
    return current;
  };
  const registered = [];
  for (const family of client.metricFamilies()) {
    // A label core's series already have fails here rather than at a scrape.
    for (const sample of family.samples) values(family, sample, extra);
    const metric = {
      // The registry may rename it (OpenMetrics drops a counter's `_total`), so get() reports this name.
      name: family.name,
      help: family.help,
      type: family.type,
      aggregator: 'sum',
      get() {
        const now = families().get(family.name);
        const samples = now ? now.samples : [];
        return {
          name: this.name,
          help: family.help,
          type: family.type,
          aggregator: 'sum',
          values: samples.flatMap((s) => values(family, s, extra)),
        };
      },
      // Counters count from the client's creation, in core; a registry reset leaves them.
      reset() {},
    };
    registry.registerMetric(metric);
    registered.push(family.name);
  }
  return registered;
}

module.exports = { registerFencelockMetrics };
