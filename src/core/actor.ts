import { NotFoundError } from '../errors.js';

// Who acts on the core, and which workspaces it may reach. Every action takes one as its second argument, so that
// neither the tenancy scope nor the audit entry can be left out of a call: a call without an actor does not
// type-check. The clients build it once at their edge: the CLI as the operator, the admin API from its token (every
// workspace, or the one it is confined to), the settings screen from its session (always one workspace).

/**
 * Who made a change: an admin token (its id and name), a settings-screen session (its id, and whose link it was), or the
 * CLI (the OS user that ran it).
 */
export type AuditActor =
  { type: 'admin_token' | 'portal_session'; id: string; name: string } | { type: 'cli'; name: string };

/**
 * What a client passes to a core function that changes something: who acts, and the request it came with (the
 * server's own id of it, and the X-Request-Id the client sent, as given).
 */
export interface AuditContext {
  actor: AuditActor;
  requestId?: string;
  clientRequestId?: string;
}

export type Actor =
  /** The operator: fleet-admin, or an admin token for every workspace. Reaches every workspace. */
  | { kind: 'operator'; audit: AuditContext }
  /** An admin token confined to one workspace, or a settings-screen session. Reaches that workspace only. */
  | { kind: 'workspace'; workspaceId: string; audit: AuditContext };

/** The operator alone: what only it may do (create a workspace, make admin tokens) takes this. */
export type OperatorActor = Extract<Actor, { kind: 'operator' }>;

/** Whether the actor may act on the workspace `workspaceId`. */
export function reaches(actor: Actor, workspaceId: string): boolean {
  return actor.kind === 'operator' || actor.workspaceId === workspaceId;
}

/**
 * Refuses a workspace out of the actor's reach as if it did not exist: a confined actor learns nothing of other
 * workspaces, not even that one exists.
 */
export function mustReach(actor: Actor, workspaceId: string): void {
  if (!reaches(actor, workspaceId)) throw new NotFoundError(`No workspace with id ${workspaceId}.`);
}

/**
 * The workspace a query is confined to: `workspaceId` once reached, or for `'every'` none (the operator: every
 * workspace) or the actor's own (a confined actor asking for every workspace sees its own only).
 */
export function workspaceFilter(actor: Actor, workspaceId: string | 'every'): string | undefined {
  if (workspaceId === 'every') return actor.kind === 'operator' ? undefined : actor.workspaceId;
  mustReach(actor, workspaceId);
  return workspaceId;
}
