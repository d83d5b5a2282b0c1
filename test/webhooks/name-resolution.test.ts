import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import {
  CACHE_LIMIT,
  NameResolutionError,
  NameResolver,
  RESOLUTION_DELAY_MS,
  type NameResolverOptions,
} from '../../src/webhooks/name-resolution.js';
import { resolveDestination, STRICT_POLICY, type DestinationPolicy } from '../../src/webhooks/destination-policy.js';
import { attemptDelivery } from '../../src/webhooks/http-attempt.js';
import { ConfigError, destinationPolicyFromEnv } from '../../src/config.js';

// Webhook destination names are resolved by a resolver of the service's own (c-ares, not the thread pool) under a
// hard deadline, one query per name at a time, cached briefly: checked against a DNS server of the test's own.
// Time bounds: a lower bound at the deadline, an upper bound with seconds of slack for a busy machine that still
// tells the deadline from what would happen without it (the 3 s default, c-ares's own retries, the attempt's 10 s).

describe('webhooks: name resolution', () => {
  let server: TestDnsServer;
  let hostsFile: string;
  /** The resolvers' clock, in ms: tests move it to expire cache entries. */
  let clock = 0;

  before(async () => {
    server = await startDnsServer({
      records: {
        'healthy.test': { addresses: ['127.0.0.1'], ttl: 20 },
        'dual.test': { addresses: ['2001:db8::1', '192.0.2.1'], ttl: 3600 },
        'v6only.test': { addresses: ['2001:db8::2'], ttl: 60 },
        'mixed.test': { addresses: ['93.184.215.14', 'fd00::7'], ttl: 60 },
        'zero-ttl.test': { addresses: ['192.0.2.9'], ttl: 0 },
        'no-aaaa.test': { addresses: ['192.0.2.10', '2001:db8::10'], ttl: 0 },
      },
      silent: ['stuck.test'],
      silentAaaa: ['no-aaaa.test'],
    });
    hostsFile = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'frs-hosts-')), 'hosts');
    await fs.writeFile(
      hostsFile,
      '# a hosts file of the test\n10.9.8.7   listed.test  Alias.Test # the receiver\n::1 listed.test\n\nnot-an-address ignored.test\n',
    );
  });
  after(async () => {
    await server.close();
    await fs.rm(path.dirname(hostsFile), { recursive: true });
  });
  beforeEach(() => {
    server.queries.length = 0;
    clock = 0;
  });

  const resolver = (options: NameResolverOptions = {}) =>
    new NameResolver({ servers: [server.address], hostsFile, now: () => clock, ...options });
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => expect.fail('resolved'),
      (err) => err,
    );

  it('asks for A and AAAA and answers IPv4 first, then IPv6', async () => {
    const names = resolver();
    expect(await names.resolve('healthy.test')).to.deep.equal([{ address: '127.0.0.1', family: 4 }]);
    expect(await names.resolve('dual.test')).to.deep.equal([
      { address: '192.0.2.1', family: 4 },
      { address: '2001:db8::1', family: 6 },
    ]);
    expect(await names.resolve('v6only.test')).to.deep.equal([{ address: '2001:db8::2', family: 6 }]);
    expect(server.queriesOf('healthy.test')).to.have.deep.members([
      { name: 'healthy.test', type: 'A' },
      { name: 'healthy.test', type: 'AAAA' },
    ]);
  });

  it('gives up on a name that never answers at the deadline, with its own error', async () => {
    const started = performance.now();
    const err = await failure(resolver({ deadlineMs: 600 }).resolve('stuck.test'));
    const tookMs = performance.now() - started;
    expect(err).to.be.an.instanceOf(NameResolutionError);
    expect(err).to.include({
      code: 'ETIMEOUT',
      host: 'stuck.test',
      message: 'stuck.test did not resolve within 600 ms',
    });
    expect(tookMs).to.be.within(590, 2500);
    expect(server.queriesOf('stuck.test').length).to.be.at.least(2); // A and AAAA were asked
  });

  it(`answers once one family has: the other gets ${RESOLUTION_DELAY_MS} ms more, not the rest of the deadline`, async () => {
    // no-aaaa.test answers A and never AAAA, with TTL 0 (nothing kept): every lookup asks again, and each takes the
    // short delay, not the default 3 s deadline.
    const names = resolver();
    for (const lookup of [1, 2]) {
      const started = performance.now();
      expect(await names.resolve('no-aaaa.test'), `lookup ${lookup}`).to.deep.equal([
        { address: '192.0.2.10', family: 4 },
      ]);
      expect(performance.now() - started, `lookup ${lookup}`).to.be.within(RESOLUTION_DELAY_MS - 5, 1000);
    }
    expect(
      server
        .queriesOf('no-aaaa.test')
        .map((q) => q.type)
        .sort(),
    ).to.deep.equal(['A', 'A', 'AAAA', 'AAAA']);
  });

  it('keeps an answer for its TTL: a second lookup sends no query; after the TTL it asks again', async () => {
    const names = resolver();
    await names.resolve('healthy.test');
    expect(server.queriesOf('healthy.test')).to.have.length(2);
    clock = 19_999;
    expect(await names.resolve('healthy.test')).to.deep.equal([{ address: '127.0.0.1', family: 4 }]);
    expect(server.queriesOf('healthy.test')).to.have.length(2);
    clock = 20_000;
    await names.resolve('healthy.test');
    expect(server.queriesOf('healthy.test')).to.have.length(4);
  });

  it('keeps an answer at most 30 s whatever its TTL, and does not keep one of TTL 0', async () => {
    const names = resolver();
    await names.resolve('dual.test'); // TTL 3600
    clock = 29_999;
    await names.resolve('dual.test');
    expect(server.queriesOf('dual.test')).to.have.length(2);
    clock = 30_000;
    await names.resolve('dual.test');
    expect(server.queriesOf('dual.test')).to.have.length(4);
    await names.resolve('zero-ttl.test');
    await names.resolve('zero-ttl.test');
    expect(server.queriesOf('zero-ttl.test')).to.have.length(4);
  });

  it('remembers a failure for 5 s: no such name, or no answer in time', async () => {
    const names = resolver({ deadlineMs: 300 });
    const missing = await failure(names.resolve('missing.test'));
    expect(missing).to.include({ code: 'ENOTFOUND', message: 'missing.test does not exist (no such name in DNS)' });
    await failure(names.resolve('stuck.test'));
    const stuckQueries = server.queriesOf('stuck.test').length;
    clock = 4_999;
    const started = performance.now();
    expect(await failure(names.resolve('missing.test'))).to.equal(missing);
    expect(await failure(names.resolve('stuck.test'))).to.include({ code: 'ETIMEOUT' });
    expect(performance.now() - started).to.be.below(100);
    expect(server.queriesOf('missing.test')).to.have.length(2);
    expect(server.queriesOf('stuck.test')).to.have.length(stuckQueries);
    clock = 5_000;
    await failure(names.resolve('missing.test'));
    expect(server.queriesOf('missing.test')).to.have.length(4);
  });

  it('concurrent lookups of one name share one query', async () => {
    const names = resolver({ deadlineMs: 400 });
    const answers = await Promise.all(Array.from({ length: 10 }, () => names.resolve('healthy.test')));
    expect(answers.every((a) => a === answers[0])).to.equal(true);
    expect(server.queriesOf('healthy.test')).to.have.deep.members([
      { name: 'healthy.test', type: 'A' },
      { name: 'healthy.test', type: 'AAAA' },
    ]);
    // Eight at once of a name that never answers: one flight (c-ares asks each type at most twice, tries: 2, where
    // eight flights would ask at least 16 times), and all eight fail together at the deadline.
    const started = performance.now();
    const errors = await Promise.all(Array.from({ length: 8 }, () => failure(names.resolve('stuck.test'))));
    expect(performance.now() - started).to.be.within(390, 2300);
    expect(new Set(errors).size).to.equal(1);
    expect(server.queriesOf('stuck.test').length).to.be.within(2, 4);
  });

  it(`keeps at most ${CACHE_LIMIT} names, forgetting the oldest first`, async () => {
    const names = resolver();
    const all = Array.from({ length: CACHE_LIMIT + 1 }, (_, i) => `n${i}.test`);
    for (let i = 0; i < all.length; i += 100)
      await Promise.all(all.slice(i, i + 100).map((name) => failure(names.resolve(name))));
    server.queries.length = 0;
    await failure(names.resolve(`n${CACHE_LIMIT}.test`));
    await failure(names.resolve('n1.test'));
    expect(server.queries).to.deep.equal([]);
    await failure(names.resolve('n0.test'));
    expect(server.queriesOf('n0.test')).to.have.length(2);
  });

  it('answers from the hosts file first, and localhost names with loopback, without DNS', async () => {
    const names = resolver();
    expect(await names.resolve('listed.test')).to.deep.equal([
      { address: '10.9.8.7', family: 4 },
      { address: '::1', family: 6 },
    ]);
    expect(await names.resolve('alias.test')).to.deep.equal([{ address: '10.9.8.7', family: 4 }]);
    const loopback = [
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
    ];
    expect(await names.resolve('localhost')).to.deep.equal(loopback);
    expect(await names.resolve('receiver.localhost')).to.deep.equal(loopback);
    await failure(names.resolve('ignored.test'));
    expect(server.queries.map((q) => q.name)).to.deep.equal(['ignored.test', 'ignored.test']);
  });

  describe('in the destination policy', () => {
    const policy = (over: Partial<DestinationPolicy> = {}): DestinationPolicy => ({
      ...STRICT_POLICY,
      dns: { servers: [server.address], deadlineMs: 500 },
      ...over,
    });

    it('checks every address a name resolves to, IPv6 included; IP literals ask no DNS', async () => {
      const err = await failure(resolveDestination('mixed.test', policy()));
      expect(err.message).to.match(/^mixed\.test resolves to fd00::7, a private address;/);
      expect(await resolveDestination('healthy.test', policy({ allowPrivate: true }))).to.deep.equal({
        address: '127.0.0.1',
        family: 4,
      });
      server.queries.length = 0;
      expect(await resolveDestination('[2001:db8::5]', policy({ allowedCidrs: ['2001:db8::/32'] }))).to.deep.equal({
        address: '2001:db8::5',
        family: 6,
      });
      expect(await resolveDestination('93.184.215.14', policy())).to.deep.equal({
        address: '93.184.215.14',
        family: 4,
      });
      expect(server.queries).to.deep.equal([]);
    });

    it('an attempt to a name that does not resolve fails as dns: no such name, or no answer within the deadline', async () => {
      const request = {
        secrets: ['whsec_abcdefghijklmnopqrstuvwxyzABCDEF0123456789'],
        deliveryId: '3f1c9a52-7d4e-4b8a-9c21-6e5f0d2b8a47',
        event: 'webhook.test',
        body: '{}',
      };
      // Names of this test alone, so that the process-wide cache of the server list holds no answer for them yet.
      const stuck = await attemptDelivery(
        { ...request, url: 'http://stuck.test:9/hook' },
        { policy: policy({ dns: { servers: [server.address], deadlineMs: 700 } }) },
      );
      expect(stuck).to.include({
        ok: false,
        statusCode: null,
        errorKind: 'dns',
        error: 'ETIMEOUT: stuck.test did not resolve within 700 ms',
        responseBody: null,
      });
      expect(stuck.durationMs).to.be.within(690, 2600);
      const missing = await attemptDelivery({ ...request, url: 'https://nowhere.test/hook' }, { policy: policy() });
      expect(missing).to.include({
        ok: false,
        errorKind: 'dns',
        error: 'ENOTFOUND: nowhere.test does not exist (no such name in DNS)',
      });
    });
  });

  it('FRS_WEBHOOK_DNS_SERVERS sets the servers; anything but IP addresses (with ports) is refused, naming it', () => {
    expect(
      destinationPolicyFromEnv({ FRS_WEBHOOK_DNS_SERVERS: '192.0.2.53, 127.0.0.1:5353,[2001:db8::53]:53' }).dns,
    ).to.deep.equal({ servers: ['192.0.2.53', '127.0.0.1:5353', '[2001:db8::53]:53'] });
    expect(destinationPolicyFromEnv({}).dns).to.equal(undefined);
    expect(destinationPolicyFromEnv({ FRS_WEBHOOK_DNS_SERVERS: '2001:db8::53,[2001:db8::54]' }).dns).to.deep.equal({
      servers: ['2001:db8::53', '[2001:db8::54]'],
    });
    // checked by its form at start (the resolver is made when a delivery first needs it): a port out of range, a name
    for (const bad of ['192.0.2.53:70000', '[2001:db8::53]:0', '192.0.2.300', '2001:db8::53:53:53:53:53:53:53']) {
      expect(() => destinationPolicyFromEnv({ FRS_WEBHOOK_DNS_SERVERS: bad }), bad).to.throw(
        ConfigError,
        'FRS_WEBHOOK_DNS_SERVERS must be',
      );
    }
    expect(() => destinationPolicyFromEnv({ FRS_WEBHOOK_DNS_SERVERS: '192.0.2.53,dns.example' })).to.throw(
      'FRS_WEBHOOK_DNS_SERVERS must be a comma-separated list of IP addresses, each with an optional port (192.0.2.53, 127.0.0.1:5353, [2001:db8::53]:53), got "192.0.2.53,dns.example"',
    );
  });
});
