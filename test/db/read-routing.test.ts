import { expect } from 'chai';
import type { Knex } from 'knex';
import pino from 'pino';
import { ReadRouting, type ReplicaProbe, type ServerIdentity } from '../../src/db/read-routing.js';
import { ServiceMetrics } from '../../src/observability/metrics.js';

// The lag logic of src/db/read-routing.ts with probes the test answers and a clock it sets (the real standby's
// behaviour is test/db/replicas.test.ts). The pools are tokens: routing only hands them to the caller's work.

const PRIMARY: ServerIdentity = { system: '7300000000000000001', database: 'fleet', timeline: 2 };
const BOUND_MS = 1500;

function pool(name: string): Knex & { destroyed: boolean } {
  const token = { name, destroyed: false, destroy: async () => void (token.destroyed = true) };
  return token as unknown as Knex & { destroyed: boolean };
}

/** Routing over one primary and replicas `a` (and `b`) whose probes answer what `answers` holds (a function: throws or waits). */
function routing(options: { replicas?: string[] } = {}) {
  let now = 0;
  let primaryLsn = 100n;
  const answers = new Map<string, ReplicaProbe | (() => Promise<ReplicaProbe>)>();
  const pools = new Map<string, Array<Knex & { destroyed: boolean }>>();
  const lines: Array<{ level: number; msg: string; replica?: string }> = [];
  const metrics = new ServiceMetrics({ defaultMetrics: false });
  const primary = pool('primary');
  const reads = new ReadRouting({
    primary,
    samplePrimary: async () => ({ lsn: primaryLsn, identity: PRIMARY }),
    replicas: (options.replicas ?? ['a']).map((name) => ({
      name,
      pool: () => {
        const made = pool(name);
        pools.set(name, [...(pools.get(name) ?? []), made]);
        return made;
      },
      probe: async () => {
        const answer = answers.get(name)!;
        return typeof answer === 'function' ? answer() : answer;
      },
    })),
    maxLagMs: BOUND_MS,
    logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) }),
    metrics,
    clock: () => now,
  });
  return {
    reads,
    primary,
    answers,
    pools,
    lines,
    metrics,
    at(ms: number) {
      now = ms;
    },
    primaryAt(lsn: bigint) {
      primaryLsn = lsn;
    },
    replayed(name: string, lsn: bigint, more: Partial<ReplicaProbe> = {}) {
      answers.set(name, { recovery: true, replayed: lsn, identity: PRIMARY, started: 'start 1', ...more });
    },
  };
}

const gauge = async (metric: ServiceMetrics['replicaUp'], replica: string) =>
  (await metric.get()).values.find((v) => v.labels.replica === replica)?.value;

