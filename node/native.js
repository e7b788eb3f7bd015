'use strict';
// Loads the compiled addon, fencelock.<platform>.node, from this directory. `npm run build` puts it here (napi build
// --platform); `npm pack` ships it. `node native.js --check` (the prepack script) fails if it is missing.

const fs = require('node:fs');
const path = require('node:path');

/** The platform part of the file name, spelled as @napi-rs/cli spells it (linux-x64-gnu, darwin-arm64, …). */
function platformTriple() {
  const { platform, arch } = process;
  if (platform === 'linux') {
    const report = process.report && process.report.getReport ? process.report.getReport() : null;
    const glibc = report && report.header && report.header.glibcVersionRuntime;
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`;
  }
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

const file = path.join(__dirname, `fencelock.${platformTriple()}.node`);

function missing() {
  const err = new Error(
    `fencelock: the native addon ${file} is missing. Build it from source with \`npm run build\` in ${__dirname} ` +
      '(needs a Rust toolchain; `npm run build:release` for an optimized build), or install a fencelock package ' +
      `packed on ${platformTriple()}.`,
  );
  err.code = 'ERR_FENCELOCK_ADDON_MISSING';
  return err;
}

if (require.main === module) {
  if (process.argv.includes('--check') && !fs.existsSync(file)) {
    console.error(missing().message);
    process.exit(1);
  }
  console.log(file);
} else {
  if (!fs.existsSync(file)) throw missing();
  module.exports = require(file);
}
