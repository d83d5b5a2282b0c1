import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from './support/database.js';
import { startReceiver, type Receiver, type Reply } from './support/receiver.js';
import { createApp } from '../src/api/app.js';
import { listen } from '../src/http/edge.js';
import { createLogger } from '../src/logger.js';
import { ServiceMetrics, startMetricsListener } from '../src/observability/metrics.js';
import { recordEvent } from '../src/webhooks/record-event.js';
import { createApiKey } from '../src/core/workspaces.js';
import { SWITCH_OFF_AFTER_FAILURES } from '../src/webhooks/endpoint-lifecycle.js';
import { Dispatcher } from '../src/webhooks/dispatcher.js';
import { observedCalendarSweep } from '../src/webhooks/worker.js';
import { bookingConfirmedData, dropTestWorkspaces, webhookWorkspace, type TestWorkspace } from './webhooks/support.js';
import { idOf, operator } from './support/actors.js';

// Point 3 and 4 of the operator's view: what the logs say about deliveries, and the Prometheus metrics scraped
// from their own listener (port 0 here: the system picks one; never the default 9464).

type Sample = { name: string; labels: Record<string, string>; value: number };

/** Parses the Prometheus text exposition format (the lines a scrape returns) into samples and HELP/TYPE names. */
function parseExposition(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1], type[2]);
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    expect(m, `not an exposition line: ${line}`).to.not.equal(null);
    const labels = Object.fromEntries(
      [...(m![2] ?? '').matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]),
    );
    samples.push({ name: m![1], labels, value: Number(m![3]) });
  }
  return { samples, types };
}

const value = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;

