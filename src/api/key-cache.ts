// Key lookups kept in memory, so that an authenticated request does not wait for the database. A cached key is
// never trusted longer than the database would agree with it:
// - every change that can stop a key working (revoked, expiry moved, deleted, its workspace frozen or renamed) is
//   announced by a trigger on AUTH_CHANGES_CHANNEL when it commits (migration 20261123001050), from whatever process
//   made it, and every API process listening drops its whole cache on the announcement;
// - the cache serves only while its LISTEN connection is up and proves that it still receives: every heartbeat
//   interval (HEARTBEAT_INTERVAL_MS by default) the process sends a heartbeat (a NOTIFY on the same channel, with a
//   payload of its own) through its ordinary pool, and the cache stops serving, dropped, as soon as one has not come
//   back within the heartbeat deadline (HEARTBEAT_DEADLINE_MS). Notifications reach a listener in commit order, so a
//   heartbeat that came back vouches for every announcement committed before it was sent; a silent listener (a
//   half-open TCP connection, a pooler that accepts LISTEN and never delivers) is trusted for the interval plus the
//   deadline at most. A new connection serves only once its first heartbeat came back, and the cache starts empty
//   whenever it serves again (announcements missed in between cannot matter, since nothing was kept);
// - a lookup that raced an announcement (read before it, finished after it) is not kept (the generation check);
// - expiry is checked on every request against the cached expiry instant, so a key stops at that instant;
// - an entry is looked up again after MAX_AGE_MS at the latest, a bound for a change made without its announcement
//   (triggers switched off by hand).
import crypto from 'node:crypto';
import type { Knex } from 'knex';
import type pg from 'pg';
import type { Logger } from 'pino';

/** The channel the auth-change triggers notify: migration 20261123001050 writes this name as it is, so a new name needs a migration. */
export const AUTH_CHANGES_CHANNEL = 'frs_auth_changes';
/** Heartbeats start with this, so that no API process drops its cache on another's heartbeat. */
const HEARTBEAT_PREFIX = 'heartbeat ';

const MAX_AGE_MS = 30_000;
const MAX_ENTRIES = 10_000;
/**
 * Key hashes the database did not know, remembered briefly so that a repeated made-up key costs no round trip. Kept
 * apart from the known keys (a flood of made-up ones cannot push real ones out) and dropped with them: a new key is
 * announced like any other change, so one made in any process works at once.
 */
const UNKNOWN_MAX_AGE_MS = 10_000;
const MAX_UNKNOWN = 10_000;
/**
 * The hashes of every key that can authenticate (not revoked, not expired when read), read again after every
 * announcement: an address blocked for failed authentications still lets such a key through to be looked up
 * (src/http/auth-failures.ts), so a valid key is never refused for its neighbours' failures, even the first time this
 * process sees it. Not kept past this many keys (then only keys this process saw work pass).
 */
const MAX_KNOWN_KEYS = 200_000;
const REOPEN_FIRST_MS = 500;
const REOPEN_MAX_MS = 30_000;
// A heartbeat is one tiny NOTIFY per process every 2 s, and comes back within milliseconds when all is well; 2.5 s
// allows for an event-loop or GC stall or a busy database (a needless drop only costs database lookups), and the two
// bound how long a silent listener is trusted: 4.5 s, against the 30 s of MAX_AGE_MS.
const HEARTBEAT_INTERVAL_MS = 2_000;
const HEARTBEAT_DEADLINE_MS = 2_500;
/** How often heartbeats are sent, and how soon each must come back (the defaults above unless a test says otherwise). */
export interface HeartbeatTimings {
  heartbeatIntervalMs?: number;
  heartbeatDeadlineMs?: number;
}
/** Heartbeats still out that are remembered, the oldest forgotten first: past the deadline, one overdue is enough. */
const MAX_PENDING_HEARTBEATS = 64;

/** What authentication needs to know about a key, as read from the database. */
export interface KeyRecord {
  keyId: string;
  role: string | null;
  revokedAt: Date | null;
  expiresAt: Date | null;
  lastUsedAt: Date | null;
  workspaceId: string;
  slug: string;
  status: 'active' | 'frozen';
  timezone: string;
}

