import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { newSigningSecret } from '../../secrets.js';
import { InvalidFieldError, isUuid, NotFoundError } from '../../errors.js';
import { recordAudit } from '../audit.js';
import type { OperatorActor } from '../actor.js';
import type { DestinationPolicy } from '../../webhooks/destination-policy.js';
import { deleteEndpointAndDeliveries, liveEndpoint, switchEndpoint } from '../../webhooks/endpoint-lifecycle.js';
import { OPERATIONAL_EVENTS } from '../../webhooks/platform-events.js';
import { withSealingLock } from '../../webhooks/sealing.js';
import {
  checkDestination,
  checkName,
  RECORD_COLUMNS,
  toEndpointView,
  type CreatedEndpoint,
  type EndpointRecord,
  type EndpointRow,
} from './endpoints.js';
import { listDeliveries, showDelivery, type OperatorDeliveryDetail, type OperatorDeliveryRow } from './deliveries.js';
import { DEFAULT_OVERLAP_HOURS, MAX_OVERLAP_HOURS, type RotatedSecret } from './signing-secrets.js';

// Operational endpoints: the platform's own receivers of operational events (endpoint.disabled, endpoint.enabled,
// delivery.exhausted: src/webhooks/platform-events.ts), across every workspace. They are webhook_endpoints rows without
// a workspace (workspace_id NULL), which no workspace's query ever reaches; only the operator (fleet-admin, an admin
// token for every workspace) manages them, so every action takes an OperatorActor. They are sent to, retried, switched
// off after 20 failures and logged as any endpoint; the URL meets the service's destination policy (no workspace's own
// ranges apply). Audited as `operational_endpoint.<verb>`, with no workspace.

const notFound = (id: string) => new NotFoundError(`no operational endpoint with id ${id}`);

function checkId(id: string): void {
  if (!isUuid(id)) throw new InvalidFieldError('id', `must be a UUID, got "${id}"`);
}

function checkOperationalEvents(events: string[]): string[] {
  const known = new Set<string>(OPERATIONAL_EVENTS);
  const unknown = [...new Set(events.filter((event) => !known.has(event)))];
  if (unknown.length > 0) {
    throw new InvalidFieldError(
      'events',
      `must name operational events (${OPERATIONAL_EVENTS.join(', ')}: the webhooks section of openapi/admin.yaml), not ${unknown.map((e) => `"${e}"`).join(', ')}`,
    );
  }
  return [...new Set(events)];
}

/** The live operational endpoint's row; with 'lock', locked against other changes until the transaction ends. */
async function findOperational(db: Knex, id: string, lock?: 'lock'): Promise<EndpointRow> {
  checkId(id);
  const row = await db('webhook_endpoints')
    .where({ id })
    .whereNull('workspace_id')
    .whereRaw(liveEndpoint())
    .modify((q) => (lock ? q.forNoKeyUpdate() : q))
    .first(RECORD_COLUMNS);
  if (!row) throw notFound(id);
  return row;
}

/** Registers an operational endpoint; its signing secret is shown this once. */
export async function createOperationalEndpoint(
  db: Knex,
  actor: OperatorActor,
  input: { url: string; name?: string; events?: string[]; policy: DestinationPolicy },
): Promise<CreatedEndpoint> {
  const url = await checkDestination(input.url, input.policy);
  const events = checkOperationalEvents(input.events ?? []);
  const name = checkName(input.name ?? url.host);
  // The id is made here: the sealed secret is bound to it.
  const id = crypto.randomUUID();
  const secret = newSigningSecret();
  const row = await withSealingLock(db, 'shared', async (trx, sealer) => {
    const [inserted] = await trx('webhook_endpoints')
      .insert({ id, workspace_id: null, name, url: input.url, events, ...sealer.columns(id, secret) })
      .returning(RECORD_COLUMNS);
    await recordAudit(trx, actor.audit, {
      action: 'operational_endpoint.create',
      workspaceId: null,
      target: { type: 'operational_endpoint', id },
      changes: { name, url: input.url, events },
    });
    return inserted as EndpointRow;
  });
  return { ...toEndpointView(row), secret };
}

/** Every live operational endpoint, oldest first. */
export async function listOperationalEndpoints(db: Knex, _actor: OperatorActor): Promise<EndpointRecord[]> {
  const rows = await db('webhook_endpoints')
    .whereNull('workspace_id')
    .whereRaw(liveEndpoint())
    .orderBy([{ column: 'created_at' }, { column: 'id' }])
    .select(RECORD_COLUMNS);
  return rows.map(toEndpointView);
}

export async function getOperationalEndpoint(
  db: Knex,
  _actor: OperatorActor,
  input: { endpointId: string },
): Promise<EndpointRecord> {
  return toEndpointView(await findOperational(db, input.endpointId));
}

