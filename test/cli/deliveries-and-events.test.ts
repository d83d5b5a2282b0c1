import fs from 'node:fs';
import { FIXTURE_ACTOR } from '../support/actors.js';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { fleetAdminOn, type CliRun } from '../support/cli.js';
import { startReceiver } from '../support/receiver.js';
import {
  buildAttempt,
  buildDelivery,
  delivery,
  dropTestWorkspaces,
  examplePayload,
  webhookWorkspace,
} from '../webhooks/support.js';
import { listEventTypes } from '../../src/core/webhooks/events.js';

// The CLI's deliveries, events and audit commands (issue 24, point 6), calling the core the admin API calls, audited as
// `cli`; and the CLI read by a person (point 8): a delivery with its payload and answers, endpoints with their events
// and failures, warnings on one readable line, and an embedded database looked for on the wrong port named as such.

async function fleetAdmin(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return fleetAdminOn((await testDatabase()).url, args, env);
}

async function json(...args: string[]): Promise<any> {
  const run = await fleetAdmin([...args, '--json']);
  expect(run.stderr, 'stderr').to.equal('');
  expect(run.code, 'exit code').to.equal(0);
  return JSON.parse(run.stdout);
}

async function fails(args: string[], message: string): Promise<void> {
  const run = await fleetAdmin(args);
  expect([run.code, run.stdout, run.stderr]).to.deep.equal([1, '', `fleet-admin: ${message}\n`]);
}

const OS_USER = os.userInfo().username;

