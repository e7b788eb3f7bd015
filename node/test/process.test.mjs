// Process lifecycle: a closed client, or an unclosed one whose leases are released, lets Node exit; a missing addon
// gives an error naming the file and the build command.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { serviceUrl, sqliteUrl } from './support.mjs';

const PKG = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Runs `body` (async JS with `fencelock` and `url` in scope) in a fresh node; it must exit 0 by itself in time. */
function runsToExit(body, url) {
  const script = `const fencelock = require(${JSON.stringify(PKG)}); const url = ${JSON.stringify(url)};
    (async () => { ${body} })().then(() => console.log('done'), (e) => { console.error(e); process.exit(3); });`;
  const t0 = Date.now();
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 15000 });
  assert.equal(r.signal, null, `still running after 15 s (killed): ${r.stderr}`);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /done/);
  return Date.now() - t0;
}

const urls = [['sqlite', sqliteUrl()]];
const redis = serviceUrl('FENCELOCK_TEST_REDIS');
if (redis) urls.push(['redis', redis]);

for (const [label, url] of urls) {
  test(`${label}: a process holding watched leases exits once the client is closed`, () => {
    runsToExit(
      `const c = await fencelock.connect(url);
       const a = await c.lock('exit-a-' + process.pid, { ttlMs: 3000 });
       const b = await c.lock('exit-b-' + process.pid, { ttlMs: 3000 });
       a.signal; b.on('lost', () => {});
       await c.close();`,
      url,
    );
  });

  test(`${label}: an unclosed client whose leases are released does not keep the process alive`, () => {
    runsToExit(
      `const c = await fencelock.connect(url);
       const a = await c.lock('exit-c-' + process.pid, { ttlMs: 3000 });
       a.signal; a.on('lost', () => {});
       await a.release();
       await c.withLock('exit-d-' + process.pid, async (l) => l.signal);`,
      url,
    );
  });
}

test('a missing addon names the file and the build command', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fencelock-noaddon-'));
  for (const f of ['index.js', 'native.js', 'errors.js']) copyFileSync(join(PKG, f), join(dir, f));
  const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(dir)})`], { encoding: 'utf8' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /fencelock\.[\w-]+\.node is missing/);
  assert.match(r.stderr, /npm run build/);
  assert.match(r.stderr, /ERR_FENCELOCK_ADDON_MISSING/);
});
