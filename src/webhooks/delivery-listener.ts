import type { Knex } from 'knex';
import pg from 'pg';
import type { Logger } from 'pino';
import { DELIVERY_CHANNEL } from './fanout.js';
import { backoffMs, OutageLog } from '../db/outage.js';

/** The longest wait between tries to LISTEN again. */
const MAX_LISTEN_BACKOFF_MS = 30_000;

export interface DeliveryListenerOptions {
  /** Called on each notification, and once listening (for what was notified while no one listened). */
  notified: () => void;
  /** Whether listening is still wanted: a lost connection is tried again only while it is. */
  wanted: () => boolean;
  /** The first wait before listening again (it doubles up to MAX_LISTEN_BACKOFF_MS). */
  firstBackoffMs: number;
}

/**
 * Listens for the delivery channel's notifications on a connection of its own. Without them polling alone still
 * sends everything, only up to a poll interval later; a lost or refused connection is tried again with backoff for
 * as long as it is wanted.
 */
export class DeliveryListener {
  private client: pg.Client | undefined;
  private failures = 0;
  private readonly outage: OutageLog;

  constructor(
    private readonly db: Knex,
    logger: Logger,
    private readonly options: DeliveryListenerOptions,
  ) {
    this.outage = new OutageLog(logger, 'delivery notifications (LISTEN)');
  }

  async listen(): Promise<void> {
    const connection = (this.db.client as { config: { connection: string | pg.ClientConfig } }).config.connection;
    const client = new pg.Client(connection);
    client.on('notification', () => this.options.notified());
    client.on('error', (err) => this.listenerLost(client, err));
    client.on('end', () => this.listenerLost(client, new Error('Connection terminated')));
    try {
      await client.connect();
      await client.query(`LISTEN ${DELIVERY_CHANNEL}`);
      this.client = client;
      this.failures = 0;
      this.outage.succeeded();
      // what was notified while no one listened
      this.options.notified();
    } catch (err) {
      await client.end().catch(() => undefined);
      this.listenAgain(err);
    }
  }

  /** Closes the connection (a try to listen again that is waiting finds it no longer wanted). */
  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private listenerLost(client: pg.Client, err: Error): void {
    if (this.client !== client) return; // already handled, or never in service (or ended by stop())
    this.client = undefined;
    void client.end().catch(() => undefined);
    this.listenAgain(err);
  }

  private listenAgain(err: unknown): void {
    if (!this.options.wanted()) return;
    const wait = backoffMs(++this.failures, this.options.firstBackoffMs, MAX_LISTEN_BACKOFF_MS);
    this.outage.failed(err, wait);
    setTimeout(() => {
      if (this.options.wanted() && !this.client) void this.listen();
    }, wait).unref();
  }
}
