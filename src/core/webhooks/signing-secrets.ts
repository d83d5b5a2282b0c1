import type { Knex } from 'knex';
import { recordAudit } from '../audit.js';
import { workspaceFilter, type Actor, type OperatorActor } from '../actor.js';
import { createMasterKeyFile, MasterKeyError, newSigningSecret, rotateMasterKey } from '../../secrets.js';
import {
  KEY_SETTINGS,
  openPrivateKey,
  openSigningSecret,
  storedSecrets,
  withSealingLock,
  type Sealer,
} from '../../webhooks/sealing.js';
import { newSigningKeyPair, publicKeyText, type SigningKeyPair } from '../../webhooks/signing.js';
import { ConflictError, InvalidFieldError, isUuid, NotFoundError } from '../../errors.js';

// The actions on endpoints' signing secrets: rotating one, re-sealing them all under a new master key, making a key
// file. How they are sealed and opened is the engine's (src/webhooks/sealing.ts). During a rotation's overlap the
// previous secret is kept sealed the same way, with the time it stops being used; deliveries are then signed with
// both, the new one first.

/** Hours the previous secret keeps signing after a rotation, unless the operator says otherwise. */
export const DEFAULT_OVERLAP_HOURS = 24;
/** The longest overlap allowed: a month. */
export const MAX_OVERLAP_HOURS = 720;

/**
 * `fleet-admin secrets create-master-key`: a new key file, for a database that holds no sealed signing secret (one
 * that does needs the key they were sealed with, not a new one).
 */
export async function createMasterKey(db: Knex, _actor: OperatorActor): Promise<{ keyId: string; file: string }> {
  const stored = await storedSecrets(db);
  if (stored && !stored.plain) {
    throw new MasterKeyError(
      `the database holds signing secrets${stored.keyId ? ` sealed with master key ${stored.keyId}` : ''}: a new key would open none of them; ` +
        `give this process the key they were sealed with (${KEY_SETTINGS})`,
    );
  }
  return createMasterKeyFile();
}

/** An overlap as given (default 24 hours), or 400 naming `overlapHours`. */
export function checkOverlapHours(given: number | undefined): number {
  const overlapHours = given ?? DEFAULT_OVERLAP_HOURS;
  if (!Number.isInteger(overlapHours) || overlapHours < 0 || overlapHours > MAX_OVERLAP_HOURS) {
    throw new InvalidFieldError(
      'overlapHours',
      `must be a whole number of hours from 0 to ${MAX_OVERLAP_HOURS}, got ${overlapHours}`,
    );
  }
  return overlapHours;
}

export interface RotatedSecret {
  id: string;
  /** The new signing secret, shown this once. */
  secret: string;
  /** Until when deliveries also carry a signature with the previous secret; null when it ended at once. */
  previousSecretExpiresAt: string | null;
}

/**
 * The live workspace endpoint a rotation changes (an operational one, workspace_id NULL, is rotated through
 * operational-endpoints.ts), locked until the transaction ends, with its signature scheme; 404 when there is none.
 */
async function lockRotatedEndpoint(
  trx: Knex.Transaction,
  id: string,
  workspaceId: string | undefined,
): Promise<{ workspace_id: string; signature_scheme: string }> {
  const row: { workspace_id: string; signature_scheme: string } | undefined = await trx('webhook_endpoints')
    .where({ id, ...(workspaceId !== undefined ? { workspace_id: workspaceId } : {}) })
    .whereNull('deleted_at')
    .whereNotNull('workspace_id')
    .forNoKeyUpdate()
    .first('workspace_id', 'signature_scheme');
  if (!row) throw new NotFoundError(`no webhook endpoint with id ${id}`);
  return row;
}

/**
 * Gives an endpoint a new signing secret. For `overlapHours` (default 24; 0 ends the old secret at once) every
 * delivery carries signatures with both, the new one first. A secret that was itself still in an overlap is
 * dropped: at most two secrets sign at a time.
 */
export async function rotateSigningSecret(
  db: Knex,
  actor: Actor,
  input: { endpointId: string; workspaceId: string | 'every'; overlapHours?: number; now: Date },
): Promise<RotatedSecret> {
  const { endpointId: id, now } = input;
  const options = { overlapHours: input.overlapHours, workspaceId: workspaceFilter(actor, input.workspaceId) };
  if (!isUuid(id)) throw new InvalidFieldError('id', `must be a UUID, got "${id}"`);
  const overlapHours = checkOverlapHours(options.overlapHours);
  const secret = newSigningSecret();
  return withSealingLock(db, 'shared', async (trx, sealer) => {
    // An ed25519 endpoint's secret signs nothing (v1a needs no secret: the sender hands none out), so rotating it
    // would only hand one out: refused, pointing at the key pair's rotation or the switch back to hmac-sha256.
    const endpoint = await lockRotatedEndpoint(trx, id, options.workspaceId);
    if (endpoint.signature_scheme === 'ed25519')
      throw new ConflictError(
        (name) =>
          `the endpoint signs with ed25519 (v1a) and its secret signs nothing: rotate its key pair instead (rotate-signing-key), or switch its ${name('signatureScheme')} to hmac-sha256, which gives it a new secret`,
        'signatureScheme',
      );
    const expiresAt = overlapHours > 0 ? new Date(now.getTime() + overlapHours * 3_600_000) : null;
    const workspaceId = endpoint.workspace_id;
    await setSigningSecret(trx, sealer, { id, workspaceId, secret, previousExpiresAt: expiresAt });
    const previousSecretExpiresAt = expiresAt?.toISOString() ?? null;
    // (that the secret changed, never the secret)
    await recordAudit(trx, actor.audit, {
      action: 'endpoint.rotate_secret',
      workspaceId,
      target: { type: 'endpoint', id },
      changes: { overlapHours, previousSecretExpiresAt },
    });
    return { id, secret, previousSecretExpiresAt };
  });
}

