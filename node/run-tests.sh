#!/usr/bin/env bash
# The node stage of scripts/test.sh: build the addon from source (debug, the workspace target dir, so core compiles
# once; FENCELOCK_NODE_PREBUILT=PATH copies a cdylib already built instead, as the test command does), run the
# node:test suites, type-check the TypeScript example, then pack the package, install the tarball into a scratch
# project in a temp dir and run the examples there (no Rust toolchain involved past the pack), and
# fencelock/prometheus there without prom-client (an error naming it) and with it.
set -euo pipefail

NODE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$NODE_DIR/.." && pwd)
cd "$NODE_DIR"

# npm ci: exactly the lockfile's @napi-rs/cli, typescript and prom-client (dev only), from the npm registry.
npm ci --no-audit --no-fund
if [[ -n ${FENCELOCK_NODE_PREBUILT:-} ]]; then
    # The test command's build stage already compiled the addon crate (a cdylib of the workspace build): napi build
    # would compile the whole dependency tree again for its explicit --target (about 3.5 min on 2 cores).
    addon=$(node native.js)
    # Without its debug info (binutils comes with the C toolchain Rust links with): the tarball below packs it.
    strip --strip-debug -o "$addon" "$FENCELOCK_NODE_PREBUILT"
    echo "addon: $FENCELOCK_NODE_PREBUILT -> ${addon##*/} (the build stage's; npm run build when run alone)"
else
    npm run build
fi
node --test test/conformance.mjs test/api.test.mjs test/kinds.test.mjs test/election.test.mjs test/process.test.mjs \
    test/metrics.test.mjs
npm run typecheck

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/fencelock-node-pack.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
tarball=$(npm pack --silent --pack-destination "$SCRATCH" | tail -n 1)
echo "packed $tarball ($(du -h "$SCRATCH/$tarball" | cut -f1))"
contents=$(tar -tzf "$SCRATCH/$tarball")
grep '^package/fencelock\..*\.node$' <<<"$contents" || { echo "the tarball carries no addon" >&2; exit 1; }
for shipped in prometheus.js prometheus.d.ts; do
    grep -qx "package/$shipped" <<<"$contents" || { echo "the tarball lacks $shipped" >&2; exit 1; }
done

mkdir "$SCRATCH/app"
cd "$SCRATCH/app"
npm init -y >/dev/null
npm install --no-audit --no-fund --offline "$SCRATCH/$tarball"
cp "$ROOT"/examples/node/*.mjs .
for example in *.mjs; do
    echo "--- examples/node/$example (installed from the tarball)"
    node "$example" "sqlite:$SCRATCH/example.db"
    [[ -z ${FENCELOCK_TEST_REDIS:-} ]] || node "$example" "$FENCELOCK_TEST_REDIS"
done

echo "--- fencelock/prometheus (installed from the tarball), without prom-client, then with it"
# prom-client is an optional peer, so installing the tarball did not pull it in. The lockfile's version: its tarball
# is in npm's cache from the npm ci above, but npm ci stores no registry metadata, so a fresh machine fetches that
# (--prefer-offline, not --offline, which fails there).
cp "$NODE_DIR/test/installed-prometheus.cjs" .
node installed-prometheus.cjs missing
prom_version=$(node -p "require('$NODE_DIR/node_modules/prom-client/package.json').version")
npm install --no-audit --no-fund --prefer-offline "prom-client@$prom_version"
node installed-prometheus.cjs present "sqlite:$SCRATCH/prometheus.db"
