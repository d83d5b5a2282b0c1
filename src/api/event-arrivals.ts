import type pg from 'pg';
import type { Logger } from 'pino';
import { backoffMs, OutageLog } from '../db/outage.js';

// The event feed's long polls (GET /v1/events?wait=N): a request with nothing to read waits for its workspace's next
// event. One LISTEN connection per API process, whatever the number of waiting requests, on the channel the events
// table announces a statement's workspaces on (migration 20261128002000: the workspace id, no event data, on commit).
// A lost connection is opened again with backoff; while there is none, the waits end every second, so that their
// requests read the feed again and still answer within about a second of an event. Closing ends every wait at once
// (the server's shutdown answers them instead of waiting out their time).

/** The channel the events table announces on (the trigger events_announce). */
export const EVENT_CHANNEL = 'frs_events';
/** The longest wait between tries to LISTEN again. */
const MAX_LISTEN_BACKOFF_MS = 30_000;
/** How long a wait lasts while nothing listens: the request reads the feed again after it. */
export const UNHEARD_WAIT_MS = 1000;

/** How a wait ended: an event of the workspace was announced, its time passed, the client left, or the feed closed. */
export type WaitEnd = 'announced' | 'timeout' | 'aborted' | 'closed';

/** One request's watch of its workspace's announcements, from before its first read to its answer. */
export interface EventWatch {
  /**
   * Waits for an announcement of the workspace (one made since the last next() ends it at once), for at most `ms`
   * (at most UNHEARD_WAIT_MS while nothing listens), or until `signal` aborts or the feed closes.
   */
  next(ms: number, signal: AbortSignal): Promise<WaitEnd>;
  /** Stops watching (call once the answer is made). */
  end(): void;
}

class Watch implements EventWatch {
  private announced = false;
  private wake: ((end: WaitEnd) => void) | undefined;

  constructor(
    private readonly arrivals: EventArrivals,
    readonly workspaceId: string,
  ) {}

  notify(end: WaitEnd): void {
    if (end === 'announced') this.announced = true;
    this.wake?.(end);
  }

  next(ms: number, signal: AbortSignal): Promise<WaitEnd> {
    if (signal.aborted) return Promise.resolve('aborted');
    if (this.arrivals.closed) return Promise.resolve('closed');
    if (this.announced) {
      this.announced = false;
      return Promise.resolve('announced');
    }
    const heard = this.arrivals.listening;
    return new Promise<WaitEnd>((resolve) => {
      const finish = (end: WaitEnd) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', aborted);
        this.wake = undefined;
        this.announced = false;
        resolve(end);
      };
      const aborted = () => finish('aborted');
      const timer = setTimeout(() => finish('timeout'), heard ? ms : Math.min(ms, UNHEARD_WAIT_MS));
      signal.addEventListener('abort', aborted, { once: true });
      this.wake = finish;
    });
  }

  end(): void {
    this.arrivals.unwatch(this);
    this.wake?.('closed');
  }
}

/** The API process's one LISTEN connection for the feed's waits, and the waits by workspace. */
export class EventArrivals {
  private client: pg.Client | undefined;
  private failures = 0;
  private stopped = false;
  private readonly watches = new Map<string, Set<Watch>>();
  private readonly outage: OutageLog;

  private constructor(
    private readonly connect: () => Promise<pg.Client>,
    logger: Logger,
    private readonly firstBackoffMs: number,
  ) {
    this.outage = new OutageLog(logger, 'event feed notifications (LISTEN)');
  }

  /**
   * Listens through a connection from `connect` (the API's database role; LISTEN needs no grant). A first try that
   * fails is logged and tried again with backoff: the feed's waits poll every second meanwhile.
   */
  static async start(
    connect: () => Promise<pg.Client>,
    logger: Logger,
    options: { firstBackoffMs?: number } = {},
  ): Promise<EventArrivals> {
    const arrivals = new EventArrivals(connect, logger, options.firstBackoffMs ?? 500);
    await arrivals.listen();
    return arrivals;
  }

  /** Whether the LISTEN connection is up. */
  get listening(): boolean {
    return this.client !== undefined;
  }

  get closed(): boolean {
    return this.stopped;
  }

  /** Starts watching the workspace's announcements: before the request's first read, so that none is missed. */
  watch(workspaceId: string): EventWatch {
    const watch = new Watch(this, workspaceId);
    if (this.stopped) return watch;
    let set = this.watches.get(workspaceId);
    if (!set) this.watches.set(workspaceId, (set = new Set()));
    set.add(watch);
    return watch;
  }

  /** The number of requests watching (the tests' check that none is left behind). */
  get watching(): number {
    let n = 0;
    for (const set of this.watches.values()) n += set.size;
    return n;
  }

  /** @internal Watch.end()'s. */
  unwatch(watch: Watch): void {
    const set = this.watches.get(watch.workspaceId);
    set?.delete(watch);
    if (set?.size === 0) this.watches.delete(watch.workspaceId);
  }

  /** Ends every wait ('closed': their requests answer what they have) and closes the connection. */
  async close(): Promise<void> {
    this.stopped = true;
    for (const set of this.watches.values()) for (const watch of set) watch.notify('closed');
    this.watches.clear();
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private announce(workspaceId: string | undefined): void {
    const sets = workspaceId === undefined ? [...this.watches.values()] : [this.watches.get(workspaceId)];
    for (const set of sets) for (const watch of set ?? []) watch.notify('announced');
  }

  private async listen(): Promise<void> {
    let client: pg.Client | undefined;
    try {
      client = await this.connect();
      const listener = client;
      listener.on('notification', (message) => {
        if (message.channel === EVENT_CHANNEL && message.payload) this.announce(message.payload);
      });
      listener.on('error', (err) => this.lost(listener, err));
      listener.on('end', () => this.lost(listener, new Error('Connection terminated')));
      await listener.query(`LISTEN ${EVENT_CHANNEL}`);
      if (this.stopped) {
        await listener.end().catch(() => undefined);
        return;
      }
      this.client = listener;
      this.failures = 0;
      this.outage.succeeded();
      // what was announced while no one listened: every waiting request reads again
      this.announce(undefined);
    } catch (err) {
      await client?.end().catch(() => undefined);
      this.listenAgain(err);
    }
  }

  private lost(client: pg.Client, err: Error): void {
    if (this.client !== client) return; // already handled, never in service, or ended by close()
    this.client = undefined;
    void client.end().catch(() => undefined);
    this.listenAgain(err);
  }

  private listenAgain(err: unknown): void {
    if (this.stopped) return;
    const wait = backoffMs(++this.failures, this.firstBackoffMs, MAX_LISTEN_BACKOFF_MS);
    this.outage.failed(err, wait);
    setTimeout(() => {
      if (!this.stopped && !this.client) void this.listen();
    }, wait).unref();
  }
}
