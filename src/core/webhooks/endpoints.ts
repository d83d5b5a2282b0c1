import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { rows, WORKSPACE } from '../../queries/common.js';
import { looksLikeSecret, newSigningSecret, SECRET_SHAPED } from '../../secrets.js';
import { findWorkspace } from '../workspaces.js';
import { ConflictError, InvalidFieldError, isUuid, NotFoundError } from '../../errors.js';
import { recordAudit } from '../audit.js';
import { mustReach, workspaceFilter, type Actor } from '../actor.js';
import { subscribableEvents, TEST_EVENT } from '../../webhooks/catalogue.js';
import { refuseDestination, workspacePolicy, type DestinationPolicy } from '../../webhooks/destination-policy.js';
import { deleteEndpointAndDeliveries, liveEndpoint, switchEndpoint } from '../../webhooks/endpoint-lifecycle.js';
import { withSealingLock } from '../../webhooks/sealing.js';

/** A webhook endpoint as the API and the CLI show it: never with its signing secret. */
export interface EndpointRecord {
  id: string;
  name: string;
  url: string;
  /** Subscribed event names; empty means every event. */
  events: string[];
  isActive: boolean;
  disabledAt: string | null;
  /** Why it was switched off (with disabledAt); null while it is on. */
  disabledReason: EndpointDisabledReason | null;
  lastSuccessAt: string | null;
  consecutiveFailures: number;
  /**
   * The end of the endpoint's latest throttle (its receiver answered 429, 502, 503 or 504): nothing is sent to it
   * before; null if it was never throttled. A past time: not throttled now.
   */
  throttledUntil: string | null;
}

/** Why an endpoint was switched off (webhook_endpoints.disabled_reason; the documents' EndpointDisabledReason). */
export type EndpointDisabledReason = 'failures' | 'gone' | 'manual';

/** What creating an endpoint returns: the record, and the only time the signing secret is shown. */
export interface CreatedEndpoint extends EndpointRecord {
  secret: string;
}

interface EndpointRow {
  id: string;
  name: string;
  url: string;
  events: string[];
  is_active: boolean;
  disabled_at: Date | null;
  disabled_reason: EndpointDisabledReason | null;
  last_success_at: Date | null;
  consecutive_failures: number;
  throttled_until: Date | null;
}

const RECORD_COLUMNS = [
  'id',
  'name',
  'url',
  'events',
  'is_active',
  'disabled_at',
  'disabled_reason',
  'last_success_at',
  'consecutive_failures',
  'throttled_until',
];

/** An endpoint's row as every client shows it (the public API, the admin API, the CLI): never its secret. */
export function toEndpointView(row: EndpointRow): EndpointRecord {
  return {
    id: row.id,
    name: row.name,
    url: row.url,
    events: row.events,
    isActive: row.is_active,
    disabledAt: row.disabled_at?.toISOString() ?? null,
    disabledReason: row.disabled_reason,
    lastSuccessAt: row.last_success_at?.toISOString() ?? null,
    consecutiveFailures: row.consecutive_failures,
    throttledUntil: row.throttled_until?.toISOString() ?? null,
  };
}

/** Which endpoints a call reaches: one workspace's (a path, a confined actor), or every workspace's (the operator). */
interface EndpointScope {
  workspaceId: string | undefined;
}

function checkId(id: string): void {
  if (!isUuid(id)) throw new InvalidFieldError('id', `must be a UUID, got "${id}"`);
}

const notFound = (id: string) => new NotFoundError(`no webhook endpoint with id ${id}`);

/** The live endpoint's row (and its workspace); with 'lock', locked against other changes until the transaction ends. */
async function findEndpoint(
  db: Knex,
  id: string,
  scope: EndpointScope,
  lock?: 'lock',
): Promise<EndpointRow & { workspace_id: string }> {
  const row = await db('webhook_endpoints')
    .where({ id, ...(scope.workspaceId !== undefined ? { workspace_id: scope.workspaceId } : {}) })
    .whereRaw(liveEndpoint())
    .modify((q) => (lock ? q.forNoKeyUpdate() : q))
    .first([...RECORD_COLUMNS, 'workspace_id']);
  if (!row) throw notFound(id);
  return row;
}