export class KeyCache {
  private readonly entries = new Map<string, { record: KeyRecord; storedAt: number }>();
  private readonly unknown = new Map<string, number>();
  /** Every key that can authenticate, as last read (see MAX_KNOWN_KEYS); a read in progress, and whether another is wanted. */
  private knownKeys: Set<string> | undefined;
  private readingKnownKeys = false;
  private knownKeysStale = false;
  /** The LISTEN connection in service (its first heartbeat came back). */
  private client: pg.Client | undefined;
  /** A new LISTEN connection waiting for its first heartbeat, and what to call when it comes back (or the wait ends). */
  private opening: { listener: pg.Client; seq: number; done: (proven: boolean) => void } | undefined;
  private closed = false;
  private reopenDelay = REOPEN_FIRST_MS;
  private reopenTimer: NodeJS.Timeout | undefined;
  private readonly beatTimer: NodeJS.Timeout;
  /**
   * This process's heartbeats: HEARTBEAT_PREFIX, a nonce of its own, a sequence number and a random token of that
   * heartbeat's. Any role may NOTIFY on the channel, and one that LISTENs sees the payloads: only a heartbeat
   * whose sequence number and token are those sent counts, so no one can answer for one not yet sent.
   */
  private readonly heartbeatPrefix = `${HEARTBEAT_PREFIX}${crypto.randomUUID()} `;
  private beats = 0;
  /** Heartbeats sent and not yet back, by sequence number: when each was sent (performance.now()) and its token. */
  private readonly pending = new Map<number, { sentAt: number; token: string }>();
  /** One heartbeat in flight at a time: a pool that cannot answer gets no queue of them (the one out goes overdue). */
  private sending = false;
  /** Whether the cache served when last looked at; a change either way drops it. */
  private served = false;
  /** Whether an outage (no listener, or heartbeats not coming back) was logged: one warning each, and one line at its end. */
  private inOutage = false;
  /** Bumped whenever the cache is dropped; a lookup started under an older generation is not kept. */
  generation = 0;
  /** Times the notification connection was lost (for tests and logs). */
  losses = 0;

  private readonly deadlineMs: number;

  private constructor(
    private readonly connect: () => Promise<pg.Client>,
    private readonly db: Knex,
    private readonly logger: Logger,
    timings: HeartbeatTimings,
  ) {
    this.deadlineMs = timings.heartbeatDeadlineMs ?? HEARTBEAT_DEADLINE_MS;
    this.beatTimer = setInterval(() => this.beat(), timings.heartbeatIntervalMs ?? HEARTBEAT_INTERVAL_MS);
    this.beatTimer.unref();
  }

  /**
   * A cache that listens through connections from `connect` (the API's database role, on a direct connection to
   * PostgreSQL) and sends its heartbeats through `db` (the API's pool). It serves once the first LISTEN succeeded and
   * its first heartbeat came back; if it cannot listen, every lookup goes to the database and it keeps trying in the
   * background.
   */
  static async start(
    connect: () => Promise<pg.Client>,
    db: Knex,
    logger: Logger,
    timings: HeartbeatTimings = {},
  ): Promise<KeyCache> {
    const cache = new KeyCache(connect, db, logger, timings);
    await cache.open();
    return cache;
  }

  /** Whether the LISTEN connection is up (and its first heartbeat came back). */
  get listening(): boolean {
    return this.client !== undefined;
  }

  /** Whether the cache serves: it listens, and no heartbeat is overdue. */
  get serving(): boolean {
    return this.current();
  }

  get(keyHash: string): KeyRecord | undefined {
    if (!this.current()) return undefined;
    const entry = this.entries.get(keyHash);
    if (!entry) return undefined;
    if (performance.now() - entry.storedAt > MAX_AGE_MS) {
      this.entries.delete(keyHash);
      return undefined;
    }
    return entry.record;
  }

