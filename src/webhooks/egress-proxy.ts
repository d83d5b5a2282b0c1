import { Pool, ProxyAgent, type buildConnector, type Dispatcher } from 'undici';

// Deliveries through an egress proxy (FRS_WEBHOOK_PROXY). undici's ProxyAgent opens each connection as an HTTP CONNECT
// tunnel to the URL's host and port (http and https destinations alike); TLS (checked against the URL's name), the
// request, the time-out, the no-redirect rule and the 4 KiB body rule run through the tunnel as they would directly.
// Two hooks of our own:
// - before a tunnel is asked for, the destination check runs on the URL's name (`check`: a literal private address, a
//   refused name, or a name the service's own resolver gives a private address is refused), so a refused destination
//   never reaches the proxy;
// - what goes wrong between the service and the proxy (it cannot be reached, it closes the connection, it answers the
//   CONNECT with anything but 200) is an EgressProxyError, whose recorded text names neither the proxy's address nor
//   its credentials (the operator's log line does name the address).
// The proxy resolves the name again and makes the real connection, to whatever address its own DNS gives: it must
// refuse private addresses itself (as Stripe's smokescreen does).

/** How long the proxy has to answer a CONNECT (an attempt's own time-out, 10 s, bounds the whole exchange anyway). */
const TUNNEL_TIMEOUT_MS = 10_000;

/** A tunnel through the egress proxy that could not be opened: nothing was sent to the destination. */
export class EgressProxyError extends Error {
  readonly code = 'ERR_EGRESS_PROXY';
  /** What the attempt record (and so the APIs and the screen) says: the destination and the proxy's answer only. */
  readonly recorded: string;
  constructor(proxy: string, target: string, answer: { statusCode: number } | { cause: unknown }) {
    const causeCode = 'cause' in answer ? ((answer.cause as { code?: string })?.code ?? 'no answer') : '';
    const causeText = 'cause' in answer ? ((answer.cause as Error)?.message ?? String(answer.cause)) : '';
    super(
      'statusCode' in answer
        ? `egress proxy ${proxy} answered ${answer.statusCode} to CONNECT ${target}`
        : `egress proxy ${proxy} did not open a tunnel to ${target}: ${causeText}`,
    );
    this.recorded =
      'statusCode' in answer
        ? `the egress proxy refused the tunnel to ${target} (it answered ${answer.statusCode}); nothing was sent`
        : `the egress proxy did not open a tunnel to ${target} (${causeCode}); nothing was sent`;
  }
}

/** The proxy as a log line may name it: scheme, host and port, never its user name or password. */
function proxyName(proxy: string): string {
  const url = new URL(proxy);
  return `${url.protocol}//${url.host}`;
}

type Connect = (options: Dispatcher.ConnectOptions) => Promise<Dispatcher.ConnectData>;

/**
 * The pool of connections to the proxy itself. Its CONNECTs fail as EgressProxyError: unreachable, closed, or any
 * answer but 200 (whose socket is closed here; ProxyAgent would otherwise make it an error naming nothing).
 */
function tunnelClient(origin: URL, options: object, proxy: string): Dispatcher {
  const pool = new Pool(origin, { ...options, headersTimeout: TUNNEL_TIMEOUT_MS });
  const connect: Connect = pool.connect.bind(pool);
  const tunnel: Connect = async (params) => {
    let data: Dispatcher.ConnectData;
    try {
      data = await connect(params);
    } catch (cause) {
      throw new EgressProxyError(proxy, String(params.path), { cause });
    }
    if (data.statusCode !== 200) {
      data.socket.on('error', () => {}).destroy();
      throw new EgressProxyError(proxy, String(params.path), { statusCode: data.statusCode });
    }
    return data;
  };
  (pool as unknown as { connect: Connect }).connect = tunnel;
  return pool;
}

/**
 * An agent that sends every request through the HTTP CONNECT proxy at `proxy` (credentials in its URL become
 * Proxy-Authorization), after `check(hostname)` has let the destination's name through; a rejection of `check` is the
 * connection's error (a BlockedDestinationError, a NameResolutionError), and nothing reaches the proxy.
 */
export function proxiedAgent(proxy: string, check: (hostname: string) => Promise<unknown>): ProxyAgent {
  const name = proxyName(proxy);
  return new ProxyAgent({
    uri: proxy,
    clientFactory: (origin, options) => tunnelClient(origin, options, name),
    // Every destination's pool: its connections are checked, then tunnelled (ProxyAgent's own connector).
    factory: (origin, options) => {
      const tunnelled = (options as { connect: buildConnector.connector }).connect;
      return new Pool(origin, {
        ...options,
        connect: (opts, callback) => {
          check(opts.hostname).then(
            () => tunnelled(opts, callback),
            (err: Error) => callback(err, null),
          );
        },
      });
    },
  });
}
