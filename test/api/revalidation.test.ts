import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import type { ApiResponse } from '../support/http.js';
import { createApiKey, createWorkspace, updateWorkspace } from '../../src/core/workspaces.js';
import { importDocument } from '../../src/core/import/import-document.js';
import { createEndpoint } from '../../src/core/webhooks/endpoints.js';
import { queueTestDelivery } from '../../src/core/webhooks/test-delivery.js';
import { loadOpenApiDocument } from '../../src/contract/document.js';
import { publicOperations } from '../../src/api/operations/index.js';
import { AnswerCache, ENTRY_BYTES } from '../../src/api/answer-cache.js';
import { WorkspaceLimits } from '../../src/api/rate-limits.js';
import { ApiError } from '../../src/http/error-catalogue.js';
import { currentDatabaseName, serviceRoleName } from '../../src/db/roles.js';
import { idOf, operator } from '../support/actors.js';
import { processConfig } from '../../src/config.js';

// Conditional GETs: every /v1 GET answer's ETag, 304 for a current tag without building the answer, and a tag that
// changes whenever the answer would (any record of the area it reads, by any writer; the local date; the clock where
// it decides a count). One workspace loaded through the import, in Asia/Dubai (UTC+4); the clock starts at
// 2026-11-22T08:00:00Z, 12:00 on 22 November in Dubai, and moves only within that local day unless a test says.
const T0 = new Date('2026-11-22T08:00:00.000Z');
/**
 * The tables the answers read, locked (ACCESS EXCLUSIVE blocks even reading) to show what is answered without reading
 * them. Left readable: the versions, authentication's tables, and the bookings (the booking summary's clock looks up
 * its next pickup and drop-off).
 */
const ANSWERS_READ = [
  'vehicles',
  'fleets',
  'owners',
  'customers',
  'invoices',
  'payments',
  'expenses',
  'maintenance',
  'customer_ledger',
  'workspace_totals',
  'booking_status_counts',
  'vehicle_state_counts',
  'payment_months',
  'payment_days',
  'open_balances',
  'vehicle_revenue',
  'vehicle_models',
  'expense_months',
  'webhook_endpoints',
  'deliveries',
  'delivery_attempts',
  'events',
];
const id = () => randomUUID();

