import os from 'node:os';
import type { Knex } from 'knex';
import { redactSecrets, redactUrlCredentials } from '../secrets.js';
import { processConfig } from '../config.js';
import { workspaceFilter, type Actor, type AuditActor, type AuditContext, type OperatorActor } from './actor.js';

// The audit trail: who changed what, through the admin API or the CLI. One entry per change, written by the core
// function that makes the change, in the same transaction (an entry exists exactly when its change committed). The
// clients only say who acts (an AuditContext); the core functions say what changed, so the CLI and the admin API
// cannot record a change differently. `changes` holds the fields set, never a key, token or secret: recordAudit
// refuses one that looks like it. Entries are never changed or deleted by the service (src/db/roles.ts).

export type { AuditActor, AuditContext } from './actor.js';

/** The CLI's actor: the OS user running it. */
export function cliAudit(): AuditContext {
  let name: string;
  try {
    name = os.userInfo().username;
  } catch {
    name = processConfig().user ?? 'unknown'; // (a uid without a passwd entry, as in some containers)
  }
  return { actor: { type: 'cli', name } };
}

/** The CLI's actor: the operator, audited as the OS user running it. */
export function cliActor(): OperatorActor {
  return { kind: 'operator', audit: cliAudit() };
}

export interface AuditChange {
  /** `<concept>.<verb>`, such as `workspace.create`, `api_key.revoke`. */
  action: string;
  workspaceId: string | null;
  target: { type: string; id: string };
  /** The fields set, as the API names them (camelCase); never a secret. */
  changes?: Record<string, unknown>;
}

export interface AuditEntry {
  id: string;
  at: string;
  actor: { type: AuditActor['type']; id: string | null; name: string };
  action: string;
  workspaceId: string | null;
  target: { type: string; id: string };
  changes: Record<string, unknown>;
  requestId: string | null;
  clientRequestId: string | null;
}

/** Writes the entry of one change; call it inside the change's transaction. */
export async function recordAudit(trx: Knex, audit: AuditContext, change: AuditChange): Promise<void> {
  // Never a secret: what is shaped like one is redacted (a core function's defect, or text a caller chose that looks like
  // one; the core refuses such names and roles, but the trail must not depend on every caller doing so, nor fail).
  // A URL's credentials too (user:password@, a token in its query or fragment): an endpoint's URL is the tenant's text.
  const changes = redactUrlCredentials(redactSecrets(JSON.stringify(change.changes ?? {})));
  const { actor } = audit;
  // The entry's id, time and request id are the database's to set (migrations/20261128000210_audit_trail_server_set.ts):
  // the request id through a setting of this transaction only, which the trigger reads.
  await trx.raw(`SELECT set_config('frs.request_id', ?, true)`, [audit.requestId ?? '']);
  await trx('audit_entries').insert({
    actor_type: actor.type,
    actor_id: actor.type === 'cli' ? null : actor.id,
    actor_name: actor.name,
    action: change.action,
    workspace_id: change.workspaceId,
    target_type: change.target.type,
    target_id: change.target.id,
    changes,
    client_request_id:
      audit.clientRequestId === undefined
        ? null
        : redactUrlCredentials(redactSecrets(audit.clientRequestId)).slice(0, 200),
  });
}

/** A position in the trail's order (newest first): `at` in epoch microseconds, and the id. */
export type AuditPosition = readonly [string, string];

/**
 * Entries newest first (by `at`, then id), at most `limit`, from after `after` when given; `workspaceId`'s, or every
 * workspace's the actor reaches (`'every'`); only those at or after `since` when given. `next` is the position to go on
 * from, null on the last page. A workspace's opened private ranges are the operator's to see, in the trail as in the
 * workspace (toWorkspaceView): hidden from a confined actor.
 */
export async function listAuditEntries(
  db: Knex,
  actor: Actor,
  input: { workspaceId: string | 'every'; since?: Date; after?: AuditPosition; limit: number },
): Promise<{ rows: AuditEntry[]; next: AuditPosition | null }> {
  const options = { ...input, workspaceId: workspaceFilter(actor, input.workspaceId) };
  const query = db('audit_entries')
    .select(
      'id',
      'at',
      'actor_type',
      'actor_id',
      'actor_name',
      'action',
      'workspace_id',
      'target_type',
      'target_id',
      'changes',
      'request_id',
      'client_request_id',
      db.raw(`(extract(epoch FROM at) * 1000000)::bigint::text AS at_us`),
    )
    .orderBy([
      { column: 'at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(options.limit + 1);
  if (options.workspaceId !== undefined) query.where({ workspace_id: options.workspaceId });
  if (options.since !== undefined) query.where('at', '>=', options.since);
  // (exact: microseconds added to the epoch as an interval, no floating point)
  if (options.after)
    query.whereRaw(`(at, id) < (timestamptz 'epoch' + ?::bigint * interval '1 microsecond', ?::uuid)`, [
      options.after[0],
      options.after[1],
    ]);
  const rows = await query;
  const page = rows.slice(0, options.limit);
  const last = page.at(-1);
  const entries: AuditEntry[] = page.map((r) => ({
    id: r.id,
    at: r.at.toISOString(),
    actor: { type: r.actor_type, id: r.actor_id, name: r.actor_name },
    action: r.action,
    workspaceId: r.workspace_id,
    target: { type: r.target_type, id: r.target_id },
    changes: r.changes,
    requestId: r.request_id,
    clientRequestId: r.client_request_id,
  }));
  return {
    rows: actor.kind === 'operator' ? entries : entries.map(withoutOperatorSettings),
    next: rows.length > options.limit && last ? [last.at_us, last.id] : null,
  };
}

function withoutOperatorSettings(row: AuditEntry): AuditEntry {
  if (row.action !== 'workspace.update' || !row.changes || !('webhookAllowedCidrs' in row.changes)) return row;
  const { webhookAllowedCidrs: _hidden, ...changes } = row.changes;
  return { ...row, changes };
}
