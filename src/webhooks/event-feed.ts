import type { Knex } from 'knex';
import { eventsWithDedupeKey, subscribableEvents } from './catalogue.js';
import { CREATED_AT_SQL, payloadSql } from './fanout.js';

// The event feed (GET /v1/events): a workspace's events, oldest first, each as the payload a receiver gets for it.
//
// Order and positions: the recording transaction's id, then the event's time and id (migration 20261128002000). Only
// events recorded by transactions older than every transaction still running are read (pg_snapshot_xmin), so an event
// recorded by a transaction that is still open can never be passed over by a consumer that read past a later one: it
// appears once every transaction older than its own has ended (at once, unless a long one is running), and always
// after the positions read before it. The items are built by the delivery body's own SQL (payloadSql), with the
// event's id where a delivery has its own: the same keys in the same order, the same createdAt text, the same data.
// The horizon is the cluster's, not the workspace's: a transaction is given its id at its first write, before anything
// says whether (or for which workspace) it will record an event, so no narrower horizon is safe. A long transaction of
// any workspace holds back every feed until it ends; a waiting request reads again every second meanwhile
// (src/api/operations/list-events.ts).
//
// Which events: those of the types asked for (the catalogue's, webhook.test left out) and never one of source `test`
// (webhook.test and the admin API's example events: no occurrence in the workspace). A request reads at most
// `scanLimit` positions after `after` in feed order (the index events_feed) and keeps those: a rare type can never make
// one request read every event of the workspace, and its `next` moves past what was read, so no later request reads
// those positions again.

/** An event's place in the feed: its transaction's id, its time in epoch microseconds (as text) and its id. */
export type EventPosition = [xid: string, createdMicros: string, id: string];

/** The events the feed holds: the public catalogue's, webhook.test left out (it is the test operation's). */
export const feedEvents = (): string[] => subscribableEvents();

/** The most positions one read goes through, kept or not (EventFeedParams.scanLimit's default). */
export const FEED_SCAN_LIMIT = 5000;

export interface EventFeedParams {
  /** Only these events (each of feedEvents()); none: every event of the feed. */
  types?: string[];
  limit: number;
  /** The events after this position (a page's `next`); none: from the oldest kept. */
  after?: EventPosition;
  /** The most positions read after `after`, kept or not (default FEED_SCAN_LIMIT; lowered by tests). */
  scanLimit?: number;
}

export interface EventFeedPage {
  /** Each item's JSON text, exactly as built by the database. */
  items: string[];
  /**
   * Where to read on: the last item's position when the page is full, else the last position read (past the events
   * left out), or the `after` given when nothing was read (null: no `after` and nothing read).
   */
  next: EventPosition | null;
  /** Whether more can be read now: the page was full, or the read stopped at scanLimit positions (then maybe short). */
  hasMore: boolean;
}

interface FeedRow {
  /** Null on the summary row only (the page is empty). */
  item: string | null;
  xid: string;
  micros: string;
  id: string;
  /** The positions read, and the last of them (the same on every row). */
  scanned: number;
  last_xid: string | null;
  last_micros: string | null;
  last_id: string | null;
}

const MICROS_SQL = (column: string) => `(extract(epoch FROM ${column}) * 1000000)::bigint::text`;

/**
 * A page of the workspace's events after `after`, oldest first, at most `limit` of them, out of at most `scanLimit`
 * positions read. One statement: the positions read (in index order), the page kept of them, and how many were read
 * with the last of them (a summary row joined to each item, or alone when the page is empty).
 */
export async function eventFeed(db: Knex, workspaceId: string, params: EventFeedParams): Promise<EventFeedPage> {
  const { after, limit } = params;
  const scanLimit = params.scanLimit ?? FEED_SCAN_LIMIT;
  const afterSql = after
    ? `AND (e.recorded_xid, e.created_at, e.id) >
           (?::xid8, timestamptz 'epoch' + ?::bigint * interval '1 microsecond', ?::uuid)`
    : '';
  const { rows } = await db.raw(
    `WITH scanned AS (
       SELECT e.id, e.recorded_xid, e.created_at, e.event = ANY(?::text[]) AND e.source <> 'test' AS kept
       FROM events e
       WHERE e.workspace_id = ?::uuid
         AND e.recorded_xid < pg_snapshot_xmin(pg_current_snapshot())
         ${afterSql}
       ORDER BY e.recorded_xid, e.created_at, e.id
       LIMIT ?
     ), summary AS (
       SELECT (SELECT count(*)::int FROM scanned) AS scanned, l.recorded_xid::text AS last_xid,
              ${MICROS_SQL('l.created_at')} AS last_micros, l.id AS last_id
       FROM (SELECT 1) one
       LEFT JOIN (SELECT * FROM scanned ORDER BY recorded_xid DESC, created_at DESC, id DESC LIMIT 1) l ON true
     ), page AS (
       SELECT ${payloadSql('e.id', CREATED_AT_SQL)} AS item, e.recorded_xid, e.created_at, e.id
       FROM (SELECT id FROM scanned WHERE kept ORDER BY recorded_xid, created_at, id LIMIT ?) k
       JOIN events e ON e.id = k.id
     )
     SELECT p.item, p.recorded_xid::text AS xid, ${MICROS_SQL('p.created_at')} AS micros, p.id, s.*
     FROM summary s LEFT JOIN page p ON true
     ORDER BY p.recorded_xid, p.created_at, p.id`,
    [
      params.types ?? feedEvents(),
      workspaceId,
      ...(after ? [after[0], after[1], after[2]] : []),
      scanLimit,
      eventsWithDedupeKey(),
      limit + 1,
    ],
  );
  return pageOf(rows as FeedRow[], limit, scanLimit, after);
}

/** The page the rows make: full (more kept than `limit`), stopped at scanLimit, or at the end of what can be read. */
function pageOf(rows: FeedRow[], limit: number, scanLimit: number, after: EventPosition | undefined): EventFeedPage {
  const [summary] = rows;
  const kept = rows.filter((row) => row.item !== null);
  const page = kept.slice(0, limit);
  const items = page.map((row) => row.item as string);
  if (kept.length > limit) {
    const last = page[page.length - 1];
    return { items, next: [last.xid, last.micros, last.id], hasMore: true };
  }
  const next: EventPosition | null =
    summary.last_xid === null
      ? (after ?? null)
      : [summary.last_xid, summary.last_micros as string, summary.last_id as string];
  return { items, next, hasMore: summary.scanned >= scanLimit };
}
