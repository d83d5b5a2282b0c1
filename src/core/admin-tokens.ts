import type { Knex } from 'knex';
import { hashApiKey, looksLikeSecret, newAdminToken, SECRET_SHAPED } from '../secrets.js';
import { recordAudit } from './audit.js';
import type { OperatorActor } from './actor.js';
import { findWorkspace } from './workspaces.js';
import { CredentialError, InvalidFieldError, isUuid, NotFoundError } from '../errors.js';
import { endPortalSessionsOfToken } from './portal-sessions.js';

// Admin tokens: the admin API's credential (src/admin/). `fra_` + 40 base62 characters, made like an API key and
// stored the same way, as its SHA-256 hash: the token is shown once, by `fleet-admin admin-token create`, and never
// again. A token made for a workspace acts on that workspace only. Tokens are made and revoked by the CLI only (the
// admin API's database role can read them and mark one as used, nothing more); both changes are audited.

export interface AdminTokenRecord {
  id: string;
  name: string;
  /** The workspace's slug for a token that acts on one workspace only; null for one that acts on every workspace. */
  workspace: string | null;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

export interface CreatedAdminToken {
  id: string;
  /** The token itself: shown once, never stored. */
  token: string;
  name: string;
  workspace: string | null;
  expiresAt: string | null;
}

const iso = (d: Date | null) => d?.toISOString() ?? null;

/** Makes a token for one workspace, or for every workspace (`'every'`): the operator's alone. */
export async function createAdminToken(
  db: Knex,
  actor: OperatorActor,
  input: { name: string; workspaceId: string | 'every'; expiresAt?: string },
): Promise<CreatedAdminToken> {
  const name = input.name.trim();
  if (name.length < 1 || name.length > 100) throw new InvalidFieldError('name', 'must be 1 to 100 characters');
  if (looksLikeSecret(name)) throw new InvalidFieldError('name', SECRET_SHAPED);
  let expiresAt: Date | null = null;
  if (input.expiresAt !== undefined) {
    expiresAt = new Date(input.expiresAt);
    if (Number.isNaN(expiresAt.getTime()) || !/^\d{4}-\d{2}-\d{2}T/.test(input.expiresAt)) {
      throw new InvalidFieldError('expiresAt', `must be an ISO 8601 date-time, got "${input.expiresAt}"`);
    }
  }
  const workspace = input.workspaceId === 'every' ? null : await findWorkspace(db, { id: input.workspaceId });
  const token = newAdminToken();
  return db.transaction(async (trx) => {
    const [row] = await trx('admin_tokens')
      .insert({ name, workspace_id: workspace?.id ?? null, token_hash: hashApiKey(token), expires_at: expiresAt })
      .returning(['id', 'expires_at']);
    const created = {
      id: row.id as string,
      token,
      name,
      workspace: workspace?.slug ?? null,
      expiresAt: iso(row.expires_at),
    };
    await recordAudit(trx, actor.audit, {
      action: 'admin_token.create',
      workspaceId: workspace?.id ?? null,
      target: { type: 'admin_token', id: row.id },
      changes: { name, workspace: created.workspace, expiresAt: created.expiresAt },
    });
    return created;
  });
}

/** Every admin token, oldest first: never the token (only its hash is stored), and never the hash. */
export async function listAdminTokens(db: Knex, _actor: OperatorActor): Promise<{ rows: AdminTokenRecord[] }> {
  const rows = await db('admin_tokens as t')
    .leftJoin('workspaces as w', 'w.id', 't.workspace_id')
    .orderBy([{ column: 't.created_at' }, { column: 't.id' }])
    .select('t.id', 't.name', 'w.slug', 't.created_at', 't.expires_at', 't.revoked_at', 't.last_used_at');
  return {
    rows: rows.map((r) => ({
      id: r.id,
      name: r.name,
      workspace: r.slug ?? null,
      createdAt: r.created_at.toISOString(),
      expiresAt: iso(r.expires_at),
      revokedAt: iso(r.revoked_at),
      lastUsedAt: iso(r.last_used_at),
    })),
  };
}

/**
 * Revokes a token: its next request is refused (the admin API reads the token on every request), and the settings-screen
 * links and sessions it made end with it. Twice keeps the first time.
 */
export async function revokeAdminToken(
  db: Knex,
  actor: OperatorActor,
  input: { id: string },
): Promise<{ id: string; revokedAt: string }> {
  const { id } = input;
  const { audit } = actor;
  if (!isUuid(id)) throw new InvalidFieldError('id', `must be a UUID, got "${id}"`);
  return db.transaction(async (trx) => {
    const before = await trx('admin_tokens').where({ id }).forUpdate().first('workspace_id', 'revoked_at');
    if (!before) throw new NotFoundError(`no admin token with id ${id}`);
    const [row] = await trx('admin_tokens')
      .where({ id })
      .update({ revoked_at: trx.raw('coalesce(revoked_at, now())') })
      .returning(['revoked_at']);
    const revokedAt = row.revoked_at.toISOString();
    if (before.revoked_at === null) {
      await recordAudit(trx, audit, {
        action: 'admin_token.revoke',
        workspaceId: before.workspace_id,
        target: { type: 'admin_token', id },
        changes: { revokedAt },
      });
    }
    await endPortalSessionsOfToken(trx, id, row.revoked_at, audit);
    return { id, revokedAt };
  });
}

/** A token as authentication finds it: who it is, and the workspace it is confined to (null: every workspace). */
export interface AdminTokenHolder {
  id: string;
  name: string;
  workspaceId: string | null;
}

/**
 * The holder of a token; a token that opens nothing is a CredentialError saying why. Looked up by the token's SHA-256
 * (a unique index): the database compares hashes, never the token, so the time taken says nothing about how close a
 * guess was. Marks the token as used at most once a minute (best effort).
 */
export async function adminTokenHolder(db: Knex, token: string, now: Date): Promise<AdminTokenHolder> {
  const row = await db('admin_tokens')
    .where({ token_hash: hashApiKey(token) })
    .first('id', 'name', 'workspace_id', 'expires_at', 'revoked_at', 'last_used_at');
  if (!row) throw new CredentialError('admin_token', 'unknown');
  if (row.revoked_at) throw new CredentialError('admin_token', 'revoked');
  if (row.expires_at && row.expires_at <= now) throw new CredentialError('admin_token', 'expired');
  if (!row.last_used_at || now.getTime() - row.last_used_at.getTime() > 60_000) {
    db('admin_tokens')
      .where({ id: row.id })
      .update({ last_used_at: now })
      .catch(() => undefined);
  }
  return { id: row.id, name: row.name, workspaceId: row.workspace_id };
}
