import type { IncomingMessage } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import type { Logger } from 'pino';
import { allowLongBody } from '../api/http-limits.js';
import { ImportError } from '../core/import/import-document.js';
import type { Knex } from 'knex';
import type { AuditContext } from '../core/audit.js';
import type { Actor } from '../core/actor.js';
import { listAuditEntries } from '../core/audit.js';
import type { Cursors } from '../api/cursors.js';
import { apiError } from '../api/errors.js';
import type { AdminTokenHolder } from '../core/admin-tokens.js';
import {
  createApiKey,
  createWorkspace,
  findWorkspace,
  listApiKeys,
  listWorkspaces,
  platformOnlySetting,
  revokeApiKey,
  updateWorkspace,
} from '../core/workspaces.js';
import { NotFoundError, instant } from '../core/errors.js';
import { idempotent, type Answer } from './idempotency.js';
import type { ApiKeyCreate, WorkspaceCreate, WorkspaceUpdate } from '../../generated/admin-strict/types.gen.js';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listEndpoints,
  setEndpointActive,
  updateEndpoint,
} from '../core/webhooks/endpoints.js';
import { rotateSigningSecret } from '../core/webhooks/signing-secrets.js';
import type { EndpointCreate, EndpointUpdate, SecretRotation } from '../../generated/admin-strict/types.gen.js';
import type {
  ExampleEventRequest,
  PublishEventRequest,
  RecoverRequest,
} from '../../generated/admin-strict/types.gen.js';
import type { CursorBinding } from '../api/cursors.js';
import type { DeliveryPosition, WorkspaceDeliveryFilters } from '../queries/deliveries.js';
import { listWorkspaceDeliveries, showDelivery } from '../core/webhooks/deliveries.js';
import { recoverEndpoint, retryDelivery } from '../core/webhooks/recovery.js';
import { listEventTypes, sendExampleEvent } from '../core/webhooks/events.js';
import { publishEvent } from '../core/webhooks/publish.js';
import { createPortalLink, endPortalSessions, listPortalSessions, portalLinkUrl } from '../core/portal-sessions.js';
import { endpointAttemptStats } from '../core/webhooks/deliveries.js';
import type { PortalSessionCreate } from '../../generated/admin-strict/types.gen.js';
import { writeRecords, type RecordMetrics } from '../core/import/records.js';
import { cancelImport, getImport, startImport } from '../core/import/jobs.js';

// The admin API's operations, by operationId: each parses what the document already validated, keeps the token to
// its reach, calls the core function (src/core/workspaces.ts, src/core/audit.ts) with the token as the actor, and answers.
// No rule of the product lives here: the CLI calls the same functions.

/**
 * Who calls: an admin token, or a settings-screen session (`screen`), which acts as a token confined to its workspace
 * does (neither changes what only the platform may: src/core/workspaces.ts's PLATFORM_ONLY_SETTINGS).
 */
export type AdminCaller = AdminTokenHolder & { screen?: true };

export interface AdminOperationContext {
  /** Connections as the admin API's role. */
  db: Knex;
  /**
   * Connections as the ingest role, for the platform's records (batch writes and import jobs), which the admin role may
   * neither read nor write; absent where those operations are out of reach (the settings screen).
   */
  ingestDb?: Knex;
  caller: AdminCaller;
  /** The token as the actor of every change, with the request's id. */
  audit: AuditContext;
  now: Date;
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
  idempotencyKey: string | undefined;
  path: string;
  cursors: Cursors;
  /** The public listener's base URL, where the settings screen's links point (FRS_PUBLIC_URL). */
  portalUrl?: string;
  /** The request itself, for an operation that streams its body (createImport), and its content type. */
  request?: Readable;
  contentType?: string;
  metrics?: RecordMetrics;
  /** The request's logger (an import job's unexpected failure is logged there). */
  logger?: Logger;
}

type Handler = (c: AdminOperationContext) => Promise<Answer>;

