// Derived events at once (issue 32, point 6): the change-recording triggers announce, at commit, each workspace they
// recorded changes for on ENTITY_CHANGES_CHANNEL (migration 20261128000600); the worker listens there and runs the
// derived part of the calendar sweep for those workspaces straight away, one run at a time, the workspaces announced
// during a run gathered for the next. The minute's sweep still covers anything missed (a lost connection, a
// notification sent while no worker listened), and on every (re)connection one run covers every workspace.
// Safe in several processes: the derived sweep claims changes with SKIP LOCKED and records events by dedupe key.
import pg from 'pg';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { OutageLog } from '../db/outage.js';
import { runDerivedSweep } from './calendar.js';

export const ENTITY_CHANGES_CHANNEL = 'frs_entity_changes';
const MAX_LISTEN_BACKOFF_MS = 30_000;

/** What an announcement carries: a workspace's id (a uuid), lower case as PostgreSQL prints it. */
const WORKSPACE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Workspaces waiting for their sweep, at most; past it the next sweep covers every workspace. */
const MAX_PENDING = 1000;

export class ChangeListener {
  private client: pg.Client | undefined;
  private stopping = false;
  private failures = 0;
  /** Workspaces announced since the last run began; `all` after a (re)connection. */
  private pending = new Set<string>();
  private all = false;
  private running: Promise<void> | undefined;
  private readonly outage: OutageLog;

  constructor(
    private readonly db: Knex,
    logger: Logger,
    /** Called with the events a run recorded (the worker's metrics). */
    private readonly onEvents: (events: number) => void = () => undefined,
    /** Only these workspaces (tests that share a database, as CalendarSweepOptions.workspaceIds). Default: all. */
    private readonly workspaceIds?: string[],
  ) {
    this.outage = new OutageLog(logger.child({ component: 'derived events' }), 'entity change notifications (LISTEN)');
  }

  /** Listens, and returns once the run catching up with what was announced before has ended. */
  async start(): Promise<void> {
    await this.listen();
    await this.running;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
    await this.running;
  }

  private async listen(): Promise<void> {
    const connection = (this.db.client as { config: { connection: string | pg.ClientConfig } }).config.connection;
    const client = new pg.Client(connection);
    client.on('notification', (message) => {
      // Any login may NOTIFY this channel: only a workspace id is taken, and past MAX_PENDING the next sweep covers all.
      if (
        !message.payload ||
        !WORKSPACE_ID.test(message.payload) ||
        (this.workspaceIds && !this.workspaceIds.includes(message.payload))
      )
        return;
      if (this.pending.size >= MAX_PENDING) this.all = true;
      else this.pending.add(message.payload);
      this.kick();
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('Connection terminated')));
    try {
      await client.connect();
      await client.query(`LISTEN ${ENTITY_CHANGES_CHANNEL}`);
      if (this.stopping) {
        await client.end();
        return;
      }
      this.client = client;
      this.failures = 0;
      this.outage.succeeded();
      // what was announced while no one listened
      this.all = true;
      this.kick();
    } catch (err) {
      await client.end().catch(() => undefined);
      this.again(err);
    }
  }

  private lost(client: pg.Client, err: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    void client.end().catch(() => undefined);
    this.again(err);
  }

  private again(err: unknown): void {
    if (this.stopping) return;
    const wait = Math.min(MAX_LISTEN_BACKOFF_MS, 250 * 2 ** Math.min(this.failures++, 8));
    this.outage.failed(err, wait);
    setTimeout(() => {
      if (!this.stopping && !this.client) void this.listen();
    }, wait).unref();
  }

  /** Starts a run unless one is going; a run in progress takes what was announced meanwhile when it ends. */
  private kick(): void {
    if (this.running || this.stopping) return;
    this.running = this.drain().finally(() => {
      this.running = undefined;
      if ((this.pending.size > 0 || this.all) && !this.stopping) this.kick();
    });
  }

  private async drain(): Promise<void> {
    while ((this.pending.size > 0 || this.all) && !this.stopping) {
      const workspaces = this.all ? undefined : [...this.pending];
      this.pending = new Set();
      this.all = false;
      try {
        const events = await runDerivedSweep(this.db, new Date(), workspaces ?? this.workspaceIds ?? null);
        this.onEvents(events);
      } catch (err) {
        // left for the minute's sweep (or the next announcement); an outage is logged once
        this.outage.failed(err);
        return;
      }
    }
  }
}
