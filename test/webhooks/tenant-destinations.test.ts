import crypto from 'node:crypto';
import os from 'node:os';
import { expect } from 'chai';
import pino from 'pino';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { fleetAdminOn } from '../support/cli.js';
import { PORTAL_API, startScreen, type TestScreen } from '../portal/support.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { createWorkspace, updateWorkspace } from '../../src/core/workspaces.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { bookingConfirmedData, dropTestWorkspaces, webhookWorkspace } from './support.js';
import { destinationPolicyFromEnv, type Env } from '../../src/config.js';
import { reconfigure } from '../support/config.js';
import { idOf, operator, operatorWith, FIXTURE_ACTOR } from '../support/actors.js';

// Tenants never learn the network (issue 31, point 4). A workspace's staff (its settings screen, its own admin token)
// and the admin API are told the CLASS of a refused destination, never the address a name resolved to nor an
// operator's setting; the full reason goes to the server log, and the operator's CLI prints it. Private ranges are
// opened per workspace (webhookAllowedCidrs), by an all-workspaces token or the CLI only, and apply to that
// workspace's endpoints alone, at registration and when a delivery connects.
//
// Names resolve through a DNS server of the test's own (FRS_WEBHOOK_DNS_SERVERS), so no hosts file is involved. The
// run allows private destinations (test/support/hooks.ts): these tests switch that off while they run.

const OPERATOR = { actor: { type: 'cli' as const, name: os.userInfo().username } };
const unique = (name: string) => `td-${name}-${crypto.randomUUID().slice(0, 8)}`;
/** What a workspace's staff are told of https://intranet.tenant.test/: the class only. */
const CLASS_ONLY = `Field "url" refused: intranet.tenant.test resolves to a private address; webhooks are not sent to private destinations unless the service's operator opens the range for this workspace`;
const INTERNAL_ADDRESS = '10.20.30.40';

