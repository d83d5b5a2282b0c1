import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { fleetAdminOn, type CliRun } from '../support/cli.js';
import { hashApiKey } from '../../src/secrets.js';
import { FIXTURE_ACTOR } from '../support/actors.js';

// `fleet-admin admin-token ...`, and the audit entries the CLI's change commands write through the core functions
// (src/core/audit.ts): actor `cli` and the OS user, the action, the workspace, the target and what changed, never a secret.

async function fleetAdmin(...args: string[]): Promise<CliRun> {
  return fleetAdminOn((await testDatabase()).url, args);
}

async function json(...args: string[]): Promise<any> {
  const run = await fleetAdmin(...args, '--json');
  expect(run.stderr, 'stderr').to.equal('');
  expect(run.code, 'exit code').to.equal(0);
  return JSON.parse(run.stdout);
}

const OS_USER = os.userInfo().username;
const unique = (name: string) => `adm-${name}-${process.pid}-${Date.now().toString(36)}`;

/** The audit entries of one target, oldest first, as stored. */
async function entriesOf(targetId: string) {
  const { db } = await testDatabase();
  return db('audit_entries')
    .whereNot({ actor_name: FIXTURE_ACTOR })
    .where({ target_id: targetId })
    .orderBy('at')
    .select('actor_type', 'actor_id', 'actor_name', 'action', 'workspace_id', 'target_type', 'changes', 'request_id');
}

