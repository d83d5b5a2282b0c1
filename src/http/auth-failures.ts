import net from 'node:net';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { wholeNumberDefault, type AuthFailureSettings } from '../config.js';
import { rateLimited, standingOf, type Standing } from './standing.js';

// Outsiders are slowed before they cost anything. Each client address may fail authentication (a 401: no key, an
// unknown, revoked or expired one) a number of times a minute; past that, its requests get 429 `rate_limited`
// (reason `auth_failures`) before any database round trip, unless they carry a valid key: one the key cache knows
// can authenticate, or one this process saw work (a valid key is never refused for its neighbours' failures: clients
// behind one NAT share an address). An attempt counts as a failure from the moment it costs a look-up until it
// succeeds, so that requests in flight together cannot all pass before one is counted.
// An IPv6 client is counted by its /64, which one host usually holds whole.
//
// The client address is the connection's peer. Behind a proxy every client would share the proxy's address, so a
// proxy's X-Forwarded-For is trusted only from the ranges in FRS_TRUSTED_PROXY_CIDRS (none by default): then the
// client is the rightmost address of that header that is not itself a trusted proxy.

export const AUTH_FAILURE_LIMIT_ENV = 'FRS_API_AUTH_FAILURE_LIMIT';
export const TRUSTED_PROXIES_ENV = 'FRS_TRUSTED_PROXY_CIDRS';
/** Failed authentications a minute per client address. */
export const DEFAULT_AUTH_FAILURE_LIMIT = wholeNumberDefault(AUTH_FAILURE_LIMIT_ENV);
const WINDOW_S = 60;
/** Keys seen to authenticate, remembered (by hash) so that their holders pass a blocked address; the oldest go first. */
const KNOWN_VALID_LIMIT = 10_000;

export type { AuthFailureSettings };

function family(address: string): 'ipv4' | 'ipv6' {
  return net.isIPv4(address) ? 'ipv4' : 'ipv6';
}

export class AuthFailureLimits {
  private readonly failures: RateLimiterMemory | undefined;
  private readonly proxies = new net.BlockList();
  private readonly trustsProxies: boolean;
  private readonly knownValid = new Set<string>();

  constructor(private readonly settings: AuthFailureSettings) {
    if (settings.perMinute > 0)
      this.failures = new RateLimiterMemory({ points: settings.perMinute, duration: WINDOW_S });
    for (const cidr of settings.trustedProxies) {
      const [address, bits] = cidr.split('/');
      this.proxies.addSubnet(address, Number(bits), family(address));
    }
    this.trustsProxies = settings.trustedProxies.length > 0;
  }

  /** The client's address as counted: the peer, or what a trusted proxy says; an IPv6 address by its /64. */
  clientAddress(peer: string | undefined, forwardedFor: string | undefined): string {
    let client = unmapped(peer ?? '');
    if (this.trustsProxies && forwardedFor && this.isProxy(client)) {
      const hops = forwardedFor.split(',').map((h) => unmapped(h.trim()));
      for (let i = hops.length - 1; i >= 0 && this.isProxy(client); i--) {
        if (!net.isIP(hops[i])) break; // a malformed hop: count the last proxy itself
        client = hops[i];
      }
    }
    return addressKey(client);
  }

  private isProxy(address: string): boolean {
    return net.isIP(address) !== 0 && this.proxies.check(address, family(address));
  }

  /** The address's standing with the failure limit (what it has left this minute). */
  async standing(address: string): Promise<Standing | undefined> {
    if (!this.failures) return undefined;
    return standingOf('auth-failures', this.settings.perMinute, WINDOW_S, await this.failures.get(address));
  }

  /**
   * An attempt to authenticate from `address` that is about to cost a database look-up: throws the 429 when the
   * address has used up its failures and the key is not known good (`known`: a key the database has, from the key
   * cache, or one this process saw work); otherwise counts it as a failure at once, so that requests in flight
   * together cannot all pass before any is counted, and returns the standing and what gives the count back when the
   * key authenticates. Costs a look-up in memory, never the database.
   */
  async attempt(
    address: string,
    keyHash: string | undefined,
    known = false,
  ): Promise<{ standing: Standing | undefined; succeeded(): void }> {
    const failures = this.failures;
    if (!failures) return { standing: undefined, succeeded: () => undefined };
    // The failure is counted before the first await (the store adds it in one step and answers with the count it
    // made): attempts that arrive together, pipelined on one socket, each see the ones before them. Reading the count
    // first and adding to it after an await let all of them read the same count and pass.
    const counted = await failures.penalty(address);
    if (
      counted.consumedPoints > this.settings.perMinute &&
      !known &&
      !(keyHash !== undefined && this.knownValid.has(keyHash))
    ) {
      await failures.reward(address); // a refusal costs nothing and is not counted
      const before = standingOf('auth-failures', this.settings.perMinute, WINDOW_S, counted);
      throw rateLimited(
        'auth_failures',
        `Too many requests from this address failed authentication; try again in ${before.resetS} seconds.`,
        before.resetS,
        before,
      );
    }
    const standing = standingOf('auth-failures', this.settings.perMinute, WINDOW_S, counted);
    let refunded = false;
    return {
      standing,
      succeeded: () => {
        if (refunded) return;
        refunded = true;
        void failures.reward(address);
      },
    };
  }

  /** Notes a key that authenticated (the latest last): its holder is not refused for its address's failures. */
  authenticated(keyHash: string): void {
    this.knownValid.delete(keyHash);
    if (this.knownValid.size >= KNOWN_VALID_LIMIT) this.knownValid.delete(this.knownValid.values().next().value!);
    this.knownValid.add(keyHash);
  }

  /** Forgets a key that stopped authenticating (revoked, expired, unknown now). */
  forget(keyHash: string): void {
    this.knownValid.delete(keyHash);
  }
}

/** An IPv4-mapped IPv6 address (::ffff:192.0.2.1, what a dual-stack socket reports) as the IPv4 address it is. */
const unmapped = (address: string): string => address.replace(/^::ffff:(?=\d+\.)/i, '');

/**
 * What one client address counts as, for every per-address limit (failed authentications here, connections in
 * http-limits.ts): an IPv4 address itself (its IPv4-mapped form too), an IPv6 address by its /64.
 */
export function addressKey(address: string): string {
  const bare = unmapped(address);
  return net.isIPv6(bare) ? prefix64(bare) : bare;
}

/** An IPv6 address's /64 (the first four groups, written in full): what one host or one customer's line usually holds. */
function prefix64(address: string): string {
  const bare = address.replace(/%.*$/, '');
  const [head, tail = ''] = bare.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = bare.includes('::')
    ? [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right]
    : left;
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

/** The client's address and its failure limit: how authentication slows outsiders (above). */
export interface AuthGuard {
  limits: AuthFailureLimits;
  address: string;
  /** Where the address's standing is left for the answer's RateLimit header fields. */
  standing?: Standing;
}
