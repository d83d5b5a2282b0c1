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
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { createWorkspace } from '../../src/core/workspaces.js';
import { createEndpoint } from '../../src/core/webhooks/endpoints.js';
import { rotateSigningSecret } from '../../src/core/webhooks/signing-secrets.js';
import { openSigningSecret } from '../../src/webhooks/sealing.js';
import { ADMIN_API, expectDocumented } from '../support/http.js';
import { bookingConfirmedData, dropTestWorkspaces, eventually } from './support.js';
import { startReceiver, verifyIndependently } from '../support/receiver.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import * as frozenSealing from '../../migrations/support/sealed-signing-secrets.js';
import { operator, operatorWith } from '../support/actors.js';
import { processConfig } from '../../src/config.js';

// Issue 31, point 1: only the worker can open a signing secret. The process serving the public listener (the API, the
// admin API, the settings screen) holds no key that opens one and no database role that reads one.
// Point 7: keys rotate whole. A master-key rotation leaves the admin API's stored answers (kept for an
// Idempotency-Key) answering as before: a replay after `secrets rotate-master-key` is the first answer, not a 500.

const OPERATOR = { actor: { type: 'cli' as const, name: os.userInfo().username } };

/** `npm start`'s entry on `url` with `env` over this process's; resolves once its listeners are up. */
async function startService(
  url: string,
  env: NodeJS.ProcessEnv,
): Promise<{ child: ChildProcess; output: { stdout: string; stderr: string }; stop: () => Promise<void> }> {
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
    child.stderr!.on('data', (chunk) => {
      output.stderr += chunk;
    });
    void exit.then((code) => reject(new Error(`the service exited (${code}) before it was ready: ${output.stderr}`)));
  });
  return {
    child,
    output,
    stop: async () => {
      child.kill('SIGTERM');
      await exit;
    },
  };
}

/** The error of a statement refused for want of a privilege (anything else fails the test). */
async function permissionDenied(query: Promise<unknown>): Promise<string> {
  try {
    await query;
  } catch (err) {
    expect((err as { code?: string }).code, (err as Error).message).to.equal('42501');
    return (err as Error).message;
  }
  throw new Error('the statement was not refused');
}