describe('API: conditional GETs (ETag, If-None-Match, 304)', () => {
  let db: Knex;
  let api: TestApi;
  let clock = T0;
  let slug: string;
  let key: string;
  let endpointId: string;
  let deliveryId: string;
  const ids = {
    owner: id(),
    fleet: id(),
    camry: id(),
    patrol: id(),
    civic: id(),
    alice: id(),
    bob: id(),
    b1: id(),
    b2: id(),
    b3: id(),
    i1: id(),
    i2: id(),
  };

  /** Every GET of /v1, by name; the window starts at 09:00Z. */
  const gets = (): Record<string, string> => ({
    me: '/v1/me',
    fleets: '/v1/fleets',
    fleetSummary: '/v1/fleet/summary',
    vehicles: '/v1/vehicles',
    vehiclesWindow: '/v1/vehicles?from=2026-11-22T09:00:00.000Z&to=2026-11-22T10:00:00.000Z',
    operationsToday: '/v1/operations/today',
    bookingSummary: '/v1/bookings/summary',
    financeOverview: '/v1/finance/overview',
    receivables: '/v1/receivables',
    webhooks: '/v1/webhooks',
    deliveries: `/v1/webhooks/${endpointId}/deliveries`,
    delivery: `/v1/webhooks/${endpointId}/deliveries/${deliveryId}`,
  });
  const RECORDS = [
    'fleets',
    'fleetSummary',
    'vehicles',
    'vehiclesWindow',
    'operationsToday',
    'bookingSummary',
    'financeOverview',
    'receivables',
  ];
  const WEBHOOKS = ['webhooks', 'deliveries', 'delivery'];
  /** The answers whose tags the local date enters. */
  const DAY = ['operationsToday', 'bookingSummary', 'financeOverview', 'receivables'];

  async function tags(): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const [name, path] of Object.entries(gets())) {
      const res = await api.get(path, key);
      expect(res.status, name).to.equal(200);
      out[name] = res.headers.get('etag')!;
    }
    return out;
  }

  /** The workspace's data version of an area, as the database keeps it: the sum of its counters. */
  const dataVersion = async (workspaceId: string, area: 'records' | 'webhooks') =>
    Number((await db('workspace_data_versions').where({ workspace_id: workspaceId, area }).sum({ n: 'changes' }))[0].n);

  /** The names whose tag differs between two readings. */
  const changed = (before: Record<string, string>, after: Record<string, string>) =>
    Object.keys(before)
      .filter((n) => before[n] !== after[n])
      .sort();

  before(async () => {
    ({ db } = await testDatabase());
    // (no rate limit: the tests read every answer many times a second)
    api = await startApi({
      now: () => clock,
      limits: { workspace: { ratePerSecond: 0, concurrency: 0 }, authFailures: { perMinute: 0, trustedProxies: [] } },
    });
    slug = `etag-${id().slice(0, 8)}`;
    await createWorkspace(db, operator, { slug, timezone: 'Asia/Dubai' });
    key = (await createApiKey(db, operator, { workspaceId: await idOf(db, slug) })).key;
    await importDocument(db, operator, {
      workspace: slug,
      document: {
        owners: [{ id: ids.owner, name: 'Owner One' }],
        fleets: [{ id: ids.fleet, code: 'DXB', name: 'Dubai Fleet', ownerId: ids.owner }],
        vehicles: [
          {
            id: ids.camry,
            fleetId: ids.fleet,
            make: 'Toyota',
            model: 'Camry',
            plate: 'Dubai A 111',
            category: 'sedan',
            dailyRate: 15000,
            state: 'active',
          },
          {
            id: ids.patrol,
            fleetId: ids.fleet,
            make: 'Nissan',
            model: 'Patrol',
            plate: 'Dubai B 222',
            category: 'suv',
            dailyRate: 60000,
            state: 'active',
          },
          {
            id: ids.civic,
            fleetId: ids.fleet,
            make: 'Honda',
            model: 'Civic',
            plate: 'Dubai E 555',
            category: 'sedan',
            dailyRate: 14000,
            state: 'active',
          },
        ],
        maintenance: [
          {
            id: id(),
            vehicleId: ids.civic,
            startsAt: '2026-12-10T06:00:00.000Z',
            endsAt: '2026-12-11T06:00:00.000Z',
            reason: 'service',
          },
        ],
        vehicleDocuments: [{ id: id(), vehicleId: ids.camry, docType: 'insurance', expiresAt: '2027-03-01' }],
        customers: [
          { id: ids.alice, name: 'Alice Mansoori' },
          { id: ids.bob, name: 'Bob Fernandes' },
        ],
        bookings: [
          // B1 active, due back today 14:00Z (18:00 Dubai); B2 active, late since 07:00Z; B3 confirmed, pickup today 10:00Z
          {
            id: ids.b1,
            number: 'B-1',
            customerId: ids.alice,
            vehicleId: ids.camry,
            type: 'daily',
            status: 'active',
            pickupAt: '2026-11-20T06:00:00.000Z',
            dropoffAt: '2026-11-22T14:00:00.000Z',
            amount: 45000,
          },
          {
            id: ids.b2,
            number: 'B-2',
            customerId: ids.bob,
            vehicleId: ids.patrol,
            type: 'daily',
            status: 'active',
            pickupAt: '2026-11-15T06:00:00.000Z',
            dropoffAt: '2026-11-22T07:00:00.000Z',
            amount: 360000,
          },
          {
            id: ids.b3,
            number: 'B-3',
            customerId: ids.alice,
            vehicleId: ids.civic,
            type: 'daily',
            status: 'confirmed',
            pickupAt: '2026-11-22T10:00:00.000Z',
            dropoffAt: '2026-11-25T10:00:00.000Z',
            amount: 60000,
          },
        ],
        extensions: [
          {
            id: id(),
            bookingId: ids.b1,
            addedDays: 1,
            amount: 15000,
            previousDropoffAt: '2026-11-21T14:00:00.000Z',
            newDropoffAt: '2026-11-22T14:00:00.000Z',
            createdAt: '2026-11-19T08:00:00.000Z',
          },
        ],
        invoices: [
          {
            id: ids.i1,
            number: 'INV-1',
            customerId: ids.alice,
            bookingId: ids.b1,
            purpose: 'rental',
            issueDate: '2026-11-20',
            dueDate: '2026-11-22',
            total: 45000,
            status: 'issued',
          },
          {
            id: ids.i2,
            number: 'INV-2',
            customerId: ids.bob,
            bookingId: ids.b2,
            purpose: 'rental',
            issueDate: '2026-11-01',
            dueDate: '2026-11-01',
            total: 360000,
            status: 'issued',
          },
        ],
        payments: [
          {
            id: id(),
            kind: 'charge',
            status: 'captured',
            amount: 20000,
            customerId: ids.alice,
            bookingId: ids.b1,
            invoiceId: ids.i1,
            at: '2026-11-20T06:00:00.000Z',
          },
          {
            id: id(),
            kind: 'charge',
            status: 'captured',
            amount: 100000,
            customerId: ids.bob,
            bookingId: ids.b2,
            invoiceId: ids.i2,
            at: '2026-10-28T10:00:00.000Z',
          },
        ],
        installments: [{ id: id(), bookingId: ids.b2, number: 1, of: 2, dueDate: '2026-12-01', amount: 100000 }],
        expenses: [{ id: id(), vehicleId: ids.camry, category: 'fuel', amount: 5000, date: '2026-11-10' }],
        fines: [
          {
            id: id(),
            kind: 'fine',
            type: 'speeding',
            date: '2026-11-18',
            amount: 60000,
            authority: 'Dubai Police',
            number: 'F-1',
            status: 'unpaid',
            vehicleId: ids.patrol,
            recordedAt: '2026-11-19T06:00:00.000Z',
          },
        ],
        integrations: [{ id: id(), integration: 'salik', status: 'ok' }],
      },
    });
    endpointId = (
      await createEndpoint(db, operator, {
        workspaceId: await idOf(db, slug),
        url: 'https://hooks.example.ae/fleet',
        policy: processConfig().destinationPolicy,
      })
    ).id;
    const test = await api.request('POST', `/v1/webhooks/${endpointId}/test`, {
      key,
      headers: { 'idempotency-key': 'first' },
    });
    expect(test.status).to.equal(202);
    deliveryId = test.body.deliveryId;
  });
  beforeEach(() => {
    clock = T0;
  });
  after(async () => {
    await api.close();
    await db('workspaces').where({ slug }).delete();
  });

  it('gives an ETag to every GET operation of /v1 the document has (but the event feed), and this test reads each', () => {
    const document = loadOpenApiDocument();
    const documented = Object.entries(document.paths)
      .filter(([path, item]) => path.startsWith('/v1/') && (item as Record<string, unknown>).get)
      .map(([, item]) => (item as unknown as { get: { operationId: string } }).get.operationId)
      // the event feed is read by its cursor, never revalidated: no ETag, no 304, no answer cache (its document says so)
      .filter((operationId) => operationId !== 'listEvents')
      .sort();
    const tagged = Object.entries(publicOperations).filter(([, operation]) => operation.etag !== undefined);
    expect(tagged.map(([operationId]) => operationId).sort()).to.deep.equal(documented);
    expect(Object.keys(gets())).to.have.length(documented.length + 1); // the window search twice
  });

  it('answers a current tag in If-None-Match with 304 and no body, on GET and HEAD, weak or not, alone, in a list or as *', async () => {
    for (const [name, path] of Object.entries(gets())) {
      const full = await api.get(path, key);
      const tag = full.headers.get('etag')!;
      for (const ifNoneMatch of [tag, tag.replace(/^W\//, ''), `"nope", ${tag}`, '*']) {
        const res = await api.get(path, key, { 'if-none-match': ifNoneMatch });
        expect(res.status, `${name} ${ifNoneMatch}`).to.equal(304);
        expect(res.headers.get('etag')).to.equal(tag);
      }
      const head = await api.request('HEAD', path, { key, headers: { 'if-none-match': tag } });
      expect(head.status, `HEAD ${name}`).to.equal(304);
      const lastChanged = `${tag.slice(0, -2)}${tag.at(-2) === 'A' ? 'B' : 'A'}"`;
      for (const other of ['W/"somethingelse"', '"', 'garbage', lastChanged]) {
        const res = await api.get(path, key, { 'if-none-match': other });
        expect(res.status, `${name} ${other}`).to.equal(200);
        expect(res.text).to.equal(full.text);
        expect(res.headers.get('etag')).to.equal(tag);
      }
    }
  });

  it('decides a 304 without building the answer: with every table the answers read locked, only the version is read', async () => {
    const current = await tags();
    const trx = await db.transaction();
    try {
      await trx.raw(`LOCK TABLE ${ANSWERS_READ.join(', ')} IN ACCESS EXCLUSIVE MODE`);
      for (const [name, path] of Object.entries(gets())) {
        const res = await api.get(path, key, { 'if-none-match': current[name] });
        expect(res.status, name).to.equal(304);
      }
      // The lock does bite: building an answer (one not made before) waits for it until its statement's time limit, then 503.
      const built = await api.get('/v1/receivables?limit=7', key);
      expect(built.status).to.equal(503);
    } finally {
      await trx.rollback();
    }
  });

  it('serves a repeat of an answer it made from memory (any key of the workspace), building only what it has not', async () => {
    const before = new Map<string, string>();
    for (const path of Object.values(gets())) before.set(path, (await api.get(path, key)).text);
    const otherKey = (await createApiKey(db, operator, { workspaceId: await idOf(db, slug) })).key;
    const trx = await db.transaction();
    try {
      await trx.raw(`LOCK TABLE ${ANSWERS_READ.join(', ')} IN ACCESS EXCLUSIVE MODE`);
      for (const [path, text] of before) {
        const res = await api.get(path, otherKey);
        expect(res.status, path).to.equal(200);
        expect(res.text, path).to.equal(text);
      }
      // an answer not made before is built, and waits for the lock (until its statement's time limit)
      expect((await api.get('/v1/receivables?limit=3', key)).status).to.equal(503);
    } finally {
      await trx.rollback();
    }
  });

  it('keeps answers within its bytes, the least recently used going first, none larger than an eighth of it', () => {
    const cache = new AnswerCache(8 * (100 + ENTRY_BYTES)); // eight answers of 50 characters
    for (const k of 'abcdefgh') cache.set(k, k.repeat(50));
    cache.set('z', 'z'.repeat(51)); // 2 bytes more than an eighth: not kept
    expect(cache.get('z')).to.equal(undefined);
    expect(cache.get('a')).to.equal('a'.repeat(50)); // now the most recently used
    cache.set('i', 'i'.repeat(50)); // one must go: the least recently used, b
    expect(cache.get('b')).to.equal(undefined);
    expect([...'acdefghi'].map((k) => cache.get(k)?.length)).to.deep.equal([50, 50, 50, 50, 50, 50, 50, 50]);
  });

  it('changes the tags of the answers that read a table when any of its rows changes, by any writer; only those', async () => {
    // Every table the API's database role may read is one an answer reads (src/db/roles.ts), but for authentication's
    // and the test operation's own. Each is changed directly (an outside writer: a statement that rewrites the
    // workspace's rows as they are), and must change the tags of its area's answers and no other.
    const api_role = serviceRoleName(await currentDatabaseName(db), 'api');
    const readable = (
      await db.raw(
        `SELECT DISTINCT table_name FROM information_schema.role_table_grants WHERE grantee = ? AND privilege_type = 'SELECT'
      UNION SELECT DISTINCT table_name FROM information_schema.column_privileges WHERE grantee = ? AND privilege_type = 'SELECT'`,
        [api_role, api_role],
      )
    ).rows
      .map((r: { table_name: string }) => r.table_name)
      .filter(
        (t: string) =>
          ![
            'knex_migrations',
            'knex_migrations_lock',
            'master_key_record',
            'api_keys',
            'test_idempotency_keys',
            'workspace_data_versions',
            'workspaces',
          ].includes(t),
      )
      .sort();
    expect(readable).to.include.members([
      'vehicles',
      'bookings',
      'customers',
      'customer_ledger',
      'deliveries',
      'delivery_attempts',
      'webhook_endpoints',
    ]);
    const { id: workspaceId } = await db('workspaces').where({ slug }).first('id');
    for (const table of readable) {
      const before = await tags();
      const rewritten =
        table === 'delivery_attempts'
          ? await db.raw(
              'UPDATE delivery_attempts SET number = number WHERE delivery_id IN (SELECT id FROM deliveries WHERE workspace_id = ?)',
              [workspaceId],
            )
          : await db.raw(`UPDATE ${table} SET workspace_id = workspace_id WHERE workspace_id = ?`, [workspaceId]);
      if (table === 'delivery_attempts' && rewritten.rowCount === 0) {
        await db('delivery_attempts').insert({
          delivery_id: deliveryId,
          endpoint_id: endpointId,
          number: 1,
          started_at: '2026-11-22T08:00:01Z',
          duration_ms: 40,
          status_code: 204,
        });
      } else {
        expect(rewritten.rowCount, `${table} holds rows of the workspace`).to.be.above(0);
      }
      const area = ['webhook_endpoints', 'deliveries', 'delivery_attempts', 'events'].includes(table)
        ? WEBHOOKS
        : RECORDS;
      expect(changed(before, await tags()), table).to.deep.equal([...area].sort());
    }
  });

  it("lets writers of one workspace count without waiting for each other's commit, every committed change counted once", async () => {
    const { id: workspaceId } = await db('workspaces').where({ slug }).first('id');
    const version = () => dataVersion(workspaceId, 'records');
    const before = await version();
    // 8 at once: a counter each (with fewer counters, or a counter per backend, two would share one and one would wait)
    const open = await Promise.all(Array.from({ length: 8 }, () => db.transaction()));
    try {
      for (const [i, trx] of open.entries()) {
        // each would wait on a counter another open transaction holds, and give up after 1 s
        await trx.raw("SET LOCAL lock_timeout = '1s'");
        await trx('maintenance').insert({
          id: id(),
          workspace_id: workspaceId,
          vehicle_id: ids.civic,
          starts_at: `2027-0${i + 1}-01T06:00:00Z`,
          ends_at: `2027-0${i + 1}-02T06:00:00Z`,
        });
      }
      expect(await version(), 'nothing counted before a commit').to.equal(before);
      for (const trx of open) await trx.commit();
    } catch (err) {
      for (const trx of open) if (!trx.isCompleted()) await trx.rollback();
      throw err;
    }
    expect(await version()).to.equal(before + 8);
    await db('maintenance').where({ workspace_id: workspaceId }).where('starts_at', '>=', '2027-01-01').delete();
  });

  it('counts a change made by a writer with temporary tables named like the ones the counting reads (they are never used)', async () => {
    // The counting runs with its owner's rights: were a temporary table found before the real one, a writer could put
    // its own code in its place. The API's role may create temporary tables, and queues test deliveries.
    const { id: workspaceId } = await db('workspaces').where({ slug }).first('id');
    const version = () => dataVersion(workspaceId, 'webhooks');
    const before = await version();
    const apiDb = (await testDatabase()).forRole('api');
    const trx = await apiDb.transaction();
    try {
      await trx.raw('CREATE TEMP TABLE workspaces (id uuid) ON COMMIT DROP');
      await trx.raw(
        'CREATE TEMP TABLE workspace_data_versions (workspace_id uuid, area text, slot smallint, changes bigint) ON COMMIT DROP',
      );
      const queued = await queueTestDelivery(trx, { workspaceId, endpointId, idempotencyKey: id(), now: T0 });
      expect(queued.replayed).to.equal(false);
      expect(
        (await trx.raw('SELECT count(*)::int AS n FROM pg_temp.workspace_data_versions')).rows[0].n,
        'the temporary table untouched',
      ).to.equal(0);
      await trx.commit();
    } catch (err) {
      await trx.rollback();
      throw err;
    }
    expect(await version()).to.equal(before + 2); // the event and its delivery: two statements
  });

  it('changes the tags for a writer whose triggers are off (session_replication_role = replica, as logical replication applies)', async function () {
    const before = await tags();
    const trx = await db.transaction();
    try {
      await trx.raw('SET LOCAL session_replication_role = replica');
    } catch (err) {
      await trx.rollback();
      if ((err as { code?: string }).code === '42501') this.skip(); // not a superuser: such a writer cannot be had here
      throw err;
    }
    await trx('vehicles').where({ id: ids.civic }).update({ daily_rate: 14500 });
    await trx.commit();
    try {
      expect(changed(before, await tags())).to.deep.equal([...RECORDS].sort());
    } finally {
      await db('vehicles').where({ id: ids.civic }).update({ daily_rate: 14000 });
    }
  });

  it('changes the tags when the service changes records: an import, a new endpoint, a test delivery, the time zone; another workspace never', async () => {
    let before = await tags();
    await importDocument(db, operator, {
      workspace: slug,
      document: {
        vehicles: [
          {
            id: id(),
            fleetId: ids.fleet,
            make: 'Kia',
            model: 'Picanto',
            plate: 'Dubai K 1',
            category: 'compact',
            dailyRate: 9000,
            state: 'active',
          },
        ],
      },
    });
    let after = await tags();
    expect(changed(before, after)).to.deep.equal([...RECORDS].sort());
    const summary = await api.get('/v1/fleet/summary', key, { 'if-none-match': before.fleetSummary });
    expect(summary.status).to.equal(200);
    expect(summary.body.total).to.equal(4);

    before = after;
    await createEndpoint(db, operator, {
      workspaceId: await idOf(db, slug),
      url: 'https://hooks.example.ae/second',
      policy: processConfig().destinationPolicy,
    });
    after = await tags();
    expect(changed(before, after)).to.deep.equal([...WEBHOOKS].sort());

    before = after;
    expect(
      (await api.request('POST', `/v1/webhooks/${endpointId}/test`, { key, headers: { 'idempotency-key': id() } }))
        .status,
    ).to.equal(202);
    after = await tags();
    expect(changed(before, after)).to.deep.equal([...WEBHOOKS].sort());

    before = after;
    const other = `etag-other-${id().slice(0, 8)}`;
    await createWorkspace(db, operator, { slug: other });
    try {
      await importDocument(db, operator, {
        workspace: other,
        document: { owners: [{ id: id(), name: 'Someone else' }] },
      });
      await createEndpoint(db, operator, {
        workspaceId: await idOf(db, other),
        url: 'https://hooks.example.ae/other',
        policy: processConfig().destinationPolicy,
      });
      expect(changed(before, await tags())).to.deep.equal([]);
    } finally {
      await db('workspaces').where({ slug: other }).delete();
    }

    // Dubai (UTC+4) to London (UTC+0): 08:00Z is still 22 November, but every answer is of another zone.
    await updateWorkspace(db, operator, {
      workspaceId: await idOf(db, slug),
      changes: { timezone: 'Europe/London' },
      now: new Date(),
    });
    try {
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(changed(before, await tags())).to.deep.equal(Object.keys(before).sort());
    } finally {
      await updateWorkspace(db, operator, {
        workspaceId: await idOf(db, slug),
        changes: { timezone: 'Asia/Dubai' },
        now: new Date(),
      });
    }
  });

  it('changes the tags of the answers about the day when the local date turns, and of no other', async () => {
    const noon = await tags();
    clock = new Date('2026-11-22T13:59:59.999Z'); // 17:59 in Dubai: nothing the clock decides has happened yet but B3's pickup
    const evening = await tags();
    expect(changed(noon, evening)).to.deep.equal(['bookingSummary', 'vehiclesWindow']);
    clock = new Date('2026-11-22T19:59:59.999Z'); // 23:59:59.999 in Dubai
    const lastMoment = await tags();
    expect(changed(evening, lastMoment)).to.deep.equal(['bookingSummary']); // B1 is overdue since 14:00Z
    clock = new Date('2026-11-22T20:00:00.000Z'); // midnight: 23 November in Dubai
    const tomorrow = await tags();
    expect(changed(lastMoment, tomorrow)).to.deep.equal([...DAY].sort());
    const operations = await api.get('/v1/operations/today', key, { 'if-none-match': lastMoment.operationsToday });
    expect(operations.status).to.equal(200);
    expect(operations.body).to.deep.equal({ handovers: [], returns: [] });
  });

  it("changes the booking summary's tag exactly when the clock changes its counts: a pickup reached, a drop-off passed", async () => {
    const at = async (iso: string) => {
      clock = new Date(iso);
      const res = await api.get('/v1/bookings/summary', key);
      return {
        tag: res.headers.get('etag')!,
        upcoming: res.body.upcoming as number,
        overdue: res.body.overdue as number,
      };
    };
    const start = await at('2026-11-22T08:00:00.000Z');
    expect(start).to.include({ upcoming: 1, overdue: 1 }); // B3 ahead; B2 late since 07:00Z
    expect(await at('2026-11-22T09:59:59.999Z')).to.deep.equal(start);
    const picked = await at('2026-11-22T10:00:00.000Z'); // B3's pickup time has come
    expect(picked).to.include({ upcoming: 0, overdue: 1 });
    expect(picked.tag).to.not.equal(start.tag);
    expect(await at('2026-11-22T14:00:00.000Z')).to.deep.equal(picked); // B1 is due at 14:00Z, not yet overdue
    const late = await at('2026-11-22T14:00:00.001Z');
    expect(late).to.include({ upcoming: 0, overdue: 2 });
    expect(late.tag).to.not.equal(picked.tag);
  });

  it("changes a window search's tag exactly when now passes the window's start (a car late back then overlaps it)", async () => {
    const path = gets().vehiclesWindow;
    const at = async (iso: string) => {
      clock = new Date(iso);
      const res = await api.get(path, key);
      const patrol = (res.body.rows as Array<{ id: string; available: boolean }>).find((r) => r.id === ids.patrol)!;
      return { tag: res.headers.get('etag')!, patrolAvailable: patrol.available };
    };
    // B2 (the Patrol) was due back at 07:00Z: until now passes 09:00Z it is expected back before the window
    const before = await at('2026-11-22T08:00:00.000Z');
    expect(before.patrolAvailable).to.equal(true);
    expect(await at('2026-11-22T09:00:00.000Z')).to.deep.equal(before);
    const after = await at('2026-11-22T09:00:00.001Z');
    expect(after.patrolAvailable).to.equal(false);
    expect(after.tag).to.not.equal(before.tag);
    // without a window the clock plays no part
    clock = T0;
    const plain = (await api.get('/v1/vehicles', key)).headers.get('etag');
    clock = new Date('2026-11-22T09:30:00.000Z');
    expect((await api.get('/v1/vehicles', key)).headers.get('etag')).to.equal(plain);
  });

  it("gives another tag for other parameters and another key's role, the same for the same answer", async () => {
    const a = await api.get('/v1/receivables?limit=1', key);
    const b = await api.get('/v1/receivables?limit=2', key);
    const c = await api.get('/v1/receivables?limit=50', key);
    const d = await api.get('/v1/receivables', key);
    expect(a.headers.get('etag')).to.not.equal(b.headers.get('etag'));
    expect(c.headers.get('etag'), 'the default applied').to.equal(d.headers.get('etag'));
    const reporting = (await createApiKey(db, operator, { workspaceId: await idOf(db, slug), role: 'reporting' })).key;
    const me = [await api.get('/v1/me', key), await api.get('/v1/me', reporting)];
    expect(me[0].body.role).to.not.equal(me[1].body.role);
    expect(me[0].headers.get('etag')).to.not.equal(me[1].headers.get('etag'));
  });

  it('answers If-None-Match: * with 304 only for an answer there is: an unknown id stays 404, a bad cursor 400', async () => {
    const unknown = await api.get(`/v1/webhooks/${id()}/deliveries`, key, { 'if-none-match': '*' });
    expect(unknown.status).to.equal(404);
    const badCursor = await api.get('/v1/vehicles?cursor=garbage', key, { 'if-none-match': '*' });
    expect(badCursor.status).to.equal(400);
    expect((await api.get('/v1/fleets', key, { 'if-none-match': '*' })).status).to.equal(304);
  });

  it('leaves 304s uncounted up to ten times the rate a second; beyond that they count like any request', async () => {
    const limits = new WorkspaceLimits({ ratePerSecond: 2, concurrency: 0 });
    const ws = id();
    expect((await limits.admit(ws)).standing!.remaining).to.equal(1); // a full answer
    for (let i = 1; i <= 20; i++) {
      const conditional = await limits.admit(ws);
      await conditional.revalidated();
      expect(conditional.standing!.remaining, `304 number ${i}`).to.equal(1);
    }
    const twentyFirst = await limits.admit(ws);
    await twentyFirst.revalidated();
    expect(twentyFirst.standing!.remaining, 'the 21st 304 counts').to.equal(0);
    const refused = await limits.admit(ws).catch((err: unknown) => err);
    expect(refused).to.be.instanceOf(ApiError).and.to.include({ status: 429 });
  });

  it("does not count a 304 against the workspace's request rate", async () => {
    const limited = await startApi({
      now: () => clock,
      limits: { workspace: { ratePerSecond: 3, concurrency: 0 }, authFailures: { perMinute: 0, trustedProxies: [] } },
    });
    try {
      const first: ApiResponse = await limited.get('/v1/fleets', key);
      expect(first.headers.get('ratelimit')).to.match(/^"workspace";r=2;/);
      for (let i = 0; i < 10; i++) {
        const res = await limited.get('/v1/fleets', key, { 'if-none-match': first.headers.get('etag')! });
        expect(res.status, `conditional request ${i + 1}`).to.equal(304);
        expect(res.headers.get('ratelimit')).to.match(/^"workspace";r=2;/);
      }
      expect((await limited.get('/v1/fleets', key)).headers.get('ratelimit')).to.match(/^"workspace";r=1;/);
    } finally {
      await limited.close();
    }
  });
});