describe('fleet-admin admin-token, and the audit trail of the CLI', () => {
  it('admin-token create prints {id, token, name, workspace, expiresAt} once, stores only the hash, and is audited', async () => {
    const slug = unique('tok');
    const ws = await json('workspace', 'create', '--slug', slug);
    const created = await json(
      'admin-token',
      'create',
      '--name',
      'platform backend',
      '--workspace',
      slug,
      '--expires-at',
      '2030-01-01T00:00:00Z',
    );
    expect(Object.keys(created)).to.deep.equal(['id', 'token', 'name', 'workspace', 'expiresAt']);
    expect(created.token).to.match(/^fra_[0-9A-Za-z]{40}$/);
    expect(created).to.deep.include({
      name: 'platform backend',
      workspace: slug,
      expiresAt: '2030-01-01T00:00:00.000Z',
    });
    const { db } = await testDatabase();
    const row = await db('admin_tokens').where({ id: created.id }).first();
    expect(row.token_hash).to.deep.equal(hashApiKey(created.token));
    expect(row.workspace_id).to.equal(ws.id);
    expect(JSON.stringify(row)).not.to.include(created.token.slice(4));
    expect(await entriesOf(created.id)).to.deep.equal([
      {
        actor_type: 'cli',
        actor_id: null,
        actor_name: OS_USER,
        action: 'admin_token.create',
        workspace_id: ws.id,
        target_type: 'admin_token',
        changes: { name: 'platform backend', workspace: slug, expiresAt: '2030-01-01T00:00:00.000Z' },
        request_id: null,
      },
    ]);

    const global = await json('admin-token', 'create', '--name', 'ops');
    expect(global).to.deep.include({ name: 'ops', workspace: null, expiresAt: null });

    const listRun = await fleetAdmin('admin-token', 'list', '--json');
    const listed = JSON.parse(listRun.stdout).rows.find((t: { id: string }) => t.id === created.id);
    expect(listed).to.deep.include({
      id: created.id,
      name: 'platform backend',
      workspace: slug,
      expiresAt: '2030-01-01T00:00:00.000Z',
      revokedAt: null,
    });
    expect(listRun.stdout).not.to.include(created.token).and.not.to.include(global.token);

    const revoked = await json('admin-token', 'revoke', '--id', created.id);
    expect(revoked.id).to.equal(created.id);
    expect(new Date(revoked.revokedAt).toISOString()).to.equal(revoked.revokedAt);
    // revoking again changes nothing and records nothing
    expect(await json('admin-token', 'revoke', '--id', created.id)).to.deep.equal(revoked);
    expect((await entriesOf(created.id)).map((e) => [e.action, e.changes])).to.deep.equal([
      ['admin_token.create', { name: 'platform backend', workspace: slug, expiresAt: '2030-01-01T00:00:00.000Z' }],
      ['admin_token.revoke', { revokedAt: revoked.revokedAt }],
    ]);
  });

  it('admin-token refuses bad input on one line, changing nothing', async () => {
    const { db } = await testDatabase();
    const before = (await db('admin_tokens').count<{ count: string }[]>('* as count'))[0].count;
    for (const [args, message] of [
      [
        ['--name', 'x', '--expires-at', 'tomorrow'],
        'fleet-admin: --expires-at must be an ISO 8601 date-time, got "tomorrow"',
      ],
      [['--name', 'x', '--workspace', unique('none')], /^fleet-admin: no workspace with slug "adm-none-/],
      [['--name', ' '], 'fleet-admin: --name must be 1 to 100 characters'],
    ] as const) {
      const run = await fleetAdmin('admin-token', 'create', ...args);
      expect(run.code).to.equal(1);
      expect(run.stdout).to.equal('');
      if (typeof message === 'string') expect(run.stderr.trimEnd()).to.equal(message);
      else expect(run.stderr.trimEnd()).to.match(message);
    }
    const revoke = await fleetAdmin('admin-token', 'revoke', '--id', '5d0c9a1e-1111-4222-8333-944455556666');
    expect(revoke.stderr.trimEnd()).to.equal(
      'fleet-admin: no admin token with id 5d0c9a1e-1111-4222-8333-944455556666',
    );
    expect((await db('admin_tokens').count<{ count: string }[]>('* as count'))[0].count).to.equal(before);
  });

  it('workspace, key and endpoint commands write one audit entry per change, with what changed and never a key or secret', async () => {
    const slug = unique('audit');
    const ws = await json('workspace', 'create', '--slug', slug, '--timezone', 'Asia/Riyadh', '--reminders-ahead', '5');
    await json('workspace', 'set', '--slug', slug, '--status', 'frozen', '--reminders-ahead', '5');
    const key = await json('key', 'create', '--workspace', slug, '--role', 'bi');
    const revoked = await json('key', 'revoke', '--id', key.id);
    const endpoint = await json(
      'endpoint',
      'create',
      '--workspace',
      slug,
      '--url',
      'https://hooks.example.ae/audit',
      '--name',
      'Ops',
      '--events',
      'payment.captured',
    );
    await json('endpoint', 'disable', '--id', endpoint.id);
    await json('endpoint', 'enable', '--id', endpoint.id);
    const rotated = await json('endpoint', 'rotate-secret', '--id', endpoint.id, '--overlap-hours', '0');
    const importFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'frs-audit-')), 'import.json');
    fs.writeFileSync(
      importFile,
      JSON.stringify({
        owners: [{ id: crypto.randomUUID(), name: 'Audited Owner' }],
        customers: [
          { id: crypto.randomUUID(), name: 'A' },
          { id: crypto.randomUUID(), name: 'B' },
        ],
      }),
    );
    await json('import', '--workspace', slug, '--file', importFile);

    const cli = { actor_type: 'cli', actor_id: null, actor_name: OS_USER, workspace_id: ws.id, request_id: null };
    expect(await entriesOf(ws.id)).to.deep.equal([
      {
        ...cli,
        action: 'workspace.create',
        target_type: 'workspace',
        changes: { slug, status: 'active', timezone: 'Asia/Riyadh', remindersAhead: 5 },
      },
      // reminders ahead was sent with its current value: no change
      {
        ...cli,
        action: 'workspace.update',
        target_type: 'workspace',
        changes: { status: { from: 'active', to: 'frozen' } },
      },
      // what an import loaded, by entity: counts, never the records
      {
        ...cli,
        action: 'workspace.import',
        target_type: 'workspace',
        changes: { imported: { owners: 1, customers: 2 } },
      },
    ]);
    expect(await entriesOf(key.id)).to.deep.equal([
      { ...cli, action: 'api_key.create', target_type: 'api_key', changes: { role: 'bi', expiresAt: null } },
      { ...cli, action: 'api_key.revoke', target_type: 'api_key', changes: { revokedAt: revoked.revokedAt } },
    ]);
    expect(await entriesOf(endpoint.id)).to.deep.equal([
      {
        ...cli,
        action: 'endpoint.create',
        target_type: 'endpoint',
        changes: { name: 'Ops', url: 'https://hooks.example.ae/audit', events: ['payment.captured'] },
      },
      { ...cli, action: 'endpoint.disable', target_type: 'endpoint', changes: { isActive: false } },
      { ...cli, action: 'endpoint.enable', target_type: 'endpoint', changes: { isActive: true } },
      {
        ...cli,
        action: 'endpoint.rotate_secret',
        target_type: 'endpoint',
        changes: { overlapHours: 0, previousSecretExpiresAt: null },
      },
    ]);
    // No secret anywhere in the trail: the key, the first signing secret, the rotated one.
    const { db } = await testDatabase();
    const trail = JSON.stringify(
      await db('audit_entries').whereNot({ actor_name: FIXTURE_ACTOR }).where({ workspace_id: ws.id }).select(),
    );
    for (const secret of [key.key, endpoint.secret, rotated.secret]) expect(trail).not.to.include(secret.slice(-20));
  });
});