/**
 * The destination a URL names, if it may be one: an absolute http(s) URL of at most 2,048 characters (the document's
 * bound), written as the database requires, and allowed by the destination policy (else 400 naming `url` and the
 * class of the destination; the address it resolved to and the settings that would allow it are the operator's
 * detail, logged and shown by the CLI only). `policy` is the workspace's (workspacePolicy).
 */
async function checkDestination(url: string, policy: DestinationPolicy): Promise<URL> {
  if (url.length > 2048) throw new InvalidFieldError('url', 'must be at most 2048 characters');
  // every API key of the workspace reads it (GET /v1/webhooks): a credential belongs in the signature, not the URL
  if (looksLikeSecret(url)) throw new InvalidFieldError('url', SECRET_SHAPED);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new InvalidFieldError('url', `must be an absolute http or https URL, got "${url}"`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new InvalidFieldError('url', `must use http or https, got "${url}"`);
  }
  // Stored as given, so it must read as the database requires: a lower-case scheme, no surrounding spaces.
  if (!/^https?:\/\/\S+$/.test(url))
    throw new InvalidFieldError('url', `must start with http:// or https:// and contain no spaces, got "${url}"`);
  const refused = await refuseDestination(parsed, policy);
  if (refused) throw new InvalidFieldError('url', `refused: ${refused.shown}`, `refused: ${refused.full}`);
  return parsed;
}

function checkEvents(events: string[]): string[] {
  const known = new Set(subscribableEvents());
  for (const event of events) {
    if (event === TEST_EVENT) {
      throw new InvalidFieldError(
        'events',
        `must not name ${TEST_EVENT}, which cannot be subscribed to: it is sent only by the test operation (POST /v1/webhooks/{id}/test), to the endpoint it names, whatever that endpoint's events`,
      );
    }
  }
  const unknown = [...new Set(events.filter((event) => !known.has(event)))];
  if (unknown.length > 0) {
    throw new InvalidFieldError(
      'events',
      `must name events of the webhooks section of openapi/openapi.yaml, not the unknown event${unknown.length > 1 ? 's' : ''} ${unknown.map((e) => `"${e}"`).join(', ')}`,
    );
  }
  return [...new Set(events)];
}

function checkName(name: string): string {
  if (name.length < 1 || name.length > 200) throw new InvalidFieldError('name', 'must be 1 to 200 characters');
  // GET /v1/webhooks and the audit trail show it: text a secret scanner would take for a signing secret is refused.
  if (looksLikeSecret(name)) throw new InvalidFieldError('name', SECRET_SHAPED);
  // eslint-disable-next-line no-control-regex -- control characters are what it looks for
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) throw new InvalidFieldError('name', 'must hold no control characters');
  return name;
}

/**
 * Refuses a URL another live endpoint of the workspace already has (compared as parsed, so `https://Hooks.example`
 * and `https://hooks.example/` are the same), unless `allowed`. A transaction-scoped advisory lock per workspace
 * serialises the check with the write, so two concurrent requests cannot both register the URL.
 */
async function refuseDuplicateUrl(
  trx: Knex.Transaction,
  workspaceId: string,
  url: URL,
  options: { allowed?: boolean; except?: string },
): Promise<void> {
  if (options.allowed) return;
  await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`webhook_endpoints.url:${workspaceId}`]);
  const others = await trx('webhook_endpoints')
    .where({ workspace_id: workspaceId })
    .whereRaw(liveEndpoint())
    .modify((q) => (options.except ? q.whereNot({ id: options.except }) : q))
    .select('id', 'url');
  const same = others.find((other: { url: string }) => URL.canParse(other.url) && new URL(other.url).href === url.href);
  if (same) {
    throw new ConflictError(
      (name) =>
        `the workspace already has an endpoint with this URL (${same.id}); send ${name('allowDuplicateUrl')} to register it again`,
      'url',
    );
  }
}

