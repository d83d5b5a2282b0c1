import type { Knex } from 'knex';
import { ConflictError, InvalidFieldError, isUuid, isValidTimeZone, NotFoundError } from '../errors.js';
import { hashApiKey, looksLikeSecret, newApiKey, SECRET_SHAPED } from '../secrets.js';
import { resumeFrozenDeliveries } from '../webhooks/endpoint-lifecycle.js';
import { recordAudit } from './audit.js';
import { mustReach, workspaceFilter, type Actor, type OperatorActor } from './actor.js';
import { isCidr } from '../webhooks/destination-policy.js';

// Workspaces and their API keys. Every action takes the actor (src/core/actor.ts): it reaches the workspace or the
// action is refused as not found, and the audit entry of a change is written in the change's transaction.

export type WorkspaceStatus = 'active' | 'frozen';

export interface WorkspaceRecord {
  id: string;
  slug: string;
  status: WorkspaceStatus;
  timezone: string;
  remindersAhead: number;
  /**
   * Private ranges this workspace's webhook endpoints may reach (CIDR), beside FRS_WEBHOOK_ALLOWED_CIDRS, which opens
   * its ranges to every workspace. The operator's: only the CLI and an all-workspaces admin token see or change it.
   */
  webhookAllowedCidrs: string[];
}

/** At most this many ranges per workspace. */
export const MAX_WEBHOOK_CIDRS = 32;

function checkSettings(settings: { timezone?: string; remindersAhead?: number; webhookAllowedCidrs?: string[] }): void {
  const cidrs = settings.webhookAllowedCidrs;
  if (cidrs !== undefined) {
    if (!Array.isArray(cidrs) || cidrs.length > MAX_WEBHOOK_CIDRS)
      throw new InvalidFieldError('webhookAllowedCidrs', `must be a list of at most ${MAX_WEBHOOK_CIDRS} CIDR ranges`);
    const bad = cidrs.find((cidr) => typeof cidr !== 'string' || !isCidr(cidr));
    if (bad !== undefined)
      throw new InvalidFieldError(
        'webhookAllowedCidrs',
        `must hold CIDR ranges such as 10.1.0.0/16 or fd12:3456::/32, got "${String(bad).slice(0, 60)}"`,
      );
  }
  if (settings.timezone !== undefined && !isValidTimeZone(settings.timezone)) {
    throw new InvalidFieldError(
      'timezone',
      `must be an IANA time zone such as Asia/Dubai, got the unknown "${settings.timezone}"`,
    );
  }
  const n = settings.remindersAhead;
  if (n !== undefined && !(Number.isInteger(n) && n >= 1 && n <= 60)) {
    throw new InvalidFieldError('remindersAhead', `must be a whole number of days from 1 to 60, got ${n}`);
  }
}

const columns = [
  'id',
  'slug',
  'status',
  'timezone',
  'reminders_ahead as remindersAhead',
  'webhook_allowed_cidrs as webhookAllowedCidrs',
];

/**
 * A workspace as the actor may see it. Its opened private ranges are the operator's setting (they describe the
 * network): shown to the operator only, never to a workspace's own token or its settings screen.
 */
export function toWorkspaceView(
  actor: Pick<Actor, 'kind'>,
  { id, slug, status, timezone, remindersAhead, webhookAllowedCidrs }: WorkspaceRecord,
) {
  return {
    id,
    slug,
    status,
    timezone,
    remindersAhead,
    ...(actor.kind === 'operator' && { webhookAllowedCidrs }),
  };
}

/** A workspace the actor reaches, or NotFoundError (as if another workspace did not exist). */
export async function reachWorkspace(db: Knex, actor: Actor, workspaceId: string): Promise<WorkspaceRecord> {
  mustReach(actor, workspaceId);
  return findWorkspace(db, { id: workspaceId });
}

/** Creates a workspace: the operator's alone. */
export async function createWorkspace(
  db: Knex,
  actor: OperatorActor,
  input: { slug: string; timezone?: string; remindersAhead?: number; status?: WorkspaceStatus },
): Promise<WorkspaceRecord> {
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(input.slug)) {
    throw new InvalidFieldError('slug', `must be 1 to 63 lower-case letters, digits and hyphens, got "${input.slug}"`);
  }
  checkSettings(input);
  return db.transaction(async (trx) => {
    // (a slug taken meanwhile by another transaction fails the insert on the unique index: the same 409)
    const existing = await trx('workspaces').where({ slug: input.slug }).first('id');
    if (existing) throw slugTaken(input.slug);
    const [row] = await trx('workspaces')
      .insert({
        slug: input.slug,
        timezone: input.timezone ?? 'Asia/Dubai',
        reminders_ahead: input.remindersAhead ?? 3,
        status: input.status ?? 'active',
      })
      .returning(columns)
      .catch((err) => {
        throw (err as { code?: string }).code === '23505' ? slugTaken(input.slug) : err;
      });
    const { slug, status, timezone, remindersAhead } = row as WorkspaceRecord;
    await recordAudit(trx, actor.audit, {
      action: 'workspace.create',
      workspaceId: row.id,
      target: { type: 'workspace', id: row.id },
      changes: { slug, status, timezone, remindersAhead },
    });
    return row;
  });
}

