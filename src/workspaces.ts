import type { Knex } from 'knex';
import { InputError, isUuid, isValidTimeZone } from './input.js';
import { hashApiKey, newApiKey } from './secrets.js';
import { resumeFrozenDeliveries } from './webhooks/endpoint-lifecycle.js';

export type WorkspaceStatus = 'active' | 'frozen';

export interface WorkspaceRecord {
  id: string;
  slug: string;
  status: WorkspaceStatus;
  timezone: string;
  remindersAhead: number;
}

function checkSettings(settings: { timezone?: string; remindersAhead?: number }): void {
  if (settings.timezone !== undefined && !isValidTimeZone(settings.timezone)) {
    throw new InputError(`unknown time zone "${settings.timezone}" (use an IANA name such as Asia/Dubai)`);
  }
  const n = settings.remindersAhead;
  if (n !== undefined && !(Number.isInteger(n) && n >= 1 && n <= 60)) {
    throw new InputError(`reminders ahead must be a whole number of days from 1 to 60, got ${n}`);
  }
}

const columns = ['id', 'slug', 'status', 'timezone', 'reminders_ahead as remindersAhead'];

export async function createWorkspace(
  db: Knex,
  input: { slug: string; timezone?: string; remindersAhead?: number; status?: WorkspaceStatus },
): Promise<WorkspaceRecord> {
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(input.slug)) {
    throw new InputError(`invalid slug "${input.slug}": use 1 to 63 lower-case letters, digits and hyphens`);
  }
  checkSettings(input);
  const existing = await db('workspaces').where({ slug: input.slug }).first('id');
  if (existing) throw new InputError(`workspace "${input.slug}" already exists`);
  const [row] = await db('workspaces')
    .insert({
      slug: input.slug,
      timezone: input.timezone ?? 'Asia/Dubai',
      reminders_ahead: input.remindersAhead ?? 3,
      status: input.status ?? 'active',
    })
    .returning(columns);
  return row;
}

export async function findWorkspace(db: Knex, slug: string): Promise<WorkspaceRecord> {
  const row = await db('workspaces').where({ slug }).first(columns);
  if (!row) throw new InputError(`no workspace with slug "${slug}"`);
  return row;
}

/**
 * Changes a workspace's settings. Setting a frozen workspace active again sends the deliveries that waited while
 * it was frozen (those older than 7 days at `now` are marked failed instead).
 */
export async function updateWorkspace(
  db: Knex,
  slug: string,
  changes: { status?: WorkspaceStatus; timezone?: string; remindersAhead?: number },
  now = new Date(),
): Promise<WorkspaceRecord> {
  if (changes.status !== undefined && changes.status !== 'active' && changes.status !== 'frozen') {
    throw new InputError(`status must be active or frozen, got "${changes.status}"`);
  }
  checkSettings(changes);
  await findWorkspace(db, slug);
  const patch: Record<string, unknown> = {};
  if (changes.status !== undefined) patch.status = changes.status;
  if (changes.timezone !== undefined) patch.timezone = changes.timezone;
  if (changes.remindersAhead !== undefined) patch.reminders_ahead = changes.remindersAhead;
  if (Object.keys(patch).length === 0) return findWorkspace(db, slug);
  return db.transaction(async (trx) => {
    const before = await trx('workspaces').where({ slug }).forUpdate().first('status');
    if (!before) throw new InputError(`no workspace with slug "${slug}"`); // deleted since the check above
    const [row] = await trx('workspaces').where({ slug }).update(patch).returning(columns);
    if (before.status === 'frozen' && row.status === 'active') await resumeFrozenDeliveries(trx, row.id, now);
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
  input: { workspaceSlug: string; role?: string | null; expiresAt?: string | null },
): Promise<CreatedApiKey> {
  // A role is returned by GET /v1/me, whose document bounds it to 64 characters.
  if (input.role != null && (input.role.length < 1 || input.role.length > 64)) throw new InputError('--role must be 1 to 64 characters');
  const workspace = await findWorkspace(db, input.workspaceSlug);
  let expiresAt: Date | null = null;
  if (input.expiresAt != null) {
    expiresAt = new Date(input.expiresAt);
    if (Number.isNaN(expiresAt.getTime()) || !/^\d{4}-\d{2}-\d{2}T/.test(input.expiresAt)) {
      throw new InputError(`--expires-at must be an ISO 8601 date-time, got "${input.expiresAt}"`);
    }
  }
  const key = newApiKey();
  const [row] = await db('api_keys')
    .insert({ workspace_id: workspace.id, key_hash: hashApiKey(key), role: input.role ?? null, expires_at: expiresAt })
    .returning(['id', 'role', 'expires_at']);
  return { id: row.id, key, role: row.role, expiresAt: row.expires_at ? row.expires_at.toISOString() : null };
}

export async function revokeApiKey(db: Knex, id: string): Promise<{ id: string; revokedAt: string }> {
  if (!isUuid(id)) throw new InputError(`--id must be a UUID, got "${id}"`);
  // Revoking twice keeps the first revocation time.
  const [row] = await db('api_keys')
    .where({ id })
    .update({ revoked_at: db.raw('coalesce(revoked_at, now())') })
    .returning(['id', 'revoked_at']);
  if (!row) throw new InputError(`no API key with id ${id}`);
  return { id: row.id, revokedAt: row.revoked_at.toISOString() };
}

/** Every workspace, by slug. */
export async function listWorkspaces(db: Knex): Promise<{ rows: WorkspaceRecord[] }> {
  return { rows: await db('workspaces').orderBy('slug').select(columns) };
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
export async function listApiKeys(db: Knex, workspaceSlug: string): Promise<{ rows: ApiKeyRecord[] }> {
  const workspace = await findWorkspace(db, workspaceSlug);
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
