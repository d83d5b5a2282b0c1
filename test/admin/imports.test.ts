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
import { ADMIN_API, expectDocumented } from '../support/http.js';
import { eventually } from '../webhooks/support.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { createWorkspace } from '../../src/core/workspaces.js';
import net from 'node:net';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdminApp } from '../../src/admin/app.js';
import { listen } from '../../src/http/edge.js';
import { DEFAULT_HTTP_LIMITS } from '../../src/http/http-limits.js';
import { capturedLogger } from '../support/logs.js';
import { runRetention } from '../../src/webhooks/retention.js';
import { LOST_JOB_ERROR } from '../../src/webhooks/lost-imports.js';
import {
  INTERNAL_JOB_ERROR,
  MAX_RUNNING_IMPORTS,
  MAX_RUNNING_IMPORTS_PER_PROCESS,
  startImport,
} from '../../src/core/import/jobs.js';
import { operator, operatorWith, FIXTURE_ACTOR } from '../support/actors.js';

// Import jobs (issue 32, point 4) through the admin API as its own role: a streamed JSON document and an NDJSON stream,
// progress and the first bad record, cancel, and a job whose process is killed mid-way (nothing written, shown failed).

const OPERATOR = { actor: { type: 'cli' as const, name: os.userInfo().username } };
const uuid = () => crypto.randomUUID();

/** `n` customers, with one owner, fleet and car, and a booking of the first customer. */
function document(n: number) {
  const owner = { id: uuid(), name: 'Al Noor Rentals' };
  const fleet = { id: uuid(), code: 'NOOR', name: 'Al Noor fleet', ownerId: owner.id };
  const car = {
    id: uuid(),
    fleetId: fleet.id,
    make: 'Toyota',
    model: 'Camry',
    plate: 'Dubai A 1',
    category: 'sedan',
    dailyRate: 15000,
    state: 'active',
  };
  const customers = Array.from({ length: n }, (_, i) => ({ id: uuid(), name: `Customer ${i}` }));
  const booking = {
    id: uuid(),
    number: 'BK-1',
    customerId: customers[0].id,
    vehicleId: car.id,
    type: 'daily',
    status: 'completed',
    pickupAt: '2026-10-01T08:00:00.000Z',
    dropoffAt: '2026-10-03T08:00:00.000Z',
    amount: 30000,
  };
  const payment = {
    id: uuid(),
    kind: 'charge',
    amount: 6000,
    customerId: customers[0].id,
    bookingId: booking.id,
    at: '2026-10-01T09:00:00.000Z',
  };
  return { owners: [owner], fleets: [fleet], vehicles: [car], customers, bookings: [booking], payments: [payment] };
}

const ndjson = (doc: Record<string, unknown[]>) =>
  Object.entries(doc)
    .flatMap(([key, records]) => records.map((record) => JSON.stringify({ key, record })))
    .join('\n');

