import type { Knex } from 'knex';
import { TEST_EVENT } from './catalogue.js';
import { notifyDispatchers } from './fanout.js';

// The endpoint-and-delivery lifecycle: what becomes of an endpoint's deliveries when the endpoint is switched off
// (by an operator, or by the dispatcher after SWITCH_OFF_AFTER_FAILURES failed attempts in a row) or on again, and
// when its workspace is frozen and set active again. The dispatcher, the endpoint commands (endpoints.ts) and the
// workspace commands (src/core/workspaces.ts) all take these rules from here, so none of them imports another for them.
//
// A pending delivery (queued or retrying) of a switched-off endpoint is held (test deliveries excepted: they are sent
// to a switched-off endpoint too); a frozen workspace's deliveries stay pending and are not claimed (fairness.ts).
// When the wait ends, what waited longer than 7 days is marked failed instead of sent. A deleted endpoint is kept
// (deleted_at: its delivery log stays readable until retention removes it) but hidden from every list, claim and
// fan-out, and its pending deliveries are marked failed (deleteEndpointAndDeliveries).

/** A delivery that is still to be attempted, as a condition on `deliveries`. */
export const PENDING = `status IN ('queued', 'retrying')`;

/** An endpoint that is not deleted, as a condition on `webhook_endpoints` (give the alias, if any). */
export const liveEndpoint = (alias?: string) => `${alias ? `${alias}.` : ''}deleted_at IS NULL`;

/** What a refusal because the endpoint is switched off tells either client to do (the CLI command, the admin operation). */
export const SWITCH_ON_FIRST = (endpointId: string) =>
  `switch it on first with "fleet-admin endpoint enable --id ${endpointId}" or the admin API's enableEndpoint (that also sends what it held)`;

/** Failed attempts in a row after which an endpoint is switched off. */
export const SWITCH_OFF_AFTER_FAILURES = 20;

/** What waited longer than this while its endpoint was switched off or its workspace frozen is marked failed instead of sent. */
const HELD_FOR_TOO_LONG = `created_at < ?::timestamptz - interval '7 days'`;

/**
 * Switches an endpoint on or off, in the caller's transaction, and returns its row (`returning`), undefined when there
 * is none. Switching on clears the failure streak, so the next failure does not switch it straight off again, and
 * sends what was held while it was off (releaseHeldDeliveries); switching off keeps the time it was first switched
 * off and holds its pending deliveries (holdPendingDeliveries).
 */
export async function switchEndpoint<Row>(
  trx: Knex.Transaction,
  id: string,
  active: boolean,
  now: Date,
  returning: readonly string[],
): Promise<Row | undefined> {
  const changes = active
    ? { is_active: true, disabled_at: null, disabled_reason: null, consecutive_failures: 0 }
    : {
        is_active: false,
        disabled_at: trx.raw('coalesce(disabled_at, now())'),
        disabled_reason: trx.raw("coalesce(disabled_reason, 'manual')"),
      };
  const [row] = await trx('webhook_endpoints')
    .where({ id })
    .whereRaw(liveEndpoint())
    .update(changes)
    .returning([...returning]);
  if (!row) return undefined;
  if (active) await releaseHeldDeliveries(trx, id, now);
  else await holdPendingDeliveries(trx, [id]);
  return row;
}

/**
 * Moves the pending deliveries of switched-off endpoints to `held` (test deliveries stay queued: they are sent
 * to a switched-off endpoint too). Call it in the transaction that switches the endpoints off. (The dispatcher's
 * flush does the same in its own statement for the endpoints it switches off: see RECORD_ATTEMPTS in
 * attempt-records.ts.)
 */
export async function holdPendingDeliveries(db: Knex, endpointIds: string[]): Promise<number> {
  if (endpointIds.length === 0) return 0;
  return db('deliveries')
    .whereIn('endpoint_id', endpointIds)
    .whereRaw(PENDING)
    .whereNot('event', TEST_EVENT)
    .update({ status: 'held', next_attempt_at: null });
}

/**
 * When an operator switches an endpoint back on: what was held is queued now, except deliveries created more
 * than 7 days before `now`, which are marked failed instead.
 */
export async function releaseHeldDeliveries(
  db: Knex,
  endpointId: string,
  now: Date,
): Promise<{ queued: number; failed: number }> {
  return db.transaction(async (trx) => {
    await trx.raw('SELECT 1 FROM webhook_endpoints WHERE id = ? FOR NO KEY UPDATE', [endpointId]);
    const { rows } = await trx.raw(
      `UPDATE deliveries SET
         status = CASE WHEN ${HELD_FOR_TOO_LONG} THEN 'failed' ELSE 'queued' END,
         next_attempt_at = CASE WHEN ${HELD_FOR_TOO_LONG} THEN NULL ELSE ?::timestamptz END,
         finished_at = CASE WHEN ${HELD_FOR_TOO_LONG} THEN now() END,
         last_error = CASE WHEN ${HELD_FOR_TOO_LONG} THEN 'held longer than 7 days while the endpoint was switched off' ELSE last_error END
       WHERE endpoint_id = ? AND status = 'held'
       RETURNING status`,
      [now, now, now, now, now, endpointId],
    );
    const queued = rows.filter((r: { status: string }) => r.status === 'queued').length;
    if (queued > 0) await notifyDispatchers(trx);
    return { queued, failed: rows.length - queued };
  });
}