describe('fleet-admin deliveries retry, events, audit list, and output a person reads', () => {
  after(async () => dropTestWorkspaces((await testDatabase()).db));

  it('deliveries retry: a retrying delivery is due now, a failed one queued again; a held one is refused naming the switch; audited as cli', async () => {
    const { db } = await testDatabase();
    const ws = await webhookWorkspace(db);
    const endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/retry' });
    const retrying = await buildDelivery(db, ws, endpoint, {
      status: 'retrying',
      createdAt: '2026-11-21T08:00:00.000Z',
      attempts: 3,
      nextAttemptAt: '2099-01-01T00:00:00.000Z',
    });
    const failed = await buildDelivery(db, ws, endpoint, {
      status: 'failed',
      createdAt: '2026-11-21T09:00:00.000Z',
      attempts: 9,
    });
    const before = Date.now();
    const now = await json('deliveries', 'retry', '--id', retrying.id);
    expect(now).to.deep.include({
      id: retrying.id,
      endpointId: endpoint.id,
      previousStatus: 'retrying',
      status: 'retrying',
      attempts: 3,
    });
    expect(Date.parse(now.nextAttemptAt)).to.be.within(before - 1000, Date.now());
    expect((await delivery(db, retrying.id)).next_attempt_at.toISOString()).to.equal(now.nextAttemptAt);
    const text = await fleetAdmin(['deliveries', 'retry', '--id', failed.id]);
    expect(text.stdout).to.equal(
      `delivery ${failed.id} was failed; queued again after 9 attempt(s), to be attempted now\n`,
    );
    expect(await delivery(db, failed.id)).to.include({ status: 'queued', attempts: 9, body: failed.body });

    const off = await ws.endpoint({ url: 'https://hooks.example.ae/off', active: false });
    const held = await buildDelivery(db, ws, off, {
      status: 'held',
      createdAt: '2026-11-21T08:00:00.000Z',
      attempts: 1,
    });
    await fails(
      ['deliveries', 'retry', '--id', held.id],
      `delivery ${held.id} is held: its webhook endpoint ${off.id} is switched off; switch it on first with "fleet-admin endpoint enable --id ${off.id}" or the admin API's enableEndpoint (that also sends what it held)`,
    );
    await fails(
      ['deliveries', 'retry', '--id', '5d0c9a1e-1111-4222-8333-944455556666'],
      'no delivery with id 5d0c9a1e-1111-4222-8333-944455556666',
    );
    expect(await delivery(db, held.id)).to.include({ status: 'held' });

    const entries = await db('audit_entries')
      .whereNot({ actor_name: FIXTURE_ACTOR })
      .whereIn('target_id', [retrying.id, failed.id, held.id])
      .orderBy('at')
      .select('actor_type', 'actor_name', 'action', 'target_id', 'changes');
    expect(entries.map((e) => [e.actor_type, e.actor_name, e.action, e.target_id, e.changes.status])).to.deep.equal([
      ['cli', OS_USER, 'delivery.retry', retrying.id, { from: 'retrying', to: 'retrying' }],
      ['cli', OS_USER, 'delivery.retry', failed.id, { from: 'failed', to: 'queued' }],
    ]);
  });

  it('events list and events send-example; audit list shows what the CLI changed', async () => {
    const { db } = await testDatabase();
    const ws = await webhookWorkspace(db);
    const endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/examples', events: ['payment.captured'] });

    expect(await json('events', 'list')).to.deep.equal(listEventTypes());
    const listed = (await fleetAdmin(['events', 'list'])).stdout.split('\n');
    expect(listed).to.include(
      `${'invoice.overdue'.padEnd(28)} ${'Money events'.padEnd(20)} ${listEventTypes().rows.find((e) => e.event === 'invoice.overdue')!.summary}`,
    );

    // (from here on: the fixture's workspace and endpoint were audited before, by the fixtures' operator)
    const since = new Date().toISOString();
    const sent = await json('events', 'send-example', '--endpoint', endpoint.id, '--event', 'invoice.overdue');
    expect(sent).to.deep.equal({ deliveryId: sent.deliveryId, endpointId: endpoint.id, event: 'invoice.overdue' });
    const row = await delivery(db, sent.deliveryId);
    expect(row).to.include({ endpoint_id: endpoint.id, event: 'invoice.overdue', status: 'queued' });
    expect(JSON.parse(row.body).data).to.deep.equal(examplePayload('invoice.overdue').data);
    await fails(
      ['events', 'send-example', '--endpoint', endpoint.id, '--event', 'invoice.nope'],
      '--event must name an event of the webhooks section of openapi/openapi.yaml (or fleet-admin events list), not the unknown event "invoice.nope"',
    );
    await fails(
      ['events', 'send-example', '--endpoint', '5d0c9a1e-1111-4222-8333-944455556666', '--event', 'invoice.overdue'],
      'no webhook endpoint with id 5d0c9a1e-1111-4222-8333-944455556666',
    );

    const audit = await json('audit', 'list', '--workspace', ws.slug, '--since', since);
    expect(audit.rows.map((e: any) => [e.actor, e.action, e.target, e.changes])).to.deep.equal([
      [
        { type: 'cli', id: null, name: OS_USER },
        'event.send_example',
        { type: 'delivery', id: sent.deliveryId },
        { event: 'invoice.overdue', endpointId: endpoint.id },
      ],
    ]);
    const text = await fleetAdmin(['audit', 'list', '--workspace', ws.slug, '--since', since]);
    expect(text.stdout).to.equal(
      `${audit.rows[0].at} cli (${OS_USER}) event.send_example delivery ${sent.deliveryId} {"event":"invoice.overdue","endpointId":"${endpoint.id}"}\n`,
    );
    // --since after the entry: none
    expect(
      (await fleetAdmin(['audit', 'list', '--workspace', ws.slug, '--since', '2099-01-01T00:00:00Z'])).stdout,
    ).to.equal('no audit entries\n');
  });

  it("deliveries show prints the payload and each attempt's answer; endpoint list shows events and failures in a row", async () => {
    const { db } = await testDatabase();
    const ws = await webhookWorkspace(db);
    const endpoint = await ws.endpoint({
      url: 'https://hooks.example.ae/show',
      events: ['booking.confirmed', 'payment.captured'],
    });
    const built = await buildDelivery(db, ws, endpoint, {
      status: 'retrying',
      createdAt: '2026-11-21T08:00:00.000Z',
      attempts: 2,
      nextAttemptAt: '2026-11-21T08:06:00.000Z',
    });
    await buildAttempt(db, endpoint, built.id, {
      number: 1,
      startedAt: '2026-11-21T08:00:00.100Z',
      durationMs: 31,
      statusCode: 500,
      errorKind: 'status',
      error: 'HTTP 500',
      responseBody: '{"error":"database is down"}',
    });
    await buildAttempt(db, endpoint, built.id, {
      number: 2,
      startedAt: '2026-11-21T08:01:00.100Z',
      durationMs: 10000,
      statusCode: null,
      errorKind: 'timeout',
      error: 'no answer within 10000 ms',
      responseBody: null,
    });
    await db('webhook_endpoints').where({ id: endpoint.id }).update({ consecutive_failures: 2 });

    const shown = await fleetAdmin(['deliveries', 'show', '--id', built.id]);
    expect(shown.stderr).to.equal('');
    expect(shown.stdout).to.equal(
      [
        `delivery ${built.id} booking.confirmed to endpoint ${endpoint.id}: retrying, 2 attempt(s), created 2026-11-21T08:00:00.000Z, next attempt 2026-11-21T08:06:00.000Z`,
        'payload:',
        ...JSON.stringify(JSON.parse(built.body), null, 2)
          .split('\n')
          .map((line) => `  ${line}`),
        'attempts:',
        '  #1 2026-11-21T08:00:00.100Z 31 ms: failed, HTTP 500',
        '    answer: {"error":"database is down"}',
        '  #2 2026-11-21T08:01:00.100Z 10000 ms: failed, no answer within 10000 ms (timeout)',
        '    answer: (none)',
      ].join('\n') + '\n',
    );

    const endpoints = await fleetAdmin(['endpoint', 'list', '--workspace', ws.slug]);
    expect(endpoints.stdout).to.equal(
      `endpoint ${endpoint.id} "hooks.example.ae" -> https://hooks.example.ae/show is enabled; events: booking.confirmed, payment.captured; failures in a row: 2; last success: never; signed with hmac-sha256\n`,
    );
    // a throttle is shown while it holds (its receiver answered 429, 502, 503 or 504), not once it is over
    await db('webhook_endpoints').where({ id: endpoint.id }).update({ throttled_until: '2099-01-01T00:00:00.000Z' });
    expect((await fleetAdmin(['endpoint', 'list', '--workspace', ws.slug])).stdout).to.equal(
      `endpoint ${endpoint.id} "hooks.example.ae" -> https://hooks.example.ae/show is enabled; events: booking.confirmed, payment.captured; failures in a row: 2; last success: never; throttled until 2099-01-01T00:00:00.000Z; signed with hmac-sha256\n`,
    );
    await db('webhook_endpoints').where({ id: endpoint.id }).update({ throttled_until: '2000-01-01T00:00:00.000Z' });
    expect((await fleetAdmin(['endpoint', 'list', '--workspace', ws.slug])).stdout).to.not.include('throttled');
  });

  it('warnings are one readable line each, not JSON log records', async () => {
    const { db } = await testDatabase();
    const ws = await webhookWorkspace(db);
    const receiver = await startReceiver(() => ({ status: 500, body: 'no' }));
    try {
      const endpoint = await ws.endpoint({ url: receiver.endpointUrl() });
      const built = await buildDelivery(db, ws, endpoint, { status: 'queued', createdAt: '2026-11-21T08:00:00.000Z' });
      const run = await fleetAdmin([
        'sweep',
        '--deliveries',
        '--workspace',
        ws.slug,
        '--now',
        '2026-11-21T09:00:00.000Z',
      ]);
      expect(run.stdout).to.equal('calendar: 0 event(s); deliveries: 1 attempted, 0 accepted, 1 retrying, 0 failed\n');
      const lines = run.stderr.split('\n').filter(Boolean);
      expect(lines).to.have.length(1);
      // (the retry after 1 min, with its jitter of 0 to 10%: 09:01:00 to 09:01:06)
      expect(lines[0]).to.match(
        new RegExp(
          `^fleet-admin: warning: webhook delivery attempt failed \\(deliveryId=${built.id}, endpointId=${endpoint.id}, event=booking\\.confirmed, attempt=1, ` +
            'errorKind=status, statusCode=500, durationMs=\\d+, status=retrying, nextAttemptAt=2026-11-21T09:01:0[0-6]\\.\\d{3}Z\\)$',
        ),
      );
    } finally {
      await receiver.close();
    }
  });

  it('against an embedded database running on another port, says which port it tried and names FRS_EMBEDDED_PORT', async () => {
    const { db } = await testDatabase();
    const clusterDir = (await db.raw('SHOW data_directory')).rows[0].data_directory as string;
    const runningOn = Number((await db.raw('SHOW port')).rows[0].port);
    // A data folder whose embedded cluster is the running test cluster, as a server started with another port leaves it.
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-port-'));
    try {
      fs.symlinkSync(clusterDir, path.join(dataDir, 'postgres'));
      const tried = runningOn + 100;
      const run = await fleetAdminOn('', ['workspace', 'list'], {
        DATABASE_URL: '',
        FRS_DATA_DIR: dataDir,
        FRS_EMBEDDED_PORT: String(tried),
      });
      expect([run.code, run.stdout]).to.deep.equal([1, '']);
      expect(run.stderr).to.equal(
        `fleet-admin: the embedded PostgreSQL in ${path.join(dataDir, 'postgres')} is running on port ${runningOn}, not on port ${tried} where it was tried: ` +
          `set FRS_EMBEDDED_PORT=${runningOn} (the port the server was started with), or stop the server first\n`,
      );
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
