import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import {
  childProcessEnv,
  ConfigError,
  configFrom,
  processConfig,
  ROOT_DIR,
  SETTINGS,
  settingRow,
  TEST_SETTINGS,
  useConfig,
  WORKER_CONCURRENCY,
} from '../src/config.js';
import { API_STATEMENT_TIMEOUT_MS } from '../src/db/database.js';
import { DEFAULT_RETENTION_DAYS } from '../src/webhooks/retention.js';
import { DEFAULT_CONCURRENCY, DEFAULT_RATE_LIMIT } from '../src/api/rate-limits.js';
import { DEFAULT_HTTP_LIMITS } from '../src/http/http-limits.js';
import { reconfigure, testConfig } from './support/config.js';

// One configuration (src/config.ts): its SETTINGS list is the operators' guide's table (docs/operations.md), every variable the code reads is in it
// once, and a Config is parsed from the environment it is given, section by section, with one-line refusals naming
// the variable.

const REWRITE =
  "the operators' guide's table, docs/operations.md (npx tsx scripts/config-table.ts rewrites it from src/config.ts)";
const read = (file: string) => fs.readFileSync(path.join(ROOT_DIR, file), 'utf8');

function files(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT_DIR, dir), { withFileTypes: true }).flatMap((entry) => {
    const name = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return entry.name === 'assets' ? [] : files(name);
    return entry.name.endsWith('.ts') ? [name] : [];
  });
}

/** The operators' guide, where the configuration tables are. */
const GUIDE = 'docs/operations.md';

/** The rows of the guide's markdown table that follows the line `after` (cells trimmed, header and rule left out). */
function guideTable(after: string): string[][] {
  const lines = read(GUIDE).split('\n');
  const start = lines.indexOf(after);
  expect(start, after).to.be.greaterThan(-1);
  let first = start + 1;
  while (!lines[first].startsWith('|')) first++;
  let end = first;
  while (lines[end]?.startsWith('|')) end++;
  return lines.slice(first + 2, end).map((line) => line.slice(2, -2).split(' | '));
}

describe("configuration: SETTINGS, the operators' guide and the code agree", () => {
  const names = SETTINGS.map((s) => s.name);

  it("the guide's configuration table is SETTINGS, row by row: each variable once, with its default, range and readers", () => {
    expect(guideTable('## Configuration'), REWRITE).to.deep.equal(SETTINGS.map(settingRow));
    expect(new Set(names).size, 'a variable listed twice').to.equal(names.length);
  });

  it("the guide's table of test-only settings is TEST_SETTINGS, and none of them is a setting of the service", () => {
    const heading = read(GUIDE)
      .split('\n')
      .find((line) => line.startsWith('Settings of the tests'))!;
    expect(guideTable(heading), REWRITE).to.deep.equal(
      TEST_SETTINGS.map((s) => [`\`${s.name}\``, s.default, s.meaning]),
    );
    expect(TEST_SETTINGS.filter((s) => names.includes(s.name))).to.deep.equal([]);
  });

  it('every FRS_ variable src/ names is in SETTINGS, and every one SETTINGS lists is read by src/config.ts', () => {
    const named = new Set(
      files('src')
        .filter((file) => file !== 'src/config.ts')
        .flatMap((file) => [...read(file).matchAll(/\bFRS_[A-Z0-9_]*[A-Z0-9]\b/g)].map((m) => m[0])),
    );
    expect([...named].filter((name) => !names.includes(name)).sort()).to.deep.equal([]);
    const config = read('src/config.ts');
    const parsing = config.slice(config.indexOf('// Parsers of one setting'));
    const readHere = (name: string) => new RegExp(`env\\.${name}\\b|'${name}'`).test(parsing);
    // the key variables are read by src/secrets.ts, through the Config's env
    const keys = [
      'FRS_SECRET_KEY',
      'FRS_SECRET_KEY_FILE',
      'FRS_SECRET_KEY_PREVIOUS',
      'FRS_API_SECRET',
      'FRS_API_SECRET_FILE',
      'FRS_API_SECRET_PREVIOUS',
    ];
    expect(names.filter((name) => !keys.includes(name) && !readHere(name))).to.deep.equal([]);
    expect(
      keys.every((name) => read('src/secrets.ts').includes(`'${name}'`)),
      'src/secrets.ts names the key variables',
    ).to.equal(true);
  });

  it('every FRS_ variable the tests, the benchmarks and the scripts read is in one of the two lists', () => {
    const readers = [...files('test'), ...files('bench'), ...files('scripts')];
    const used = new Set(
      readers.flatMap((file) => [...read(file).matchAll(/process\.env\.(FRS_[A-Z0-9_]+)/g)].map((m) => m[1])),
    );
    const listed = [...names, ...TEST_SETTINGS.map((s) => s.name)];
    expect([...used].filter((name) => !listed.includes(name)).sort()).to.deep.equal([]);
  });

  it('the defaults the code names are those of SETTINGS', () => {
    const config = configFrom({});
    expect([
      config.retentionDays,
      config.workspaceLimits,
      config.apiStatementTimeoutMs,
      config.httpLimits,
    ]).to.deep.equal([
      DEFAULT_RETENTION_DAYS,
      { ratePerSecond: DEFAULT_RATE_LIMIT, concurrency: DEFAULT_CONCURRENCY },
      API_STATEMENT_TIMEOUT_MS,
      DEFAULT_HTTP_LIMITS,
    ]);
    expect([
      DEFAULT_RETENTION_DAYS,
      DEFAULT_RATE_LIMIT,
      DEFAULT_CONCURRENCY,
      API_STATEMENT_TIMEOUT_MS,
      DEFAULT_HTTP_LIMITS.maxConnections,
    ]).to.deep.equal([30, 100, 8, 3000, 1024]);
    expect([
      config.dataDir,
      config.embeddedPort,
      config.dbRoles,
      config.seedDemo,
      config.readUrls,
      config.readMaxLagMs,
      config.answerCacheBytes,
    ]).to.deep.equal([path.join(ROOT_DIR, '.data'), 54329, true, undefined, [], 5000, 64 * 1024 * 1024]);
    expect(config.worker).to.deep.equal({
      retentionDays: 30,
      perWorkspaceConcurrency: undefined,
      destinationPolicy: { allowPrivate: false, allowedCidrs: [] },
    });
    expect(config.service).to.deep.include({
      role: 'all',
      port: 3000,
      host: '0.0.0.0',
      logLevel: 'info',
      metricsPort: 9464,
      adminPort: 3001,
      adminHost: '127.0.0.1',
    });
  });
});

