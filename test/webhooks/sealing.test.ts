import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { dropDatabase, testDatabase } from '../support/database.js';
import { fleetAdminOn } from '../support/cli.js';
import { freePort } from '../support/ports.js';
import { createKnex } from '../../src/db/database.js';
import { ROOT_DIR } from '../../src/config.js';
import { createAdminToken } from '../../src/admin-tokens.js';
import { createWorkspace } from '../../src/workspaces.js';
import { expectAdminDocumented } from '../admin/support.js';

// Issue 31, point 7: keys rotate whole. A master-key rotation leaves the admin API's stored answers (kept for an
// Idempotency-Key) answering as before: a replay after `secrets rotate-master-key` is the first answer, not a 500.

const OPERATOR = { actor: { type: 'cli' as const, name: os.userInfo().username } };

/** `npm start`'s entry on `url` with `env` over this process's; resolves once its listeners are up. */
async function startService(url: string, env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; output: { stdout: string; stderr: string }; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT_DIR, 'src', 'main.ts')], {
    cwd: ROOT_DIR,
    env: { ...process.env, DATABASE_URL: url, HOST: '127.0.0.1', FRS_METRICS_PORT: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = { stdout: '', stderr: '' };
  const exit = new Promise<number | null>((resolve) => child.on('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk) => {
      output.stdout += chunk;
      if (output.stdout.includes('Ready ')) resolve();
    });
    child.stderr!.on('data', (chunk) => { output.stderr += chunk; });
    void exit.then((code) => reject(new Error(`the service exited (${code}) before it was ready: ${output.stderr}`)));
  });
  return { child, output, stop: async () => { child.kill('SIGTERM'); await exit; } };
}

describe('keys rotate whole: the admin API replays a stored answer after a master-key rotation (a database of its own)', () => {
  let url: string;
  let own: Knex;
  const name = `fleet_rotate_whole_${process.pid}`;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-rotate-whole-'));
  const apiSecret = crypto.randomBytes(32).toString('base64');

  before(async () => {
    const admin = await testDatabase();
    await admin.db.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
    await admin.db.raw('CREATE DATABASE ??', [name]);
    url = admin.url.replace(/\/[^/?]+(\?|$)/, `/${name}$1`);
    own = createKnex(url, 2);
  });
  after(async () => {
    await own.destroy();
    await dropDatabase((await testDatabase()).url, name);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('POST with an Idempotency-Key, rotate the master key (key file shared by every process), the same POST again: the first answer', async function () {
    this.timeout(120_000);
    // The master key in a key file under the data folder, which every process here reads.
    const keys = { FRS_DATA_DIR: dataDir, FRS_SECRET_KEY: '', FRS_SECRET_KEY_PREVIOUS: '', FRS_API_SECRET: apiSecret };
    const cli = async (...args: string[]) => {
      const run = await fleetAdminOn(url, [...args, '--json'], keys);
      expect(run.stderr, args.join(' ')).to.equal('');
      return JSON.parse(run.stdout);
    };
    await cli('secrets', 'create-master-key');
    await cli('migrate');
    const workspace = await createWorkspace(own, { slug: 'rotate-whole' });
    const token = await createAdminToken(own, { name: 'platform' }, OPERATOR);
    const adminPort = await freePort();
    const service = await startService(url, { ...keys, FRS_ROLE: 'api', PORT: String(await freePort()), FRS_ADMIN_PORT: String(adminPort) });
    try {
      const post = async (idempotencyKey = 'create-once-7f3a', name = 'Whole') => {
        const response = await fetch(`http://127.0.0.1:${adminPort}/admin/v1/workspaces/${workspace.id}/endpoints`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token.token}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
          body: JSON.stringify({ url: `https://hooks.example.ae/${name}`, name }),
        });
        const body = await response.json();
        expectAdminDocumented('POST', `/admin/v1/workspaces/${workspace.id}/endpoints`, { status: response.status, headers: response.headers, body });
        return { status: response.status, body };
      };
      const first = await post();
      expect(first.status).to.equal(201);
      expect(first.body.secret).to.match(/^whsec_[0-9A-Za-z]{40}$/);
      const rotated = await cli('secrets', 'rotate-master-key', '--key-file-is-shared');
      expect(rotated.resealed).to.equal(1);
      // The running process seals the next secret under the new key (it follows the rotation without a restart)...
      const next = await post('create-next-9c1d', 'Next');
      expect(next.status).to.equal(201);
      // ...and still replays the answer it kept before the rotation.
      const replay = await post();
      expect(replay).to.deep.equal(first);
      expect(await own('webhook_endpoints').where({ workspace_id: workspace.id }).orderBy('name').pluck('name')).to.deep.equal(['Next', 'Whole']);
    } finally {
      await service.stop();
    }
    expect(service.output.stdout + service.output.stderr).not.to.include('whsec_');
  });
});
