import type { Knex } from 'knex';
import { InputError, isUuid } from '../input.js';
import { deliveryDetail, type DeliveryDetail } from '../queries/deliveries.js';
import { notifyDispatchers } from './fanout.js';

// Recovery for operators: look at one delivery, send a failed one again, send again everything an endpoint failed
// in a time window (after the receiver's outage is over). A delivery sent again keeps its id and body bytes, and
// its attempt count continues: its next attempt follows the retry schedule from there (one that had used all its
// retries gets one more attempt, and is failed again if that fails).

/** One delivery with its attempts, whatever its workspace (the operator's view). */
export async function showDelivery(db: Knex, id: string): Promise<DeliveryDetail> {
  if (!isUuid(id)) throw new InputError(`--id must be a UUID, got "${id}"`);
  const row = await db('deliveries').where({ id }).first('endpoint_id');
  const detail = row && (await deliveryDetail(db, { endpointId: row.endpoint_id }, id));
  if (!detail) throw new InputError(`no delivery with id ${id}`);
  const { body: _body, ...shown } = detail;
  return shown;
}

/** An endpoint that can take deliveries again: it exists and is switched on. */
async function lockActiveEndpoint(trx: Knex.Transaction, endpointId: string): Promise<void> {
  const endpoint = await trx('webhook_endpoints').where({ id: endpointId }).whereNull('deleted_at').forNoKeyUpdate().first('is_active');
  if (!endpoint) throw new InputError(`no webhook endpoint with id ${endpointId}`);
  if (!endpoint.is_active) {
    throw new InputError(`webhook endpoint ${endpointId} is switched off; switch it on first with "fleet-admin endpoint enable --id ${endpointId}" (that also sends what it held)`);
  }
}

const requeue = (now: Date) => ({ status: 'queued', next_attempt_at: now, finished_at: null, lease_owner: null, lease_until: null });

/** Queues a failed delivery again, due at `now`. */
export async function resendDelivery(db: Knex, id: string, now = new Date()): Promise<{ id: string; status: 'queued'; attempts: number }> {
  if (!isUuid(id)) throw new InputError(`--id must be a UUID, got "${id}"`);
  return db.transaction(async (trx) => {
    const found = await trx('deliveries').where({ id }).first('endpoint_id', 'status');
    if (!found) throw new InputError(`no delivery with id ${id}`);
    await lockActiveEndpoint(trx, found.endpoint_id);
    const [row] = await trx('deliveries').where({ id, status: 'failed' }).update(requeue(now)).returning(['id', 'attempts']);
    if (!row) {
      const current = await trx('deliveries').where({ id }).first('status');
      // Gone: the retention removed it meanwhile.
      throw new InputError(current ? `delivery ${id} is ${current.status}; only a failed delivery can be resent` : `no delivery with id ${id}`);
    }
    await notifyDispatchers(trx);
    return { id: row.id, status: 'queued', attempts: row.attempts };
  });
}

/** Queues again every failed delivery of the endpoint created in [since, until); returns how many. */
export async function recoverEndpoint(
  db: Knex,
  input: { endpointId: string; since: Date; until?: Date; now?: Date },
): Promise<{ endpointId: string; since: string; until: string | null; queued: number }> {
  const { endpointId, since, until, now = new Date() } = input;
  if (!isUuid(endpointId)) throw new InputError(`--id must be a UUID, got "${endpointId}"`);
  if (until && !(since < until)) throw new InputError('--until must be later than --since');
  return db.transaction(async (trx) => {
    await lockActiveEndpoint(trx, endpointId);
    const query = trx('deliveries').where({ endpoint_id: endpointId, status: 'failed' }).where('created_at', '>=', since);
    if (until) query.where('created_at', '<', until);
    const queued = await query.update(requeue(now));
    if (queued > 0) await notifyDispatchers(trx);
    return { endpointId, since: since.toISOString(), until: until?.toISOString() ?? null, queued };
  });
}
