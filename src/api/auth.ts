import type { Knex } from 'knex';
import { apiError, type ApiError } from '../http/error-catalogue.js';
import { hashApiKey } from '../secrets.js';
import type { Me } from '../../generated/strict/types.gen.js';
import type { KeyCache, KeyRecord } from './key-cache.js';
import type { AuthFailureLimits, AuthGuard } from '../http/auth-failures.js';
import { bearerToken } from '../http/bearer-token.js';

export type AuthFailure = 'missing' | 'unknown' | 'revoked' | 'expired';

export interface Caller {
  keyId: string;
  role: string | null;
  /** `status` is always `active`: a frozen workspace's key is refused (403) before a Caller is made. */
  workspace: { id: string; slug: string; status: Me['workspace']['status']; timezone: string };
}

const MESSAGES: Record<AuthFailure, string> = {
  missing: 'Send an API key as "Authorization: Bearer <API_KEY>".',
  unknown: 'This API key is not known.',
  revoked: 'This API key was revoked.',
  expired: 'This API key has expired.',
};

export function unauthorized(reason: AuthFailure): ApiError {
  const header =
    reason === 'missing'
      ? 'Bearer realm="fleet-rental"'
      : `Bearer realm="fleet-rental", error="invalid_token", error_description="${reason}"`;
  return apiError('unauthorized', MESSAGES[reason], { reason, headers: { 'WWW-Authenticate': header } });
}

/**
 * Resolves the caller from the Authorization header, or throws the documented 401/403. A revoked key is
 * reported as revoked even when it has also expired. Marks the key as used at most once a minute. With a key
 * cache (src/api/key-cache.ts) a known key is checked from memory, and a key the database did not know a moment
 * ago is refused from memory too; revocation, expiry and freezing are checked on every request all the same. With a
 * guard, a key that is not known good is refused with 429 before any database round trip once its address has
 * failed too often, and every 401 counts against the address.
 */
export async function authenticate(
  db: Knex,
  authorization: string | undefined,
  now: Date,
  cache?: KeyCache,
  guarding?: { limits: AuthFailureLimits; guard(): AuthGuard },
): Promise<Caller> {
  const token = bearerToken(authorization);
  const keyHash = token === undefined ? undefined : hashApiKey(token);
  const hashText = keyHash?.toString('base64');
  const cached = hashText === undefined ? undefined : cache?.get(hashText);
  // What is not answered from memory is an attempt of the client's address: counted as a failure until it succeeds.
  // (The guard is asked for only then: a key answered from memory costs nothing more.)
  const guard = cached ? undefined : guarding?.guard();
  let attempt: { succeeded(): void } | undefined;
  if (guard) {
    ({ standing: guard.standing, ...attempt } = await guard.limits.attempt(
      guard.address,
      hashText,
      hashText !== undefined && cache?.isKnownKey(hashText),
    ));
  }
  const refused = (reason: AuthFailure): never => {
    if (hashText !== undefined) guard?.limits.forget(hashText);
    throw unauthorized(reason);
  };
  if (!keyHash || !hashText) return refused('missing');
  let row = cached;
  if (!row) {
    if (cache?.isUnknown(hashText)) return refused('unknown');
    const generation = cache?.generation ?? 0;
    try {
      row = (await db('api_keys as k')
        .join('workspaces as w', 'w.id', 'k.workspace_id')
        .where('k.key_hash', keyHash)
        .first(
          'k.id as keyId',
          'k.role',
          'k.revoked_at as revokedAt',
          'k.expires_at as expiresAt',
          'k.last_used_at as lastUsedAt',
          'w.id as workspaceId',
          'w.slug',
          'w.status',
          'w.timezone',
        )) as KeyRecord | undefined;
    } catch (err) {
      attempt?.succeeded(); // an outage is not the client's failure
      throw err;
    }
    if (!row) {
      cache?.setUnknown(hashText, generation);
      return refused('unknown');
    }
    cache?.set(hashText, row, generation);
  }
  if (row.revokedAt) return refused('revoked');
  if (row.expiresAt && row.expiresAt <= now) return refused('expired');
  // (a frozen workspace's key stays counted against its address: its holder is refused, and must not be unlimited)
  if (row.status === 'frozen') throw apiError('workspace_frozen', 'This workspace is frozen.');
  attempt?.succeeded();
  guarding?.limits.authenticated(hashText);
  if (!row.lastUsedAt || now.getTime() - row.lastUsedAt.getTime() > 60_000) {
    // Noted first (the cached record too), so concurrent requests do not all write it.
    row.lastUsedAt = now;
    // Best effort, off the request path: a failed bookkeeping write must not fail the request.
    db('api_keys')
      .where({ id: row.keyId })
      .update({ last_used_at: now })
      .catch(() => undefined);
  }
  return {
    keyId: row.keyId,
    role: row.role,
    workspace: { id: row.workspaceId, slug: row.slug, status: row.status, timezone: row.timezone },
  };
}

export function describeCaller(caller: Caller): Me {
  return { workspace: { slug: caller.workspace.slug, status: caller.workspace.status }, role: caller.role };
}