describe("read routing: how old a replica's data is, with probes the test answers", () => {
  it('measures a replica that came back (down, or another server behind its name) anew, never keeping the freshness it had', async () => {
    const t = routing();
    // t=0: the primary at 100, replayed; t=1000: at 200, replayed: fresh as of 1000
    await t.reads.samplePrimary();
    t.replayed('a', 100n);
    await t.reads.probe();
    t.at(1000);
    t.primaryAt(200n);
    await t.reads.samplePrimary();
    t.replayed('a', 200n);
    await t.reads.probe();
    t.at(1200);
    expect(t.reads.choose().maxStalenessMs()).to.equal(200);
    // another server (restarted from an older point) answers at 100: as of 0, 2000 ms old at t=2000, past the bound
    t.at(2000);
    t.primaryAt(300n);
    await t.reads.samplePrimary();
    t.replayed('a', 100n, { started: 'start 2' });
    await t.reads.probe();
    expect(t.reads.choose().name).to.equal('primary');
    // back at 300 (sampled at 2000): fresh again; then down, and back on the same server at 200 (sampled at 1000)
    t.replayed('a', 300n, { started: 'start 2' });
    await t.reads.probe();
    t.at(2100);
    expect(t.reads.choose()).to.deep.include({ name: 'a' });
    t.answers.set('a', async () => {
      throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:5432'), { code: 'ECONNREFUSED' });
    });
    await t.reads.probe();
    expect(t.reads.choose().name).to.equal('primary');
    t.replayed('a', 200n, { started: 'start 2' });
    await t.reads.probe();
    t.at(2600);
    expect(t.reads.choose().name, 'as of 1000: 1600 ms old').to.equal('primary');
  });

  it('refuses a replica of another cluster, another database or an older timeline (logged once each, up 0), and takes one whose timeline it cannot see', async () => {
    const t = routing();
    await t.reads.samplePrimary();
    const refusedFor = async (identity: ServerIdentity) => {
      t.replayed('a', 100n, { identity });
      await t.reads.probe();
      await t.reads.probe();
      expect(t.reads.choose().name).to.equal('primary');
      expect(await gauge(t.metrics.replicaUp, 'a')).to.equal(0);
    };
    await refusedFor({ ...PRIMARY, system: '7300000000000000999' });
    await refusedFor({ ...PRIMARY, database: 'fleet_staging' });
    await refusedFor({ ...PRIMARY, timeline: 1 });
    expect(
      t.lines.filter((line) => line.level === 50).map((line) => [line.replica, line.msg.replace(/;.*/, '')]),
    ).to.deep.equal([
      [
        'a',
        "read replica refused: it is not a standby of this primary's database but of another cluster (system identifier 7300000000000000999, the primary's 7300000000000000001)",
      ],
      [
        'a',
        "read replica refused: it is not a standby of this primary's database but of another database (fleet_staging, the primary's fleet)",
      ],
      [
        'a',
        "read replica refused: it is not a standby of this primary's database but of an older timeline (1, the primary's 2)",
      ],
    ]);
    for (const identity of [
      { ...PRIMARY, timeline: null },
      { ...PRIMARY, timeline: 3 },
    ]) {
      t.replayed('a', 100n, { identity });
      await t.reads.probe();
      expect(t.reads.choose().name).to.equal('a');
      expect(await gauge(t.metrics.replicaUp, 'a')).to.equal(1);
    }
  });

  it("probes each replica on its own: one whose probe hangs delays neither the primary's sample nor the other replica", async () => {
    const t = routing({ replicas: ['a', 'b'] });
    await t.reads.samplePrimary();
    t.answers.set('a', () => new Promise<never>(() => undefined));
    t.replayed('b', 100n);
    void t.reads.probe();
    await new Promise((resolve) => setImmediate(resolve));
    expect(t.reads.choose().name).to.equal('b');
    t.at(1000);
    t.primaryAt(200n);
    await t.reads.samplePrimary();
    t.replayed('b', 200n);
    void t.reads.probe();
    await new Promise((resolve) => setImmediate(resolve));
    t.at(1100);
    expect(t.reads.choose().maxStalenessMs(), 'b: as of the sample at 1000').to.equal(100);
  });

  it('says how old the data is when the answer is finished, not when its replica was chosen', async () => {
    const t = routing();
    await t.reads.samplePrimary();
    t.replayed('a', 100n);
    await t.reads.probe();
    t.at(40.2);
    const chosen = t.reads.choose();
    expect(chosen.maxStalenessMs()).to.equal(41);
    t.at(900);
    expect(chosen.maxStalenessMs(), 'the request took 860 ms more').to.equal(900);
    expect(t.reads.choose().name === 'a' && t.reads.choose().maxStalenessMs()).to.equal(900);
  });

  it('runs a read again on the primary at once when a probe finds its replica down, with a new pool and no lag figure for it', async () => {
    const t = routing();
    await t.reads.samplePrimary();
    t.replayed('a', 100n);
    await t.reads.probe();
    expect(await gauge(t.metrics.replicaLag, 'a')).to.equal(0);
    const [first] = t.pools.get('a')!;
    let onReplica = 0;
    const reading = t.reads.read(async ({ db, name }) => {
      if (db === t.primary) return name;
      onReplica++;
      return new Promise<string>(() => undefined);
    });
    t.answers.set('a', async () => {
      throw Object.assign(new Error('Query read timeout'), {});
    });
    await t.reads.probe();
    expect(await reading).to.equal('primary');
    expect(onReplica).to.equal(1);
    expect(first.destroyed).to.equal(true);
    expect(t.pools.get('a')).to.have.length(2);
    expect(await gauge(t.metrics.replicaLag, 'a'), 'no lag while it is down').to.equal(undefined);
    expect(t.lines.filter((line) => line.level === 40).map((line) => line.msg)).to.deep.equal([
      'read replica skipped: unreachable',
    ]);
  });

  it('sends a read whose replica pool is full, or whose statement met a deadlock with replay, to the primary without skipping the replica', async () => {
    const t = routing();
    await t.reads.samplePrimary();
    t.replayed('a', 100n);
    await t.reads.probe();
    const failures = [
      Object.assign(new Error('Knex: Timeout acquiring a connection. The pool is probably full.'), {
        name: 'KnexTimeoutError',
      }),
      Object.assign(new Error('canceling statement due to conflict with recovery'), { code: '40P01' }),
    ];
    for (const failure of failures) {
      expect(
        await t.reads.read(async ({ name }) => {
          if (name !== 'primary') throw failure;
          return name;
        }),
        failure.message,
      ).to.equal('primary');
      expect(t.reads.choose().name, failure.message).to.equal('a');
    }
    expect(t.lines.filter((line) => line.level >= 40)).to.deep.equal([]);
    expect(t.pools.get('a')).to.have.length(1);
  });
});
