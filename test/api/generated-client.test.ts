import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { documentedResults, PUBLIC_API } from '../support/http.js';
import { fixture } from '../support/fixtures.js';
import { createApiKey, revokeApiKey } from '../../src/core/workspaces.js';
import { createEndpoint } from '../../src/core/webhooks/endpoints.js';
import { createClient, type Client } from '../../generated/openapi/client/index.js';
import {
  getBookingSummary,
  getFinanceOverview,
  getFleetSummary,
  getHealth,
  getMe,
  getOperationsToday,
  getReadiness,
  getReceivables,
  getWebhookDelivery,
  listFleets,
  listWebhookDeliveries,
  listWebhookEndpoints,
  searchVehicles,
  sendTestDelivery,
} from '../../generated/openapi/sdk.gen.js';
import type {
  BookingSummary,
  ErrorResponse,
  FinanceOverview,
  FleetSummary,
  Receivables,
} from '../../generated/openapi/types.gen.js';
import { idOf, operator } from '../support/actors.js';
import { processConfig } from '../../src/config.js';

// Every operation through the client that `npm run generate` writes (@hey-api/client-fetch), as a client's author would
// call it, against the real server: the answers as typed values, the errors with their reasons, every one of them
// checked against the document. Figures worked out by hand from the workspace below, at 2026-11-22T08:00Z (12:00 in
// Dubai): one fleet; a Camry out on booking B1 (20 Nov 06:00Z to today 14:00Z, AED 450.00) and a Picanto in service;
// Alice owes invoice I1 (AED 450.00, due today) on which AED 200.00 was paid.
const NOW = new Date('2026-11-22T08:00:00.000Z');