describe('observability: delivery logs and Prometheus metrics', () => {
  let db: Knex;
  let ws: TestWorkspace;
  let receiver: Receiver;
  let answer: Reply;
  let metrics: ServiceMetrics;
  let listener: Server;
  let metricsUrl: string;
  const lines: Array<Record<string, unknown>> = [];
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk, _e, done) {
      raw.push(chunk.toString());
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  const logger = createLogger('debug', sink);

  before(async () => {
    ({ db } = await testDatabase());
    receiver = await startReceiver(() => answer);
    metrics = new ServiceMetrics();
    metrics.watchDatabase(db);
    listener = await startMetricsListener({ metrics, db, logger, port: 0, host: '127.0.0.1' });
    metricsUrl = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
    answer = { status: 204 };
    lines.length = 0;
    raw.length = 0;
  });
  after(async () => {
    listener.close();
    await receiver.close();
    await dropTestWorkspaces(db);
  });

  const scrape = async () => {
    const res = await fetch(`${metricsUrl}/metrics`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/);
    return parseExposition(await res.text());
  };
  const dispatcher = (m: ServiceMetrics) =>
    new Dispatcher({ db, logger, metrics: m, workspaceIds: [ws.id], random: () => 0 });
  /** Publishes a booking.confirmed to the workspace's endpoints, due at the tests' fixed clock. */
  const publish = async () => {
    const { eventId } = await recordEvent(db, {
      workspaceId: ws.id,
      event: 'booking.confirmed',
      data: bookingConfirmedData(),
      source: 'publish',
    });
    await db('deliveries').where({ event_id: eventId }).update({ next_attempt_at: '2026-11-22T08:00:00.000Z' });
  };

  it('logs a failed attempt at warn with its ids, kind, status and duration; a success at debug; times in ISO 8601', async () => {
    const url = receiver.endpointUrl();
    const endpoint = await ws.endpoint({ url });
    await publish();
    answer = { status: 503, body: 'down for maintenance' };
    await dispatcher(metrics).runOnce(new Date('2026-11-22T08:00:00.000Z'));
    const [delivery] = await db('deliveries').where({ endpoint_id: endpoint.id });
    const failed = lines.filter((l) => l.msg === 'webhook delivery attempt failed');
    expect(failed).to.have.length(1);
    expect(failed[0]).to.deep.include({
      level: 40,
      component: 'dispatcher',
      deliveryId: delivery.id,
      endpointId: endpoint.id,
      event: 'booking.confirmed',
      attempt: 1,
      errorKind: 'status',
      statusCode: 503,
      status: 'retrying',
      nextAttemptAt: '2026-11-22T08:01:00.000Z',
    });
    expect(failed[0].durationMs).to.be.a('number').and.at.least(0);
    expect(failed[0].time).to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);

    answer = { status: 200 };
    await dispatcher(metrics).runOnce(new Date('2026-11-22T08:01:00.000Z'));
    const accepted = lines.filter((l) => l.msg === 'webhook delivery accepted');
    expect(accepted).to.have.length(1);
    expect(accepted[0]).to.deep.include({
      level: 20,
      deliveryId: delivery.id,
      attempt: 2,
      errorKind: null,
      statusCode: 200,
      status: 'accepted',
    });
    // no secret, no payload, no response body, no URL in any line
    const all = raw.join('');
    for (const secretOrBody of [
      endpoint.secret,
      delivery.body,
      bookingConfirmedData().bookingId as string,
      'down for maintenance',
      url,
    ]) {
      expect(all).not.to.include(secretOrBody);
    }
  });

  it('logs one info line when an endpoint is switched off, and counts it', async () => {
    const endpoint = await ws.endpoint({ url: receiver.endpointUrl() });
    await db('webhook_endpoints')
      .where({ id: endpoint.id })
      .update({ consecutive_failures: SWITCH_OFF_AFTER_FAILURES - 1 });
    const before = value((await scrape()).samples, 'frs_webhook_endpoint_switch_offs_total') ?? 0;
    await publish();
    answer = { status: 500 };
    await dispatcher(metrics).runOnce(new Date('2026-11-22T08:00:00.000Z'));
    const off = lines.filter((l) => l.msg === 'webhook endpoint switched off after failed attempts in a row');
    expect(off).to.have.length(1);
    expect(off[0]).to.deep.include({ level: 30, endpointId: endpoint.id, failures: SWITCH_OFF_AFTER_FAILURES });
    expect(value((await scrape()).samples, 'frs_webhook_endpoint_switch_offs_total')).to.equal(before + 1);
  });

  it('serves the metrics in the text format: attempts by outcome and kind, lag, requests by operation, gauges, process', async () => {
    const own = new ServiceMetrics({ defaultMetrics: false });
    const endpoint = await ws.endpoint({ url: receiver.endpointUrl() });
    await publish();
    await publish();
    answer = { status: 500 };
    await dispatcher(own).runOnce(new Date('2026-11-22T08:00:00.000Z'));
    answer = { status: 204 };
    await dispatcher(own).runOnce(new Date('2026-11-22T08:01:00.000Z'));
    await db('webhook_endpoints').where({ id: endpoint.id }).update({ url: 'http://127.0.0.1:1/closed' });
    await publish();
    await dispatcher(own).runOnce(new Date('2026-11-22T08:02:00.000Z'));
    const ownText = await own.registry.metrics();
    const { samples } = parseExposition(ownText);
    // 2 failed with 500, then those 2 accepted, then 1 refused connection
    expect(value(samples, 'frs_webhook_delivery_attempts_total', { outcome: 'failed', error_kind: 'status' })).to.equal(
      2,
    );
    expect(value(samples, 'frs_webhook_delivery_attempts_total', { outcome: 'accepted', error_kind: 'none' })).to.equal(
      2,
    );
    expect(
      value(samples, 'frs_webhook_delivery_attempts_total', { outcome: 'failed', error_kind: 'connection' }),
    ).to.equal(1);
    expect(value(samples, 'frs_webhook_delivery_lag_seconds_count')).to.equal(2);
    expect(value(samples, 'frs_webhook_delivery_lag_seconds_bucket', { le: '+Inf' })).to.equal(2);

    // requests by operationId and status, through the real app
    const key = (await createApiKey(db, operator, { workspaceId: await idOf(db, ws.slug) })).key;
    const app = await createApp({ db, logger, metrics: own });
    const server = await listen(app, 0, '127.0.0.1');
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      await fetch(`${base}/v1/me`, { headers: { authorization: `Bearer ${key}` } });
      await fetch(`${base}/v1/me`, { headers: { authorization: `Bearer ${key}` } });
      await fetch(`${base}/v1/me`);
      await fetch(`${base}/v1/webhooks/${endpoint.id}/deliveries?limit=0`, {
        headers: { authorization: `Bearer ${key}` },
      });
      await fetch(`${base}/nowhere`);
    } finally {
      server.close();
    }
    const after = parseExposition(await own.registry.metrics()).samples;
    expect(value(after, 'frs_http_request_duration_seconds_count', { operation: 'getMe', status: '200' })).to.equal(2);
    expect(value(after, 'frs_http_request_duration_seconds_count', { operation: 'getMe', status: '401' })).to.equal(1);
    expect(
      value(after, 'frs_http_request_duration_seconds_count', { operation: 'listWebhookDeliveries', status: '400' }),
    ).to.equal(1);
    expect(value(after, 'frs_http_request_duration_seconds_count', { operation: 'none', status: '404' })).to.equal(1);

    // the shared listener: gauges read from the database, the pool, calendar metrics, default process metrics
    const { samples: scraped, types } = await scrape();
    for (const status of ['queued', 'retrying', 'held']) {
      expect(value(scraped, 'frs_webhook_deliveries_pending', { status }), status)
        .to.be.a('number')
        .and.at.least(0);
    }
    // this test's retrying delivery (the refused connection) is among the pending ones
    expect(value(scraped, 'frs_webhook_deliveries_pending', { status: 'retrying' })).to.be.at.least(1);
    expect(value(scraped, 'frs_webhook_endpoints_switched_off')).to.be.a('number');
    expect(value(scraped, 'frs_db_pool_connections', { state: 'in_use' })).to.be.a('number');
    expect(value(scraped, 'frs_db_pool_connections', { state: 'waiting' })).to.be.a('number');
    expect(types.get('frs_calendar_sweep_duration_seconds')).to.equal('histogram');
    expect(types.get('frs_calendar_events_total')).to.equal('counter');
    expect(types.get('frs_http_request_duration_seconds')).to.equal('histogram');
    expect(value(scraped, 'process_cpu_user_seconds_total')).to.be.a('number');
    expect(value(scraped, 'nodejs_eventloop_lag_seconds')).to.be.a('number');
  });

  it('times calendar sweeps and counts the events they raise', async () => {
    const own = new ServiceMetrics({ defaultMetrics: false });
    const now = new Date('2026-11-22T08:00:00.000Z');
    // two valid events in the outbox and one the schema refuses: two events raised
    for (const data of [bookingConfirmedData(), bookingConfirmedData(), { bookingId: 'not-a-uuid' }]) {
      await db('outbox').insert({ workspace_id: ws.id, event: 'booking.confirmed', data: JSON.stringify(data) });
    }
    await observedCalendarSweep(db, logger, own, now, { workspaceIds: [ws.id] });
    await observedCalendarSweep(db, logger, own, now, { workspaceIds: [ws.id] });
    const { samples } = parseExposition(await own.registry.metrics());
    expect(value(samples, 'frs_calendar_sweep_duration_seconds_count')).to.equal(2);
    expect(value(samples, 'frs_calendar_events_total')).to.equal(2);
    expect(lines.filter((l) => l.msg === 'calendar sweep').map((l) => l.events)).to.deep.equal([2, 0]);
  });

  it('the metrics listener also answers /healthz and /readyz, and nothing else', async () => {
    expect(await (await fetch(`${metricsUrl}/healthz`)).json()).to.deep.equal({ status: 'ok' });
    expect(await (await fetch(`${metricsUrl}/readyz`)).json()).to.deep.equal({ status: 'ready' });
    expect((await fetch(`${metricsUrl}/v1/me`)).status).to.equal(404);
    expect((await fetch(`${metricsUrl}/metrics`, { method: 'POST' })).status).to.equal(405);
  });
});