  /**
   * Whether `keyHash` is a key the database had, able to authenticate, when last read: read again after every
   * announcement, and trusted only while the cache serves. (A key revoked a moment ago may still pass: it is then only
   * looked up, and refused.)
   */
  isKnownKey(keyHash: string): boolean {
    return this.current() && this.knownKeys?.has(keyHash) === true;
  }

  /** Reads every key that can authenticate, one read at a time; an announcement during a read asks for another. */
  private readKnownKeys(): void {
    if (this.closed) return;
    if (this.readingKnownKeys) {
      this.knownKeysStale = true;
      return;
    }
    this.readingKnownKeys = true;
    this.knownKeysStale = false;
    this.db('api_keys')
      .whereNull('revoked_at')
      .where((q) => q.whereNull('expires_at').orWhere('expires_at', '>', this.db.fn.now()))
      .limit(MAX_KNOWN_KEYS + 1)
      .pluck('key_hash')
      .then(
        (hashes: Buffer[]) => {
          this.knownKeys =
            hashes.length > MAX_KNOWN_KEYS ? undefined : new Set(hashes.map((h) => h.toString('base64')));
        },
        () => undefined,
      ) // (an outage: what was read last stays, and the next announcement or service reads again)
      .finally(() => {
        this.readingKnownKeys = false;
        if (this.knownKeysStale) this.readKnownKeys();
      });
  }

  /** Whether the database said, a moment ago and with nothing announced since, that it knows no such key. */
  isUnknown(keyHash: string): boolean {
    if (!this.current()) return false;
    const storedAt = this.unknown.get(keyHash);
    if (storedAt === undefined) return false;
    if (performance.now() - storedAt <= UNKNOWN_MAX_AGE_MS) return true;
    this.unknown.delete(keyHash);
    return false;
  }

  /** Remembers a key hash the database does not know, unless the cache was dropped since `generation` was read. */
  setUnknown(keyHash: string, generation: number): void {
    if (!this.current() || generation !== this.generation) return;
    if (this.unknown.size >= MAX_UNKNOWN) this.unknown.delete(this.unknown.keys().next().value!);
    this.unknown.set(keyHash, performance.now());
  }

