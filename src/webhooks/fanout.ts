import type { Knex } from 'knex';
import { eventsWithDedupeKey, TEST_EVENT } from './catalogue.js';

/** The channel dispatchers LISTEN on; a notification means "something was queued". */
export const DELIVERY_CHANNEL = 'frs_deliveries';

/**
 * The delivery body, built in SQL once when the delivery is created and sent byte for byte on every attempt:
 * `{id, event, createdAt, [dedupeKey,] data}` in that order, createdAt in UTC with milliseconds. `dedupeKey` is
 * there only for events whose payload schema has it. `id` and `createdAt` are SQL expressions (the delivery's id and
 * the event's time as iso_utc_text); `e` is the events row; `?` is the array of events with a dedupeKey. The event
 * feed (src/webhooks/event-feed.ts) builds its items with it too, so that an item is what a receiver gets.
 */
export const payloadSql = (id: string, createdAt: string): string => `(CASE WHEN e.event = ANY(?::text[])
    THEN json_build_object('id', ${id}, 'event', e.event, 'createdAt', ${createdAt}, 'dedupeKey', e.dedupe_key, 'data', e.data)
    ELSE json_build_object('id', ${id}, 'event', e.event, 'createdAt', ${createdAt}, 'data', e.data)
  END)::text`;

/** Expects `p.id` (the delivery id) and `p.created_at` (CREATED_AT_SQL). */
const BODY_SQL = payloadSql('p.id', 'p.created_at');

/** The event's time as Date.prototype.toISOString() writes it (iso_utc_text: migration 20261123003100). */
export const CREATED_AT_SQL = 'iso_utc_text(e.created_at)';

/** Wakes the dispatchers; inside a transaction the notification is delivered on commit. */
export async function notifyDispatchers(db: Knex): Promise<void> {
  await db.raw(`SELECT pg_notify(?, '')`, [DELIVERY_CHANNEL]);
}

/**
 * Fan-out to subscribers locks them: switching an endpoint on or off waits for this transaction (and this one for
 * it), so a delivery is never held for an endpoint that was just switched on, after its held deliveries were
 * released. Endpoints are locked in id order, as the dispatcher's bookkeeping locks them. A test delivery is
 * queued whether the endpoint is on or off, so it needs no lock (and the API's role, which queues it, may not
 * lock endpoints).
 */
const LOCK_SUBSCRIBERS = `ORDER BY w.id
       FOR SHARE OF w`;

export interface CreatedDelivery {
  id: string;
  eventId: string;
  endpointId: string;
  status: 'queued' | 'held';
}

/**
 * Creates deliveries of the given events in one INSERT ... SELECT and notifies the dispatchers when any was
 * queued. `subscribers`: every endpoint of the event's workspace subscribed to it (an empty event list means
 * all), queued when the endpoint is on, held when it is switched off; webhook.test is never fanned out this
 * way. `endpoint`: that endpoint only (the test operation), queued whether it is on or off and whatever its
 * event list says. An existing (event, endpoint) delivery is left as it is.
 */
export async function createDeliveries(
  db: Knex,
  eventIds: string[],
  target: { kind: 'subscribers' } | { kind: 'endpoint'; endpointId: string },
  dueAt?: Date | string,
): Promise<CreatedDelivery[]> {
  if (eventIds.length === 0) return [];
  const toEndpoint = target.kind === 'endpoint';
  const match = toEndpoint
    ? `w.id = ?::uuid`
    : `e.event <> '${TEST_EVENT}' AND (w.events = '{}' OR e.event = ANY(w.events))`;
  const { rows } = await db.raw(
    `WITH pairs AS MATERIALIZED (
       SELECT gen_random_uuid() AS id, e.id AS event_id, w.id AS endpoint_id, ${CREATED_AT_SQL} AS created_at,
              ${toEndpoint ? 'true' : 'w.is_active'} AS send
       FROM events e
       JOIN webhook_endpoints w ON w.workspace_id = e.workspace_id AND w.deleted_at IS NULL AND ${match}
       WHERE e.id = ANY(?::uuid[])
       ${toEndpoint ? '' : LOCK_SUBSCRIBERS}
     ), inserted AS (
       INSERT INTO deliveries (id, workspace_id, event_id, endpoint_id, event, body, status, next_attempt_at)
       SELECT p.id, e.workspace_id, e.id, p.endpoint_id, e.event, ${BODY_SQL},
              CASE WHEN p.send THEN 'queued' ELSE 'held' END,
              CASE WHEN p.send THEN coalesce(?::timestamptz, now()) END
       FROM pairs p JOIN events e ON e.id = p.event_id
       ON CONFLICT (event_id, endpoint_id) DO NOTHING
       RETURNING id, event_id, endpoint_id, status
     )
     SELECT id, event_id AS "eventId", endpoint_id AS "endpointId", status FROM inserted`,
    [...(toEndpoint ? [target.endpointId] : []), eventIds, eventsWithDedupeKey(), dueAt ?? null],
  );
  if (rows.some((row: CreatedDelivery) => row.status === 'queued')) await notifyDispatchers(db);
  return rows;
}

/**
 * Fans events out to their workspace's subscribed endpoints (see createDeliveries) and returns how many
 * deliveries were created. Call it inside the transaction that records the events: the notification is sent on
 * commit. `dueAt`: when the deliveries are first due (default the database clock); a sweep passes its own clock,
 * so `sweep --now` sends what it raised.
 */
export async function fanOutEvents(db: Knex, eventIds: string[], dueAt?: Date | string): Promise<number> {
  return (await createDeliveries(db, eventIds, { kind: 'subscribers' }, dueAt)).length;
}
