import net from 'node:net';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { isCidr, type DestinationPolicy } from '../config.js';
import { proxiedAgent } from './egress-proxy.js';
import { LOCALHOST_NAME, NameResolutionError, sharedNameResolver } from './name-resolution.js';

// Which addresses a webhook may reach. One policy, used twice: when an endpoint is registered (its URL's host,
// resolved) and inside the HTTP connector at connect time, on the very address the socket is opened to (resolve,
// check, connect to that address; TLS still checks the certificate against the URL's name). So a name that
// resolves to a private address, or that changes between registration and delivery (DNS rebinding), is refused.

/** Allows every private destination (local receivers, tests). */
export const ALLOW_PRIVATE_ENV = 'FRS_ALLOW_PRIVATE_WEBHOOK_URLS';
/** Comma-separated CIDR ranges that are allowed although they are private (e.g. 10.1.0.0/16). */
export const ALLOWED_CIDRS_ENV = 'FRS_WEBHOOK_ALLOWED_CIDRS';
/** Comma-separated DNS servers that webhook destination names are asked of, instead of the system's. */
export const DNS_SERVERS_ENV = 'FRS_WEBHOOK_DNS_SERVERS';

/** The address classes that are refused by default, with the ranges each covers (IPv4-mapped forms included). */
export const BLOCKED_RANGES: ReadonlyArray<{ kind: string; cidrs: string[] }> = [
  { kind: 'unspecified', cidrs: ['0.0.0.0/8', '::/128'] },
  { kind: 'loopback', cidrs: ['127.0.0.0/8', '::1/128'] },
  { kind: 'private', cidrs: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'] },
  { kind: 'link-local', cidrs: ['169.254.0.0/16', 'fe80::/10'] },
  { kind: 'CGNAT (shared address space)', cidrs: ['100.64.0.0/10'] },
  // Reserved: IETF protocol assignments, benchmarking, future use and broadcast, the documentation ranges, and in
  // IPv6 the deprecated IPv4-compatible form, discard-only and documentation prefixes.
  {
    kind: 'reserved',
    cidrs: [
      '192.0.0.0/24',
      '192.0.2.0/24',
      '198.18.0.0/15',
      '198.51.100.0/24',
      '203.0.113.0/24',
      '240.0.0.0/4',
      '::/96',
      '100::/64',
      '2001:db8::/32',
    ],
  },
  { kind: 'multicast', cidrs: ['224.0.0.0/4', 'ff00::/8'] },
  { kind: 'IPv4-mapped IPv6', cidrs: ['::ffff:0:0/96'] },
  { kind: 'NAT64', cidrs: ['64:ff9b::/96', '64:ff9b:1::/48'] },
  // 6to4 and Teredo carry an IPv4 address inside, which could be a private one.
  { kind: 'IPv4-embedding tunnel', cidrs: ['2002::/16', '2001::/32'] },
];

/** Names refused whatever they resolve to: loopback names (RFC 6761) and cloud metadata services. */
const BLOCKED_NAMES = [LOCALHOST_NAME, /^metadata\.google\.internal$/, /^metadata$/];

// The policy is a setting (src/config.ts), and so is isCidr's syntax.
export { isCidr, type DestinationPolicy };

/** The default: nothing private is reachable. */
export const STRICT_POLICY: DestinationPolicy = Object.freeze({ allowPrivate: false, allowedCidrs: [] });

function family(address: string): 'ipv4' | 'ipv6' {
  return net.isIPv4(address) ? 'ipv4' : 'ipv6';
}

function blockList(cidrs: string[]): net.BlockList {
  const list = new net.BlockList();
  for (const cidr of cidrs) {
    const [address, bits] = cidr.split('/');
    list.addSubnet(address, Number(bits), family(address));
  }
  return list;
}

// An IPv4 rule of a BlockList also matches the IPv4-mapped form of its addresses (so ::ffff:127.0.0.1 is named
// loopback), and an IPv6 rule covering ::ffff:0:0/96 matches every IPv4 address: that one applies to IPv6 only.
const BLOCKED = BLOCKED_RANGES.map(({ kind, cidrs }) => ({
  kind,
  list: blockList(cidrs),
  ipv6Only: cidrs.includes('::ffff:0:0/96'),
}));

/** The workspace setting that opens private ranges for one workspace's endpoints (src/core/workspaces.ts). */
export const WORKSPACE_CIDRS_SETTING = 'webhookAllowedCidrs';

/**
 * Why a destination is refused, in two forms. `message` is for the operator (the server log, the CLI): it names the
 * address a name resolved to and the settings that would allow it. `recorded` is what a workspace's staff and the
 * APIs see (the attempt record, the registration's 400): the class of the destination only, never the address a
 * name resolved to (an internal DNS and hosts-file oracle) nor an operator's setting.
 */
export class BlockedDestinationError extends Error {
  readonly code = 'ERR_BLOCKED_DESTINATION';
  readonly recorded: string;
  constructor(
    readonly host: string,
    readonly address: string | null,
    readonly kind: string,
  ) {
    const a = /^[aeiouI]/.test(kind) ? 'an' : 'a';
    const resolved = address !== null && address !== host;
    const what = (shown: boolean) =>
      resolved
        ? `${host} resolves to ${shown ? `${address}, ` : ''}${a} ${kind} address`
        : address
          ? `${address} is ${a} ${kind} address`
          : `${host} is ${a} ${kind} name`;
    super(
      `${what(true)}; webhooks are not sent to private destinations (set ${ALLOW_PRIVATE_ENV}=1, list the range in ${ALLOWED_CIDRS_ENV} for every workspace, or in the workspace's ${WORKSPACE_CIDRS_SETTING} for its endpoints only)`,
    );
    this.recorded = `${what(false)}; webhooks are not sent to private destinations unless the service's operator opens the range for this workspace`;
  }
}

const allowLists = new WeakMap<DestinationPolicy, net.BlockList>();
const workspacePolicies = new WeakMap<DestinationPolicy, Map<string, DestinationPolicy>>();

/**
 * The policy for one workspace's endpoints: the process's (FRS_WEBHOOK_ALLOWED_CIDRS applies to every workspace) with
 * the ranges the workspace's own setting opens added. One object per base and set of ranges, so that its allow list
 * and its HTTP agent (guardedAgent) are made once and shared by the workspace's deliveries.
 */
export function workspacePolicy(
  base: DestinationPolicy,
  cidrs: readonly string[] | null | undefined,
): DestinationPolicy {
  if (!cidrs || cidrs.length === 0 || base.allowPrivate) return base;
  let byRanges = workspacePolicies.get(base);
  if (!byRanges) workspacePolicies.set(base, (byRanges = new Map()));
  const key = cidrs.join(',');
  let policy = byRanges.get(key);
  if (!policy) byRanges.set(key, (policy = { ...base, allowedCidrs: [...base.allowedCidrs, ...cidrs] }));
  return policy;
}

/** The class of a refused IP address, or null when the policy lets it through. */
export function blockedKind(address: string, policy: DestinationPolicy = STRICT_POLICY): string | null {
  if (policy.allowPrivate) return null;
  const type = family(address);
  const hit = BLOCKED.find(({ list, ipv6Only }) => (type === 'ipv6' || !ipv6Only) && list.check(address, type));
  if (!hit) return null;
  let allowed = allowLists.get(policy);
  if (!allowed) allowLists.set(policy, (allowed = blockList(policy.allowedCidrs)));
  return allowed.check(address, type) ? null : hit.kind;
}

/** A URL's host as the connector sees it: no IPv6 brackets, no trailing dot, lower case. */
function bareHost(hostname: string): string {
  return hostname
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase();
}

/**
 * Resolves `hostname` (an IP literal stands for itself) and returns the address to connect to, or throws
 * BlockedDestinationError when the name, or any address it resolves to, is refused, and NameResolutionError when
 * it does not resolve (within the deadline).
 */
export async function resolveDestination(
  hostname: string,
  policy: DestinationPolicy,
): Promise<{ address: string; family: 4 | 6 }> {
  const host = bareHost(hostname);
  const ip = net.isIP(host);
  if (ip) {
    const kind = blockedKind(host, policy);
    if (kind) throw new BlockedDestinationError(host, host, kind);
    return { address: host, family: ip as 4 | 6 };
  }
  if (!policy.allowPrivate && BLOCKED_NAMES.some((name) => name.test(host)))
    throw new BlockedDestinationError(host, null, 'loopback or metadata');
  const addresses: Array<{ address: string; family: number }> = policy.lookup
    ? await policy.lookup(host)
    : await sharedNameResolver(policy.dns).resolve(host);
  if (addresses.length === 0) throw new NameResolutionError(host, 'ENOTFOUND', `${host} did not resolve`);
  for (const { address } of addresses) {
    const kind = blockedKind(address, policy);
    if (kind) throw new BlockedDestinationError(host, address, kind);
  }
  return { address: addresses[0].address, family: addresses[0].family as 4 | 6 };
}

/**
 * Checks an endpoint URL at registration: no user name or password, and a host that is not refused. A name that
 * does not resolve now is accepted (it is checked again on every connection). Returns the reason, or null: `shown`
 * for whoever registers it (the class of a refused destination only), `full` for the operator (BlockedDestinationError).
 */
export async function refuseDestination(
  url: URL,
  policy: DestinationPolicy,
): Promise<{ shown: string; full: string } | null> {
  if (url.username || url.password) {
    const reason =
      'the URL must not carry a user name or password (they would be shown to every API key and are never sent)';
    return { shown: reason, full: reason };
  }
  if (policy.allowPrivate) return null;
  try {
    await resolveDestination(url.hostname, policy);
    return null;
  } catch (err) {
    if (err instanceof BlockedDestinationError) return { shown: err.recorded, full: err.message };
    return null;
  }
}

const agents = new WeakMap<DestinationPolicy, Dispatcher>();

/**
 * The undici agent deliveries go through: its connector resolves the host, applies the policy to the address and
 * opens the socket to that very address, keeping the URL's name for TLS (SNI and certificate check). With an egress
 * proxy (policy.proxy) it is the proxy's agent (egress-proxy.ts), which checks the name the same way first.
 */
export function guardedAgent(policy: DestinationPolicy): Dispatcher {
  let agent = agents.get(policy);
  if (agent) return agent;
  if (policy.proxy) {
    // Through the egress proxy: the name is checked (and resolved by the service's own resolver, so a name it sees
    // as private is refused too) before the tunnel is asked for; the proxy then resolves it again and connects.
    agent = proxiedAgent(policy.proxy, (hostname) =>
      policy.allowPrivate ? Promise.resolve() : resolveDestination(hostname, policy),
    );
    agents.set(policy, agent);
    return agent;
  }
  const connect = buildConnector({});
  agent = new Agent({
    connect: (options, callback) => {
      resolveDestination(options.hostname, policy).then(
        ({ address }) =>
          connect(
            {
              ...options,
              hostname: address,
              servername:
                options.servername ?? (net.isIP(bareHost(options.hostname)) ? undefined : bareHost(options.hostname)),
            },
            callback,
          ),
        (err) => callback(err, null),
      );
    },
  });
  agents.set(policy, agent);
  return agent;
}
