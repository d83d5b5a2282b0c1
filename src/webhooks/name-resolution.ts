import dns from 'node:dns';
import fs from 'node:fs/promises';
import net from 'node:net';

// How webhook destination names become addresses, so that a slow or silent name server stalls no one. The system's
// dns.lookup runs getaddrinfo on libuv's 4-thread pool (shared with file I/O, crypto and the database driver's own
// lookups) with no deadline of its own: a few names that answer in 9 s held every thread. Here names are asked of
// DNS through c-ares (dns.Resolver: sockets on the event loop, no pool thread), A and AAAA at once, under a hard
// deadline of our own that cancels the queries (once one family has answered, the other has only a short delay more);
// answers are cached briefly and one name has one query in flight.
//
// How many lookups can wait: every lookup at delivery time belongs to an attempt in flight, so the dispatcher's
// limits (8 attempts per endpoint, a quarter of the worker's 64 per workspace) bound them per endpoint and per
// workspace; concurrent lookups of one name share one flight, a failure is remembered for a few seconds, and a
// waiting lookup holds a socket and a timer, not a shared thread. Registration's lookup has the same deadline.
//
// Like the system resolver (`hosts: files dns`), the hosts file answers first; `localhost` names are loopback
// (RFC 6761) and never asked of DNS. Unlike getaddrinfo, a name is looked up as written: resolv.conf's search
// list does not apply (register a receiver by its full name).

/** The hard deadline of one lookup: well inside an attempt's 10 s, so a name that never answers leaves the rest. */
export const DEFAULT_DNS_DEADLINE_MS = 3000;
/** How long the other family may still answer once one has (RFC 8305 §3's resolution delay); then it is cancelled. */
export const RESOLUTION_DELAY_MS = 50;
/** Positive answers are kept for their TTL, at most this long. */
export const POSITIVE_TTL_CAP_MS = 30_000;
/** A failed lookup (no such name, no answer in time, a server failure) is remembered this long. */
export const NEGATIVE_TTL_MS = 5000;
/** Names kept in the cache at once; the oldest goes first. */
export const CACHE_LIMIT = 1000;
/** How long the hosts file's contents are used before it is read again. */
const HOSTS_FILE_TTL_MS = 30_000;

/** RFC 6761 localhost names: `localhost` and every name under it. */
export const LOCALHOST_NAME = /^(.+\.)?localhost$/;