/** The ingest role's connections (writeRecords and import jobs). */
function ingestOf(c: AdminOperationContext): Knex {
  if (!c.ingestDb)
    throw new Error("the platform's records are written through the ingest pool, which this client was not given");
  return c.ingestDb;
}

/**
 * The caller as the core's actor: an all-workspaces token is the operator; a token confined to a workspace, and the
 * settings screen's session, act on that workspace only.
 */
function actorOf(c: AdminOperationContext): Actor {
  return c.caller.workspaceId === null
    ? { kind: 'operator', audit: c.audit }
    : { kind: 'workspace', workspaceId: c.caller.workspaceId, audit: c.audit };
}

/** The workspace of the path, within the token's reach: another workspace is not found, as if it did not exist. */
async function reachable(c: AdminOperationContext) {
  const id = c.params.workspaceId;
  if (c.caller.workspaceId !== null && c.caller.workspaceId !== id)
    throw new NotFoundError(`No workspace with id ${id}.`);
  return findWorkspace(c.db, { id });
}

/**
 * A workspace as the caller may see it. Its opened private ranges are the operator's setting (they describe the
 * network): shown to an all-workspaces token only, never to a workspace's own token or its settings screen.
 */
const workspaceBody =
  (caller: AdminCaller) =>
  ({ id, slug, status, timezone, remindersAhead, webhookAllowedCidrs }: Awaited<ReturnType<typeof findWorkspace>>) => ({
    id,
    slug,
    status,
    timezone,
    remindersAhead,
    ...(caller.workspaceId === null && { webhookAllowedCidrs }),
  });

