import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { expectRollupsExact } from '../support/rollups.js';
import { LAUNCHER } from '../support/cli.js';
import { startAdminApi, type TestAdminApi } from './support.js';
import { eventually } from '../webhooks/support.js';
import { createAdminToken } from '../../src/admin-tokens.js';
import { createWorkspace } from '../../src/workspaces.js';

// Import jobs (issue 32, point 4) through the admin API as its own role: a streamed JSON document and an NDJSON stream,
// progress and the first bad record, cancel, and a job whose process is killed mid-way (nothing written, shown failed).

const OPERATOR = { actor: { type: 'cli' as const, name: os.userInfo().username } };
const uuid = () => crypto.randomUUID();

/** `n` customers, with one owner, fleet and car, and a booking of the first customer. */
function document(n: number) {
  const owner = { id: uuid(), name: 'Al Noor Rentals' };
  const fleet = { id: uuid(), code: 'NOOR', name: 'Al Noor fleet', ownerId: owner.id };
  const car = { id: uuid(), fleetId: fleet.id, make: 'Toyota', model: 'Camry', plate: 'Dubai A 1', category: 'sedan', dailyRate: 15000, state: 'active' };
  const customers = Array.from({ length: n }, (_, i) => ({ id: uuid(), name: `Customer ${i}` }));
  const booking = {
    id: uuid(), number: 'BK-1', customerId: customers[0].id, vehicleId: car.id, type: 'daily', status: 'completed',
    pickupAt: '2026-10-01T08:00:00.000Z', dropoffAt: '2026-10-03T08:00:00.000Z', amount: 30000,
  };
  const payment = { id: uuid(), kind: 'charge', amount: 6000, customerId: customers[0].id, bookingId: booking.id, at: '2026-10-01T09:00:00.000Z' };
  return { owners: [owner], fleets: [fleet], vehicles: [car], customers, bookings: [booking], payments: [payment] };
}

const ndjson = (doc: Record<string, unknown[]>) => Object.entries(doc).flatMap(([key, records]) => records.map((record) => JSON.stringify({ key, record }))).join('\n');

