import type { Knex } from 'knex';
import { ConflictError, InputError, InvalidFieldError, isUuid, NotFoundError } from '../../errors.js';
import { recordAudit } from '../audit.js';
import { workspaceFilter, type Actor } from '../actor.js';
import { notifyDispatchers } from '../../webhooks/fanout.js';
import { SWITCH_ON_FIRST } from '../../webhooks/endpoint-lifecycle.js';

// Recovery for operators, through the CLI and the admin API alike: attempt a delivery now, send a finished one again,
// send again everything an endpoint failed in a time window (after the receiver's outage is over). A delivery sent
// again keeps its id and body bytes, and its attempt count continues: its next attempt follows the retry schedule
// from there (one that had used all its retries gets one more attempt, and is failed again if that fails). The admin
// API passes the token's workspace (`workspaceId`): another workspace's delivery or endpoint is not found.

/**
 * An endpoint that can take deliveries again: it exists (in `workspaceId`, or in any workspace for undefined: the
 * endpoint of a delivery already found within reach) and is switched on.
 */
async function lockActiveEndpoint(
  trx: Knex.Transaction,
  endpointId: string,
  workspaceId: string | undefined,
): Promise<{ workspaceId: string }> {
  // (never the platform's operational endpoints, workspace_id NULL: operational-endpoints.ts manages them)
  const query = trx('webhook_endpoints').where({ id: endpointId }).whereNull('deleted_at').whereNotNull('workspace_id');
  if (workspaceId !== undefined) query.where({ workspace_id: workspaceId });
  const endpoint = await query.forNoKeyUpdate().first('is_active', 'workspace_id');
  if (!endpoint) throw new NotFoundError(`no webhook endpoint with id ${endpointId}`);
  if (!endpoint.is_active)
    throw new ConflictError(
      `webhook endpoint ${endpointId} is switched off; ${SWITCH_ON_FIRST(endpointId)}`,
      'endpointId',
    );
  return { workspaceId: endpoint.workspace_id };
}

const requeue = (now: Date) => ({
  status: 'queued',
  next_attempt_at: now,
  finished_at: null,
  lease_owner: null,
  lease_until: null,
});

export interface RetriedDelivery {
  id: string;
  endpointId: string;
  /** What it was: queued or retrying (attempted now), failed or accepted (sent again), as the audit entry says. */
  previousStatus: 'queued' | 'retrying' | 'failed' | 'accepted';
  status: 'queued' | 'retrying';
  attempts: number;
  nextAttemptAt: string;
}

/**
 * Attempts a delivery now. Queued or retrying: its next attempt is set to `now`, so a dispatcher takes it at once (a
 * test delivery pending behind the 5-per-endpoint limit included: it stops counting once it is sent). Failed or
 * accepted: queued again, due at `now`, with the same id and bytes, its attempt count continuing. Held (its endpoint
 * is switched off): refused, naming the switch; so is a finished delivery of a switched-off endpoint. Audited as
 * `delivery.retry`.
 */
export async function retryDelivery(
  db: Knex,
  actor: Actor,
  input: { deliveryId: string; workspaceId: string | 'every'; now: Date },
): Promise<RetriedDelivery> {
  const { deliveryId: id, now } = input;
  const workspaceId = workspaceFilter(actor, input.workspaceId);
  if (!isUuid(id)) throw new InvalidFieldError('id', `must be a UUID, got "${id}"`);
  return db.transaction(async (trx) => {
    // (an operational delivery, workspace_id NULL, is no workspace's: not found)
    const query = trx('deliveries').where({ id }).whereNotNull('workspace_id');
    if (workspaceId !== undefined) query.where({ workspace_id: workspaceId });
    const found = await query.first('endpoint_id', 'workspace_id', 'status');
    if (!found) throw new NotFoundError(`no delivery with id ${id}`);
    if (found.status === 'held')
      throw new ConflictError(
        `delivery ${id} is held: its webhook endpoint ${found.endpoint_id} is switched off; ${SWITCH_ON_FIRST(found.endpoint_id)}`,
        'status',
      );
    // A pending delivery of a switched-off endpoint is a test delivery (any other is held): it is sent all the same.
    const pending = found.status === 'queued' || found.status === 'retrying';
    if (!pending) await lockActiveEndpoint(trx, found.endpoint_id, undefined);
    // The status read is checked again by the update itself: the dispatcher may have recorded an attempt meanwhile.
    const [row] = await trx('deliveries')
      .where({ id })
      .whereIn('status', pending ? ['queued', 'retrying'] : ['failed', 'accepted'])
      .update(pending ? { next_attempt_at: now } : requeue(now))
      .returning(['id', 'status', 'attempts', 'next_attempt_at']);
    if (!row) throw new ConflictError(`delivery ${id} changed while it was being retried; try again`, 'status');
    await notifyDispatchers(trx);
    await recordAudit(trx, actor.audit, {
      action: 'delivery.retry',
      workspaceId: found.workspace_id,
      target: { type: 'delivery', id },
      changes: { status: { from: found.status, to: row.status }, nextAttemptAt: now.toISOString() },
    });
    return {
      id,
      endpointId: found.endpoint_id,
      previousStatus: found.status,
      status: row.status,
      attempts: row.attempts,
      nextAttemptAt: row.next_attempt_at.toISOString(),
    };
  });
}