const slugTaken = (slug: string) => new ConflictError(`workspace "${slug}" already exists`, 'slug');

/** A workspace named by its slug (a string, as the CLI names it) or by its id (as the admin API does). */
export type WorkspaceName = string | { id: string };

/** A look-up, not an action (the clients' own edge: the CLI turns a slug into an id with it). */
export async function findWorkspace(db: Knex, name: WorkspaceName): Promise<WorkspaceRecord> {
  const byId = typeof name !== 'string';
  if (byId && !isUuid(name.id)) throw new NotFoundError(`no workspace with id "${name.id}"`);
  const row = await db('workspaces')
    .where(byId ? { id: name.id } : { slug: name })
    .first(columns);
  if (!row) throw new NotFoundError(byId ? `no workspace with id ${name.id}` : `no workspace with slug "${name}"`);
  return row;
}

/**
 * What only the platform may change in a workspace (an admin token for every workspace, or the CLI): a caller confined
 * to the workspace (a token made for it, or its settings screen) may change the rest only. Its status is how the
 * platform holds a tenant back (a frozen workspace's keys are refused, its webhooks held): the tenant must not lift it.
 * Which private ranges its webhooks may reach is the operator's network: the tenant must not open it.
 */
export const PLATFORM_ONLY_SETTINGS = ['status', 'webhookAllowedCidrs'] as const;

/** The first of `changes` that only the platform may make, if any. */
export function platformOnlySetting(changes: object): (typeof PLATFORM_ONLY_SETTINGS)[number] | undefined {
  return PLATFORM_ONLY_SETTINGS.find((field) => (changes as Record<string, unknown>)[field] !== undefined);
}

/**
 * Changes a workspace's settings. Setting a frozen workspace active again sends the deliveries that waited while
 * it was frozen (those older than 7 days at `now` are marked failed instead). `webhookAllowedCidrs` replaces the
 * workspace's opened ranges (duplicates dropped). PLATFORM_ONLY_SETTINGS are the operator's: its clients refuse them
 * to a confined actor first, in their own words; the core refuses them too.
 */
export async function updateWorkspace(
  db: Knex,
  actor: Actor,
  input: {
    workspaceId: string;
    changes: { status?: WorkspaceStatus; timezone?: string; remindersAhead?: number; webhookAllowedCidrs?: string[] };
    now: Date;
  },
): Promise<WorkspaceRecord> {
  const { changes, now } = input;
  mustReach(actor, input.workspaceId);
  const platformOnly = actor.kind === 'operator' ? undefined : platformOnlySetting(changes);
  if (platformOnly !== undefined) throw new Error(`updateWorkspace: ${platformOnly} is the operator's to change`);
  if (changes.status !== undefined && changes.status !== 'active' && changes.status !== 'frozen') {
    throw new InvalidFieldError('status', `must be active or frozen, got "${changes.status}"`);
  }
  checkSettings(changes);
  const { id } = await findWorkspace(db, { id: input.workspaceId });
  const patch: Record<string, unknown> = {};
  if (changes.status !== undefined) patch.status = changes.status;
  if (changes.timezone !== undefined) patch.timezone = changes.timezone;
  if (changes.remindersAhead !== undefined) patch.reminders_ahead = changes.remindersAhead;
  if (changes.webhookAllowedCidrs !== undefined)
    patch.webhook_allowed_cidrs = [...new Set(changes.webhookAllowedCidrs)];
  if (Object.keys(patch).length === 0) return findWorkspace(db, { id });
  return db.transaction(async (trx) => {
    const before = await trx('workspaces').where({ id }).forUpdate().first(columns);
    if (!before) throw new NotFoundError(`no workspace with id ${id}`); // deleted since the check above
    const [row] = await trx('workspaces').where({ id }).update(patch).returning(columns);
    if (before.status === 'frozen' && row.status === 'active') await resumeFrozenDeliveries(trx, row.id, now);
    // What changed, from what to what (a setting sent with its current value is no change)
    const same = (a: unknown, b: unknown) =>
      Array.isArray(a) && Array.isArray(b) ? a.join(',') === b.join(',') : a === b;
    const changed = Object.fromEntries(
      (['status', 'timezone', 'remindersAhead', 'webhookAllowedCidrs'] as const)
        .filter((field) => changes[field] !== undefined && !same(before[field], row[field]))
        .map((field) => [field, { from: before[field], to: row[field] }]),
    );
    await recordAudit(trx, actor.audit, {
      action: 'workspace.update',
      workspaceId: id,
      target: { type: 'workspace', id },
      changes: changed,
    });
    return row;
  });
}

export interface CreatedApiKey {
  id: string;
  /** The key itself: shown once, never stored. */
  key: string;
  role: string | null;
  expiresAt: string | null;
}