describe('the admin API: import jobs', () => {
  let db: Knex;
  let url: string;
  let admin: TestAdminApi;
  let token: { token: string };
  let n = 0;
  const fresh = () => createWorkspace(db, { slug: `imports-${process.pid}-${Date.now().toString(36)}-${++n}` });
  const counted = async (table: string, workspaceId: string) => Number((await db(table).where({ workspace_id: workspaceId }).count({ c: '*' }))[0].c);

  before(async () => {
    ({ db, url } = await testDatabase());
    token = await createAdminToken(db, { name: 'imports test' }, OPERATOR);
    admin = await startAdminApi();
  });
  after(async () => admin?.close());

  async function start(workspaceId: string, body: string, type: string) {
    const res = await fetch(`${admin.url}/admin/v1/workspaces/${workspaceId}/imports`, { method: 'POST', headers: { authorization: `Bearer ${token.token}`, 'content-type': type }, body });
    return { status: res.status, body: await res.json() };
  }
  const show = (workspaceId: string, id: string) => admin.request('GET', `/admin/v1/workspaces/${workspaceId}/imports/${id}`, { token: token.token });
  const finished = (workspaceId: string, id: string) => eventually(async () => {
    const job = (await show(workspaceId, id)).body;
    return job.phase === 'running' ? undefined : job;
  }, 20_000, 'the job to end');

  it('loads a JSON document streamed, in one transaction (bulk into an empty workspace), then an NDJSON stream over it', async () => {
    const ws = await fresh();
    const doc = document(2500);
    const started = await start(ws.id, JSON.stringify(doc), 'application/json');
    expect(started.status).to.equal(202);
    expect(started.body).to.include({ workspaceId: ws.id, format: 'json', error: null });
    const job = await finished(ws.id, started.body.id).catch(async (err) => { console.log(await db('import_jobs').where({ id: started.body.id }).first(), JSON.stringify(admin.logs.slice(-3)).slice(0, 3000)); throw err; });
    expect(job).to.deep.include({ phase: 'succeeded', recordsRead: 2505, recordsApplied: 2505, error: null });
    expect(job.counts).to.deep.equal({ owners: 1, fleets: 1, vehicles: 1, customers: 2500, bookings: 1, payments: 1 });
    expect(await counted('customers', ws.id)).to.equal(2500);
    await expectRollupsExact(db, ws.id);
    const audit = await db('audit_entries').where({ workspace_id: ws.id, action: 'workspace.import' }).select('changes', 'target_id');
    expect(audit).to.deep.equal([{ target_id: ws.id, changes: { imported: job.counts } }]);

    // The same records as NDJSON, one changed: written over them (the triggers keep the totals this time).
    doc.payments[0].amount = 7000;
    const again = await start(ws.id, ndjson(doc), 'application/x-ndjson');
    expect(await finished(ws.id, again.body.id)).to.deep.include({ phase: 'succeeded', format: 'ndjson', recordsApplied: 2505 });
    expect(await db('payments').where({ id: doc.payments[0].id }).first('amount')).to.deep.equal({ amount: 7000 });
    await expectRollupsExact(db, ws.id);
  });

  it('fails on the first bad record, naming it, with nothing written; refuses another content type; cancels', async () => {
    const ws = await fresh();
    const doc = document(10);
    (doc.customers[7] as Record<string, unknown>).name = '';
    const bad = await start(ws.id, JSON.stringify(doc), 'application/json');
    const job = await finished(ws.id, bad.body.id);
    expect(job.phase).to.equal('failed');
    expect(job.error).to.equal('invalid import document at /customers/7/name: must NOT have fewer than 1 characters');
    expect(await counted('owners', ws.id)).to.equal(0);

    const lines = ndjson(document(3)).split('\n');
    lines[6] = JSON.stringify({ key: 'bookings', record: { ...JSON.parse(lines[6]).record, vehicleId: uuid() } });
    const dangling = await start(ws.id, lines.join('\n'), 'application/x-ndjson');
    const failed = await finished(ws.id, dangling.body.id);
    expect(failed.error).to.match(/^import failed at line 7: \/record\/vehicleId: no vehicle [0-9a-f-]{36} in workspace/);
    expect(await counted('customers', ws.id)).to.equal(0);

    const csv = await fetch(`${admin.url}/admin/v1/workspaces/${ws.id}/imports`, { method: 'POST', headers: { authorization: `Bearer ${token.token}`, 'content-type': 'text/csv' }, body: 'a,b' });
    expect(csv.status).to.equal(415);

    // A job fed slowly is canceled while it runs: it ends canceled, nothing written.
    let feed!: ReadableStreamDefaultController<Uint8Array>;
    const body = new ReadableStream<Uint8Array>({ start: (controller) => { feed = controller; } });
    const big = ndjson(document(3000));
    const response = fetch(`${admin.url}/admin/v1/workspaces/${ws.id}/imports`, {
      method: 'POST', headers: { authorization: `Bearer ${token.token}`, 'content-type': 'application/x-ndjson' }, body, duplex: 'half',
    } as RequestInit);
    feed.enqueue(new TextEncoder().encode(big.slice(0, big.length / 2)));
    const running = await eventually(async () => (await db('import_jobs').where({ workspace_id: ws.id, phase: 'running' }).first('id')) ?? undefined, 10_000, 'the job to start');
    const canceled = await admin.request('POST', `/admin/v1/workspaces/${ws.id}/imports/${running.id}/cancel`, { token: token.token });
    expect([canceled.status, canceled.body.phase]).to.deep.equal([200, 'running']);
    feed.enqueue(new TextEncoder().encode(big.slice(big.length / 2)));
    feed.close();
    await response;
    expect(await finished(ws.id, running.id)).to.deep.include({ phase: 'canceled', recordsApplied: 0 });
    expect(await counted('customers', ws.id)).to.equal(0);
    const late = await admin.request('POST', `/admin/v1/workspaces/${ws.id}/imports/${running.id}/cancel`, { token: token.token });
    expect([late.status, late.body.error.reason]).to.deep.equal([409, 'phase']);
  });

  it('shows a job whose process was killed mid-way as failed, with nothing written (fleet-admin import runs the same job)', async () => {
    const ws = await fresh();
    const file = path.join(os.tmpdir(), `frs-import-${process.pid}-${n}.ndjson`);
    fs.writeFileSync(file, ndjson(document(60_000)));
    try {
      const child = spawn(process.execPath, [LAUNCHER, 'import', '--workspace', ws.slug, '--file', file, '--json'], { env: { ...process.env, DATABASE_URL: url }, stdio: 'ignore' });
      const exited = new Promise((resolve) => child.on('exit', resolve));
      const job = await eventually(async () => (await db('import_jobs').where({ workspace_id: ws.id }).where('records_applied', '>', 0).first('id')) ?? undefined, 60_000, 'the job to apply records');
      child.kill('SIGKILL');
      await exited;
      const shown = await eventually(async () => {
        const res = await show(ws.id, job.id);
        return res.body.phase === 'failed' ? res.body : undefined;
      }, 20_000, 'the job to be shown failed');
      expect(shown).to.deep.include({ recordsApplied: 0, error: 'the process running the job stopped before it finished; nothing was written' });
      expect(await counted('customers', ws.id)).to.equal(0);
      expect(await counted('owners', ws.id)).to.equal(0);
    } finally {
      fs.rmSync(file, { force: true });
    }
  });
});