describe('the generated TypeScript client (generated/openapi), against the server', () => {
  let api: TestApi;
  let client: Client;
  let ids: Record<string, string>;
  let slug: string;
  let endpointId: string;
  let keys: Record<'revoked' | 'expired', string>;

  const documented = documentedResults(PUBLIC_API);

  before(async () => {
    const { db } = await testDatabase();
    const f = await fixture(db, { timezone: 'Asia/Dubai' });
    slug = f.slug;
    const fleet = await f.fleet({ code: 'DXB', name: 'Dubai Fleet' });
    const camry = await f.vehicle({
      fleetId: fleet,
      make: 'Toyota',
      model: 'Camry',
      plate: 'Dubai A 111',
      dailyRate: 15000,
    });
    await f.vehicle({ fleetId: fleet, make: 'Kia', model: 'Picanto', plate: 'Dubai C 333', state: 'in_service' });
    const alice = await f.customer({ name: 'Alice Mansoori' });
    const b1 = await f.booking({
      vehicleId: camry,
      customerId: alice,
      status: 'active',
      pickupAt: '2026-11-20T06:00:00Z',
      dropoffAt: '2026-11-22T14:00:00Z',
      amount: 45000,
    });
    const i1 = await f.invoice({ customerId: alice, bookingId: b1, total: 45000, dueDate: '2026-11-22' });
    await f.payment({ kind: 'charge', amount: 20000, bookingId: b1, invoiceId: i1, at: '2026-11-20T06:00:00Z' });
    ids = { fleet, camry, alice, b1 };
    // A public host name: registration accepts it (it is checked again on every connection); nothing is sent here.
    endpointId = (
      await createEndpoint(db, operator, {
        workspaceId: await idOf(db, slug),
        url: 'https://hooks.example.ae/fleet',
        name: 'Ops',
        policy: processConfig().destinationPolicy,
      })
    ).id;
    const { key } = await createApiKey(db, operator, { workspaceId: await idOf(db, slug) });
    const revoked = await createApiKey(db, operator, { workspaceId: await idOf(db, slug) });
    await revokeApiKey(db, operator, { keyId: revoked.id, workspaceId: 'every' });
    const expired = await createApiKey(db, operator, {
      workspaceId: await idOf(db, slug),
      expiresAt: '2026-11-01T00:00:00.000Z',
    });
    keys = { revoked: revoked.key, expired: expired.key };
    api = await startApi({ now: NOW });
    client = createClient({ baseUrl: api.url, auth: key });
  });
  after(() => api?.close());

  it('reads every figure, typed', async () => {
    const me = await getMe({ client });
    documented('GET', '/v1/me', me);
    expect(me.data).to.deep.equal({ workspace: { slug, status: 'active' }, role: null });

    const fleets = await listFleets({ client });
    documented('GET', '/v1/fleets', fleets);
    expect(fleets.data).to.deep.equal({ rows: [{ id: ids.fleet, code: 'DXB', name: 'Dubai Fleet' }] });

    const fleet = await getFleetSummary({ client });
    documented('GET', '/v1/fleet/summary', fleet);
    const expectedFleet: FleetSummary = {
      total: 2,
      byStatus: { available: 0, rented: 1, in_service: 1, inactive: 0 },
      available: 0,
      rented: 1,
      inService: 1,
      utilization: 1,
    };
    expect(fleet.data).to.deep.equal(expectedFleet);

    const vehicles = await searchVehicles({
      client,
      query: { q: 'camry', from: '2026-11-21T00:00:00Z', to: '2026-11-21T12:00:00Z', limit: 5 },
    });
    documented('GET', '/v1/vehicles', vehicles);
    expect(vehicles.data).to.deep.equal({
      rows: [
        {
          id: ids.camry,
          make: 'Toyota',
          model: 'Camry',
          plate: 'Dubai A 111',
          category: 'sedan',
          dailyRate: 15000,
          available: false,
        },
      ],
      nextCursor: null,
    });

    const today = await getOperationsToday({ client });
    documented('GET', '/v1/operations/today', today);
    expect(today.data).to.deep.equal({
      handovers: [],
      returns: [
        {
          bookingId: ids.b1,
          customer: { id: ids.alice, name: 'Alice Mansoori' },
          vehicle: { id: ids.camry, plate: 'Dubai A 111' },
          time: '2026-11-22T14:00:00.000Z',
          amount: 45000,
          balanceDue: 25000,
        },
      ],
    });

    const bookings = await getBookingSummary({ client });
    documented('GET', '/v1/bookings/summary', bookings);
    const expectedBookings: BookingSummary = {
      byStatus: { pending: 0, confirmed: 0, active: 1, completed: 0, canceled: 0 },
      total: 1,
      active: 1,
      upcoming: 0,
      dueReturns: 1,
      overdue: 0,
      revenueCollected: 20000,
    };
    expect(bookings.data).to.deep.equal(expectedBookings);

    const finance = await getFinanceOverview({ client });
    documented('GET', '/v1/finance/overview', finance);
    const overview = finance.data as FinanceOverview;
    expect(overview).to.deep.include({
      collectedAllTime: 20000,
      collectedThisMonth: 20000,
      arOutstanding: 25000,
      arOverdue: 0,
      depositsHeld: 0,
      expenses: 0,
      netProfitAllTime: 20000,
    });
    expect(overview.aging).to.deep.equal([
      { bucket: 'current', amount: 25000 },
      { bucket: '1-30', amount: 0 },
      { bucket: '31-60', amount: 0 },
      { bucket: '61+', amount: 0 },
    ]);
    expect(overview.monthly.at(-1)).to.deep.equal({ month: '2026-11', collected: 20000, expenses: 0, net: 20000 });
    expect(overview.topVehicles).to.deep.equal([
      {
        vehicle: { id: ids.camry, plate: 'Dubai A 111' },
        fleet: { id: ids.fleet, code: 'DXB', name: 'Dubai Fleet' },
        revenue: 20000,
        bookings: 1,
      },
    ]);

    const receivables = await getReceivables({ client, query: { search: 'alice', limit: 10 } });
    documented('GET', '/v1/receivables', receivables);
    const aliceRow = {
      billed: 45000,
      collected: 20000,
      outstanding: 25000,
      current: 25000,
      d1_30: 0,
      d31_60: 0,
      d60p: 0,
    };
    const expectedReceivables: Receivables = {
      rows: [{ customerId: ids.alice, name: 'Alice Mansoori', ...aliceRow, openInvoices: 1 }],
      totals: { ...aliceRow, openInvoices: 1, customers: 1 },
      nextCursor: null,
    };
    expect(receivables.data).to.deep.equal(expectedReceivables);

    for (const [call, path] of [
      [getHealth, '/healthz'],
      [getReadiness, '/readyz'],
    ] as const) {
      const result = await call({ client });
      expect(result.response.status, path).to.equal(200);
    }
  });

  it('lists endpoints, queues test deliveries and reads their log, with 404, 409 and 429 as documented', async () => {
    const endpoints = await listWebhookEndpoints({ client });
    documented('GET', '/v1/webhooks', endpoints);
    expect(endpoints.data).to.deep.equal({
      rows: [
        {
          id: endpointId,
          name: 'Ops',
          url: 'https://hooks.example.ae/fleet',
          events: [],
          isActive: true,
          disabledAt: null,
          disabledReason: null,
          lastSuccessAt: null,
          consecutiveFailures: 0,
          signatureScheme: 'hmac-sha256',
          publicKey: null,
          previousSchemeExpiresAt: null,
          rateLimit: null,
          throttledUntil: null,
        },
      ],
    });

    const test = (id: string, key: string) =>
      sendTestDelivery({ client, path: { id }, headers: { 'Idempotency-Key': key } });
    const first = await test(endpointId, 'k-1');
    documented('POST', `/v1/webhooks/${endpointId}/test`, first);
    expect(first.response.status).to.equal(202);
    const deliveryId = first.data!.deliveryId;
    expect((await test(endpointId, 'k-1')).data).to.deep.equal({ deliveryId });

    const unknownEndpoint = randomUUID();
    const missing = await test(unknownEndpoint, 'k-2');
    documented('POST', `/v1/webhooks/${unknownEndpoint}/test`, missing);
    expect([missing.response.status, (missing.error as ErrorResponse).error.code]).to.deep.equal([404, 'not_found']);

    // Five test deliveries may wait per endpoint; the sixth is refused and queues nothing.
    for (const key of ['k-3', 'k-4', 'k-5', 'k-6']) expect((await test(endpointId, key)).response.status).to.equal(202);
    const limited = await test(endpointId, 'k-7');
    documented('POST', `/v1/webhooks/${endpointId}/test`, limited);
    expect([limited.response.status, (limited.error as ErrorResponse).error.code]).to.deep.equal([429, 'rate_limited']);
    expect(Number(limited.response.headers.get('retry-after'))).to.be.at.least(1);

    const log = await listWebhookDeliveries({ client, path: { id: endpointId }, query: { limit: 10 } });
    documented('GET', `/v1/webhooks/${endpointId}/deliveries`, log);
    expect(log.data!.rows.map((r) => [r.event, r.status, r.attempts])).to.deep.equal(
      Array(5).fill(['webhook.test', 'queued', 0]),
    );
    expect(log.data!.rows.at(-1)!.id).to.equal(deliveryId);
    expect(log.data!.nextCursor).to.equal(null);

    const detail = await getWebhookDelivery({ client, path: { id: endpointId, deliveryId } });
    documented('GET', `/v1/webhooks/${endpointId}/deliveries/${deliveryId}`, detail);
    expect(detail.data).to.deep.include({ id: deliveryId, event: 'webhook.test', status: 'queued', attempts: [] });
  });

  it('answers 401 with the reason, 409 for a reused key and 400 naming the parameter', async () => {
    const cases: Array<[string, Client]> = [
      ['missing', createClient({ baseUrl: api.url })],
      ['unknown', createClient({ baseUrl: api.url, auth: `frs_${'x'.repeat(40)}` })],
      ['revoked', createClient({ baseUrl: api.url, auth: keys.revoked })],
      ['expired', createClient({ baseUrl: api.url, auth: keys.expired })],
    ];
    for (const [reason, other] of cases) {
      const result = await getMe({ client: other });
      documented('GET', '/v1/me', result);
      expect([result.response.status, (result.error as ErrorResponse).error.reason], reason).to.deep.equal([
        401,
        reason,
      ]);
    }

    const { db } = await testDatabase();
    const second = (
      await createEndpoint(db, operator, {
        workspaceId: await idOf(db, slug),
        url: 'https://hooks.example.ae/second',
        policy: processConfig().destinationPolicy,
      })
    ).id;
    const reused = await sendTestDelivery({ client, path: { id: second }, headers: { 'Idempotency-Key': 'k-1' } });
    documented('POST', `/v1/webhooks/${second}/test`, reused);
    expect([reused.response.status, (reused.error as ErrorResponse).error.code]).to.deep.equal([
      409,
      'idempotency_key_reused',
    ]);

    const bad = await searchVehicles({ client, query: { limit: 0 } });
    documented('GET', '/v1/vehicles', bad);
    expect([bad.response.status, (bad.error as ErrorResponse).error.reason]).to.deep.equal([400, 'limit']);
  });
});
