import crypto, { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { fixture, type Fixture } from '../support/fixtures.js';
import { createApiKey } from '../../src/core/workspaces.js';
import { Cursors } from '../../src/http/cursors.js';
import { searchVehicles } from '../../src/queries/vehicles.js';
import { receivables } from '../../src/queries/receivables.js';
import { idOf, operator } from '../support/actors.js';

// Cursors on GET /v1/vehicles and GET /v1/receivables, through HTTP (each answer checked against the document by
// startApi): the pages of a large workspace, concatenated, are the one unpaged answer of the query function (whose
// rows the query tests check by hand), with and without a term or a window; rows inserted and deleted between pages;
// cursors of another query, list or workspace, or altered. The clock is fixed; nothing depends on today's date.
const NOW = new Date('2026-11-22T08:00:00.000Z');
const UNLIMITED = {
  workspace: { ratePerSecond: 0, concurrency: 0 },
  authFailures: { perMinute: 0, trustedProxies: [] },
};

type Row = Record<string, unknown>;

interface Paged {
  rows: Row[];
  pages: number;
  /** Each page's answer. */
  answers: Row[];
}

/** Every page of `path` (which holds its query, and a `limit`), cursor after cursor, until nextCursor is null. */
async function pageThrough(
  api: TestApi,
  key: string,
  path: string,
  between?: (page: number, rows: Row[]) => Promise<void>,
): Promise<Paged> {
  const rows: Row[] = [];
  const answers: Row[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res = await api.get(cursor === null ? path : `${path}&cursor=${cursor}`, key);
    expect(res.status, `${path} page ${pages + 1}: ${res.text}`).to.equal(200);
    pages++;
    rows.push(...res.body.rows);
    answers.push(res.body);
    cursor = res.body.nextCursor;
    // a page short of its limit is the last one; a full page may be the last one too, and says so
    if (res.body.rows.length < Number(new URL(path, 'http://x').searchParams.get('limit')))
      expect(cursor).to.equal(null);
    if (cursor !== null) await between?.(pages, res.body.rows);
  } while (cursor !== null);
  return { rows, pages, answers };
}

const MAKES = ['Toyota', 'Nissan', 'Kia'];
const MODELS = ['Corolla', 'Patrol', 'Rio', 'Sunny'];
/** 300 vehicles: 3 makes x 4 models (25 of each pair), plates `P <k>`, `TO <k>` and `DXB <k>` by turns. */
const VEHICLES = 300;

/** 330 debtors: outstanding 1000 x (k mod 5), so 0 for a fifth of them (paid up); names `Customer <k mod 40>` (ties). */
const CUSTOMERS = 330;

async function loadVehicles(db: Knex, f: Fixture): Promise<void> {
  const fleet = await f.fleet();
  await db('vehicles').insert(
    Array.from({ length: VEHICLES }, (_, k) => ({
      id: randomUUID(),
      workspace_id: f.ws.id,
      fleet_id: fleet,
      make: MAKES[k % 3],
      model: MODELS[Math.floor(k / 3) % 4],
      plate: `${['P', 'TO', 'DXB'][Math.floor(k / 12) % 3]} ${k}`,
      category: 'sedan',
      daily_rate: 10000 + k,
      state: k % 10 === 0 ? 'in_service' : 'active',
    })),
  );
  // a few bookings and a maintenance block, for `available` in the window below
  const some = await db('vehicles')
    .where({ workspace_id: f.ws.id, state: 'active' })
    .orderBy('plate')
    .limit(5)
    .pluck('id');
  for (const vehicleId of some.slice(0, 3))
    await f.booking({
      vehicleId,
      status: 'confirmed',
      pickupAt: '2026-12-01T06:00:00Z',
      dropoffAt: '2026-12-03T06:00:00Z',
    });
  await f.maintenance({ vehicleId: some[4], startsAt: '2026-12-02T00:00:00Z', endsAt: '2026-12-02T12:00:00Z' });
}

async function loadDebtors(db: Knex, f: Fixture, count = CUSTOMERS, namePrefix = 'Customer'): Promise<string[]> {
  const ids = Array.from({ length: count }, () => randomUUID());
  await db('customers').insert(ids.map((id, k) => ({ id, workspace_id: f.ws.id, name: `${namePrefix} ${k % 40}` })));
  const invoices = ids.map((id, k) => ({
    id: randomUUID(),
    workspace_id: f.ws.id,
    number: `INV-${namePrefix}-${k}`,
    customer_id: id,
    purpose: 'rental',
    issue_date: '2026-10-01',
    due_date: '2026-11-01',
    total: 5000,
    status: 'issued',
  }));
  await db('invoices').insert(invoices);
  // paid 5000 - 1000 x (k mod 5): outstanding 1000 x (k mod 5)
  await db('payments').insert(
    invoices.map((invoice, k) => ({
      id: randomUUID(),
      workspace_id: f.ws.id,
      kind: 'charge',
      status: 'captured',
      amount: 5000 - 1000 * (k % 5),
      customer_id: invoice.customer_id,
      invoice_id: invoice.id,
      at: new Date('2026-10-15T00:00:00Z'),
    })),
  );
  return ids;
}

describe('API: paging GET /v1/vehicles and GET /v1/receivables by cursor', () => {
  let db: Knex;
  let api: TestApi;
  let f: Fixture;
  let key: string;
  let otherKey: string;

  before(async () => {
    ({ db } = await testDatabase());
    f = await fixture(db, { timezone: 'Asia/Dubai' });
    await loadVehicles(db, f);
    await loadDebtors(db, f);
    key = (await createApiKey(db, operator, { workspaceId: await idOf(db, f.slug) })).key;
    // another workspace with the same data: its key never takes this one's cursors
    const other = await fixture(db, { timezone: 'Asia/Dubai' });
    await loadVehicles(db, other);
    await loadDebtors(db, other);
    otherKey = (await createApiKey(db, operator, { workspaceId: await idOf(db, other.slug) })).key;
    // many pages a second: the per-workspace limits off
    api = await startApi({ now: NOW, limits: UNLIMITED });
  });
  after(() => api.close());

  const window = { from: '2026-12-01T06:00:00.000Z', to: '2026-12-04T06:00:00.000Z' };

  describe('vehicles', () => {
    const cases: Array<[string, { q?: string; from?: Date; to?: Date }, number]> = [
      // every vehicle
      ['', {}, VEHICLES],
      // a term too short for the trigram index: the make Toyota (k mod 3 = 0: 100) and the plates `TO <k>` of the
      // others (8 blocks of 12 with floor(k / 12) mod 3 = 1, 8 of each block not Toyotas: 64)
      ['&q=to', { q: 'to' }, 164],
      // a term the trigram index serves, matching a make and a model: Nissan (100) and the Patrols of the others (50)
      ['&q=nissan', { q: 'nissan' }, 100],
      ['&q=patrol', { q: 'patrol' }, 75],
      // plates only, through the trigram index: DXB <k> (8 blocks of 12 with floor(k / 12) mod 3 = 2)
      ['&q=dxb', { q: 'dxb' }, 96],
      // with a window: `available` on every row of every page
      [`&from=${window.from}&to=${window.to}`, { from: new Date(window.from), to: new Date(window.to) }, VEHICLES],
      [
        `&q=to&from=${window.from}&to=${window.to}`,
        { q: 'to', from: new Date(window.from), to: new Date(window.to) },
        164,
      ],
    ];
    for (const [query, params, count] of cases) {
      it(`pages${query || ' every vehicle'} 7 at a time into the one unpaged answer (${count} rows)`, async () => {
        const whole = await searchVehicles(db, f.ws, { ...params, limit: 1000 }, NOW);
        expect(whole.rows).to.have.length(count);
        expect(whole.next).to.equal(null);
        const paged = await pageThrough(api, key, `/v1/vehicles?limit=7${query}`);
        expect(paged.rows).to.deep.equal(whole.rows);
        expect(paged.pages).to.equal(Math.ceil(count / 7));
      });
    }

    it('takes another limit on every page, and the same term with spaces around it or the window with another offset', async () => {
      const whole = (await searchVehicles(db, f.ws, { q: 'to', limit: 1000 }, NOW)).rows;
      const first = await api.get('/v1/vehicles?q=to&limit=3', key);
      const second = await api.get(`/v1/vehicles?q=%20to%20&limit=50&cursor=${first.body.nextCursor}`, key);
      expect([...first.body.rows, ...second.body.rows]).to.deep.equal(whole.slice(0, 53));
      // 2026-12-01T06:00Z is 10:00 in Dubai
      const windowed = await api.get(`/v1/vehicles?from=${window.from}&to=${window.to}&limit=2`, key);
      const next = await api.get(
        `/v1/vehicles?from=2026-12-01T10:00:00%2B04:00&to=${window.to}&limit=2&cursor=${windowed.body.nextCursor}`,
        key,
      );
      expect(next.status).to.equal(200);
      expect(next.body.rows.map((r: Row) => r.plate)).to.deep.equal(
        (await searchVehicles(db, f.ws, { limit: 4 }, NOW)).rows.slice(2).map((r) => r.plate),
      );
    });

    it('sees every vehicle that stays put exactly once while others are added and removed before and after the cursor', async () => {
      const g = await fixture(db);
      const fleet = await g.fleet();
      const car = (make: string, model: string, plate: string) => ({
        id: randomUUID(),
        workspace_id: g.ws.id,
        fleet_id: fleet,
        make,
        model,
        plate,
        category: 'sedan',
        daily_rate: 1,
        state: 'active',
      });
      const initial = Array.from({ length: 60 }, (_, k) => car(MAKES[k % 3], MODELS[k % 4], `S ${k}`));
      await db('vehicles').insert(initial);
      const gKey = (await createApiKey(db, operator, { workspaceId: await idOf(db, g.slug) })).key;
      const seen = new Set<string>();
      const removedSeen = new Set<string>();
      const removedUnseen = new Set<string>();
      const before: string[] = [];
      const after: string[] = [];
      const paged = await pageThrough(api, gKey, '/v1/vehicles?limit=8', async (page, rows) => {
        for (const r of rows) seen.add(r.id as string);
        // one before the cursor (never to be seen), one after it (to be seen); and one at the cursor's own make and
        // model, either side of it
        const last = rows.at(-1)!;
        const [first, beside, later] = [
          car('Aston', 'Z', `N ${page}`),
          car(String(last.make), String(last.model), `${String(last.plate)} b`),
          car('Zotye', 'A', `N ${String(page).padStart(3, '0')}`),
        ];
        await db('vehicles').insert([first, beside, later]);
        before.push(first.id);
        after.push(later.id);
        // one vehicle of the start already seen, and one not yet seen, are removed
        const gone = initial.find((v) => seen.has(v.id) && !removedSeen.has(v.id));
        const unseen = initial.find((v) => !seen.has(v.id) && !removedUnseen.has(v.id) && v.id !== initial.at(-1)!.id);
        for (const v of [gone, unseen]) if (v) await db('vehicles').where({ id: v.id }).delete();
        if (gone) removedSeen.add(gone.id);
        if (unseen) removedUnseen.add(unseen.id);
      });
      const ids = paged.rows.map((r) => r.id as string);
      expect(new Set(ids).size, 'no vehicle twice').to.equal(ids.length);
      for (const v of initial.filter((v) => !removedUnseen.has(v.id)))
        expect(
          ids.filter((id) => id === v.id),
          `${v.plate} once`,
        ).to.have.length(1);
      expect(
        ids.filter((id) => removedUnseen.has(id) || before.includes(id)),
        'none removed before it was reached, none added before the cursor',
      ).to.deep.equal([]);
      expect(
        after.every((id) => ids.includes(id)),
        'every one added after the cursor',
      ).to.equal(true);
      expect(removedUnseen.size).to.be.greaterThan(3);
    });

    it('answers an empty list with one page and no cursor', async () => {
      const g = await fixture(db);
      const res = await api.get(
        '/v1/vehicles?limit=5',
        (await createApiKey(db, operator, { workspaceId: await idOf(db, g.slug) })).key,
      );
      expect(res.body).to.deep.equal({ rows: [], nextCursor: null });
    });
  });

  describe('receivables', () => {
    const cases: Array<[string, string | undefined, number]> = [
      ['', undefined, CUSTOMERS],
      // names `Customer <k mod 40>` for k < 330: those of k mod 40 < 10 nine times, the others eight times
      // a term too short for the trigram index: `Customer 1` (9) and `Customer 10` to `Customer 19` (80)
      ['&search=r%201', 'r 1', 89],
      // a rare term (the trigram index's matches, sorted): `Customer 3` (9) and `Customer 30` to `Customer 39` (80)
      ['&search=mer%203', 'mer 3', 89],
    ];
    for (const [query, search, count] of cases) {
      it(`pages${query || ' the whole book'} 9 at a time into the one unpaged answer, totals whole-book on every page (${count} rows)`, async () => {
        const whole = await receivables(db, f.ws, { search, limit: 1000 }, NOW);
        expect(whole.rows).to.have.length(count);
        const paged = await pageThrough(api, key, `/v1/receivables?limit=9${query}`);
        expect(paged.rows).to.deep.equal(whole.rows);
        expect(paged.pages).to.equal(Math.ceil(count / 9));
        for (const answer of paged.answers) expect(answer.totals).to.deep.equal(whole.totals);
        expect(whole.totals).to.include({
          customers: CUSTOMERS,
          outstanding: 1000 * (0 + 1 + 2 + 3 + 4) * (CUSTOMERS / 5),
        });
      });
    }

    it('pages a term matching more customers than a rare one (the ledger walked) into the unpaged answer', async () => {
      const g = await fixture(db, { timezone: 'Asia/Dubai' });
      await loadDebtors(db, g, 520, 'Commoner');
      const gKey = (await createApiKey(db, operator, { workspaceId: await idOf(db, g.slug) })).key;
      const whole = await receivables(db, g.ws, { search: 'commoner', limit: 1000 }, NOW);
      expect(whole.rows).to.have.length(520);
      const paged = await pageThrough(api, gKey, '/v1/receivables?limit=200&search=commoner');
      expect(paged.rows).to.deep.equal(whole.rows);
      expect(paged.pages).to.equal(3);
    });

    it('sees every customer that stays put exactly once while others come and go, and a moved one again (deduped by id)', async () => {
      const g = await fixture(db, { timezone: 'Asia/Dubai' });
      const initial = await loadDebtors(db, g, 60);
      const gKey = (await createApiKey(db, operator, { workspaceId: await idOf(db, g.slug) })).key;
      const seen = new Set<string>();
      const removedSeen = new Set<string>();
      const removedUnseen = new Set<string>();
      const before: string[] = [];
      const after: string[] = [];
      let moved: string | undefined;
      const debtor = async (name: string, outstanding: number) => {
        const id = await g.customer({ name });
        const invoice = await g.invoice({ customerId: id, total: outstanding + 100, dueDate: '2026-11-01' });
        await g.payment({ invoiceId: invoice, amount: 100, at: '2026-11-02T00:00:00Z' });
        return id;
      };
      const paged = await pageThrough(api, gKey, '/v1/receivables?limit=8', async (page, rows) => {
        for (const r of rows) seen.add(r.customerId as string);
        // one owing the most (before the cursor: never seen), one owing nothing with a name after all others (after
        // it: seen), and one with the cursor's own amount and name (either side of it, by its id)
        const last = rows.at(-1)!;
        before.push(await debtor(`Aaron New ${page}`, 99000));
        after.push(await debtor(`Zed New ${String(page).padStart(3, '0')}`, 0));
        await debtor(String(last.name), Number(last.outstanding));
        // one seen and one not yet seen leave the list (their invoices voided)
        const gone = initial.find((id) => seen.has(id) && !removedSeen.has(id) && id !== moved);
        const unseen = initial.find((id) => !seen.has(id) && !removedUnseen.has(id));
        for (const id of [gone, unseen])
          if (id) await db('invoices').where({ customer_id: id }).update({ status: 'void' });
        if (gone) removedSeen.add(gone);
        if (unseen) removedUnseen.add(unseen);
        // after the first page: one seen owing 4000 pays it all and moves past the cursor, to owing nothing
        if (page === 1) {
          moved = rows.find((r) => r.outstanding === 4000 && r.customerId !== gone)!.customerId as string;
          const invoice = await db('invoices').where({ customer_id: moved }).first('id');
          await g.payment({ customerId: moved, invoiceId: invoice.id, amount: 4000, at: '2026-11-10T00:00:00Z' });
        }
      });
      const ids = paged.rows.map((r) => r.customerId as string);
      // the one whose own amount changed is seen twice (documented: clients dedupe by customerId); no one else is
      expect(ids.filter((id) => id === moved)).to.have.length(2);
      expect(new Set(ids).size, 'no one else twice').to.equal(ids.length - 1);
      for (const id of initial.filter((id) => !removedUnseen.has(id))) expect(ids.includes(id), id).to.equal(true);
      expect(
        ids.filter((id) => removedUnseen.has(id) || before.includes(id)),
        'none removed before it was reached, none added before the cursor',
      ).to.deep.equal([]);
      expect(
        after.every((id) => ids.includes(id)),
        'every one added after the cursor',
      ).to.equal(true);
      expect(removedUnseen.size).to.be.greaterThan(3);
    });

    it('answers an empty book with one page and no cursor', async () => {
      const g = await fixture(db);
      const res = await api.get(
        '/v1/receivables?limit=5',
        (await createApiKey(db, operator, { workspaceId: await idOf(db, g.slug) })).key,
      );
      expect(res.body).to.deep.include({ rows: [], nextCursor: null });
    });
  });

  describe('cursors that are refused', () => {
    const expectRefused = (
      res: { status: number; body: { error: { code: string; reason?: string; message: string } } },
      what: string,
    ) => {
      expect(res.status, what).to.equal(400);
      expect(res.body.error, what).to.include({ code: 'invalid_request', reason: 'cursor' });
      expect(res.body.error.message, what).to.match(/^Query parameter "cursor" .* Start again without "cursor"\.$/);
    };

    it('refuses a cursor altered, of another workspace, of another query or of another list, and changes nothing', async () => {
      const vehicles = (await api.get('/v1/vehicles?limit=5&q=to', key)).body.nextCursor as string;
      const windowed = (await api.get(`/v1/vehicles?limit=5&from=${window.from}&to=${window.to}`, key)).body
        .nextCursor as string;
      const debtors = (await api.get('/v1/receivables?limit=5&search=r%201', key)).body.nextCursor as string;
      const altered = (cursor: string, at: number) =>
        `${cursor.slice(0, at)}${cursor[at] === 'A' ? 'B' : 'A'}${cursor.slice(at + 1)}`;
      const refused: Array<[string, string, string]> = [
        ['altered at its start', `/v1/vehicles?limit=5&q=to&cursor=${altered(vehicles, 0)}`, key],
        ['altered in its position', `/v1/vehicles?limit=5&q=to&cursor=${altered(vehicles, 8)}`, key],
        ['altered in its signature', `/v1/vehicles?limit=5&q=to&cursor=${altered(vehicles, vehicles.length - 3)}`, key],
        ['cut short', `/v1/vehicles?limit=5&q=to&cursor=${vehicles.slice(0, -2)}`, key],
        ['another workspace', `/v1/vehicles?limit=5&q=to&cursor=${vehicles}`, otherKey],
        ['another term', `/v1/vehicles?limit=5&q=toy&cursor=${vehicles}`, key],
        ['no term', `/v1/vehicles?limit=5&cursor=${vehicles}`, key],
        ['a window added', `/v1/vehicles?limit=5&q=to&from=${window.from}&to=${window.to}&cursor=${vehicles}`, key],
        [
          'another window',
          `/v1/vehicles?limit=5&from=${window.from}&to=2026-12-04T06:00:00.001Z&cursor=${windowed}`,
          key,
        ],
        ['the window left out', `/v1/vehicles?limit=5&cursor=${windowed}`, key],
        ['another list (vehicles to receivables)', `/v1/receivables?limit=5&cursor=${vehicles}`, key],
        ['another list (receivables to vehicles)', `/v1/vehicles?limit=5&cursor=${debtors}`, key],
        ['another search', `/v1/receivables?limit=5&search=r%202&cursor=${debtors}`, key],
        ['no search', `/v1/receivables?limit=5&cursor=${debtors}`, key],
        ['another workspace (receivables)', `/v1/receivables?limit=5&search=r%201&cursor=${debtors}`, otherKey],
        ['not a cursor at all', '/v1/receivables?limit=5&cursor=bm90LWEtY3Vyc29y', key],
      ];
      for (const [what, path, apiKey] of refused) expectRefused(await api.get(path, apiKey), what);
      // outside the parameter's alphabet or length: refused by the document, naming it too
      for (const bad of ['a*b', 'A'.repeat(2049)]) {
        expect((await api.get(`/v1/vehicles?cursor=${bad}`, key)).body.error).to.include({
          code: 'invalid_request',
          reason: 'cursor',
        });
      }
      // and the cursors themselves still work where they belong
      expect((await api.get(`/v1/vehicles?limit=5&q=to&cursor=${vehicles}`, key)).status).to.equal(200);
      expect((await api.get(`/v1/receivables?limit=5&search=r%201&cursor=${debtors}`, key)).status).to.equal(200);
    });

    it('takes a cursor from another API process with the same master key, not from one with another', async () => {
      const sibling = await startApi({ now: NOW, limits: UNLIMITED });
      const foreign = await startApi({
        now: NOW,
        limits: UNLIMITED,
        cursors: Cursors.fromApiSecret({ env: { FRS_API_SECRET: crypto.randomBytes(32).toString('base64') } }),
      });
      try {
        const first = await api.get('/v1/receivables?limit=4', key);
        const whole = await receivables(db, f.ws, { limit: 8 }, NOW);
        expect(
          (await sibling.get(`/v1/receivables?limit=4&cursor=${first.body.nextCursor}`, key)).body.rows,
        ).to.deep.equal(whole.rows.slice(4, 8));
        expectRefused(
          await foreign.get(`/v1/receivables?limit=4&cursor=${first.body.nextCursor}`, key),
          'another master key',
        );
      } finally {
        await sibling.close();
        await foreign.close();
      }
    });
  });
});