describe('only the worker can open a signing secret: the API process, as its roles and with its keys, opens none', () => {
  after(async () => dropTestWorkspaces((await testDatabase()).db));

  it("the API's and the admin API's roles cannot read a sealed secret; the admin role seals one and rotates it, and only the master key opens them", async () => {
    const database = await testDatabase();
    const owner = database.db;
    const api = database.forRole('api');
    const admin = database.forRole('admin');
    const workspace = await createWorkspace(owner, operator, {
      slug: `sealing-${process.pid}-${Date.now().toString(36)}`,
    });
    // Made and rotated as the admin API does, in its role (sealed to the recorded public key), by a token it knows
    const token = await createAdminToken(owner, operator, { name: 'sealing test', workspaceId: 'every' });
    const asToken = operatorWith({ actor: { type: 'admin_token', id: token.id, name: token.name } });
    const made = await createEndpoint(admin, asToken, {
      workspaceId: workspace.id,
      url: 'https://hooks.example.ae/sealed',
      policy: processConfig().destinationPolicy,
    });
    const rotated = await rotateSigningSecret(admin, asToken, {
      endpointId: made.id,
      workspaceId: workspace.id,
      overlapHours: 2,
      now: new Date(),
    });
    for (const role of [api, admin]) {
      for (const column of ['secret_sealed', 'previous_secret_sealed']) {
        expect(
          await permissionDenied(role.raw(`SELECT ${column} FROM webhook_endpoints WHERE id = ?`, [made.id])),
        ).to.match(/ - permission denied for table webhook_endpoints$/);
      }
      await permissionDenied(role.raw('SELECT * FROM webhook_endpoints WHERE id = ?', [made.id]));
      // nor through a copy of one into a column it may read
      await permissionDenied(
        role.raw("UPDATE webhook_endpoints SET name = encode(secret_sealed, 'base64') WHERE id = ?", [made.id]),
      );
      await permissionDenied(
        role.raw('UPDATE webhook_endpoints SET previous_secret_sealed = secret_sealed WHERE id = ?', [made.id]),
      );
    }
    // What the admin role reads of an endpoint: which key seals it, never the sealed value
    expect(
      await admin('webhook_endpoints').where({ id: made.id }).first('secret_key_id', 'previous_secret_key_id'),
    ).to.deep.equal({
      secret_key_id: (await owner('master_key_record').first('key_id')).key_id,
      previous_secret_key_id: (await owner('master_key_record').first('key_id')).key_id,
    });
    // The worker's role reads them, and the master key opens them: the new secret, the first one as the previous
    const row = await database
      .forRole('worker')('webhook_endpoints')
      .where({ id: made.id })
      .first('secret_key_id', 'secret_sealed', 'previous_secret_key_id', 'previous_secret_sealed');
    expect(openSigningSecret(made.id, { keyId: row.secret_key_id, sealed: row.secret_sealed })).to.equal(
      rotated.secret,
    );
    expect(
      openSigningSecret(made.id, { keyId: row.previous_secret_key_id, sealed: row.previous_secret_sealed }),
    ).to.equal(made.secret);
    expect([row.secret_sealed[0], row.previous_secret_sealed[0]], 'sealed boxes').to.deep.equal([2, 2]);
  });

  it('with the keys it holds (given FRS_SECRET_KEY as npm start may be), the API process opens no sealed secret: no master key, and its derived keys open nothing', async () => {
    const { db: owner } = await testDatabase();
    const workspace = await createWorkspace(owner, operator, {
      slug: `sealing-keys-${process.pid}-${Date.now().toString(36)}`,
    });
    const made = await createEndpoint(owner, operator, {
      workspaceId: workspace.id,
      url: 'https://hooks.example.ae/keys',
      policy: processConfig().destinationPolicy,
    });
    const row = await owner('webhook_endpoints').where({ id: made.id }).first('secret_key_id', 'secret_sealed');
    // this process, holding the master key, opens it
    expect(openSigningSecret(made.id, { keyId: row.secret_key_id, sealed: row.secret_sealed })).to.equal(made.secret);
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(ROOT_DIR, 'test', 'support', 'api-process-keys.ts'),
        made.id,
        row.secret_key_id,
        row.secret_sealed.toString('base64'),
      ],
      {
        cwd: ROOT_DIR,
        env: {
          ...process.env,
          FRS_SECRET_KEY: process.env.FRS_SECRET_KEY,
          FRS_SECRET_KEY_PREVIOUS: crypto.randomBytes(32).toString('base64'),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr!.on('data', (chunk) => {
      stderr += chunk;
    });
    expect(await new Promise((resolve) => child.on('close', resolve)), stderr).to.equal(0);
    const seen = JSON.parse(stdout);
    expect(seen.masterKeyVariables, 'taken out of its environment').to.deep.equal([]);
    expect(seen.apiSecret).to.match(/^as_[0-9a-f]{16}$/);
    expect(seen.tries.service).to.equal(
      'refused: this process holds no master key: it serves the API (FRS_ROLE=all); only the webhook worker holds the master key',
    );
    const others = Object.entries(seen.tries).filter(([name]) => name !== 'service');
    expect(others).to.have.length(6);
    for (const [name, outcome] of others) expect(outcome, name).to.match(/^refused: /);
    expect(stdout).not.to.include(made.secret);
  });
});

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
    this.timeout(300_000);
    // The master key in a key file under the data folder, which every process here reads.
    const keys = { FRS_DATA_DIR: dataDir, FRS_SECRET_KEY: '', FRS_SECRET_KEY_PREVIOUS: '', FRS_API_SECRET: apiSecret };
    const cli = async (...args: string[]) => {
      const run = await fleetAdminOn(url, [...args, '--json'], keys);
      expect(run.stderr, args.join(' ')).to.equal('');
      return JSON.parse(run.stdout);
    };
    await cli('secrets', 'create-master-key');
    await cli('migrate');
    const workspace = await createWorkspace(own, operator, { slug: 'rotate-whole' });
    const token = await createAdminToken(own, operatorWith(OPERATOR), { name: 'platform', workspaceId: 'every' });
    const adminPort = await freePort();
    const service = await startService(url, {
      ...keys,
      FRS_ROLE: 'api',
      PORT: String(await freePort()),
      FRS_ADMIN_PORT: String(adminPort),
    });
    try {
      const post = async (idempotencyKey = 'create-once-7f3a', name = 'Whole') => {
        const response = await fetch(`http://127.0.0.1:${adminPort}/admin/v1/workspaces/${workspace.id}/endpoints`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token.token}`,
            'content-type': 'application/json',
            'idempotency-key': idempotencyKey,
          },
          body: JSON.stringify({ url: `https://hooks.example.ae/${name}`, name }),
        });
        const body = await response.json();
        expectDocumented(ADMIN_API, 'POST', `/admin/v1/workspaces/${workspace.id}/endpoints`, {
          status: response.status,
          headers: response.headers,
          body,
        });
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
      expect(
        await own('webhook_endpoints').where({ workspace_id: workspace.id }).orderBy('name').pluck('name'),
      ).to.deep.equal(['Next', 'Whole']);
    } finally {
      await service.stop();
    }
    expect(service.output.stdout + service.output.stderr).not.to.include('whsec_');
  });

  it('an API process given a stale API secret refuses at start, naming the setting; one given the new secret with the old as previous moves the record', async function () {
    this.timeout(180_000);
    const keys = {
      FRS_DATA_DIR: dataDir,
      FRS_SECRET_KEY: '',
      FRS_SECRET_KEY_PREVIOUS: '',
      FRS_API_SECRET_PREVIOUS: '',
    };
    const idOf = (secret: string) =>
      `as_${crypto.createHash('sha256').update('frs-api-secret-id\0').update(Buffer.from(secret, 'base64')).digest('hex').slice(0, 16)}`;
    const refusedAtStart = async (env: NodeJS.ProcessEnv) => {
      const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT_DIR, 'src', 'main.ts')], {
        cwd: ROOT_DIR,
        env: {
          ...process.env,
          DATABASE_URL: url,
          HOST: '127.0.0.1',
          PORT: '0',
          FRS_ADMIN_PORT: '0',
          FRS_METRICS_PORT: '0',
          LOG_LEVEL: 'warn',
          FRS_ROLE: 'api',
          ...keys,
          ...env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr!.on('data', (chunk) => {
        stderr += chunk;
      });
      expect(await new Promise((resolve) => child.on('exit', resolve))).to.equal(1);
      return stderr.split('\n').filter((line) => line.startsWith('fleet-rental: failed'));
    };
    // recorded by the previous test's API process
    expect(await own('master_key_record').first('api_secret_id')).to.deep.equal({ api_secret_id: idOf(apiSecret) });
    const other = crypto.randomBytes(32).toString('base64');
    const refusal = (secret: string, ids: string, recorded: string) =>
      `fleet-rental: failed to start: ${secret} holds API secret ${ids}, but the database records ${recorded}, the one every API process holds: give this process that secret ` +
      '(during a change of it, the new one in FRS_API_SECRET and the old one in FRS_API_SECRET_PREVIOUS)';
    expect(await refusedAtStart({ FRS_API_SECRET: other })).to.deep.equal([
      refusal('FRS_API_SECRET', idOf(other), idOf(apiSecret)),
    ]);
    // The change of the secret: a process given the new one, the old one as previous, starts and moves the record...
    const service = await startService(url, {
      ...keys,
      FRS_ROLE: 'api',
      PORT: String(await freePort()),
      FRS_ADMIN_PORT: '0',
      FRS_API_SECRET: other,
      FRS_API_SECRET_PREVIOUS: apiSecret,
    });
    await service.stop();
    expect(await own('master_key_record').first('api_secret_id')).to.deep.equal({ api_secret_id: idOf(other) });
    // ...and a process still given only the old one is stale: refused.
    expect(await refusedAtStart({ FRS_API_SECRET: apiSecret })).to.deep.equal([
      refusal('FRS_API_SECRET', idOf(apiSecret), idOf(other)),
    ]);
  });
});