/**
 * When a frozen workspace is set active again: its pending deliveries (which waited, unattempted, while it was
 * frozen) are sent, except those created more than 7 days before `now`, which are marked failed instead. Call it
 * in the transaction that sets the workspace active.
 */
export async function resumeFrozenDeliveries(db: Knex, workspaceId: string, now: Date): Promise<{ failed: number }> {
  const failed = await db('deliveries')
    .where({ workspace_id: workspaceId })
    .whereRaw(PENDING)
    .whereRaw(HELD_FOR_TOO_LONG, [now])
    .update({
      status: 'failed',
      next_attempt_at: null,
      finished_at: db.fn.now(),
      lease_owner: null,
      lease_until: null,
      last_error: 'waited longer than 7 days while the workspace was frozen',
    });
  await notifyDispatchers(db);
  return { failed };
}

/** The error kind of a delivery its endpoint's deletion ended (deliveries.error_kind; the document's AttemptErrorKind). */
export const ENDPOINT_DELETED = 'endpoint_deleted';

/** How often a deletion looks again whether the deliveries a dispatcher holds are done with. */
const LEASE_POLL_MS = 25;

/**
 * Marks the endpoint's pending deliveries (queued, retrying or held, test deliveries too) failed with the kind
 * ENDPOINT_DELETED; only those no dispatcher holds unless `leased` (every lease having ended, see below).
 */
async function failDeliveriesOfDeleted(db: Knex, endpointId: string, leased: boolean): Promise<number> {
  const query = db('deliveries').where({ endpoint_id: endpointId }).whereRaw(`(${PENDING} OR status = 'held')`);
  if (!leased) query.whereRaw('(lease_until IS NULL OR lease_until < now())');
  return query.update({
    status: 'failed',
    error_kind: ENDPOINT_DELETED,
    last_error: 'the endpoint was deleted before this delivery was sent',
    next_attempt_at: null,
    finished_at: db.fn.now(),
    lease_owner: null,
    lease_until: null,
  });
}

/**
 * Deletes an endpoint (`where` names it, and may confine it to a workspace) and returns its row (`returning`),
 * undefined when there is no such live endpoint; `inTransaction` runs in the deleting transaction (the audit entry).
 * When this returns, none of its deliveries will be sent any more, by any dispatcher, even one that claimed it before:
 * 1. In one transaction the endpoint is marked deleted, which no claim (fairness.ts) or fan-out (fanout.ts) takes
 *    from then on (the update waits for fan-outs holding the row, and those after it see it deleted), and its pending
 *    deliveries no dispatcher holds are marked failed.
 * 2. The deliveries a dispatcher holds (claimed before, sent now or about to be) are waited for: until it records
 *    them or gives them back, or their lease runs out (a dispatcher never starts an attempt on an expired lease). So
 *    an attempt under way is finished before this returns, never after; this is as long as one attempt (10 s at
 *    most), or as long as a lease (60 s) when a dispatcher died holding one.
 * 3. What is still pending then (a retry scheduled by that attempt, a claim given back) is marked failed too.
 */
/**
 * The workspace's lock on queuing test deliveries (test-delivery.ts: its limits are counted under it), for the rest of
 * the transaction. Deleting an endpoint takes it too: a test or example queued at the same moment is then either
 * committed before the delete (which fails it with the rest) or finds the endpoint gone, never left pending.
 */
export async function lockTestDeliveries(trx: Knex.Transaction, workspaceId: string): Promise<void> {
  await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`test-delivery:${workspaceId}`]);
}

export async function deleteEndpointAndDeliveries<Row>(
  db: Knex,
  where: { id: string; workspace_id?: string },
  returning: readonly string[],
  inTransaction: (trx: Knex.Transaction, row: Row) => Promise<void>,
): Promise<Row | undefined> {
  const row = await db.transaction(async (trx) => {
    const endpoint = await trx('webhook_endpoints').where(where).whereRaw(liveEndpoint()).first('workspace_id');
    if (!endpoint) return undefined;
    await lockTestDeliveries(trx, endpoint.workspace_id);
    const [deleted] = await trx('webhook_endpoints')
      .where(where)
      .whereRaw(liveEndpoint())
      .update({ deleted_at: trx.fn.now() })
      .returning([...returning]);
    if (!deleted) return undefined;
    await failDeliveriesOfDeleted(trx, where.id, false);
    await inTransaction(trx, deleted as Row);
    return deleted as Row;
  });
  if (row === undefined) return undefined;
  for (;;) {
    const held = await db('deliveries')
      .where({ endpoint_id: where.id })
      .whereRaw(PENDING)
      .whereRaw('lease_until >= now()')
      .first(db.raw('1 AS held'));
    if (!held) break;
    await new Promise((resolve) => setTimeout(resolve, LEASE_POLL_MS));
  }
  await failDeliveriesOfDeleted(db, where.id, true);
  return row;
}
