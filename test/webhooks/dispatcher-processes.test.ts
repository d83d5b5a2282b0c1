import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { ROOT_DIR } from '../../src/config.js';
import { fanOutEvents } from '../../src/webhooks/fanout.js';
import type { DispatcherOptions } from '../../src/webhooks/dispatcher.js';
import { testDatabase } from '../support/database.js';
import { startReceiver, type Receiver, type Reply } from '../support/receiver.js';
import {
  bookingConfirmedData,
  dropTestWorkspaces,
  eventually,
  examplePayload,
  webhookWorkspace,
  type TestWorkspace,
} from './support.js';

type ChildOptions = Omit<DispatcherOptions, 'db' | 'logger'>;

interface DispatcherProcess {
  child: ChildProcess;
  exited: Promise<number | null>;
  /** Everything the process printed. */
  output(): string;
}

/** A dispatcher in its own process (its own pg pool and LISTEN connection), started through tsx. */
async function spawnDispatcher(databaseUrl: string, options: ChildOptions): Promise<DispatcherProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(ROOT_DIR, 'test', 'webhooks', 'dispatcher-process.ts'), JSON.stringify(options)],
    {
      cwd: ROOT_DIR,
      env: { ...process.env, DATABASE_URL: databaseUrl },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('dispatcher process did not start within 30 s')), 30_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('ready\n')) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => reject(new Error(`dispatcher process exited with ${code} before it was ready`)));
  });
  return { child, exited, output: () => output };
}