describe('the move to sealed boxes: `secrets rotate-master-key` re-seals the secrets of before while a worker signs deliveries (a database of its own)', () => {
  let url: string;
  let own: Knex;
  const name = `fleet_sealing_move_${process.pid}`;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-sealing-move-'));

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

  it("every delivery, before, during and after the re-seal, carries a signature with the endpoint's secret; afterwards every secret is a sealed box under the new key", async function () {
    this.timeout(180_000);
    // The master key in a key file every process here reads; the worker alone holds it.
    const keys = { FRS_DATA_DIR: dataDir, FRS_SECRET_KEY: '', FRS_SECRET_KEY_PREVIOUS: '', FRS_SECRET_KEY_FILE: '' };
    const cli = async (...args: string[]) => {
      const run = await fleetAdminOn(url, [...args, '--json'], keys);
      expect(run.stderr, args.join(' ')).to.equal('');
      return JSON.parse(run.stdout);
    };
    await cli('secrets', 'create-master-key');
    await cli('migrate');
    const receiver = await startReceiver(() => ({ status: 204 }));
    const workspace = await createWorkspace(own, operator, { slug: 'move' });
    // A secret as the previous release sealed it (version 1: AES-256-GCM under the master key itself), with the key file
    // as this process's master key while it seals.
    const secret = `whsec_${crypto.randomBytes(20).toString('hex')}`;
    const endpointId = crypto.randomUUID();
    const saved = { ...process.env };
    let legacy;
    try {
      Object.assign(process.env, { FRS_DATA_DIR: dataDir, FRS_SECRET_KEY: '' });
      legacy = frozenSealing.sealedSecretColumns(endpointId, secret);
    } finally {
      Object.assign(process.env, saved);
    }
    expect(legacy.secret_sealed[0]).to.equal(1);
    await own('webhook_endpoints').insert({
      id: endpointId,
      workspace_id: workspace.id,
      name: 'before',
      url: receiver.endpointUrl(secret),
      ...legacy,
    });
    const worker = await startService(url, { ...keys, FRS_ROLE: 'worker', FRS_ALLOW_PRIVATE_WEBHOOK_URLS: '1' });
    try {
      const publish = () =>
        recordEvent(own, {
          workspaceId: workspace.id,
          event: 'booking.confirmed',
          data: bookingConfirmedData(),
          source: 'publish',
        });
      await publish();
      await receiver.waitForRequests(1, 30_000);
      // Events keep coming while the re-seal runs, and after it.
      let publishing = true;
      const publisher = (async () => {
        let count = 0;
        while (publishing) {
          await publish();
          count++;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        return count;
      })();
      const rotated = await cli('secrets', 'rotate-master-key', '--key-file-is-shared');
      expect(rotated.resealed).to.equal(1);
      await new Promise((resolve) => setTimeout(resolve, 500));
      publishing = false;
      const published = 1 + (await publisher);
      await publish();
      await receiver.waitForRequests(published + 1, 60_000);
      expect(receiver.requests).to.have.length(published + 1);
      for (const request of receiver.requests) {
        expect(verifyIndependently(request.rawBody, request.signature, secret, Date.now() / 1000)).to.deep.equal({
          ok: true,
        });
      }
      await eventually(
        async () =>
          Number(
            (await own('deliveries').whereNot({ status: 'accepted' }).count<{ count: string }[]>('* as count'))[0]
              .count,
          ) === 0,
        10_000,
        'every delivery accepted',
      );
      const row = await own('webhook_endpoints').where({ id: endpointId }).first('secret_key_id', 'secret_sealed');
      expect([row.secret_key_id, row.secret_sealed[0]]).to.deep.equal([rotated.keyId, 2]);
      expect(await own('master_key_record').first('key_id')).to.deep.equal({ key_id: rotated.keyId });
    } finally {
      await worker.stop();
      await receiver.close();
    }
  });
});