/**
 * Stores an endpoint's new signing secret, sealed by `sealer`; the current one becomes the previous one until
 * `previousExpiresAt` (null: dropped). The move happens inside the database (rotate_endpoint_secret(), a definer of
 * migration 20261128000100): the admin role may write sealed secrets but never read one, not even to move it.
 * Returns the endpoint's workspace, or null when no live endpoint has the id (within `workspaceId`, when given).
 */
export async function setSigningSecret(
  trx: Knex.Transaction,
  sealer: Sealer,
  input: { id: string; workspaceId: string | undefined; secret: string; previousExpiresAt: Date | null },
): Promise<string | null> {
  const { secret_key_id: keyId, secret_sealed: sealed } = sealer.columns(input.id, input.secret);
  const {
    rows: [row],
  } = await trx.raw('SELECT rotate_endpoint_secret(?::uuid, ?::uuid, ?, ?, ?::timestamptz) AS workspace_id', [
    input.id,
    input.workspaceId ?? null,
    keyId,
    sealed,
    input.previousExpiresAt,
  ]);
  return row.workspace_id;
}

export interface RotatedSigningKey {
  id: string;
  /** The new ed25519 public key (`whpk_` + base64): receivers verify `v1a` with it. */
  publicKey: string;
  /** Until when deliveries also carry a `v1a` signature with the previous key pair; null when it ended at once. */
  previousKeyExpiresAt: string | null;
}

/**
 * Gives an ed25519 endpoint a new key pair, the private key sealed at once (never shown, kept nowhere in plain text).
 * For `overlapHours` (default 24, as a secret's rotation; 0 ends the old pair at once) every delivery carries `v1a`
 * signatures with both, the new key's first; a pair still in an overlap is dropped. An endpoint signing with its
 * secret is 409: switch it to ed25519 first (switchSignatureScheme), which makes its first pair.
 */
export async function rotateSigningKey(
  db: Knex,
  actor: Actor,
  input: { endpointId: string; workspaceId: string | 'every'; overlapHours?: number; now: Date },
): Promise<RotatedSigningKey> {
  const { endpointId: id, now } = input;
  const workspaceId = workspaceFilter(actor, input.workspaceId);
  if (!isUuid(id)) throw new InvalidFieldError('id', `must be a UUID, got "${id}"`);
  const overlapHours = checkOverlapHours(input.overlapHours);
  const keyPair = newSigningKeyPair();
  return withSealingLock(db, 'shared', async (trx, sealer) => {
    const row = await lockRotatedEndpoint(trx, id, workspaceId);
    if (row.signature_scheme !== 'ed25519')
      throw new ConflictError(
        (name) =>
          `the endpoint signs with its secret (${row.signature_scheme}) and has no key pair to rotate: switch its ${name('signatureScheme')} to ed25519 first, which makes one`,
        'signatureScheme',
      );
    const expiresAt = overlapHours > 0 ? new Date(now.getTime() + overlapHours * 3_600_000) : null;
    await setSigningKey(trx, sealer, { id, workspaceId: row.workspace_id, keyPair, previousExpiresAt: expiresAt });
    const previousKeyExpiresAt = expiresAt?.toISOString() ?? null;
    // (that the key pair changed, never a key)
    await recordAudit(trx, actor.audit, {
      action: 'endpoint.rotate_signing_key',
      workspaceId: row.workspace_id,
      target: { type: 'endpoint', id },
      changes: { overlapHours, previousKeyExpiresAt },
    });
    return { id, publicKey: publicKeyText(keyPair.publicKey), previousKeyExpiresAt };
  });
}

/**
 * Stores an endpoint's new key pair, its private key sealed by `sealer`; the current pair becomes the previous one
 * until `previousExpiresAt` (null: dropped). The move happens inside the database (set_endpoint_signing_key(), a
 * definer of migration 20261128002300): the admin role may write sealed keys but never read one.
 */