/**
 * Queues a failed delivery again, due at `now` (`fleet-admin deliveries resend`: failed ones only), within the
 * actor's reach. It writes no audit entry (it never did; `deliveries retry` is the audited way).
 */
export async function resendDelivery(
  db: Knex,
  actor: Actor,
  input: { deliveryId: string; workspaceId: string | 'every'; now: Date },
): Promise<{ id: string; status: 'queued'; attempts: number }> {
  const { deliveryId: id, now } = input;
  const workspaceId = workspaceFilter(actor, input.workspaceId);
  if (!isUuid(id)) throw new InvalidFieldError('id', `must be a UUID, got "${id}"`);
  return db.transaction(async (trx) => {
    const found = await trx('deliveries')
      .where({ id, ...(workspaceId !== undefined ? { workspace_id: workspaceId } : {}) })
      .whereNotNull('workspace_id')
      .first('endpoint_id', 'status');
    if (!found) throw new NotFoundError(`no delivery with id ${id}`);
    await lockActiveEndpoint(trx, found.endpoint_id, undefined);
    const [row] = await trx('deliveries')
      .where({ id, status: 'failed' })
      .update(requeue(now))
      .returning(['id', 'attempts']);
    if (!row) {
      const current = await trx('deliveries').where({ id }).first('status');
      // Gone: the retention removed it meanwhile.
      throw new InputError(
        current
          ? `delivery ${id} is ${current.status}; only a failed delivery can be resent`
          : `no delivery with id ${id}`,
      );
    }
    await notifyDispatchers(trx);
    return { id: row.id, status: 'queued', attempts: row.attempts };
  });
}

/** Queues again every failed delivery of the endpoint created in [since, until); returns how many. Audited as `endpoint.recover`. */
export async function recoverEndpoint(
  db: Knex,
  actor: Actor,
  input: { endpointId: string; workspaceId: string | 'every'; since: Date; until?: Date; now: Date },
): Promise<{ endpointId: string; since: string; until: string | null; queued: number }> {
  const { endpointId, since, until, now } = input;
  if (!isUuid(endpointId)) throw new InvalidFieldError('id', `must be a UUID, got "${endpointId}"`);
  if (until && !(since < until)) throw new InvalidFieldError('until', (name) => `must be later than ${name('since')}`);
  return db.transaction(async (trx) => {
    const { workspaceId } = await lockActiveEndpoint(trx, endpointId, workspaceFilter(actor, input.workspaceId));
    const query = trx('deliveries')
      .where({ endpoint_id: endpointId, status: 'failed' })
      .where('created_at', '>=', since);
    if (until) query.where('created_at', '<', until);
    const queued = await query.update(requeue(now));
    if (queued > 0) await notifyDispatchers(trx);
    const result = { endpointId, since: since.toISOString(), until: until?.toISOString() ?? null, queued };
    await recordAudit(trx, actor.audit, {
      action: 'endpoint.recover',
      workspaceId,
      target: { type: 'endpoint', id: endpointId },
      changes: { since: result.since, until: result.until, queued },
    });
    return result;
  });
}
