import type { Knex } from 'knex';
import { currentMasterKeyId, newSigningSecret, openSecret, rotateMasterKey, sealSecret, type SealedSecret } from '../secrets.js';
import { InputError, isUuid } from '../workspaces.js';

// Endpoints' signing secrets at rest: sealed (AES-256-GCM under the master key, see src/secrets.ts) in
// webhook_endpoints.secret_sealed with the sealing key's id in secret_key_id. During a rotation's overlap the
// previous secret is kept sealed the same way, with the time it stops being used; deliveries are then signed
// with both, the new one first.

/** Hours the previous secret keeps signing after a rotation, unless the operator says otherwise. */
export const DEFAULT_OVERLAP_HOURS = 24;
/** The longest overlap allowed: a month. */
export const MAX_OVERLAP_HOURS = 720;

/** The authenticated context of an endpoint's sealed secret: it opens only on that endpoint's row. */
function sealingContext(endpointId: string): string {
  return `webhook_endpoints.secret:${endpointId}`;
}

/**
 * Runs `work` in a transaction holding the sealing lock: shared for a writer that seals a secret (the master key is
 * read after the lock is taken), exclusive for the master-key rotation's re-seal. So a secret sealed under the old
 * key is either committed before the re-seal starts (and re-sealed by it) or sealed under the new key: none is
 * left under a key the rotation then removes from the key file.
 */
export function withSealingLock<T>(db: Knex, mode: 'shared' | 'exclusive', work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  return db.transaction(async (trx) => {
    await trx.raw(mode === 'shared' ? 'SELECT pg_advisory_xact_lock_shared(?::bigint)' : 'SELECT pg_advisory_xact_lock(?::bigint)', [SEALING_LOCK]);
    return work(trx);
  });
}

/** The advisory lock key of sealing (an arbitrary constant of this service's). */
const SEALING_LOCK = '7262193140017346561';

/** The columns holding an endpoint's current signing secret, sealed. */
export function sealedSecretColumns(endpointId: string, secret: string): { secret_key_id: string; secret_sealed: Buffer } {
  const { keyId, sealed } = sealSecret(secret, sealingContext(endpointId));
  return { secret_key_id: keyId, secret_sealed: sealed };
}

/** Opens one sealed signing secret of an endpoint. */
export function openSigningSecret(endpointId: string, secret: SealedSecret): string {
  return openSecret(secret, sealingContext(endpointId));
}

/**
 * The secrets an attempt is signed with, newest first: the current one, and the previous one while a rotation's
 * overlap lasts (the caller passes it only then).
 */
export function openSigningSecrets(endpointId: string, current: SealedSecret, previous: SealedSecret | null): string[] {
  return previous ? [openSigningSecret(endpointId, current), openSigningSecret(endpointId, previous)] : [openSigningSecret(endpointId, current)];
}

export interface RotatedSecret {
  id: string;
  /** The new signing secret, shown this once. */
  secret: string;
  /** Until when deliveries also carry a signature with the previous secret; null when it ended at once. */
  previousSecretExpiresAt: string | null;
}

/**
 * Gives an endpoint a new signing secret. For `overlapHours` (default 24; 0 ends the old secret at once) every
 * delivery carries signatures with both, the new one first. A secret that was itself still in an overlap is
 * dropped: at most two secrets sign at a time.
 */
export async function rotateSigningSecret(db: Knex, id: string, options: { overlapHours?: number; now?: Date } = {}): Promise<RotatedSecret> {
  if (!isUuid(id)) throw new InputError(`--id must be a UUID, got "${id}"`);
  const overlapHours = options.overlapHours ?? DEFAULT_OVERLAP_HOURS;
  if (!Number.isInteger(overlapHours) || overlapHours < 0 || overlapHours > MAX_OVERLAP_HOURS) {
    throw new InputError(`--overlap-hours must be a whole number of hours from 0 to ${MAX_OVERLAP_HOURS}, got ${overlapHours}`);
  }
  const now = options.now ?? new Date();
  const secret = newSigningSecret();
  return withSealingLock(db, 'shared', async (trx) => {
    const row = await trx('webhook_endpoints').where({ id }).forNoKeyUpdate().first('secret_key_id', 'secret_sealed');
    if (!row) throw new InputError(`no webhook endpoint with id ${id}`);
    // Refuses (MasterKeyError) when this process lacks the master key the endpoint's secrets are sealed with, so a
    // new secret is never sealed under a key the workers do not share.
    if (row.secret_key_id !== currentMasterKeyId()) openSigningSecret(id, { keyId: row.secret_key_id, sealed: row.secret_sealed });
    const expiresAt = overlapHours > 0 ? new Date(now.getTime() + overlapHours * 3_600_000) : null;
    await trx('webhook_endpoints')
      .where({ id })
      .update({
        ...sealedSecretColumns(id, secret),
        previous_secret_key_id: expiresAt ? row.secret_key_id : null,
        previous_secret_sealed: expiresAt ? row.secret_sealed : null,
        previous_secret_expires_at: expiresAt,
      });
    return { id, secret, previousSecretExpiresAt: expiresAt?.toISOString() ?? null };
  });
}

/**
 * `fleet-admin secrets rotate-master-key`: re-seals every endpoint's signing secrets under the new master key in
 * one transaction; previous secrets whose overlap has ended are dropped instead.
 */
export async function resealSigningSecrets(db: Knex): Promise<{ keyId: string; source: 'env' | 'file'; resealed: number }> {
  const { keyId, source, result } = await rotateMasterKey((currentKeyId) =>
    withSealingLock(db, 'exclusive', async (trx) => {
      const rows = await trx('webhook_endpoints')
        .where('secret_key_id', '<>', currentKeyId)
        .orWhere('previous_secret_key_id', '<>', currentKeyId)
        .orderBy('id')
        .forNoKeyUpdate()
        .select('id', 'secret_key_id', 'secret_sealed', 'previous_secret_key_id', 'previous_secret_sealed', 'previous_secret_expires_at');
      for (const row of rows) {
        const current = openSigningSecret(row.id, { keyId: row.secret_key_id, sealed: row.secret_sealed });
        const previousLive = row.previous_secret_sealed && row.previous_secret_expires_at > new Date();
        const previous = previousLive ? sealedSecretColumns(row.id, openSigningSecret(row.id, { keyId: row.previous_secret_key_id, sealed: row.previous_secret_sealed })) : null;
        await trx('webhook_endpoints')
          .where({ id: row.id })
          .update({
            ...sealedSecretColumns(row.id, current),
            previous_secret_key_id: previous?.secret_key_id ?? null,
            previous_secret_sealed: previous?.secret_sealed ?? null,
            previous_secret_expires_at: previous ? row.previous_secret_expires_at : null,
          });
      }
      return rows.length;
    }),
  );
  return { keyId, source, resealed: result };
}