describe('webhooks: several dispatcher processes on one database', function () {
  this.timeout(120_000);
  let db: Knex;
  let url: string;
  let ws: TestWorkspace;
  let receiver: Receiver;
  let answer: () => Reply;
  const children: DispatcherProcess[] = [];

  before(async () => {
    ({ db, url } = await testDatabase());
    receiver = await startReceiver(() => answer());
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
    receiver.reset();
  });
  afterEach(async () => {
    for (const { child, exited } of children.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    }
  });
  after(async () => {
    await receiver.close();
    await dropTestWorkspaces(db);
  });

  const endpoints = async (count: number) => {
    for (let i = 0; i < count; i++) {
      const endpointUrl = receiver.endpointUrl();
      receiver.setSecret(endpointUrl, (await ws.endpoint({ url: endpointUrl })).secret);
    }
  };
  /** Records `count` events and fans them out in one transaction: everything is queued at the same moment. */
  const queueAtOnce = (count: number, event = 'booking.confirmed') =>
    db.transaction(async (trx) => {
      const rows = await trx('events')
        .insert(
          Array.from({ length: count }, () => ({
            workspace_id: ws.id,
            event,
            data: JSON.stringify(event === 'booking.confirmed' ? bookingConfirmedData() : examplePayload(event).data),
            source: 'publish',
          })),
        )
        .returning('id');
      return fanOutEvents(
        trx,
        rows.map((r) => r.id),
      );
    });
  const accepted = async () =>
    Number((await db('deliveries').where({ workspace_id: ws.id, status: 'accepted' }).count({ n: '*' }).first())!.n);

  it('never attempts one delivery in two processes at once: each is attempted exactly once', async () => {
    answer = () => ({ status: 204, delayMs: Math.floor(Math.random() * 15) });
    await endpoints(4);
    const options: ChildOptions = {
      workspaceIds: [ws.id],
      concurrency: 16,
      perEndpointConcurrency: 4,
      perWorkspaceConcurrency: 16,
    };
    children.push(await spawnDispatcher(url, options), await spawnDispatcher(url, options));
    const total = await queueAtOnce(100);
    expect(total).to.equal(400);
    await eventually(async () => (await accepted()) === total, 60_000, 'every delivery accepted');
    const attemptedBy: number[] = [];
    for (const { child, exited, output } of children) {
      child.kill('SIGTERM');
      expect(await exited).to.equal(0);
      attemptedBy.push(JSON.parse(output().trim().split('\n').pop()!).attempted);
    }
    // Both took part, and between them attempted each delivery once.
    expect(
      attemptedBy.every((n) => n > 0),
      `attempted per process: ${attemptedBy}`,
    ).to.equal(true);
    expect(attemptedBy[0] + attemptedBy[1]).to.equal(total);

    expect(receiver.overlaps, 'delivery ids in flight twice at once').to.deep.equal([]);
    expect(receiver.requests).to.have.length(total);
    expect(new Set(receiver.requests.map((r) => r.deliveryId)).size).to.equal(total);
    expect(receiver.requests.every((r) => r.verified?.ok)).to.equal(true);
    const attempts = await db('delivery_attempts')
      .join('deliveries', 'deliveries.id', 'delivery_attempts.delivery_id')
      .where('deliveries.workspace_id', ws.id)
      .select('delivery_attempts.number', 'deliveries.attempts');
    expect(attempts).to.have.length(total);
    expect(attempts.every((a) => a.number === 1 && a.attempts === 1)).to.equal(true);
  });

  it('loses nothing when a dispatcher is killed mid-attempt: another delivers its claims once the lease runs out', async () => {
    const leaseMs = 3000;
    let receiverUp = false;
    answer = () => (receiverUp ? { status: 204 } : 'hang');
    await endpoints(2);
    const total = await queueAtOnce(10);
    const doomed = await spawnDispatcher(url, {
      workspaceIds: [ws.id],
      concurrency: 8,
      perEndpointConcurrency: 4,
      perWorkspaceConcurrency: 8,
      leaseMs,
      attemptTimeoutMs: 2500,
    });
    children.push(doomed);
    await receiver.waitForRequests(8, 20_000);
    doomed.child.kill('SIGKILL');
    await doomed.exited;
    const inFlight = new Map(receiver.requests.map((r) => [r.deliveryId, r.receivedAt]));
    expect(inFlight.size).to.equal(8);

    // The killed process's claims are leased, unattempted as far as the records go: the 8 in flight, and the 8 it had
    // claimed ahead (it holds up to twice its limits: 16 of the 20).
    const leased = await db('deliveries').where({ workspace_id: ws.id }).whereNotNull('lease_owner');
    expect(leased).to.have.length(16);
    expect(leased.map((d) => d.id)).to.include.members([...inFlight.keys()]);
    expect(leased.every((d) => d.status === 'queued' && d.attempts === 0)).to.equal(true);

    receiverUp = true;
    receiver.reset();
    const rescuer = ws.dispatcher({ pollIntervalMs: 200 });
    await rescuer.start();
    try {
      await eventually(async () => (await accepted()) === total, 20_000, 'every delivery accepted');
    } finally {
      await rescuer.stop();
    }
    const delivered = new Map(receiver.requests.map((r) => [r.deliveryId, r.receivedAt]));
    expect(delivered.size).to.equal(total);
    expect(receiver.requests).to.have.length(total);
    for (const [id, firstTry] of inFlight) {
      // Not taken over before the dead process's lease ran out.
      expect(delivered.get(id)! - firstTry, id).to.be.at.least(leaseMs - 500);
    }
    // Claimed ahead and never sent: taken over once the lease ran out too (leased in the same claim as the first 8).
    const firstRequest = Math.min(...inFlight.values());
    for (const { id } of leased.filter((d) => !inFlight.has(d.id)))
      expect(delivered.get(id)! - firstRequest, id).to.be.at.least(leaseMs - 500);
    const attempts = await db('delivery_attempts')
      .join('deliveries', 'deliveries.id', 'delivery_attempts.delivery_id')
      .where('deliveries.workspace_id', ws.id)
      .select('delivery_attempts.number', 'delivery_attempts.status_code');
    expect(attempts).to.have.length(total);
    expect(attempts.every((a) => a.number === 1 && a.status_code === 204)).to.equal(true);
  });

  it("keeps a throttled endpoint within its rate across both processes, and the other endpoint's deliveries go meanwhile", async () => {
    answer = () => ({ status: 204 });
    const rateLimit = 5;
    const [throttledUrl, otherUrl] = [receiver.endpointUrl(), receiver.endpointUrl()];
    const throttled = await ws.endpoint({ url: throttledUrl, events: ['booking.confirmed'] });
    const other = await ws.endpoint({ url: otherUrl, events: ['payment.captured'] });
    receiver.setSecret(throttledUrl, throttled.secret);
    receiver.setSecret(otherUrl, other.secret);
    await db('webhook_endpoints').where({ id: throttled.id }).update({ rate_limit: rateLimit });
    const options: ChildOptions = {
      workspaceIds: [ws.id],
      concurrency: 16,
      perEndpointConcurrency: 4,
      perWorkspaceConcurrency: 16,
    };
    children.push(await spawnDispatcher(url, options), await spawnDispatcher(url, options));
    expect(await queueAtOnce(30)).to.equal(30);
    expect(await queueAtOnce(30, 'payment.captured')).to.equal(30);
    const arrivals = (endpointUrl: string) =>
      receiver.requests.filter((r) => r.path === new URL(endpointUrl).pathname).map((r) => r.receivedAt);
    await eventually(async () => arrivals(throttledUrl).length >= 20, 20_000, '20 throttled deliveries received');
    const times = arrivals(throttledUrl);
    // In any span of w seconds at most rateLimit x w + rateLimit (the bucket's capacity, one second's worth), allowing
    // 0.1 s between a claim and the request's arrival.
    for (let i = 0; i < times.length; i++)
      for (let j = i; j < times.length; j++) {
        const w = (times[j] - times[i]) / 1000 + 0.1;
        expect(j - i + 1, `${j - i + 1} requests within ${w.toFixed(2)} s`).to.be.at.most(rateLimit * w + rateLimit);
      }
    // 5 at once, then one every 200 ms: the 20th about 3 s after the first (not much later either).
    expect((times[19] - times[0]) / 1000).to.be.within(2.8, 5);
    // The other endpoint's 30 were not held behind the throttled backlog: all sent before it was half through.
    const others = arrivals(otherUrl);
    expect(others).to.have.length(30);
    expect(Math.max(...others)).to.be.below(times[14]);
    expect(receiver.requests.every((r) => r.verified?.ok)).to.equal(true);
    expect(receiver.overlaps).to.deep.equal([]);
  });
});
