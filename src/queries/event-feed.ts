import type { Knex } from 'knex';
import { eventsWithDedupeKey, subscribableEvents } from '../webhooks/catalogue.js';
import { CREATED_AT_SQL, payloadSql } from '../webhooks/fanout.js';

// The event feed (GET /v1/events): a workspace's events, oldest first, each as the payload a receiver gets for it.
//
// Order and positions: the recording transaction's id, then the event's time and id (migration 20261128002000). Only
// events recorded by transactions older than every transaction still running are read (pg_snapshot_xmin), so an event
// recorded by a transaction that is still open can never be passed over by a consumer that read past a later one: it
// appears once every transaction older than its own has ended (at once, unless a long one is running), and always
// after the positions read before it. The items are built by the delivery body's own SQL (payloadSql), with the
// event's id where a delivery has its own: the same keys in the same order, the same createdAt text, the same data.

/** An event's place in the feed: its transaction's id, its time in epoch microseconds (as text) and its id. */
export type EventPosition = [xid: string, createdMicros: string, id: string];

/** The events the feed holds: the public catalogue's, webhook.test left out (it is the test operation's). */
export const feedEvents = (): string[] => subscribableEvents();

export interface EventFeedParams {
  /** Only these events (each of feedEvents()); none: every event of the feed. */
  types?: string[];
  limit: number;
  /** The events after this position (a page's `next`); none: from the oldest kept. */
  after?: EventPosition;
}

export interface EventFeedPage {
  /** Each item's JSON text, exactly as built by the database. */
  items: string[];
  /** The last item's position, or the `after` given when there is none (null: no `after` and no item). */
  next: EventPosition | null;
  /** Whether more events after `next` can be read now (the page was full). */
  hasMore: boolean;
}

interface FeedRow {
  item: string;
  xid: string;
  micros: string;
  id: string;
}

/** A page of the workspace's events after `after`, oldest first, at most `limit` of them. */
export async function eventFeed(db: Knex, workspaceId: string, params: EventFeedParams): Promise<EventFeedPage> {
  const { after, limit } = params;
  const { rows } = await db.raw(
    `SELECT ${payloadSql('e.id', CREATED_AT_SQL)} AS item, e.recorded_xid::text AS xid,
            (extract(epoch FROM e.created_at) * 1000000)::bigint AS micros, e.id
     FROM events e
     WHERE e.workspace_id = ?::uuid
       AND e.event = ANY(?::text[])
       AND e.recorded_xid < pg_snapshot_xmin(pg_current_snapshot())
       AND (?::xid8 IS NULL OR (e.recorded_xid, e.created_at, e.id) >
            (?::xid8, timestamptz 'epoch' + ?::bigint * interval '1 microsecond', ?::uuid))
     ORDER BY e.recorded_xid, e.created_at, e.id
     LIMIT ?`,
    [
      eventsWithDedupeKey(),
      workspaceId,
      params.types ?? feedEvents(),
      after?.[0] ?? null,
      after?.[0] ?? null,
      after?.[1] ?? null,
      after?.[2] ?? null,
      limit + 1,
    ],
  );
  const page = (rows as FeedRow[]).slice(0, limit);
  const last = page.at(-1);
  return {
    items: page.map((r) => r.item),
    next: last ? [last.xid, String(last.micros), last.id] : (after ?? null),
    hasMore: rows.length > limit,
  };
}