export const adminOperations: Record<string, Handler> = {
  async listWorkspaces(c) {
    const slug = c.query.slug as string | undefined;
    const { rows } = await listWorkspaces(c.db, {
      slug,
      ...(c.caller.workspaceId !== null ? { id: c.caller.workspaceId } : {}),
    });
    return { status: 200, body: { rows: rows.map(workspaceBody(c.caller)) } };
  },

  async createWorkspace(c) {
    if (c.caller.workspaceId !== null) {
      throw apiError('forbidden', 'This admin token acts on one workspace only and cannot create workspaces.');
    }
    const input = c.body as WorkspaceCreate;
    return await idempotent(
      c.db,
      { tokenId: c.caller.id, key: c.idempotencyKey, operationId: 'createWorkspace', path: c.path, body: input },
      async (trx) => ({ status: 201, body: workspaceBody(c.caller)(await createWorkspace(trx, input, c.audit)) }),
    );
  },

  async getWorkspace(c) {
    return { status: 200, body: workspaceBody(c.caller)(await reachable(c)) };
  },

  async updateWorkspace(c) {
    const { id } = await reachable(c);
    const changes = c.body as WorkspaceUpdate;
    const platformOnly = c.caller.workspaceId === null ? undefined : platformOnlySetting(changes);
    if (platformOnly !== undefined) {
      throw apiError(
        'forbidden',
        c.caller.screen
          ? `The settings screen changes the workspace's time zone and reminders; its ${platformOnly} is the platform's to change.`
          : `This admin token acts on one workspace only and cannot change its ${platformOnly}: that takes a token for every workspace, or the CLI.`,
        { reason: platformOnly },
      );
    }
    return { status: 200, body: workspaceBody(c.caller)(await updateWorkspace(c.db, { id }, changes, c.now, c.audit)) };
  },

  async listApiKeys(c) {
    const { id } = await reachable(c);
    return { status: 200, body: await listApiKeys(c.db, { id }) };
  },

  async createApiKey(c) {
    const { id } = await reachable(c);
    const input = c.body as ApiKeyCreate;
    return await idempotent(
      c.db,
      { tokenId: c.caller.id, key: c.idempotencyKey, operationId: 'createApiKey', path: c.path, body: input },
      async (trx) => ({
        status: 201,
        body: await createApiKey(trx, { workspaceId: id, role: input.role, expiresAt: input.expiresAt }, c.audit),
      }),
    );
  },

  async revokeApiKey(c) {
    const { id } = await reachable(c);
    return { status: 200, body: await revokeApiKey(c.db, c.params.keyId, { workspaceId: id }, c.audit) };
  },

  // Webhook endpoints (src/core/webhooks/endpoints.ts and signing-secrets.ts), each within the path's workspace: an endpoint
  // of another workspace is not found, as if it did not exist.
  async listEndpoints(c) {
    const { id } = await reachable(c);
    return { status: 200, body: { rows: await listEndpoints(c.db, id) } };
  },

  async createEndpoint(c) {
    const { id } = await reachable(c);
    const input = c.body as EndpointCreate;
    return await idempotent(
      c.db,
      { tokenId: c.caller.id, key: c.idempotencyKey, operationId: 'createEndpoint', path: c.path, body: input },
      async (trx) => ({
        status: 201,
        body: await createEndpoint(trx, { workspaceId: id, ...input }, undefined, c.audit),
      }),
    );
  },

  async getEndpoint(c) {
    const { id } = await reachable(c);
    return { status: 200, body: await getEndpoint(c.db, c.params.endpointId, { workspaceId: id }) };
  },

  async updateEndpoint(c) {
    const { id } = await reachable(c);
    return {
      status: 200,
      body: await updateEndpoint(
        c.db,
        c.params.endpointId,
        c.body as EndpointUpdate,
        { workspaceId: id },
        undefined,
        c.audit,
      ),
    };
  },

  async deleteEndpoint(c) {
    const { id } = await reachable(c);
    await deleteEndpoint(c.db, c.params.endpointId, { workspaceId: id }, c.audit);
    return { status: 204, body: undefined };
  },

  async enableEndpoint(c) {
    const { id } = await reachable(c);
    return {
      status: 200,
      body: await setEndpointActive(c.db, c.params.endpointId, true, c.now, c.audit, { workspaceId: id }),
    };
  },

  async disableEndpoint(c) {
    const { id } = await reachable(c);
    return {
      status: 200,
      body: await setEndpointActive(c.db, c.params.endpointId, false, c.now, c.audit, { workspaceId: id }),
    };
  },

  async rotateEndpointSecret(c) {
    const { id } = await reachable(c);
    const input = (c.body ?? {}) as SecretRotation;
    return await idempotent(
      c.db,
      { tokenId: c.caller.id, key: c.idempotencyKey, operationId: 'rotateEndpointSecret', path: c.path, body: input },
      async (trx) => ({
        status: 200,
        body: await rotateSigningSecret(
          trx,
          c.params.endpointId,
          { overlapHours: input.overlapHours, now: c.now, workspaceId: id },
          c.audit,
        ),
      }),
    );
  },

  async listAuditEntries(c) {
    const asked = c.query.workspace as string | undefined;
    if (asked !== undefined && c.caller.workspaceId !== null && asked !== c.caller.workspaceId)
      throw new NotFoundError(`No workspace with id ${asked}.`);
    const workspaceId = asked ?? c.caller.workspaceId ?? undefined;
    const since = c.query.since as string | undefined;
    const binding = { workspaceId: workspaceId ?? '*', parameters: [since ?? null] };
    const cursor = c.query.cursor as string | undefined;
    const after = cursor === undefined ? undefined : (c.cursors.decode('audit', binding, cursor) as [string, string]);
    const page = await listAuditEntries(c.db, {
      workspaceId,
      since: since === undefined ? undefined : instant(since, 'since'),
      after,
      limit: c.query.limit as number,
    });
    // (the workspace's opened private ranges are the operator's to see, in the trail as in the workspace: workspaceBody)
    const rows =
      c.caller.workspaceId === null
        ? page.rows
        : page.rows.map((row) => {
            if (row.action !== 'workspace.update' || !row.changes || !('webhookAllowedCidrs' in row.changes))
              return row;
            const { webhookAllowedCidrs: _hidden, ...changes } = row.changes as Record<string, unknown>;
            return { ...row, changes };
          });
    return {
      status: 200,
      body: { rows, nextCursor: page.next === null ? null : c.cursors.encode('audit', binding, page.next) },
    };
  },

  // --- Deliveries and events (src/core/webhooks/deliveries.ts, recovery.ts, events.ts, publish.ts)

  async listDeliveries(c) {
    const { id } = await reachable(c);
    const q = c.query as {
      endpointId?: string;
      status?: WorkspaceDeliveryFilters['status'];
      event?: string;
      since?: string;
      until?: string;
      limit: number;
      cursor?: string;
    };
    // Bound: the workspace and every filter (a cursor of other filters is refused); not the page size.
    const binding: CursorBinding = {
      workspaceId: id,
      parameters: [q.endpointId ?? null, q.status ?? null, q.event ?? null, q.since ?? null, q.until ?? null],
    };
    const after =
      q.cursor === undefined
        ? undefined
        : (c.cursors.decode('workspaceDeliveries', binding, q.cursor) as DeliveryPosition);
    const filters = {
      endpointId: q.endpointId,
      status: q.status,
      event: q.event,
      since: q.since === undefined ? undefined : instant(q.since, 'since'),
      until: q.until === undefined ? undefined : instant(q.until, 'until'),
    };
    const page = await listWorkspaceDeliveries(c.db, id, filters, { limit: q.limit, after });
    return {
      status: 200,
      body: {
        rows: page.rows,
        nextCursor: page.next === null ? null : c.cursors.encode('workspaceDeliveries', binding, page.next),
      },
    };
  },

  async getDelivery(c) {
    const { id } = await reachable(c);
    return { status: 200, body: await showDelivery(c.db, c.params.deliveryId, { workspaceId: id }) };
  },

  async retryDelivery(c) {
    const { id } = await reachable(c);
    return {
      status: 200,
      body: await retryDelivery(c.db, c.params.deliveryId, { workspaceId: id, now: c.now, audit: c.audit }),
    };
  },

  async recoverEndpoint(c) {
    const { id } = await reachable(c);
    const { since, until } = c.body as RecoverRequest;
    const input = {
      endpointId: c.params.endpointId,
      workspaceId: id,
      since: instant(since, 'since'),
      until: until === undefined ? undefined : instant(until, 'until'),
      now: c.now,
    };
    return { status: 200, body: await recoverEndpoint(c.db, input, c.audit) };
  },

  async listEventTypes(c) {
    await reachable(c);
    return { status: 200, body: listEventTypes() };
  },

  async publishEvent(c) {
    const { id } = await reachable(c);
    const input = c.body as PublishEventRequest;
    return await idempotent(
      c.db,
      { tokenId: c.caller.id, key: c.idempotencyKey, operationId: 'publishEvent', path: c.path, body: input },
      async (trx) => ({
        status: 201,
        body: await publishEvent(trx, actorOf(c), {
          workspaceId: id,
          event: input.event,
          data: input.data,
          dedupeKey: input.dedupeKey,
          source: 'publish',
        }),
      }),
    );
  },

  // --- Keeping the service current (src/core/import/records.ts, jobs.ts)

  async writeRecords(c) {
    const { id } = await reachable(c);
    return await idempotent(
      ingestOf(c),
      { tokenId: c.caller.id, key: c.idempotencyKey, operationId: 'writeRecords', path: c.path, body: c.body ?? null },
      async (trx) => ({
        status: 200,
        body: await writeRecords(trx, id, c.body ?? {}, { audit: c.audit, metrics: c.metrics }),
      }),
    );
  },

  async createImport(c) {
    const { id } = await reachable(c);
    const type = (c.contentType ?? '').split(';')[0].trim().toLowerCase();
    const format = type === 'application/json' ? 'json' : type === 'application/x-ndjson' ? 'ndjson' : undefined;
    if (format === undefined)
      throw apiError(
        'unsupported_media_type',
        'Send the import as Content-Type application/json (an import document) or application/x-ndjson (one {"key", "record"} a line).',
      );
    if (!c.request) throw new Error('createImport: no request stream given');
    // The job reads the body as it arrives; the 202 goes out once it is all read (an HTTP server throws away what is
    // left of a body once it has answered), with the job as it stands: getImport follows it from then on (or meanwhile,
    // from another connection).
    // Through a pipe: a job that stops early drops its side, never the request itself (nor the connection with it).
    const request = c.request;
    const body = request.pipe(new PassThrough());
    // (the job reads the body's error as it iterates; between two reads there may be no listener)
    body.on('error', () => undefined);
    // A cut-off upload (the client gone, the connection closed) never ends the pipe: the job is told, and fails.
    const cutOff = () => {
      if (!(request as IncomingMessage).complete)
        body.destroy(new ImportError('the upload was cut off before the body ended; nothing was written'));
    };
    request.once('aborted', cutOff);
    request.once('close', cutOff);
    // An upload may honestly take longer than the listener's request time-out; the job fails one that stalls instead.
    allowLongBody(request as IncomingMessage);
    const ingest = ingestOf(c);
    const { job, done, received } = await startImport(ingest, id, {
      body,
      format,
      audit: c.audit,
      metrics: c.metrics,
      logger: c.logger,
    });
    await received;
    // What the job left unread (it failed or was canceled early) is read and dropped, so the client's upload ends.
    void done.then(
      () => {
        request.unpipe(body);
        request.resume();
      },
      () => undefined,
    );
    return { status: 202, body: await getImport(ingest, id, job.id) };
  },

  async getImport(c) {
    const { id } = await reachable(c);
    return { status: 200, body: await getImport(ingestOf(c), id, c.params.importId) };
  },

  async cancelImport(c) {
    const { id } = await reachable(c);
    return { status: 200, body: await cancelImport(ingestOf(c), id, c.params.importId, c.audit) };
  },

  async sendExampleEvent(c) {
    const { id } = await reachable(c);
    const input = c.body as ExampleEventRequest;
    return await idempotent(
      c.db,
      { tokenId: c.caller.id, key: c.idempotencyKey, operationId: 'sendExampleEvent', path: c.path, body: input },
      async (trx) => ({
        status: 202,
        body: await sendExampleEvent(
          trx,
          { workspaceId: id, endpointId: input.endpointId, event: input.event, now: c.now },
          c.audit,
        ),
      }),
    );
  },

  // --- The settings screen (src/core/portal-sessions.ts; src/portal/ serves the screen)

  async createPortalSession(c) {
    const { id } = await reachable(c);
    if (c.portalUrl === undefined) throw new Error('createPortalSession: no portalUrl given to the admin API');
    const input = (c.body ?? {}) as PortalSessionCreate;
    // (the token is kept with the link: revoking it ends the link and its session)
    const link = await createPortalLink(
      c.db,
      {
        workspaceId: id,
        expiresInMinutes: input.expiresInMinutes,
        readOnly: input.readOnly,
        now: c.now,
        adminTokenId: c.caller.screen ? undefined : c.caller.id,
      },
      c.audit,
    );
    return {
      status: 201,
      body: {
        id: link.id,
        url: portalLinkUrl(c.portalUrl, link.key),
        readOnly: link.readOnly,
        linkExpiresAt: link.linkExpiresAt,
        expiresAt: link.expiresAt,
      },
    };
  },

  async listPortalSessions(c) {
    const { id } = await reachable(c);
    return { status: 200, body: await listPortalSessions(c.db, id, c.now) };
  },

  async endPortalSession(c) {
    const { id } = await reachable(c);
    await endPortalSessions(c.db, { workspaceId: id, id: c.params.sessionId }, c.now, c.audit);
    return { status: 204, body: undefined };
  },

  async endPortalSessions(c) {
    const { id } = await reachable(c);
    const { ended } = await endPortalSessions(c.db, { workspaceId: id }, c.now, c.audit);
    return { status: 200, body: { ended: ended.length } };
  },

  async getEndpointAttemptStats(c) {
    const { id } = await reachable(c);
    const period = (c.query.period as '24h' | '7d' | undefined) ?? '24h';
    return {
      status: 200,
      body: await endpointAttemptStats(c.db, c.params.endpointId, { workspaceId: id, period, now: c.now }),
    };
  },
};