export interface NameResolverOptions {
  /** The DNS servers to ask ('192.0.2.53', '127.0.0.1:5353', '[2001:db8::53]:53'). Default: the system's (/etc/resolv.conf). */
  servers?: string[];
  /** The hard deadline of one lookup, in ms (default 3000). */
  deadlineMs?: number;
  /** Default /etc/hosts. */
  hostsFile?: string;
  /** A monotonic clock in ms, for the cache (tests move it). */
  now?: () => number;
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** A name that did not resolve: no such name, no address, no answer within the deadline, or a server failure. */
export class NameResolutionError extends Error {
  constructor(
    readonly host: string,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** An answer and how long it is kept (0: not at all). */
type Answer = (
  { addresses: ResolvedAddress[]; error?: undefined } | { addresses?: undefined; error: NameResolutionError }
) & { ttlMs: number };

const failed = (host: string, code: string, message: string): Answer => ({
  error: new NameResolutionError(host, code, message),
  ttlMs: NEGATIVE_TTL_MS,
});

/** The hosts file as a map from (lower-case) name to its addresses in file order. */
export function parseHostsFile(text: string): Map<string, ResolvedAddress[]> {
  const names = new Map<string, ResolvedAddress[]>();
  for (const line of text.split('\n')) {
    const [address, ...aliases] = line.replace(/#.*/, '').trim().split(/\s+/);
    const family = net.isIP(address);
    if (!family) continue;
    for (const alias of aliases) {
      const name = alias.toLowerCase();
      const list = names.get(name) ?? [];
      if (!list.some((a) => a.address === address)) list.push({ address, family: family as 4 | 6 });
      names.set(name, list);
    }
  }
  return names;
}

/** The error of a failed query, as c-ares names it. */
const codeOf = (result: PromiseSettledResult<unknown>) =>
  result.status === 'rejected' ? ((result.reason as { code?: string }).code ?? 'EUNKNOWN') : null;

export class NameResolver {
  readonly servers: string[] | undefined;
  readonly deadlineMs: number;
  private readonly hostsFile: string;
  private readonly now: () => number;
  private readonly cache = new Map<string, Answer & { until: number }>();
  private readonly flights = new Map<string, Promise<Answer>>();
  private hosts: { until: number; names: Promise<Map<string, ResolvedAddress[]>> } | undefined;

  constructor(options: NameResolverOptions = {}) {
    this.servers = options.servers;
    this.deadlineMs = options.deadlineMs ?? DEFAULT_DNS_DEADLINE_MS;
    this.hostsFile = options.hostsFile ?? '/etc/hosts';
    this.now = options.now ?? (() => performance.now());
    // (the server list is checked here, so that a bad one fails at start rather than at the first delivery)
    if (this.servers) new dns.promises.Resolver().setServers(this.servers);
  }

  /** The addresses of `host` (a name, lower case, no trailing dot), IPv4 first; throws NameResolutionError. */
  async resolve(host: string): Promise<ResolvedAddress[]> {
    const cached = this.cache.get(host);
    const answer = cached && cached.until > this.now() ? cached : await this.flight(host);
    if (answer.error) throw answer.error;
    return answer.addresses;
  }

  /** One lookup of `host` at a time; whoever asks meanwhile waits for the same answer. */
  private flight(host: string): Promise<Answer> {
    let flight = this.flights.get(host);
    if (!flight) {
      flight = this.lookUp(host).then((answer) => {
        this.flights.delete(host);
        this.cache.delete(host);
        if (answer.ttlMs > 0) {
          if (this.cache.size >= CACHE_LIMIT) this.cache.delete(this.cache.keys().next().value!);
          this.cache.set(host, { ...answer, until: this.now() + answer.ttlMs });
        }
        return answer;
      });
      this.flights.set(host, flight);
    }
    return flight;
  }

  private async lookUp(host: string): Promise<Answer> {
    const listed = (await this.hostsNames()).get(host);
    if (listed) return { addresses: listed, ttlMs: HOSTS_FILE_TTL_MS };
    if (LOCALHOST_NAME.test(host))
      return {
        addresses: [
          { address: '127.0.0.1', family: 4 },
          { address: '::1', family: 6 },
        ],
        ttlMs: HOSTS_FILE_TTL_MS,
      };
    return this.query(host);
  }

  /**
   * A and AAAA from DNS, within the deadline: c-ares retries within it, and at the deadline the queries are cancelled.
   * Once one family has answered with addresses the other has RESOLUTION_DELAY_MS more, not the rest of the deadline,
   * so that a name whose AAAA (or A) queries go unanswered costs each uncached lookup the delay, not 3 s.
   */
  private async query(host: string): Promise<Answer> {
    const resolver = new dns.promises.Resolver({ timeout: Math.max(1, Math.floor(this.deadlineMs / 3)), tries: 2 });
    if (this.servers) resolver.setServers(this.servers);
    const families = [resolver.resolve4(host, { ttl: true }), resolver.resolve6(host, { ttl: true })];
    const both = Promise.allSettled(families);
    // Done at the deadline, when both families have settled, or RESOLUTION_DELAY_MS after the first answer with addresses.
    let deadline: NodeJS.Timeout | undefined;
    let delay: NodeJS.Timeout | undefined;
    await new Promise<void>((done) => {
      deadline = setTimeout(done, this.deadlineMs);
      const answered = (records: unknown[]) => {
        if (records.length > 0) delay ??= setTimeout(done, RESOLUTION_DELAY_MS);
      };
      for (const family of families) family.then(answered, () => {});
      void both.then(() => done());
    });
    clearTimeout(deadline);
    clearTimeout(delay);
    resolver.cancel();
    // (after a cancel an unanswered family settles at once, as ECANCELLED; an answered one is kept)
    const [v4, v6] = await both;
    const records = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
    if (records.length > 0) {
      const addresses = records.map(({ address }) => ({ address, family: net.isIP(address) as 4 | 6 }));
      return { addresses, ttlMs: Math.min(POSITIVE_TTL_CAP_MS, ...records.map((r) => r.ttl * 1000)) };
    }
    const codes = [codeOf(v4), codeOf(v6)];
    const failure = codes.find((code) => code !== null && code !== dns.NODATA && code !== dns.NOTFOUND);
    if (failure === dns.CANCELLED || failure === dns.TIMEOUT)
      return failed(host, dns.TIMEOUT, `${host} did not resolve within ${this.deadlineMs} ms`);
    if (failure) return failed(host, failure, `${host} did not resolve`);
    if (codes.includes(dns.NOTFOUND)) return failed(host, dns.NOTFOUND, `${host} does not exist (no such name in DNS)`);
    return failed(host, dns.NODATA, `${host} has no A or AAAA record`);
  }

  /** The hosts file (a small local file), read again at most every 30 s; a missing or unreadable one lists nothing. */
  private hostsNames(): Promise<Map<string, ResolvedAddress[]>> {
    if (!this.hosts || this.hosts.until <= this.now()) {
      const names = fs
        .readFile(this.hostsFile, 'utf8')
        .then(parseHostsFile, () => new Map<string, ResolvedAddress[]>());
      this.hosts = { until: this.now() + HOSTS_FILE_TTL_MS, names };
    }
    return this.hosts.names;
  }
}

const shared = new Map<string, NameResolver>();

/** The resolver of a server list and deadline, one per process, so that every policy with them shares its cache. */
export function sharedNameResolver(options: Pick<NameResolverOptions, 'servers' | 'deadlineMs'> = {}): NameResolver {
  const key = JSON.stringify([options.servers ?? null, options.deadlineMs ?? null]);
  let resolver = shared.get(key);
  if (!resolver) shared.set(key, (resolver = new NameResolver(options)));
  return resolver;
}