/** Creates an endpoint of the workspace; `policy` is the service's destination policy (Config's). */
export async function createEndpoint(
  db: Knex,
  actor: Actor,
  input: {
    workspaceId: string;
    url: string;
    name?: string;
    events?: string[];
    allowDuplicateUrl?: boolean;
    policy: DestinationPolicy;
  },
): Promise<CreatedEndpoint> {
  mustReach(actor, input.workspaceId);
  const { policy } = input;
  // The workspace first: its own ranges are part of the policy its URL is checked by.
  const workspace = await findWorkspace(db, { id: input.workspaceId });
  const url = await checkDestination(input.url, workspacePolicy(policy, workspace.webhookAllowedCidrs));
  const events = checkEvents(input.events ?? []);
  const name = checkName(input.name ?? url.host);
  // The id is made here: the sealed secret is bound to it.
  const id = crypto.randomUUID();
  const secret = newSigningSecret();
  const row = await withSealingLock(db, 'shared', async (trx, sealer) => {
    await refuseDuplicateUrl(trx, workspace.id, url, { allowed: input.allowDuplicateUrl });
    const [inserted] = await trx('webhook_endpoints')
      .insert({ id, workspace_id: workspace.id, name, url: input.url, events, ...sealer.columns(id, secret) })
      .returning(RECORD_COLUMNS);
    await recordAudit(trx, actor.audit, {
      action: 'endpoint.create',
      workspaceId: workspace.id,
      target: { type: 'endpoint', id },
      changes: { name, url: input.url, events },
    });
    return inserted as EndpointRow;
  });
  return { ...toEndpointView(row), secret };
}

/** One live endpoint of the workspace (or of any the actor reaches: `'every'`). */
export async function getEndpoint(
  db: Knex,
  actor: Actor,
  input: { endpointId: string; workspaceId: string | 'every' },
): Promise<EndpointRecord> {
  const id = input.endpointId;
  const scope = { workspaceId: workspaceFilter(actor, input.workspaceId) };
  checkId(id);
  return toEndpointView(await findEndpoint(db, id, scope));
}

/**
 * Changes an endpoint's url, name or events (those given; the others stay). A new URL meets the same checks as at
 * creation (the destination policy, the duplicate-URL rule). Audited as `endpoint.update` with {from, to} per field
 * that changed (a field sent with its current value is no change).
 */
export async function updateEndpoint(
  db: Knex,
  actor: Actor,
  input: {
    endpointId: string;
    workspaceId: string | 'every';
    changes: { url?: string; name?: string; events?: string[]; allowDuplicateUrl?: boolean };
    policy: DestinationPolicy;
  },
): Promise<EndpointRecord> {
  const { endpointId: id, changes, policy } = input;
  const scope = { workspaceId: workspaceFilter(actor, input.workspaceId) };
  checkId(id);
  // The endpoint first (another workspace's, or none, is not found whatever the URL), then the URL by its workspace's
  // policy, outside the transaction: a name's look-up must not hold the row's lock.
  const found = await findEndpoint(db, id, scope);
  const url =
    changes.url === undefined
      ? undefined
      : await checkDestination(
          changes.url,
          workspacePolicy(policy, (await findWorkspace(db, { id: found.workspace_id })).webhookAllowedCidrs),
        );
  const events = changes.events === undefined ? undefined : checkEvents(changes.events);
  if (changes.name !== undefined) checkName(changes.name);
  return db.transaction(async (trx) => {
    const before = await findEndpoint(trx, id, scope, 'lock');
    if (url && changes.url !== before.url)
      await refuseDuplicateUrl(trx, before.workspace_id, url, { allowed: changes.allowDuplicateUrl, except: id });
    const patch: Partial<Pick<EndpointRow, 'url' | 'name' | 'events'>> = {};
    if (changes.url !== undefined && changes.url !== before.url) patch.url = changes.url;
    if (changes.name !== undefined && changes.name !== before.name) patch.name = changes.name;
    if (events !== undefined && !sameEvents(events, before.events)) patch.events = events;
    if (Object.keys(patch).length === 0) return toEndpointView(before);
    const [row] = await trx('webhook_endpoints').where({ id }).update(patch).returning(RECORD_COLUMNS);
    const changed = Object.fromEntries(
      Object.entries(patch).map(([field, to]) => [field, { from: before[field as keyof typeof patch], to }]),
    );
    await recordAudit(trx, actor.audit, {
      action: 'endpoint.update',
      workspaceId: before.workspace_id,
      target: { type: 'endpoint', id },
      changes: changed,
    });
    return toEndpointView(row);
  });
}