describe('the admin API: import jobs', () => {
  let db: Knex;
  let url: string;
  let admin: TestAdminApi;
  let token: { token: string };
  let n = 0;
  const fresh = () =>
    createWorkspace(db, operator, { slug: `imports-${process.pid}-${Date.now().toString(36)}-${++n}` });
  const counted = async (table: string, workspaceId: string) =>
    Number((await db(table).where({ workspace_id: workspaceId }).count({ c: '*' }))[0].c);

  before(async () => {
    ({ db, url } = await testDatabase());
    token = await createAdminToken(db, operatorWith(OPERATOR), { name: 'imports test', workspaceId: 'every' });
    admin = await startAdminApi();
  });
  after(async () => admin?.close());

  async function start(workspaceId: string, body: string, type: string) {
    const res = await fetch(`${admin.url}/admin/v1/workspaces/${workspaceId}/imports`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token.token}`, 'content-type': type },
      body,
    });
    return { status: res.status, body: await res.json() };
  }
  const show = (workspaceId: string, id: string) =>
    admin.request('GET', `/admin/v1/workspaces/${workspaceId}/imports/${id}`, { token: token.token });
  const finished = (workspaceId: string, id: string) =>
    eventually(
      async () => {
        const job = (await show(workspaceId, id)).body;
        return job.phase === 'running' ? undefined : job;
      },
      20_000,
      'the job to end',
    );

  it('loads a JSON document streamed, in one transaction (bulk into an empty workspace), then an NDJSON stream over it', async () => {
    const ws = await fresh();
    const doc = document(2500);
    const started = await start(ws.id, JSON.stringify(doc), 'application/json');
    expect(started.status).to.equal(202);
    expect(started.body).to.include({ workspaceId: ws.id, format: 'json', error: null });
    const job = await finished(ws.id, started.body.id).catch(async (err) => {
      console.log(
        await db('import_jobs').where({ id: started.body.id }).first(),
        JSON.stringify(admin.logs.slice(-3)).slice(0, 3000),
      );
      throw err;
    });
    expect(job).to.deep.include({ phase: 'succeeded', recordsRead: 2505, recordsApplied: 2505, error: null });
    expect(job.counts).to.deep.equal({ owners: 1, fleets: 1, vehicles: 1, customers: 2500, bookings: 1, payments: 1 });
    // it ended after it started (the end is the wall clock's, not the job's transaction's start)
    expect(Date.parse(job.finishedAt)).to.be.at.least(Date.parse(job.startedAt));
    expect(await counted('customers', ws.id)).to.equal(2500);
    await expectRollupsExact(db, ws.id);
    const audit = await db('audit_entries')
      .whereNot({ actor_name: FIXTURE_ACTOR })
      .where({ workspace_id: ws.id, action: 'workspace.import' })
      .select('changes', 'target_id');
    expect(audit).to.deep.equal([{ target_id: ws.id, changes: { imported: job.counts } }]);

    // The same records as NDJSON, one changed: written over them (the triggers keep the totals this time).
    doc.payments[0].amount = 7000;
    const again = await start(ws.id, ndjson(doc), 'application/x-ndjson');
    expect(await finished(ws.id, again.body.id)).to.deep.include({
      phase: 'succeeded',
      format: 'ndjson',
      recordsApplied: 2505,
    });
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
    expect(failed.error).to.match(
      /^import failed at line 7: \/record\/vehicleId: no vehicle [0-9a-f-]{36} in workspace/,
    );
    expect(await counted('customers', ws.id)).to.equal(0);

    // a record the database refuses (year 0: SQLSTATE 22008) is named by its line, never in the database's words (L3b)
    const years = ndjson(document(2)).split('\n');
    years.push(
      JSON.stringify({
        key: 'payments',
        record: { ...JSON.parse(years.at(-1)!).record, id: uuid(), at: '0000-01-01T00:00:00Z' },
      }),
    );
    const year0 = await start(ws.id, years.join('\n'), 'application/x-ndjson');
    expect(await finished(ws.id, year0.body.id)).to.deep.include({
      phase: 'failed',
      recordsApplied: 0,
      error:
        'import failed at line 8: /record: the record cannot be stored: a date or time is out of the range the service stores',
    });
    expect(await counted('customers', ws.id)).to.equal(0);

    const csv = await fetch(`${admin.url}/admin/v1/workspaces/${ws.id}/imports`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token.token}`, 'content-type': 'text/csv' },
      body: 'a,b',
    });
    expect(csv.status).to.equal(415);

    // A job fed slowly is canceled while it runs: it ends canceled, nothing written.
    let feed!: ReadableStreamDefaultController<Uint8Array>;
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        feed = controller;
      },
    });
    const big = ndjson(document(3000));
    const response = fetch(`${admin.url}/admin/v1/workspaces/${ws.id}/imports`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token.token}`, 'content-type': 'application/x-ndjson' },
      body,
      duplex: 'half',
    } as RequestInit);
    feed.enqueue(new TextEncoder().encode(big.slice(0, big.length / 2)));
    const running = await eventually(
      async () => (await db('import_jobs').where({ workspace_id: ws.id, phase: 'running' }).first('id')) ?? undefined,
      10_000,
      'the job to start',
    );
    const canceled = await admin.request('POST', `/admin/v1/workspaces/${ws.id}/imports/${running.id}/cancel`, {
      token: token.token,
    });
    expect([canceled.status, canceled.body.phase]).to.deep.equal([200, 'running']);
    feed.enqueue(new TextEncoder().encode(big.slice(big.length / 2)));
    feed.close();
    await response;
    expect(await finished(ws.id, running.id)).to.deep.include({ phase: 'canceled', recordsApplied: 0 });
    expect(await counted('customers', ws.id)).to.equal(0);
    const late = await admin.request('POST', `/admin/v1/workspaces/${ws.id}/imports/${running.id}/cancel`, {
      token: token.token,
    });
    expect([late.status, late.body.error.reason]).to.deep.equal([409, 'phase']);
  });

  it('shows a job whose process was killed mid-way as failed, with nothing written (fleet-admin import runs the same job)', async () => {
    const ws = await fresh();
    const file = path.join(os.tmpdir(), `frs-import-${process.pid}-${n}.ndjson`);
    fs.writeFileSync(file, ndjson(document(60_000)));
    try {
      const child = spawn(process.execPath, [LAUNCHER, 'import', '--workspace', ws.slug, '--file', file, '--json'], {
        env: { ...process.env, DATABASE_URL: url },
        stdio: 'ignore',
      });
      const exited = new Promise((resolve) => child.on('exit', resolve));
      const job = await eventually(
        async () =>
          (await db('import_jobs').where({ workspace_id: ws.id }).where('records_applied', '>', 0).first('id')) ??
          undefined,
        60_000,
        'the job to apply records',
      );
      child.kill('SIGKILL');
      await exited;
      const shown = await eventually(
        async () => {
          const res = await show(ws.id, job.id);
          return res.body.phase === 'failed' ? res.body : undefined;
        },
        20_000,
        'the job to be shown failed',
      );
      expect(shown).to.deep.include({
        recordsApplied: 0,
        error: 'the process running the job stopped before it finished; nothing was written',
      });
      expect(await counted('customers', ws.id)).to.equal(0);
      expect(await counted('owners', ws.id)).to.equal(0);
    } finally {
      fs.rmSync(file, { force: true });
    }
  });
  /** Sends the headers and `part` of an NDJSON body that announces `length` bytes over a raw socket; the body never ends. */
  async function partialUpload(base: string, workspaceId: string, part: string, length: number): Promise<net.Socket> {
    const { hostname, port } = new URL(base);
    const socket = net.connect(Number(port), hostname);
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /admin/v1/workspaces/${workspaceId}/imports HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${token.token}\r\n` +
        `Content-Type: application/x-ndjson\r\nContent-Length: ${length}\r\n\r\n${part}`,
    );
    return socket;
  }
  const runningJob = (workspaceId: string) =>
    eventually(
      async () =>
        (await db('import_jobs').where({ workspace_id: workspaceId, phase: 'running' }).first('id')) ?? undefined,
      10_000,
      'the job to start',
    );
  /** The states of the connections that hold the job's lock (its transaction). */
  const holders = async (jobId: string) =>
    (
      await db.raw(
        `SELECT a.state FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.objsubid = 1
       AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended('frs.import:' || ?::text, 0)`,
        [jobId],
      )
    ).rows.map((r: { state: string }) => r.state);

  it('fails a job whose upload is cut off, at once: rolled back, its connection released (H1)', async () => {
    const ws = await fresh();
    const part = ndjson(document(50)) + '\n';
    const socket = await partialUpload(admin.url, ws.id, part, part.length * 10);
    const job = await runningJob(ws.id);
    await eventually(
      async () => ((await holders(job.id)).join() === 'idle in transaction' ? true : undefined),
      5_000,
      'the job to wait for input',
    );
    socket.destroy();
    const ended = await eventually(
      async () => {
        const row = await db('import_jobs').where({ id: job.id }).first();
        return row.phase === 'running' ? undefined : row;
      },
      5_000,
      'the cut-off job to end',
    );
    expect(ended).to.include({
      phase: 'failed',
      records_applied: 0,
      error: 'the upload was cut off before the body ended; nothing was written',
    });
    // (the job's end is written just before its transaction rolls back)
    await eventually(
      async () => ((await holders(job.id)).length === 0 ? true : undefined),
      5_000,
      "the job's transaction to end",
    );
    expect(await counted('customers', ws.id)).to.equal(0);
    expect(await counted('owners', ws.id)).to.equal(0);
  });

  it('cancels a job stalled mid-body (H1)', async () => {
    const ws = await fresh();
    const part = ndjson(document(20)) + '\n';
    const socket = await partialUpload(admin.url, ws.id, part, part.length * 10);
    const job = await runningJob(ws.id);
    // No more bytes come: the cancel ends the job all the same.
    const canceled = await admin.request('POST', `/admin/v1/workspaces/${ws.id}/imports/${job.id}/cancel`, {
      token: token.token,
    });
    expect(canceled.status).to.equal(200);
    expect(await finished(ws.id, job.id)).to.deep.include({ phase: 'canceled', recordsApplied: 0 });
    // (the job's end is written just before its transaction rolls back)
    await eventually(
      async () => ((await holders(job.id)).length === 0 ? true : undefined),
      5_000,
      "the job's transaction to end",
    );
    socket.destroy();
    expect(await counted('customers', ws.id)).to.equal(0);
  });

  it('refuses a third running job in a workspace (H1)', async () => {
    const ws = await fresh();
    // (records first: a first load of an empty workspace holds the workspace's row, and a second job waits for it)
    await finished(ws.id, (await start(ws.id, ndjson(document(1)), 'application/x-ndjson')).body.id);
    const part = ndjson(document(20)) + '\n';
    const sockets = [];
    for (let i = 0; i < MAX_RUNNING_IMPORTS; i++)
      sockets.push(await partialUpload(admin.url, ws.id, part, part.length * 10));
    const running = async () =>
      Number((await db('import_jobs').where({ workspace_id: ws.id, phase: 'running' }).count({ c: '*' }))[0].c);
    await eventually(
      async () => ((await running()) === MAX_RUNNING_IMPORTS ? true : undefined),
      10_000,
      'the jobs to start',
    );
    const refused = await admin.request('POST', `/admin/v1/workspaces/${ws.id}/imports`, {
      token: token.token,
      body: part,
      headers: { 'content-type': 'application/x-ndjson' },
    });
    expect([refused.status, refused.body.error.code, refused.body.error.reason]).to.deep.equal([
      409,
      'conflict',
      'running_imports',
    ]);
    expect(refused.body.error.message).to.equal(
      `This workspace already runs ${MAX_RUNNING_IMPORTS} import jobs, the most it may at once: wait for one to end (getImport) or cancel one (cancelImport).`,
    );
    expect(await running()).to.equal(MAX_RUNNING_IMPORTS);
    for (const socket of sockets) socket.destroy();
    await eventually(async () => ((await running()) === 0 ? true : undefined), 5_000, 'the jobs to end');
    expect(await counted('customers', ws.id)).to.equal(1);
  });

  it("refuses a job over the process's cap with 503 overloaded before it takes a connection; batches and other operations answer meanwhile (M-B)", async () => {
    expect(MAX_RUNNING_IMPORTS_PER_PROCESS).to.equal(3);
    const workspaces = [];
    for (let i = 0; i <= MAX_RUNNING_IMPORTS_PER_PROCESS; i++) workspaces.push(await fresh());
    const busy = workspaces.slice(0, MAX_RUNNING_IMPORTS_PER_PROCESS);
    const last = workspaces[MAX_RUNNING_IMPORTS_PER_PROCESS];
    // one slow upload in each of three workspaces (one job each: within every workspace's own limit)
    const part = ndjson(document(20)) + '\n';
    const sockets: net.Socket[] = [];
    const running = async () =>
      Number(
        (
          await db('import_jobs')
            .whereIn(
              'workspace_id',
              busy.map((w) => w.id),
            )
            .where({ phase: 'running' })
            .count({ c: '*' })
        )[0].c,
      );
    try {
      for (const ws of busy) sockets.push(await partialUpload(admin.url, ws.id, part, part.length * 10));
      await eventually(
        async () => ((await running()) === MAX_RUNNING_IMPORTS_PER_PROCESS ? true : undefined),
        10_000,
        'the jobs to start',
      );
      const refused = await fetch(`${admin.url}/admin/v1/workspaces/${last.id}/imports`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token.token}`, 'content-type': 'application/x-ndjson' },
        body: part,
      });
      const body = await refused.json();
      expectDocumented(ADMIN_API, 'POST', `/admin/v1/workspaces/${last.id}/imports`, {
        status: refused.status,
        headers: refused.headers,
        body,
      });
      expect([refused.status, body.error.code, refused.headers.get('retry-after')]).to.deep.equal([
        503,
        'overloaded',
        '30',
      ]);
      expect(body.error.message).to.equal(
        'The service already runs 3 import jobs, the most it runs at once: nothing was started. Try again in 30 seconds.',
      );
      expect(await counted('import_jobs', last.id)).to.equal(0);
      // meanwhile a batch is written, the jobs are shown, and the admin API's other operations answer
      const customer = uuid();
      const batch = await admin.request('POST', `/admin/v1/workspaces/${last.id}/records`, {
        token: token.token,
        body: { upsert: { customers: [{ id: customer, name: 'Meanwhile' }] } },
      });
      expect([batch.status, batch.body.upserted]).to.deep.equal([200, { customers: 1 }]);
      expect(await db('customers').where({ id: customer }).pluck('name')).to.deep.equal(['Meanwhile']);
      const job = await runningJob(busy[0].id);
      expect((await show(busy[0].id, job.id)).body).to.include({ id: job.id, phase: 'running' });
      expect((await admin.request('GET', `/admin/v1/workspaces/${last.id}`, { token: token.token })).body).to.include({
        id: last.id,
      });
      expect(
        (await admin.request('GET', `/admin/v1/workspaces/${last.id}/endpoints`, { token: token.token })).body,
      ).to.deep.equal({ rows: [] });
      expect(await running()).to.equal(MAX_RUNNING_IMPORTS_PER_PROCESS);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
    await eventually(async () => ((await running()) === 0 ? true : undefined), 5_000, 'the jobs to end');
    // the places are given back as the jobs end
    const again = await start(last.id, ndjson(document(1)), 'application/x-ndjson');
    expect(again.status).to.equal(202);
    expect(await finished(last.id, again.body.id)).to.deep.include({ phase: 'succeeded', recordsApplied: 6 });
  });

  it("takes an upload longer than the listener's request time-out, which still holds for other requests (H1)", async () => {
    const { logger } = capturedLogger();
    const app = await createAdminApp({
      db: (await testDatabase()).forRole('admin'),
      ingestDb: (await testDatabase()).forRole('ingest'),
      logger,
      portalUrl: 'http://localhost:3000',
    });
    const server: Server = await listen(app, 0, '127.0.0.1', {
      ...DEFAULT_HTTP_LIMITS,
      headersTimeoutMs: 500,
      requestTimeoutMs: 800,
      checkIntervalMs: 100,
    });
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const ws = await fresh();
      const body = ndjson(document(30)) + '\n';
      const half = body.length / 2;
      const socket = await partialUpload(base, ws.id, body.slice(0, half), body.length);
      const answer = new Promise<string>((resolve) => {
        let text = '';
        socket.on('data', (d) => {
          text += d;
        });
        socket.on('close', () => resolve(text));
      });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      socket.write(body.slice(half));
      expect((await answer).split('\r\n')[0]).to.equal('HTTP/1.1 202 Accepted');
      const { id } = await db('import_jobs').where({ workspace_id: ws.id }).first('id');
      expect(
        await eventually(
          async () => {
            const row = await db('import_jobs').where({ id }).first();
            return row.phase === 'running' ? undefined : row;
          },
          10_000,
          'the job to end',
        ),
      ).to.include({ phase: 'succeeded', records_applied: 35 });

      // Any other request with a body that is not whole in time is still answered 408.
      const slow = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
      slow.on('error', () => undefined);
      const slowAnswer = new Promise<string>((resolve) => {
        let text = '';
        slow.on('data', (d) => {
          text += d;
        });
        slow.on('close', () => resolve(text));
      });
      slow.write(
        `POST /admin/v1/workspaces/${ws.id}/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token.token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`,
      );
      expect((await slowAnswer).split('\r\n')[0]).to.equal('HTTP/1.1 408 Request Timeout');
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('fails an NDJSON line over 1 MiB, naming the line (M1)', async () => {
    const ws = await fresh();
    const body = ndjson(document(2)) + '\n' + 'x'.repeat(1.5 * 1024 * 1024) + '\n';
    const started = await start(ws.id, body, 'application/x-ndjson');
    expect(await finished(ws.id, started.body.id)).to.deep.include({
      phase: 'failed',
      recordsApplied: 0,
      error: 'invalid import stream at line 8: a line is longer than 1048576 characters (1 MiB)',
    });
    expect(await counted('customers', ws.id)).to.equal(0);
  });

  it('fails a JSON document that goes on for more than 1 MiB without a whole record (an endless string)', async () => {
    const ws = await fresh();
    // two whole customers, then one that opens a string and never closes it
    const head = JSON.stringify(document(2)).replace(/\]\}$/, '');
    const body = `${head},{"id":"${crypto.randomUUID()}","name":"${'x'.repeat(1.5 * 1024 * 1024)}`;
    const started = await start(ws.id, body, 'application/json');
    const job = await finished(ws.id, started.body.id);
    expect(job).to.deep.include({ phase: 'failed', recordsApplied: 0 });
    expect(job.error).to.match(
      /^invalid import document: more than 1048576 bytes \(1 MiB\) without a whole record after record \d+$/,
    );
    expect(await counted('customers', ws.id)).to.equal(0);
  });

  it('shows a generic error for a failure the caller cannot act on, the detail in the log only (L5)', async () => {
    const ws = await fresh();
    const logged: unknown[] = [];
    async function* body() {
      yield Buffer.from(ndjson(document(2)) + '\n');
      throw new Error('connection to 10.1.2.3 reset by the driver');
    }
    const { done } = await startImport(db, operatorWith(OPERATOR), {
      workspaceId: ws.id,
      body: body(),
      format: 'ndjson',
      logger: {
        error: (detail: unknown) => {
          logged.push(detail);
        },
      } as never,
    });
    const job = await done;
    expect(job).to.deep.include({ phase: 'failed', recordsApplied: 0, error: INTERNAL_JOB_ERROR });
    expect(logged).to.have.length(1);
    expect(logged[0] as { err: Error; importJob: string }).to.deep.include({ importJob: job.id });
    expect((logged[0] as { err: Error }).err.message).to.equal('connection to 10.1.2.3 reset by the driver');
    expect(await counted('customers', ws.id)).to.equal(0);
  });
  it('forgets finished jobs past the retention, never a running one (L5)', async () => {
    const ws = await fresh();
    const done = await finished(ws.id, (await start(ws.id, ndjson(document(1)), 'application/x-ndjson')).body.id);
    const part = ndjson(document(1)) + '\n';
    const socket = await partialUpload(admin.url, ws.id, part, part.length * 10);
    const running = await runningJob(ws.id);
    const finishedAt = new Date(done.finishedAt).getTime();
    const DAY = 86_400_000;
    // The cutoff is 30 days before `now`: one hour short of the job's end, then one hour past it.
    expect(
      (
        await runRetention(db, {
          now: new Date(finishedAt + 30 * DAY - 3_600_000),
          retentionDays: 30,
          workspaceIds: [ws.id],
        })
      ).importJobs,
    ).to.equal(0);
    expect(
      (
        await runRetention(db, {
          now: new Date(finishedAt + 30 * DAY + 3_600_000),
          retentionDays: 30,
          workspaceIds: [ws.id],
        })
      ).importJobs,
    ).to.equal(1);
    expect(await db('import_jobs').where({ workspace_id: ws.id }).pluck('id')).to.deep.equal([running.id]);
    socket.destroy();
    await eventually(
      async () => ((await db('import_jobs').where({ id: running.id }).first()).phase === 'failed' ? true : undefined),
      5_000,
      'the job to end',
    );
  });

  it("the worker's retention records as failed a running job whose process died, never a live one (L3a)", async () => {
    const ws = await fresh();
    // a job whose process died: its row says running, and no transaction holds its lock (made first: a first load holds
    // the workspace's row, which the insert would wait for)
    const [dead] = await db('import_jobs')
      .insert({
        workspace_id: ws.id,
        phase: 'running',
        format: 'ndjson',
        started_by: 'a process gone',
        records_read: 7,
      })
      .returning('id');
    const part = ndjson(document(1)) + '\n';
    const socket = await partialUpload(admin.url, ws.id, part, part.length * 10);
    try {
      const live = await eventually(
        async () =>
          (await db('import_jobs')
            .where({ workspace_id: ws.id, phase: 'running' })
            .whereNot({ id: dead.id })
            .first('id')) ?? undefined,
        10_000,
        'the job to start',
      );
      const worker = (await testDatabase()).forRole('worker');
      const counts = await runRetention(worker, { now: new Date(), retentionDays: 30, workspaceIds: [ws.id] });
      expect(counts).to.deep.include({ lostImportJobs: 1, importJobs: 0 });
      const rows = await db('import_jobs')
        .where({ workspace_id: ws.id })
        .select('id', 'phase', 'error', 'records_applied', db.raw('finished_at IS NOT NULL AS ended'));
      expect(rows.find((r) => r.id === dead.id)).to.deep.equal({
        id: dead.id,
        phase: 'failed',
        error: LOST_JOB_ERROR,
        records_applied: 0,
        ended: true,
      });
      expect(rows.find((r) => r.id === live.id)).to.deep.include({ phase: 'running', ended: false });
      expect((await show(ws.id, dead.id)).body).to.deep.include({ phase: 'failed', error: LOST_JOB_ERROR });
      // and again: nothing more to record
      expect(
        (await runRetention(worker, { now: new Date(), retentionDays: 30, workspaceIds: [ws.id] })).lostImportJobs,
      ).to.equal(0);
    } finally {
      socket.destroy();
    }
  });
});