/** Changes an operational endpoint's url, name or events (those given); audited with {from, to} per changed field. */
export async function updateOperationalEndpoint(
  db: Knex,
  actor: OperatorActor,
  input: { endpointId: string; changes: { url?: string; name?: string; events?: string[] }; policy: DestinationPolicy },
): Promise<EndpointRecord> {
  const { endpointId: id, changes } = input;
  await findOperational(db, id);
  if (changes.url !== undefined) await checkDestination(changes.url, input.policy);
  const events = changes.events === undefined ? undefined : checkOperationalEvents(changes.events);
  if (changes.name !== undefined) checkName(changes.name);
  return db.transaction(async (trx) => {
    const before = await findOperational(trx, id, 'lock');
    const patch: Partial<Pick<EndpointRow, 'url' | 'name' | 'events'>> = {};
    if (changes.url !== undefined && changes.url !== before.url) patch.url = changes.url;
    if (changes.name !== undefined && changes.name !== before.name) patch.name = changes.name;
    if (events !== undefined && events.join('\n') !== before.events.join('\n')) patch.events = events;
    if (Object.keys(patch).length === 0) return toEndpointView(before);
    const [row] = await trx('webhook_endpoints').where({ id }).update(patch).returning(RECORD_COLUMNS);
    await recordAudit(trx, actor.audit, {
      action: 'operational_endpoint.update',
      workspaceId: null,
      target: { type: 'operational_endpoint', id },
      changes: Object.fromEntries(
        Object.entries(patch).map(([field, to]) => [field, { from: before[field as keyof typeof patch], to }]),
      ),
    });
    return toEndpointView(row);
  });
}

/** Deletes an operational endpoint: never sent to again, its pending deliveries failed (deleteEndpointAndDeliveries). */
export async function deleteOperationalEndpoint(
  db: Knex,
  actor: OperatorActor,
  input: { endpointId: string },
): Promise<{ id: string }> {
  const id = input.endpointId;
  await findOperational(db, id);
  const deleted = await deleteEndpointAndDeliveries<{ id: string; name: string; url: string }>(
    db,
    { id, workspace_id: null as unknown as string },
    ['id', 'name', 'url'],
    async (trx, row) => {
      await recordAudit(trx, actor.audit, {
        action: 'operational_endpoint.delete',
        workspaceId: null,
        target: { type: 'operational_endpoint', id },
        changes: { name: row.name, url: row.url },
      });
    },
  );
  if (!deleted) throw notFound(id);
  return { id };
}

/** Switches an operational endpoint on (sending what it held) or off (holding what is pending), as any endpoint. */
export async function setOperationalEndpointActive(
  db: Knex,
  actor: OperatorActor,
  input: { endpointId: string; active: boolean; now: Date },
): Promise<EndpointRecord> {
  const { endpointId: id, active, now } = input;
  return db.transaction(async (trx) => {
    await findOperational(trx, id, 'lock');
    const row = await switchEndpoint<EndpointRow>(trx, id, active, now, RECORD_COLUMNS);
    if (!row) throw notFound(id);
    await recordAudit(trx, actor.audit, {
      action: active ? 'operational_endpoint.enable' : 'operational_endpoint.disable',
      workspaceId: null,
      target: { type: 'operational_endpoint', id },
      changes: { isActive: active },
    });
    return toEndpointView(row);
  });
}

/** Gives an operational endpoint a new signing secret, shown this once; the old one signs too for `overlapHours`. */
export async function rotateOperationalSecret(
  db: Knex,
  actor: OperatorActor,
  input: { endpointId: string; overlapHours?: number; now: Date },
): Promise<RotatedSecret> {
  const { endpointId: id, now } = input;
  checkId(id);
  const overlapHours = input.overlapHours ?? DEFAULT_OVERLAP_HOURS;
  if (!Number.isInteger(overlapHours) || overlapHours < 0 || overlapHours > MAX_OVERLAP_HOURS) {
    throw new InvalidFieldError(
      'overlapHours',
      `must be a whole number of hours from 0 to ${MAX_OVERLAP_HOURS}, got ${overlapHours}`,
    );
  }
  const secret = newSigningSecret();
  return withSealingLock(db, 'shared', async (trx, sealer) => {
    await findOperational(trx, id, 'lock');
    const expiresAt = overlapHours > 0 ? new Date(now.getTime() + overlapHours * 3_600_000) : null;
    const { secret_key_id: keyId, secret_sealed: sealed } = sealer.columns(id, secret);
    // (the move of the current secret to previous, as rotateSigningSecret does it: the admin role never reads one)
    await trx.raw('SELECT rotate_endpoint_secret(?::uuid, NULL, ?, ?, ?::timestamptz)', [id, keyId, sealed, expiresAt]);
    const previousSecretExpiresAt = expiresAt?.toISOString() ?? null;
    await recordAudit(trx, actor.audit, {
      action: 'operational_endpoint.rotate_secret',
      workspaceId: null,
      target: { type: 'operational_endpoint', id },
      changes: { overlapHours, previousSecretExpiresAt },
    });
    return { id, secret, previousSecretExpiresAt };
  });
}

/** The operational endpoint's deliveries, newest first (at most `limit`, default 50): its delivery log. */
export async function listOperationalDeliveries(
  db: Knex,
  actor: OperatorActor,
  input: { endpointId: string; limit?: number },
): Promise<{ rows: OperatorDeliveryRow[] }> {
  await findOperational(db, input.endpointId);
  const limit = input.limit ?? 50;
  return listDeliveries(db, actor, { endpointId: input.endpointId, workspaceId: 'every', limit, owner: 'platform' });
}

/** One delivery of the operational endpoint, with its payload and attempts; another endpoint's is not found. */
export async function showOperationalDelivery(
  db: Knex,
  actor: OperatorActor,
  input: { endpointId: string; deliveryId: string },
): Promise<OperatorDeliveryDetail> {
  await findOperational(db, input.endpointId);
  const detail = await showDelivery(db, actor, {
    deliveryId: input.deliveryId,
    workspaceId: 'every',
    owner: 'platform',
  });
  if (detail.endpointId !== input.endpointId) throw new NotFoundError(`no delivery with id ${input.deliveryId}`);
  return detail;
}
