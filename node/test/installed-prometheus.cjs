'use strict';
// Run by run-tests.sh in a scratch project that installed the packed tarball: `missing` before prom-client is
// installed (requiring fencelock/prometheus must fail naming it), `present` after (the adapter must work as shipped).
const assert = require('node:assert/strict');

const [mode, url] = process.argv.slice(2);

if (mode === 'missing') {
  assert.throws(() => require('fencelock/prometheus'), /fencelock\/prometheus needs the prom-client package/);
  console.log('fencelock/prometheus without prom-client: an error naming it');
} else {
  const { connect } = require('fencelock');
  const { registerFencelockMetrics } = require('fencelock/prometheus');
  const { Registry } = require('prom-client');
  (async () => {
    const client = await connect(url);
    const registry = new Registry();
    registerFencelockMetrics(client, registry);
    await (await client.lock('scratch')).release();
    const text = await registry.metrics();
    await client.close();
    const line = 'fencelock_acquire_wait_seconds_count{backend="sqlite",outcome="acquired"} 1';
    assert.ok(text.split('\n').includes(line), `no ${line} in:\n${text}`);
    console.log(`fencelock/prometheus with prom-client: ${line}`);
  })().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
