// Key lookups kept in memory, so that an authenticated request does not wait for the database. A cached key is
// never trusted longer than the database would agree with it:
// - every change that can stop a key working (revoked, expiry moved, deleted, its workspace frozen or renamed) is
//   announced by a trigger on AUTH_CHANGES_CHANNEL when it commits (migration 20261123001050), from whatever process
//   made it, and every API process listening drops its whole cache on the announcement;
// - the cache serves only while its LISTEN connection is up: when that connection is lost the cache is dropped and
//   every lookup goes to the database until a new connection listens again (announcements missed in between
//   cannot matter, since nothing was kept);
// - a lookup that raced an announcement (read before it, finished after it) is not kept (the generation check);
// - expiry is checked on every request against the cached expiry instant, so a key stops at that instant;
// - an entry is looked up again after MAX_AGE_MS at the latest, a bound for a connection that died silently.
import type pg from 'pg';
import type { Logger } from 'pino';

export const AUTH_CHANGES_CHANNEL = 'frs_auth_changes';

const MAX_AGE_MS = 30_000;
const MAX_ENTRIES = 10_000;
const REOPEN_FIRST_MS = 500;
const REOPEN_MAX_MS = 30_000;

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
  private client: pg.Client | undefined;
  private closed = false;
  private reopenDelay = REOPEN_FIRST_MS;
  private reopenTimer: NodeJS.Timeout | undefined;
  /** Bumped whenever the cache is dropped; a lookup started under an older generation is not kept. */
  generation = 0;
  /** Times the notification connection was lost (for tests and logs). */
  losses = 0;

  private constructor(
    private readonly connect: () => Promise<pg.Client>,
    private readonly logger: Logger,
  ) {}

  /**
   * A cache that listens through connections from `connect` (the API's database role). It serves once the first
   * LISTEN succeeded; if it cannot listen, every lookup goes to the database and it keeps trying in the background.
   */
  static async start(connect: () => Promise<pg.Client>, logger: Logger): Promise<KeyCache> {
    const cache = new KeyCache(connect, logger);
    await cache.open();
    return cache;
  }

  /** Whether the cache serves (its LISTEN connection is up). */
  get listening(): boolean {
    return this.client !== undefined;
  }

  get(keyHash: string): KeyRecord | undefined {
    if (!this.client) return undefined;
    const entry = this.entries.get(keyHash);
    if (!entry) return undefined;
    if (performance.now() - entry.storedAt > MAX_AGE_MS) {
      this.entries.delete(keyHash);
      return undefined;
    }
    return entry.record;
  }

  /** Keeps a record read from the database, unless the cache was dropped since `generation` was read. */
  set(keyHash: string, record: KeyRecord, generation: number): void {
    if (!this.client || generation !== this.generation) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(keyHash, { record, storedAt: performance.now() });
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reopenTimer);
    const client = this.client;
    this.client = undefined;
    this.drop();
    await client?.end().catch(() => undefined);
  }

  private drop(): void {
    this.entries.clear();
    this.generation++;
  }

  private async open(): Promise<void> {
    let client: pg.Client | undefined;
    try {
      client = await this.connect();
      const listener = client;
      listener.on('notification', () => this.drop());
      listener.on('error', (err) => this.lost(listener, err));
      listener.on('end', () => this.lost(listener));
      await listener.query(`LISTEN ${AUTH_CHANGES_CHANNEL}`);
      if (this.closed) {
        await listener.end();
        return;
      }
      // Nothing was kept while no one listened; start from empty anyway.
      this.drop();
      this.client = listener;
      this.reopenDelay = REOPEN_FIRST_MS;
    } catch (err) {
      await client?.end().catch(() => undefined);
      if (this.closed) return;
      this.logger.warn({ err: { message: (err as Error).message }, retryInMs: this.reopenDelay }, 'key cache: cannot listen for key changes; keys are looked up in the database');
      this.scheduleReopen();
    }
  }

  private lost(client: pg.Client, err?: Error): void {
    if (this.client !== client) return; // already handled, or never in service
    this.client = undefined;
    this.losses++;
    this.drop();
    client.end().catch(() => undefined);
    if (this.closed) return;
    this.logger.warn({ err: err && { message: err.message } }, 'key cache: lost the connection that listens for key changes; cache dropped');
    this.scheduleReopen();
  }

  private scheduleReopen(): void {
    this.reopenTimer = setTimeout(() => void this.open(), this.reopenDelay);
    this.reopenTimer.unref();
    this.reopenDelay = Math.min(this.reopenDelay * 2, REOPEN_MAX_MS);
  }
}
