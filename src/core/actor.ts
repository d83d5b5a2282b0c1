import { cliAudit, type AuditContext } from './audit.js';
import { NotFoundError } from './errors.js';

// Who acts on the core, and which workspaces it may reach. Every action takes one as its second argument, so that
// neither the tenancy scope nor the audit entry can be left out of a call: a call without an actor does not
// type-check. The clients build it once at their edge: the CLI as the operator, the admin API from its token (every
// workspace, or the one it is confined to), the settings screen from its session (always one workspace).

export type Actor =
  /** The operator: fleet-admin, or an admin token for every workspace. Reaches every workspace. */
  | { kind: 'operator'; audit: AuditContext }
  /** An admin token confined to one workspace, or a settings-screen session. Reaches that workspace only. */
  | { kind: 'workspace'; workspaceId: string; audit: AuditContext };

/** The CLI's actor: the operator, audited as the OS user running it. */
export function cliActor(): Actor {
  return { kind: 'operator', audit: cliAudit() };
}

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