describe('webhooks: tenants never learn the network', () => {
  let db: Knex;
  let dns: TestDnsServer;
  let screen: TestScreen;
  let receiver: Receiver;
  let restore = () => undefined as void;
  let strict: Env;

  before(async () => {
    ({ db } = await testDatabase());
    receiver = await startReceiver();
    dns = await startDnsServer({
      records: {
        'intranet.tenant.test': { addresses: [INTERNAL_ADDRESS], ttl: 60 },
        'receiver.tenant.test': { addresses: ['127.0.0.1'], ttl: 60 },
        'unseen.tenant.test': { addresses: ['10.20.30.41'], ttl: 60 },
      },
      silent: [],
    });
    // The production default (strict), the test's name server; the admin API reads the policy per request.
    strict = {
      FRS_ALLOW_PRIVATE_WEBHOOK_URLS: '0',
      FRS_WEBHOOK_DNS_SERVERS: dns.address,
      FRS_WEBHOOK_ALLOWED_CIDRS: undefined,
    };
    restore = reconfigure(strict);
    screen = await startScreen();
  });
  after(async () => {
    restore();
    await screen?.close();
    await dns?.close();
    await receiver?.close();
    await dropTestWorkspaces(db);
  });

  const endpoints = (workspaceId: string) => `/admin/v1/workspaces/${workspaceId}/endpoints`;
  const liveEndpoints = async (workspaceId: string) =>
    (await db('webhook_endpoints').where({ workspace_id: workspaceId }).whereNull('deleted_at').select('url')).map(
      (r) => r.url,
    );
  /** A workspace with a token confined to it and an open settings-screen session. */
  const tenant = async (name: string) => {
    const workspace = await createWorkspace(db, operator, { slug: unique(name) });
    const { token } = await createAdminToken(db, operatorWith(OPERATOR), {
      name: `${name} backend`,
      workspaceId: await idOf(db, workspace.slug),
    });
    const { cookie, session } = await screen.open((await screen.link(workspace.id)).key);
    const viaScreen = (method: string, path: string, body?: unknown) =>
      screen.request(method, `${PORTAL_API}${path}`, { cookie, csrf: session.csrfToken, body });
    const viaToken = (method: string, path: string, body?: unknown) =>
      screen.admin.request(method, path, { token, body });
    const viaOperator = (method: string, path: string, body?: unknown) =>
      screen.admin.request(method, path, { token: screen.adminToken, body });
    return { ...workspace, viaScreen, viaToken, viaOperator };
  };
  it('tells a tenant (its screen, its own token) and the admin API the class of a refused destination only; the log and the CLI have the rest', async () => {
    const ws = await tenant('refused');
    const body = { url: 'https://intranet.tenant.test/hook' };
    const answers = [
      await ws.viaScreen('POST', endpoints(ws.id), body),
      await ws.viaToken('POST', endpoints(ws.id), body),
      await ws.viaOperator('POST', endpoints(ws.id), body),
    ];
    for (const answer of answers) {
      expect(answer.status).to.equal(400);
      expect(answer.body.error).to.include({ code: 'invalid_request', reason: 'url', message: CLASS_ONLY });
      for (const secretOfTheNetwork of [INTERNAL_ADDRESS, 'FRS_', 'webhookAllowedCidrs'])
        expect(JSON.stringify(answer.body)).not.to.include(secretOfTheNetwork);
    }
    expect(await liveEndpoints(ws.id)).to.deep.equal([]);
    // The server's log has the whole reason, beside each request's id.
    const details = [...screen.logs, ...screen.admin.logs].filter((line) => line.msg === 'input refused');
    expect(details.map((line) => line.requestId)).to.have.members(answers.map((a) => a.body.error.requestId));
    for (const line of details) {
      expect(line.detail).to.equal(
        `url refused: intranet.tenant.test resolves to ${INTERNAL_ADDRESS}, a private address; webhooks are not sent to private destinations (set FRS_ALLOW_PRIVATE_WEBHOOK_URLS=1, list the range in FRS_WEBHOOK_ALLOWED_CIDRS for every workspace, or in the workspace's webhookAllowedCidrs for its endpoints only)`,
      );
    }
    // The operator's CLI prints it.
    const cli = await fleetAdminOn(
      (await testDatabase()).url,
      ['endpoint', 'create', '--workspace', ws.slug, '--url', body.url],
      {
        FRS_ALLOW_PRIVATE_WEBHOOK_URLS: '0',
        FRS_WEBHOOK_DNS_SERVERS: dns.address,
      },
    );
    expect(cli.code).to.equal(1);
    // (named by its flag)
    expect(cli.stderr).to.equal(`fleet-admin: --${details[0].detail}\n`);
  });

  it("looks the endpoint up before the URL: an unknown or another workspace's id is 404 whatever the URL, and nothing is resolved", async () => {
    const mine = await tenant('mine');
    const theirs = await webhookWorkspace(db);
    const theirEndpoint = await theirs.endpoint({ url: 'https://hooks.example.ae/theirs' });
    const own = await mine.viaOperator('POST', endpoints(mine.id), { url: 'https://hooks.example.ae/mine' });
    expect(own.status).to.equal(201);
    // (a name no other request asks for: its look-up would show in the server's count)
    for (const via of [mine.viaScreen, mine.viaToken]) {
      for (const id of [crypto.randomUUID(), theirEndpoint.id]) {
        const answer = await via('PATCH', `${endpoints(mine.id)}/${id}`, { url: 'https://unseen.tenant.test/hook' });
        expect([answer.status, answer.body.error.code]).to.deep.equal([404, 'not_found']);
      }
    }
    expect(dns.queriesOf('unseen.tenant.test')).to.deep.equal([]);
    // Its own endpoint: the class only, and the endpoint unchanged.
    const refused = await mine.viaToken('PATCH', `${endpoints(mine.id)}/${own.body.id}`, {
      url: 'https://intranet.tenant.test/hook',
    });
    expect([refused.status, refused.body.error.message]).to.deep.equal([400, CLASS_ONLY]);
    expect(await liveEndpoints(mine.id)).to.deep.equal(['https://hooks.example.ae/mine']);
  });

  it('opens private ranges per workspace, by an all-workspaces token only; a tenant can neither change nor see them', async () => {
    const ws = await tenant('opened');
    const path = `/admin/v1/workspaces/${ws.id}`;
    // A workspace's own token and its screen: 403 naming the setting, nothing changed.
    for (const via of [ws.viaToken, ws.viaScreen]) {
      const refused = await via('PATCH', path, { webhookAllowedCidrs: ['10.20.0.0/16'] });
      expect([refused.status, refused.body.error.code, refused.body.error.reason]).to.deep.equal([
        403,
        'forbidden',
        'webhookAllowedCidrs',
      ]);
    }
    expect(
      (await db('workspaces').where({ id: ws.id }).first('webhook_allowed_cidrs')).webhook_allowed_cidrs,
    ).to.deep.equal([]);
    // Bad ranges: 400 naming the field.
    for (const bad of [['10.20.0.0'], ['10.20.0.0/33'], ['intranet.tenant.test/16']]) {
      const refused = await ws.viaOperator('PATCH', path, { webhookAllowedCidrs: bad });
      expect([refused.status, refused.body.error.reason], JSON.stringify(bad)).to.deep.equal([
        400,
        'webhookAllowedCidrs',
      ]);
    }
    // The operator's token sets it, audited.
    const set = await ws.viaOperator('PATCH', path, { webhookAllowedCidrs: ['10.20.0.0/16', 'fd12:3456::/32'] });
    expect(set.status).to.equal(200);
    expect(set.body).to.deep.equal({
      id: ws.id,
      slug: ws.slug,
      status: 'active',
      timezone: 'Asia/Dubai',
      remindersAhead: 3,
      webhookAllowedCidrs: ['10.20.0.0/16', 'fd12:3456::/32'],
    });
    expect(
      await db('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ workspace_id: ws.id, action: 'workspace.update' })
        .select('actor_type', 'changes'),
    ).to.deep.equal([
      {
        actor_type: 'admin_token',
        changes: { webhookAllowedCidrs: { from: [], to: ['10.20.0.0/16', 'fd12:3456::/32'] } },
      },
    ]);
    // The tenant's view of its workspace says nothing of it, in the workspace and in the list.
    for (const via of [ws.viaToken, ws.viaScreen]) {
      const shown = await via('GET', path);
      expect(shown.body).to.deep.equal({
        id: ws.id,
        slug: ws.slug,
        status: 'active',
        timezone: 'Asia/Dubai',
        remindersAhead: 3,
      });
    }
    const listed = await ws.viaToken('GET', '/admin/v1/workspaces');
    expect(listed.body.rows).to.deep.equal([
      { id: ws.id, slug: ws.slug, status: 'active', timezone: 'Asia/Dubai', remindersAhead: 3 },
    ]);
    expect((await ws.viaOperator('GET', path)).body.webhookAllowedCidrs).to.deep.equal([
      '10.20.0.0/16',
      'fd12:3456::/32',
    ]);
    // Nor in its audit trail (a workspace of a token only: the screen's own entries are not in the document's list yet).
    const tokenOnly = await createWorkspace(db, operator, { slug: unique('trail') });
    const { token } = await createAdminToken(db, operatorWith(OPERATOR), {
      name: 'trail backend',
      workspaceId: await idOf(db, tokenOnly.slug),
    });
    expect(
      (
        await screen.admin.request('PATCH', `/admin/v1/workspaces/${tokenOnly.id}`, {
          token: screen.adminToken,
          body: { webhookAllowedCidrs: ['10.30.0.0/16'], remindersAhead: 4 },
        })
      ).status,
    ).to.equal(200);
    const trail = await screen.admin.request('GET', `/admin/v1/audit-entries?workspace=${tokenOnly.id}`, { token });
    expect(
      trail.body.rows
        .filter((r: { action: string }) => r.action === 'workspace.update')
        .map((r: { changes: unknown }) => r.changes),
    ).to.deep.equal([{ remindersAhead: { from: 3, to: 4 } }]);
    expect(JSON.stringify(trail.body)).not.to.include('10.30.');
    const operatorTrail = await screen.admin.request('GET', `/admin/v1/audit-entries?workspace=${tokenOnly.id}`, {
      token: screen.adminToken,
    });
    expect(
      operatorTrail.body.rows.find((r: { action: string }) => r.action === 'workspace.update').changes,
    ).to.deep.equal({
      remindersAhead: { from: 3, to: 4 },
      webhookAllowedCidrs: { from: [], to: ['10.30.0.0/16'] },
    });
    // The CLI sets it too, and closes it with "".
    const cli = await fleetAdminOn((await testDatabase()).url, [
      'workspace',
      'set',
      '--slug',
      ws.slug,
      '--webhook-allowed-cidrs',
      '',
      '--json',
    ]);
    expect(cli.code, cli.stderr).to.equal(0);
    expect(
      (await db('workspaces').where({ id: ws.id }).first('webhook_allowed_cidrs')).webhook_allowed_cidrs,
    ).to.deep.equal([]);
  });

  it("one workspace's opened range lets its own staff register into it, and no other workspace's", async () => {
    const opened = await tenant('owner');
    const other = await tenant('neighbour');
    await updateWorkspace(db, operatorWith(OPERATOR), {
      workspaceId: opened.id,
      changes: { webhookAllowedCidrs: ['10.20.0.0/16'] },
      now: new Date(),
    });
    const url = { url: 'https://intranet.tenant.test/hook' };
    const registered = await opened.viaScreen('POST', endpoints(opened.id), url);
    expect(registered.status).to.equal(201);
    for (const via of [other.viaScreen, other.viaToken]) {
      const refused = await via('POST', endpoints(other.id), url);
      expect([refused.status, refused.body.error.message]).to.deep.equal([400, CLASS_ONLY]);
    }
    expect(await liveEndpoints(opened.id)).to.deep.equal([url.url]);
    expect(await liveEndpoints(other.id)).to.deep.equal([]);
    // The process-wide list (the operator's) still opens a range to every workspace.
    const closeRange = reconfigure({ ...strict, FRS_WEBHOOK_ALLOWED_CIDRS: '10.20.30.0/24' });
    try {
      expect((await other.viaToken('POST', endpoints(other.id), url)).status).to.equal(201);
    } finally {
      closeRange();
    }
  });

  it("delivers into an opened range for that workspace only: another's delivery is refused at connect time, by class", async () => {
    const policy = destinationPolicyFromEnv({ FRS_WEBHOOK_DNS_SERVERS: dns.address });
    const port = new URL(receiver.url).port;
    const url = (who: string) => `http://receiver.tenant.test:${port}/${who}`;
    const owner = await webhookWorkspace(db);
    const neighbour = await webhookWorkspace(db);
    await updateWorkspace(db, operatorWith(OPERATOR), {
      workspaceId: owner.id,
      changes: { webhookAllowedCidrs: ['127.0.0.1/32'] },
      now: new Date(),
    });
    // The neighbour had the range opened when it registered, and closed since: its deliveries are checked again.
    await updateWorkspace(db, operatorWith(OPERATOR), {
      workspaceId: neighbour.id,
      changes: { webhookAllowedCidrs: ['127.0.0.1/32'] },
      now: new Date(),
    });
    const owned = await owner.endpoint({ url: url('owner') });
    const theirs = await neighbour.endpoint({ url: url('neighbour') });
    await updateWorkspace(db, operatorWith(OPERATOR), {
      workspaceId: neighbour.id,
      changes: { webhookAllowedCidrs: [] },
      now: new Date(),
    });
    for (const ws of [owner, neighbour])
      await recordEvent(db, {
        workspaceId: ws.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        source: 'publish',
      });
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    // (a dispatcher of the test's two workspaces, as the worker's role, logging to the test)
    const dispatcher = new Dispatcher({
      db: (await testDatabase()).forRole('worker'),
      logger,
      workspaceIds: [owner.id, neighbour.id],
      destinationPolicy: policy,
    });
    expect(await dispatcher.runOnce(new Date())).to.deep.equal({ attempted: 2, accepted: 1, retrying: 1, failed: 0 });
    expect(receiver.requests.map((r) => r.path)).to.deep.equal(['/owner']);
    const attempts = await db('delivery_attempts as a')
      .join('deliveries as d', 'd.id', 'a.delivery_id')
      .whereIn('d.endpoint_id', [owned.id, theirs.id])
      .select('d.endpoint_id as endpointId', 'a.error_kind as errorKind', 'a.error');
    expect(attempts.find((a) => a.endpointId === owned.id)).to.include({ errorKind: null, error: null });
    // The delivery log names the class, not the address the name resolved to, nor a setting.
    expect(attempts.find((a) => a.endpointId === theirs.id)).to.deep.equal({
      endpointId: theirs.id,
      errorKind: 'blocked_destination',
      error:
        "receiver.tenant.test resolves to a loopback address; webhooks are not sent to private destinations unless the service's operator opens the range for this workspace",
    });
    // The worker's log line has the operator's detail.
    const refusal = lines.find(
      (line) => line.endpointId === theirs.id && line.msg === 'webhook delivery attempt failed',
    );
    expect(refusal).to.include({ errorKind: 'blocked_destination' });
    expect(refusal!.detail).to.match(
      /^receiver\.tenant\.test resolves to 127\.0\.0\.1, a loopback address; .*webhookAllowedCidrs/,
    );
  });
});
