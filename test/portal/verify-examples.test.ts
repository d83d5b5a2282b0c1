import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { ROOT_DIR } from '../../src/config.js';

// The settings screen's "Verifying signatures" receivers (src/portal/assets/events.js), run as a reader would copy
// them, against the Standard Webhooks signature vectors (valid, rotated, mismatched, out of tolerance), each with the
// vector's clock: Node, and Python where python3 is installed. (The Go example is not run: CI has no Go toolchain.)

interface Vector {
  scheme?: string;
  secret: string;
  id: string;
  body: string;
  timestamp: number;
  now: number;
  header: string;
  valid: boolean;
  description: string;
}

const vectors: Vector[] = JSON.parse(
  fs.readFileSync(path.join(ROOT_DIR, 'openapi', 'webhook-signature-vectors.json'), 'utf8'),
).filter((v: Vector) => v.scheme === 'standard-webhooks');
const cases = vectors.map((v) => ({
  secret: v.secret,
  now: v.now,
  body: v.body,
  headers: { 'webhook-id': v.id, 'webhook-timestamp': String(v.timestamp), 'webhook-signature': v.header },
}));
const expected = vectors.map((v) => v.valid);

async function examples(): Promise<Record<string, string>> {
  const module = pathToFileURL(path.join(ROOT_DIR, 'src', 'portal', 'assets', 'events.js')).href;
  return (await import(module)).VERIFY_EXAMPLES;
}

describe('the settings screen: its signature verification examples', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-verify-'));
    fs.writeFileSync(path.join(dir, 'cases.json'), JSON.stringify(cases));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('has a Standard Webhooks vector of each kind to run them on', () => {
    expect(expected.filter(Boolean).length).to.be.at.least(3);
    expect(expected.filter((valid) => !valid).length).to.be.at.least(2);
  });

  it('the Node.js example accepts exactly the valid vectors', async () => {
    fs.writeFileSync(path.join(dir, 'verify.mjs'), (await examples())['Node.js']);
    fs.writeFileSync(
      path.join(dir, 'run.mjs'),
      `import fs from 'node:fs';
import { verify } from './verify.mjs';
const cases = JSON.parse(fs.readFileSync(new URL('./cases.json', import.meta.url), 'utf8'));
console.log(JSON.stringify(cases.map((c) => { Date.now = () => c.now * 1000; return verify(c.secret, c.headers, Buffer.from(c.body, 'utf8')); })));`,
    );
    expect(JSON.parse(execFileSync(process.execPath, [path.join(dir, 'run.mjs')], { encoding: 'utf8' }))).to.deep.equal(
      expected,
    );
  });

  it('the Python example accepts exactly the valid vectors', async function () {
    if (spawnSync('python3', ['--version']).status !== 0) {
      console.warn('      (skipped: no python3; .ci/run does not install it)');
      this.skip();
    }
    fs.writeFileSync(path.join(dir, 'verify.py'), (await examples()).Python);
    fs.writeFileSync(
      path.join(dir, 'run.py'),
      `import json, sys, time
sys.path.insert(0, ${JSON.stringify(dir)})
import verify
results = []
for c in json.load(open(${JSON.stringify(path.join(dir, 'cases.json'))})):
    time.time = lambda now=c["now"]: now
    results.append(verify.verify(c["secret"], c["headers"], c["body"].encode("utf-8")))
print(json.dumps(results))`,
    );
    expect(JSON.parse(execFileSync('python3', [path.join(dir, 'run.py')], { encoding: 'utf8' }))).to.deep.equal(
      expected,
    );
  });
});