export async function setSigningKey(
  trx: Knex.Transaction,
  sealer: Sealer,
  input: { id: string; workspaceId: string; keyPair: SigningKeyPair; previousExpiresAt: Date | null },
): Promise<void> {
  const { id, keyPair } = input;
  const sealed = sealer.privateKeyColumns(id, keyPair.privateKey);
  await trx.raw('SELECT set_endpoint_signing_key(?::uuid, ?::uuid, ?, ?, ?, ?::timestamptz)', [
    id,
    input.workspaceId,
    keyPair.publicKey,
    sealed.signing_private_key_key_id,
    sealed.signing_private_key_sealed,
    input.previousExpiresAt,
  ]);
}

/**
 * `fleet-admin secrets rotate-master-key`: re-seals every endpoint's signing secrets under the new master key in
 * one transaction; previous secrets whose overlap has ended are dropped instead. With DATABASE_URL a key file is
 * rotated only when `keyFileIsShared` (src/secrets.ts).
 */
export async function resealSigningSecrets(
  db: Knex,
  actor: OperatorActor,
  options: { keyFileIsShared: boolean },
): Promise<{ keyId: string; source: 'env' | 'file'; file?: string; resealed: number }> {
  const { result, ...rotated } = await rotateMasterKey(
    () =>
      withSealingLock(db, 'exclusive', async (trx, sealer) => {
        // every secret not in a sealed box to the new key: another key's, or a version-1 value (from before sealed boxes)
        const rows = await trx('webhook_endpoints')
          .where('secret_key_id', '<>', sealer.keyId)
          .orWhere('previous_secret_key_id', '<>', sealer.keyId)
          .orWhereRaw('get_byte(secret_sealed, 0) <> 2 OR get_byte(previous_secret_sealed, 0) <> 2')
          .orderBy('id')
          .forNoKeyUpdate()
          .select(
            'id',
            'secret_key_id',
            'secret_sealed',
            'previous_secret_key_id',
            'previous_secret_sealed',
            'previous_secret_expires_at',
          );
        for (const row of rows) {
          const current = openSigningSecret(row.id, { keyId: row.secret_key_id, sealed: row.secret_sealed });
          const previousLive = row.previous_secret_sealed && row.previous_secret_expires_at > new Date();
          const previous = previousLive
            ? sealer.columns(
                row.id,
                openSigningSecret(row.id, { keyId: row.previous_secret_key_id, sealed: row.previous_secret_sealed }),
              )
            : null;
          await trx('webhook_endpoints')
            .where({ id: row.id })
            .update({
              ...sealer.columns(row.id, current),
              previous_secret_key_id: previous?.secret_key_id ?? null,
              previous_secret_sealed: previous?.secret_sealed ?? null,
              previous_secret_expires_at: previous ? row.previous_secret_expires_at : null,
            });
        }
        const resealedPrivateKeys = await resealPrivateKeys(trx, sealer);
        // the new key's id (a digest, never the key) and how many endpoints it now seals
        await recordAudit(trx, actor.audit, {
          action: 'master_key.rotate',
          workspaceId: null,
          target: { type: 'master_key', id: sealer.keyId },
          changes: { resealed: rows.length, resealedPrivateKeys },
        });
        return rows.length;
      }),
    options,
  );
  return { ...rotated, resealed: result };
}

/**
 * The master-key rotation's re-seal of the endpoints' ed25519 private keys (in its exclusive sealing transaction):
 * every one not in a sealed box to the new key is opened and sealed again; a previous key whose overlap has ended is
 * dropped instead. Returns how many endpoints' keys were re-sealed.
 */
async function resealPrivateKeys(trx: Knex.Transaction, sealer: Sealer): Promise<number> {
  const rows = await trx('webhook_endpoints')
    .where('signing_private_key_key_id', '<>', sealer.keyId)
    .orWhere('previous_signing_private_key_key_id', '<>', sealer.keyId)
    .orderBy('id')
    .forNoKeyUpdate()
    .select(
      'id',
      'signing_private_key_key_id',
      'signing_private_key_sealed',
      'previous_signing_private_key_key_id',
      'previous_signing_private_key_sealed',
      'previous_signing_key_expires_at',
    );
  for (const row of rows) {
    const current = row.signing_private_key_sealed
      ? sealer.privateKeyColumns(
          row.id,
          openPrivateKey(row.id, { keyId: row.signing_private_key_key_id, sealed: row.signing_private_key_sealed }),
        )
      : {};
    const previousLive = row.previous_signing_private_key_sealed && row.previous_signing_key_expires_at > new Date();
    const previous = previousLive
      ? sealer.privateKeyColumns(
          row.id,
          openPrivateKey(row.id, {
            keyId: row.previous_signing_private_key_key_id,
            sealed: row.previous_signing_private_key_sealed,
          }),
        )
      : null;
    await trx('webhook_endpoints')
      .where({ id: row.id })
      .update({
        ...current,
        previous_signing_private_key_key_id: previous?.signing_private_key_key_id ?? null,
        previous_signing_private_key_sealed: previous?.signing_private_key_sealed ?? null,
        ...(previous ? {} : { previous_signing_public_key: null, previous_signing_key_expires_at: null }),
      });
  }
  return rows.length;
}