describe('configuration: a Config from the environment it is given', () => {
  it("reads its values from that environment only, whatever this process's is", () => {
    const config = configFrom({
      FRS_DATA_DIR: '/srv/fleet',
      FRS_EMBEDDED_PORT: '6000',
      FRS_RETENTION_DAYS: '7',
      USER: 'ops',
      FRS_SEED_DEMO: '0',
      FRS_DB_ROLES: 'off',
    });
    expect([
      config.dataDir,
      config.embeddedPort,
      config.retentionDays,
      config.user,
      config.seedDemo,
      config.dbRoles,
    ]).to.deep.equal(['/srv/fleet', 6000, 7, 'ops', false, false]);
  });

  it('refuses a bad value when its section is first read, on one line naming the variable and its range', () => {
    const config = configFrom({ FRS_RETENTION_DAYS: '0', FRS_SEED_DEMO: 'yes' });
    expect(config.dataDir).to.equal(path.join(ROOT_DIR, '.data'));
    expect(() => config.retentionDays).to.throw(
      ConfigError,
      /^FRS_RETENTION_DAYS must be a whole number of days from 1 to 3650, got "0"$/,
    );
    expect(() => config.seedDemo).to.throw(ConfigError, /^FRS_SEED_DEMO must be 1 or 0, got "yes"$/);
    for (const s of SETTINGS.filter((s) => s.whole)) {
      const { min, max } = s.whole!;
      const config = configFrom({ [s.name]: String(max + 1) }) as unknown as Record<string, unknown>;
      expect(() => config[sectionOf(s.name)], s.name).to.throw(
        ConfigError,
        new RegExp(`^${s.name} must be a whole number.* from ${min}.* to ${max}, got "${max + 1}"$`),
      );
    }
  });

  it("the worker's per-workspace limit is bounded by the worker's concurrency", () => {
    expect(configFrom({ FRS_WEBHOOK_WORKSPACE_CONCURRENCY: '8' }).worker.perWorkspaceConcurrency).to.equal(8);
    expect(() => configFrom({ FRS_WEBHOOK_WORKSPACE_CONCURRENCY: String(WORKER_CONCURRENCY + 1) }).worker).to.throw(
      ConfigError,
      `FRS_WEBHOOK_WORKSPACE_CONCURRENCY must be a whole number from 1 to ${WORKER_CONCURRENCY}, got "${WORKER_CONCURRENCY + 1}"`,
    );
  });

  it('FRS_WEBHOOK_PROXY: the proxy deliveries are sent through, validated when the worker reads its settings', () => {
    const proxied = configFrom({ FRS_WEBHOOK_PROXY: 'http://fleet:s3cret@proxy.internal:3128' });
    const policy = { allowPrivate: false, allowedCidrs: [], proxy: 'http://fleet:s3cret@proxy.internal:3128' };
    expect(proxied.worker.destinationPolicy).to.deep.equal(policy);
    expect(proxied.deliveryPolicy).to.deep.equal(policy);
    // Registration sends nothing: its policy has no proxy.
    expect(proxied.destinationPolicy).to.deep.equal({ allowPrivate: false, allowedCidrs: [] });
    expect(configFrom({ FRS_WEBHOOK_PROXY: ' ' }).deliveryPolicy).to.deep.equal({
      allowPrivate: false,
      allowedCidrs: [],
    });
    const refusal = (why: string) =>
      `FRS_WEBHOOK_PROXY must be the URL of an HTTP CONNECT proxy, such as http://proxy.internal:3128 (user:password@ allowed): ${why}`;
    const bad: Array<[string, string]> = [
      ['proxy.internal:3128', 'its scheme is proxy.internal: (http: or https: only)'],
      ['socks5://proxy.internal:1080', 'its scheme is socks5: (http: or https: only)'],
      ['http://', 'its value is not a URL'],
      ['http://fleet:s3cret@proxy.internal:3128/hooks', 'it has a path, query or fragment'],
      ['http://proxy.internal:3128?x=1', 'it has a path, query or fragment'],
      ['http://proxy.internal:99999', 'its value is not a URL'],
    ];
    for (const [value, why] of bad) {
      const config = configFrom({ FRS_WEBHOOK_PROXY: value });
      expect(() => config.worker, value).to.throw(ConfigError, refusal(why));
      expect(() => config.deliveryPolicy, value).to.throw(ConfigError, refusal(why));
      // (the value itself is never repeated: it may hold a password)
      expect(() => config.worker)
        .to.throw(ConfigError)
        .that.satisfies((e: Error) => !e.message.includes('s3cret'));
    }
  });

  it("the code that is not handed a Config reads the one this process uses; a child process's environment is built from it", () => {
    const restore = reconfigure({ FRS_WEBHOOK_ALLOWED_CIDRS: '10.9.0.0/16', FRS_CONFIG_TEST_MARK: 'child' });
    try {
      expect(processConfig().destinationPolicy).to.deep.equal({ allowPrivate: true, allowedCidrs: ['10.9.0.0/16'] });
      expect(childProcessEnv({ FRS_ROLE: 'worker' })).to.deep.include({
        FRS_CONFIG_TEST_MARK: 'child',
        FRS_ROLE: 'worker',
        FRS_ALLOW_PRIVATE_WEBHOOK_URLS: '1',
      });
    } finally {
      restore();
    }
    expect(processConfig().destinationPolicy).to.deep.equal({ allowPrivate: true, allowedCidrs: [] });
    expect(childProcessEnv()).not.to.have.property('FRS_CONFIG_TEST_MARK');
  });

  it('useConfig returns the configuration it replaces', () => {
    const before = processConfig();
    const other = testConfig({ FRS_RETENTION_DAYS: '9' });
    expect(useConfig(other)).to.equal(before);
    expect(processConfig().retentionDays).to.equal(9);
    expect(useConfig(before)).to.equal(other);
  });
});

/** The Config section a whole-number setting is parsed in. */
function sectionOf(name: string): string {
  const sections: Record<string, string> = {
    FRS_RETENTION_DAYS: 'retentionDays',
    FRS_API_RATE_LIMIT: 'workspaceLimits',
    FRS_API_CONCURRENCY: 'workspaceLimits',
    FRS_API_AUTH_FAILURE_LIMIT: 'authFailures',
    FRS_MAX_CONNECTIONS_PER_ADDRESS: 'httpLimits',
    FRS_MAX_CONNECTIONS: 'httpLimits',
    FRS_SHED_EVENT_LOOP_LAG_MS: 'shedEventLoopLagMs',
    FRS_ANSWER_CACHE_MB: 'answerCacheBytes',
    FRS_READ_MAX_LAG_MS: 'readMaxLagMs',
    FRS_API_STATEMENT_TIMEOUT_MS: 'apiStatementTimeoutMs',
    FRS_PORTAL_AUTH_FAILURE_LIMIT: 'portal',
  };
  expect(sections, name).to.have.property(name);
  return sections[name];
}