  /** Keeps a record read from the database, unless the cache was dropped since `generation` was read. */
  set(keyHash: string, record: KeyRecord, generation: number): void {
    if (!this.current() || generation !== this.generation) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(keyHash, { record, storedAt: performance.now() });
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reopenTimer);
    clearInterval(this.beatTimer);
    this.opening?.done(false);
    const client = this.client;
    this.client = undefined;
    this.current();
    await client?.end().catch(() => undefined);
  }

  private drop(): void {
    this.entries.clear();
    this.unknown.clear();
    this.generation++;
    this.readKnownKeys();
  }

  /**
   * Whether the cache may serve now (it listens and no heartbeat sent is overdue), checked at the instant of every
   * lookup rather than when a timer fires. A change either way drops what was kept: going out of service so that
   * nothing is kept over a blind spell, coming back so that it starts empty.
   */
  private current(): boolean {
    const oldest = this.pending.values().next().value;
    const overdue = oldest !== undefined && performance.now() - oldest.sentAt > this.deadlineMs;
    const serves = this.client !== undefined && !overdue;
    if (serves !== this.served) {
      this.served = serves;
      this.drop();
      if (serves) this.outageEnds();
      else if (this.client)
        this.outageBegins(
          { deadlineMs: this.deadlineMs },
          `key cache: a heartbeat did not come back within ${this.deadlineMs} ms; cache dropped, keys are looked up in the database until heartbeats come back`,
        );
    }
    return serves;
  }

  /** Sends the next heartbeat through the pool, unless one is still on its way there. */
  private beat(): void {
    this.current();
    if ((!this.client && !this.opening) || this.sending || this.closed) return;
    const seq = ++this.beats;
    const token = crypto.randomBytes(16).toString('hex');
    this.pending.set(seq, { sentAt: performance.now(), token });
    if (this.pending.size > MAX_PENDING_HEARTBEATS) this.pending.delete(this.pending.keys().next().value!);
    this.sending = true;
    this.db
      .raw('SELECT pg_notify(?, ?)', [AUTH_CHANGES_CHANNEL, `${this.heartbeatPrefix}${seq} ${token}`])
      .catch(() => undefined) // it will not come back, which is what counts
      .finally(() => {
        this.sending = false;
      });
  }

  private notified(listener: pg.Client, payload: string | undefined): void {
    if (!payload?.startsWith(HEARTBEAT_PREFIX)) {
      this.drop();
      return;
    }
    if (!payload.startsWith(this.heartbeatPrefix)) return; // another process's heartbeat
    if (listener !== this.client && listener !== this.opening?.listener) return;
    const [seqText, token] = payload.slice(this.heartbeatPrefix.length).split(' ');
    const seq = Number(seqText);
    const awaited = Number.isSafeInteger(seq) && seq <= this.beats ? this.pending.get(seq) : undefined;
    if (awaited === undefined || awaited.token !== token) return; // not a heartbeat this process sent and still awaits
    // Sent one at a time, heartbeats commit in order: this one coming back vouches for every earlier one.
    for (const sent of this.pending.keys()) {
      if (sent > seq) break;
      this.pending.delete(sent);
    }
    if (listener === this.opening?.listener && seq >= this.opening.seq) this.opening.done(true);
    this.current();
  }

  private async open(): Promise<void> {
    let client: pg.Client | undefined;
    try {
      client = await this.connect();
      const listener = client;
      listener.on('notification', (message) => this.notified(listener, message.payload));
      listener.on('error', (err) => this.lost(listener, err));
      listener.on('end', () => this.lost(listener));
      await listener.query(`LISTEN ${AUTH_CHANGES_CHANNEL}`);
      // Put in service once a heartbeat sent now comes back on it: a pooler that accepts LISTEN and never delivers
      // never serves. Heartbeats sent to an earlier connection will not come back on this one.
      this.pending.clear();
      const proven = new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), this.deadlineMs);
        this.opening = {
          listener,
          seq: this.beats + 1,
          done: (ok) => {
            clearTimeout(timer);
            resolve(ok);
          },
        };
      });
      this.beat();
      const ok = await proven;
      this.opening = undefined;
      if (this.closed) {
        await listener.end();
        return;
      }
      if (!ok)
        throw new Error(
          `LISTEN succeeded but a heartbeat sent through the pool did not come back on it within ${this.deadlineMs} ms (a transaction pooler in between?)`,
        );
      this.client = listener;
      this.reopenDelay = REOPEN_FIRST_MS;
      this.current();
    } catch (err) {
      this.opening = undefined;
      await client?.end().catch(() => undefined);
      if (this.closed) return;
      this.outageBegins(
        { err: { message: (err as Error).message }, retryInMs: this.reopenDelay },
        'key cache: cannot listen for key changes; keys are looked up in the database',
      );
      this.scheduleReopen();
    }
  }

  private lost(client: pg.Client, err?: Error): void {
    if (this.client !== client) return; // already handled, or never in service
    this.client = undefined;
    this.losses++;
    this.current();
    client.end().catch(() => undefined);
    if (this.closed) return;
    this.outageBegins(
      { err: err && { message: err.message } },
      'key cache: lost the connection that listens for key changes; cache dropped',
    );
    this.scheduleReopen();
  }

  /** Logs the first failure of an outage as a warning; the next ones, until the cache serves again, at debug. */
  private outageBegins(fields: object, message: string): void {
    if (this.closed) return;
    this.logger[this.inOutage ? 'debug' : 'warn'](fields, message);
    this.inOutage = true;
  }

  private outageEnds(): void {
    if (!this.inOutage) return;
    this.inOutage = false;
    this.logger.info('key cache: listening again; the cache serves again, starting empty');
  }

  private scheduleReopen(): void {
    this.reopenTimer = setTimeout(() => void this.open(), this.reopenDelay);
    this.reopenTimer.unref();
    this.reopenDelay = Math.min(this.reopenDelay * 2, REOPEN_MAX_MS);
  }
}
