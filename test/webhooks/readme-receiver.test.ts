import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { expect } from 'chai';
import { ROOT_DIR } from '../../src/config.js';
import { signatureHeader } from '../../src/webhooks/signing.js';

// The receiver example of the receivers' guide (docs/webhooks.md) is runnable as written: extracted, started, and fed signed deliveries.
describe("the receivers' guide: its example receiver (docs/webhooks.md)", () => {
  const secret = 'whsec_ReadmeReceiverSecret0123456789abcdef';
  let child: ReturnType<typeof spawn>;
  let url: string;
  let output = '';

  before(async () => {
    const readme = fs.readFileSync(path.join(ROOT_DIR, 'docs', 'webhooks.md'), 'utf8');
    const code = readme.match(/```js\n(\/\/ receiver\.mjs[\s\S]*?)```/)![1];
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'readme-receiver-'));
    fs.writeFileSync(path.join(dir, 'receiver.mjs'), code);
    // PORT=0: the system picks a free port, which the example prints.
    child = spawn(process.execPath, [path.join(dir, 'receiver.mjs')], {
      env: { ...process.env, SIGNING_SECRET: secret, PORT: '0' },
    });
    child.stdout!.on('data', (chunk) => {
      output += chunk;
    });
    while (!/listening on port \d+/.test(output)) await once(child.stdout!, 'data');
    url = `http://127.0.0.1:${output.match(/listening on port (\d+)/)![1]}/hooks`;
  });
  after(() => child.kill());

  const post = (body: string, signature: string) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'service-signature': signature },
      body,
    });

  it('accepts a signed delivery once, ignores its repeat, and rejects a tampered or stale one', async () => {
    const body = JSON.stringify({
      id: '3f1c9a52-7d4e-4b8a-9c21-6e5f0d2b8a47',
      event: 'webhook.test',
      createdAt: '2026-11-22T08:30:00.000Z',
      data: { endpointId: '8d6f2c1e-4a3b-4c5d-8e9f-0a1b2c3d4e5f', message: 'hi' },
    });
    expect((await post(body, signatureHeader(secret, body))).status).to.equal(204);
    expect((await post(body, signatureHeader(secret, body))).status).to.equal(204);
    expect(output.match(/webhook\.test 3f1c9a52/g)).to.have.length(1);
    expect((await post(body.replace('hi', 'ho'), signatureHeader(secret, body))).status).to.equal(400);
    expect((await post(body, signatureHeader('whsec_another', body))).status).to.equal(400);
    const stale = Math.floor(Date.now() / 1000) - 301;
    expect((await post(body, signatureHeader(secret, body, stale))).status).to.equal(400);
    expect((await post(body, `v1=${signatureHeader(secret, body).split('v1=')[1]}`)).status).to.equal(400);
  });
});
