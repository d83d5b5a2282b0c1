import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { startAdminApi, type TestAdminApi } from './support.js';
import { testDatabase } from '../support/database.js';
import { fleetAdminOn } from '../support/cli.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { createWorkspace } from '../../src/core/workspaces.js';
import { flagOf } from '../../src/cli/flags.js';
import { InvalidFieldError } from '../../src/errors.js';
import { operatorWith } from '../support/actors.js';

// The core refuses a field by its name; each client says it its own way: the admin API `Field "timezone" ...` with
// the field in `reason`, the CLI `--timezone ...` (src/cli/flags.ts). Neither reads the other's words.
describe('core refusals: fields named by each client', () => {
  let admin: TestAdminApi;
  let token: string;
  let workspace: { id: string; slug: string };
  const operator = { actor: { type: 'cli' as const, name: 'test' } };
  before(async () => {
    const { db } = await testDatabase();
    admin = await startAdminApi({ authFailures: { perMinute: 0, trustedProxies: [] } });
    workspace = await createWorkspace(db, operatorWith(operator), { slug: `fields-${randomUUID().slice(0, 8)}` });
    // (all workspaces: webhookAllowedCidrs is the platform's setting)
    token = (await createAdminToken(db, operatorWith(operator), { name: 'field names', workspaceId: 'every' })).token;
  });
  after(async () => {
    await admin.close();
    await (await testDatabase()).db('workspaces').where({ id: workspace.id }).delete();
  });
  const cli = async (...args: string[]) => fleetAdminOn((await testDatabase()).url, args);

  it('answers an unknown time zone through the admin API naming the field, and through the CLI naming the flag', async () => {
    const answer = await admin.request('PATCH', `/admin/v1/workspaces/${workspace.id}`, {
      token,
      body: { timezone: 'Mars/Olympus' },
    });
    expect([answer.status, answer.body.error.code, answer.body.error.reason, answer.body.error.message]).to.deep.equal([
      400,
      'invalid_request',
      'timezone',
      'Field "timezone" must be an IANA time zone such as Asia/Dubai, got the unknown "Mars/Olympus"',
    ]);
    const run = await cli('workspace', 'set', '--slug', workspace.slug, '--timezone', 'Mars/Olympus');
    expect([run.code, run.stdout, run.stderr]).to.deep.equal([
      1,
      '',
      'fleet-admin: --timezone must be an IANA time zone such as Asia/Dubai, got the unknown "Mars/Olympus"\n',
    ]);
  });

  it("says a camelCase field as the admin API names it and as the CLI's kebab-case flag", async () => {
    const answer = await admin.request('PATCH', `/admin/v1/workspaces/${workspace.id}`, {
      token,
      body: { webhookAllowedCidrs: ['10.2.0.0/33'] },
    });
    expect([answer.status, answer.body.error.reason, answer.body.error.message]).to.deep.equal([
      400,
      'webhookAllowedCidrs',
      'Field "webhookAllowedCidrs" must hold CIDR ranges such as 10.1.0.0/16 or fd12:3456::/32, got "10.2.0.0/33"',
    ]);
    const run = await cli('workspace', 'set', '--slug', workspace.slug, '--webhook-allowed-cidrs', '10.2.0.0/33');
    expect(run.stderr).to.equal(
      'fleet-admin: --webhook-allowed-cidrs must hold CIDR ranges such as 10.1.0.0/16 or fd12:3456::/32, got "10.2.0.0/33"\n',
    );
    // Nothing changed, by either client.
    expect(
      await (
        await testDatabase()
      )
        .db('workspaces')
        .where({ id: workspace.id })
        .first('timezone', 'webhook_allowed_cidrs'),
    ).to.deep.equal({
      timezone: 'Asia/Dubai',
      webhook_allowed_cidrs: [],
    });
  });

  it("names the other fields a refusal mentions in each client's words, and no flag reaches an HTTP client", async () => {
    const url = `https://hooks.example.ae/${randomUUID()}`;
    const endpoints = `/admin/v1/workspaces/${workspace.id}/endpoints`;
    const created = await admin.request('POST', endpoints, { token, body: { url } });
    expect(created.status).to.equal(201);
    const again = await admin.request('POST', endpoints, { token, body: { url } });
    expect([again.status, again.body.error.code, again.body.error.reason, again.body.error.message]).to.deep.equal([
      409,
      'conflict',
      'url',
      `the workspace already has an endpoint with this URL (${created.body.id}); send "allowDuplicateUrl" to register it again`,
    ]);
    const named = await admin.request('POST', endpoints, { token, body: { url: `${url}/x`, name: 'ops\u001b[31m' } });
    expect([named.status, named.body.error.reason, named.body.error.message]).to.deep.equal([
      400,
      'name',
      'Field "name" must hold no control characters',
    ]);
    for (const answer of [again, named]) expect(answer.body.error.message).not.to.include('--');
    const run = await cli(
      'endpoint',
      'create',
      '--workspace',
      workspace.slug,
      '--url',
      `${url}/x`,
      '--name',
      'ops\u001b[31m',
    );
    expect(run.stderr).to.equal('fleet-admin: --name must hold no control characters\n');
  });

  it("takes each field's flag from one table: kebab-case, or the shorter flag the CLI has", () => {
    expect(
      ['url', 'expiresAt', 'overlapHours', 'remindersAhead', 'allowDuplicateUrl', 'endpointId', 'expiresInMinutes'].map(
        flagOf,
      ),
    ).to.deep.equal([
      '--url',
      '--expires-at',
      '--overlap-hours',
      '--reminders-ahead',
      '--allow-duplicate-url',
      '--endpoint',
      '--minutes',
    ]);
    const refusal = new InvalidFieldError('until', (name) => `must be later than ${name('since')}`);
    expect([
      refusal.message,
      refusal.say(flagOf),
      refusal.say(
        (f) => `"${f}"`,
        (f) => `Field "${f}"`,
      ),
    ]).to.deep.equal([
      'until must be later than since',
      '--until must be later than --since',
      'Field "until" must be later than "since"',
    ]);
  });

  it('has no core refusal phrased as a CLI flag (only src/cli/ says flags)', () => {
    const root = path.resolve(import.meta.dirname, '../../src');
    const flagged: string[] = [];
    for (const file of fs.readdirSync(root, { recursive: true }) as string[]) {
      if (!file.endsWith('.ts') || file.startsWith(`cli${path.sep}`)) continue;
      // (comments left out: they may show how a client says a refusal)
      const text = fs
        .readFileSync(path.join(root, file), 'utf8')
        .split('\n')
        .filter((line) => !/^\s*(\*|\/\/|\/\*)/.test(line))
        .join('\n');
      for (const match of text.matchAll(/new \w*Error\([^;]*?['"`]--[a-z][^;]*;/g))
        flagged.push(`${file}: ${match[0].slice(0, 80)}`);
    }
    expect(flagged).to.deep.equal([]);
  });
});