export async function createApiKey(
  db: Knex,
  actor: Actor,
  input: { workspaceId: string; role?: string | null; expiresAt?: string | null },
): Promise<CreatedApiKey> {
  mustReach(actor, input.workspaceId);
  // A role is returned by GET /v1/me, whose document bounds it to 64 characters.
  if (input.role != null && (input.role.length < 1 || input.role.length > 64))
    throw new InvalidFieldError('role', 'must be 1 to 64 characters');
  // GET /v1/me shows it, lists and the audit trail name it: text a secret scanner would take for a key is refused.
  if (input.role != null && looksLikeSecret(input.role)) throw new InvalidFieldError('role', SECRET_SHAPED);
  const workspace = await findWorkspace(db, { id: input.workspaceId });
  let expiresAt: Date | null = null;
  if (input.expiresAt != null) {
    expiresAt = new Date(input.expiresAt);
    if (Number.isNaN(expiresAt.getTime()) || !/^\d{4}-\d{2}-\d{2}T/.test(input.expiresAt)) {
      throw new InvalidFieldError('expiresAt', `must be an ISO 8601 date-time, got "${input.expiresAt}"`);
    }
  }
  const key = newApiKey();
  return db.transaction(async (trx) => {
    const [row] = await trx('api_keys')
      .insert({
        workspace_id: workspace.id,
        key_hash: hashApiKey(key),
        role: input.role ?? null,
        expires_at: expiresAt,
      })
      .returning(['id', 'role', 'expires_at']);
    const created = {
      id: row.id,
      key,
      role: row.role,
      expiresAt: row.expires_at ? row.expires_at.toISOString() : null,
    };
    await recordAudit(trx, actor.audit, {
      action: 'api_key.create',
      workspaceId: workspace.id,
      target: { type: 'api_key', id: row.id },
      changes: { role: created.role, expiresAt: created.expiresAt },
    });
    return created;
  });
}

/** Revokes a key of `workspaceId` (another workspace's key is not found), or of any workspace (`'every'`). */
export async function revokeApiKey(
  db: Knex,
  actor: Actor,
  input: { keyId: string; workspaceId: string | 'every' },
): Promise<{ id: string; revokedAt: string }> {
  const id = input.keyId;
  const workspaceId = workspaceFilter(actor, input.workspaceId);
  if (!isUuid(id)) throw new InvalidFieldError('id', `must be a UUID, got "${id}"`);
  return db.transaction(async (trx) => {
    const before = await trx('api_keys')
      .where({ id, ...(workspaceId !== undefined ? { workspace_id: workspaceId } : {}) })
      .forUpdate()
      .first('workspace_id', 'revoked_at');
    if (!before) throw new NotFoundError(`no API key with id ${id}`);
    // Revoking twice keeps the first revocation time (and records nothing the second time: nothing changed).
    const [row] = await trx('api_keys')
      .where({ id })
      .update({ revoked_at: trx.raw('coalesce(revoked_at, now())') })
      .returning(['id', 'revoked_at']);
    const revokedAt = row.revoked_at.toISOString();
    if (before.revoked_at === null) {
      await recordAudit(trx, actor.audit, {
        action: 'api_key.revoke',
        workspaceId: before.workspace_id,
        target: { type: 'api_key', id },
        changes: { revokedAt },
      });
    }
    return { id: row.id, revokedAt };
  });
}

/** The workspaces the actor reaches, by slug (every one for the operator), as it may see them; `slug`'s only when given. */
export async function listWorkspaces(
  db: Knex,
  actor: Actor,
  input: { slug?: string },
): Promise<{ rows: ReturnType<typeof toWorkspaceView>[] }> {
  const query = db('workspaces').orderBy('slug').select(columns);
  if (input.slug !== undefined) query.where({ slug: input.slug });
  if (actor.kind === 'workspace') query.where({ id: actor.workspaceId });
  return { rows: (await query).map((row: WorkspaceRecord) => toWorkspaceView(actor, row)) };
}

/** An API key as an operator may see it: never the key (only its hash is stored) and never the hash. */
export interface ApiKeyRecord {
  id: string;
  role: string | null;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

/** The workspace's API keys, oldest first. */
export async function listApiKeys(
  db: Knex,
  actor: Actor,
  input: { workspaceId: string },
): Promise<{ rows: ApiKeyRecord[] }> {
  const workspace = await reachWorkspace(db, actor, input.workspaceId);
  const rows = await db('api_keys')
    .where({ workspace_id: workspace.id })
    .orderBy([{ column: 'created_at' }, { column: 'id' }])
    .select('id', 'role', 'created_at', 'expires_at', 'revoked_at', 'last_used_at');
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  return {
    rows: rows.map((r) => ({
      id: r.id,
      role: r.role,
      createdAt: r.created_at.toISOString(),
      expiresAt: iso(r.expires_at),
      revokedAt: iso(r.revoked_at),
      lastUsedAt: iso(r.last_used_at),
    })),
  };
}
