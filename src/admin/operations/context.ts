import type { Readable } from 'node:stream';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Cursors } from '../../http/cursors.js';
import type { Actor, AuditContext } from '../../core/actor.js';
import type { AdminTokenHolder } from '../../core/admin-tokens.js';
import type { RecordMetrics } from '../../core/import/records.js';
import type { WorkspaceRecord } from '../../core/workspaces.js';
import type { Answer } from '../idempotency.js';

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

/**
 * What an operation of a resource is given: the request's context, the caller as the core's actor, and the path's
 * workspace once reached (src/admin/operations/index.ts checks it before any operation runs).
 */
export interface AdminActionContext extends AdminOperationContext {
  actor: Actor;
  /** The path's `{workspaceId}`, found and within the actor's reach (undefined for an operation without one). */
  workspace: WorkspaceRecord | undefined;
  /**
   * Runs a change in one transaction, once per `Idempotency-Key`: a repeat of the same request is answered as the first
   * was (src/admin/idempotency.ts). The operation's id and path are the request's own, so no action types them again.
   * `db`: the connections to run it through, when not the admin role's (the platform's records: the ingest role's).
   */
  once(body: unknown, change: (trx: Knex) => Promise<Answer>, db?: Knex): Promise<Answer>;
}

export type AdminAction = (c: AdminActionContext) => Promise<Answer>;

/** The path's workspace (an operation under /workspaces/{workspaceId}). */
export function pathWorkspace(c: AdminActionContext): WorkspaceRecord {
  if (!c.workspace) throw new Error(`no {workspaceId} in the path ${c.path}`);
  return c.workspace;
}

/**
 * The caller as the core's actor: an all-workspaces token is the operator; a token confined to a workspace, and the
 * settings screen's session, act on that workspace only.
 */
export function actorOf(c: Pick<AdminOperationContext, 'caller' | 'audit'>): Actor {
  return c.caller.workspaceId === null
    ? { kind: 'operator', audit: c.audit }
    : { kind: 'workspace', workspaceId: c.caller.workspaceId, audit: c.audit };
}

/** The ingest role's connections (writeRecords and import jobs). */
export function ingestOf(c: AdminOperationContext): Knex {
  if (!c.ingestDb)
    throw new Error("the platform's records are written through the ingest pool, which this client was not given");
  return c.ingestDb;
}