const sameEvents = (a: string[], b: string[]) => a.length === b.length && a.every((event) => b.includes(event));

/**
 * Deletes an endpoint: it is hidden from every list and never sent to again; its pending deliveries are marked
 * failed (kind `endpoint_deleted`), and none is sent after this returns (deleteEndpointAndDeliveries). Its delivery
 * log stays readable until retention removes it. Audited as `endpoint.delete`.
 */
export async function deleteEndpoint(
  db: Knex,
  actor: Actor,
  input: { endpointId: string; workspaceId: string | 'every' },
): Promise<{ id: string }> {
  const id = input.endpointId;
  const scope = { workspaceId: workspaceFilter(actor, input.workspaceId) };
  checkId(id);
  const deleted = await deleteEndpointAndDeliveries<{ id: string; workspace_id: string; name: string; url: string }>(
    db,
    { id, ...(scope.workspaceId !== undefined ? { workspace_id: scope.workspaceId } : {}) },
    ['id', 'workspace_id', 'name', 'url'],
    async (trx, row) => {
      await recordAudit(trx, actor.audit, {
        action: 'endpoint.delete',
        workspaceId: row.workspace_id,
        target: { type: 'endpoint', id },
        changes: { name: row.name, url: row.url },
      });
    },
  );
  if (!deleted) throw notFound(id);
  return { id };
}

/**
 * Switches an endpoint on or off: switching on sends what it held (what was held longer than 7 days is marked failed),
 * switching off holds its pending deliveries (switchEndpoint in endpoint-lifecycle.ts).
 */
export async function setEndpointActive(
  db: Knex,
  actor: Actor,
  input: { endpointId: string; workspaceId: string | 'every'; active: boolean; now: Date },
): Promise<EndpointRecord> {
  const { endpointId: id, active, now } = input;
  const scope = { workspaceId: workspaceFilter(actor, input.workspaceId) };
  checkId(id);
  return db.transaction(async (trx) => {
    await findEndpoint(trx, id, scope, 'lock');
    const row = await switchEndpoint<EndpointRow & { workspace_id: string }>(trx, id, active, now, [
      ...RECORD_COLUMNS,
      'workspace_id',
    ]);
    if (!row) throw notFound(id);
    const record = toEndpointView(row);
    await recordAudit(trx, actor.audit, {
      action: active ? 'endpoint.enable' : 'endpoint.disable',
      workspaceId: row.workspace_id,
      target: { type: 'endpoint', id },
      changes: { isActive: active },
    });
    return record;
  });
}

/**
 * The workspace's endpoints, oldest first, on one kept plan per connection (WORKSPACE; built by knex, the statement
 * was planned on every request: 0.2 to 0.4 ms, against 0.07 ms to run it, on the large bench set).
 */
const LIST_ENDPOINTS = `SELECT ${RECORD_COLUMNS.join(', ')} FROM webhook_endpoints
  WHERE workspace_id = ${WORKSPACE} AND ${liveEndpoint()} ORDER BY created_at, id`;

/** The workspace's endpoints: a read-only look-up (the public API's list, for the key's own workspace). */
export async function workspaceEndpoints(db: Knex, workspaceId: string): Promise<EndpointRecord[]> {
  return (await rows<EndpointRow>(db, LIST_ENDPOINTS, { ws: workspaceId }, { prepared: true })).map(toEndpointView);
}

/** The workspace's endpoints, oldest first. */
export async function listEndpoints(db: Knex, actor: Actor, input: { workspaceId: string }): Promise<EndpointRecord[]> {
  mustReach(actor, input.workspaceId);
  return workspaceEndpoints(db, input.workspaceId);
}
