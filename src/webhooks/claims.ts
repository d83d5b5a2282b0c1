import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { TEST_EVENT } from './catalogue.js';
import type { PendingDispatch } from './dispatch.js';
import { PENDING } from './endpoint-lifecycle.js';
import { fairCandidates, type InFlightShares } from './fairness.js';
import { tenantOf } from './platform-events.js';
import { NEXT_TOKEN_SQL, RATE_CONTENDED_SQL, RATE_TAKEN_SQL } from './rate-limits.js';
import { rows } from '../queries/common.js';
import { openPrivateKey, openSigningSecrets } from './sealing.js';
import { ed25519PrivateKey } from './signing.js';

// The claim stage: due deliveries leased to one dispatcher in fair order (FOR NO KEY UPDATE SKIP LOCKED, then a
// lease, so several processes can run at once), each with its endpoint's signing secrets opened.

/** What a dispatcher claims with, fixed for its life. */
export interface ClaimSettings {
  db: Knex;
  logger: Logger;
  /** Written into lease_owner. */
  owner: string;
  /** How long a claim is held before another dispatcher may take the delivery over. */
  leaseMs: number;
  /** How many deliveries one endpoint, and one workspace, may hold in this process (in flight or ready). */
  perEndpoint: number;
  perWorkspace: number;
  /** Only deliveries of these workspaces; null: every workspace. */
  workspaceIds: string[] | null;
}

/** A claim as the database returns it: the signing secrets still sealed (base64). */
type SealedClaim = Omit<PendingDispatch, 'secrets'> & {
  secretKeyId: string;
  secretSealed: string;
  previousSecretKeyId: string | null;
  previousSecretSealed: string | null;
  /** False once an ed25519 endpoint's switch overlap is over: its secret no longer signs. */
  symmetric: boolean;
  /** The ed25519 private keys that sign (`v1a`), sealed; null when none does. */
  privateKeyId: string | null;
  privateKeySealed: string | null;
  previousPrivateKeyId: string | null;
  previousPrivateKeySealed: string | null;
};

/**
 * Leases up to `limit` due deliveries in fair order (fairness.ts), within the free per-endpoint and per-workspace
 * slots of `held` and the throttled endpoints' token buckets (rate-limits.ts). `contended`: some due candidates, or a
 * throttled endpoint's bucket, were skipped because another dispatcher was locking them. `nextTokenInMs`: when a
 * throttled endpoint whose bucket this claim emptied has its next token (null: none did).
 */
export async function claimDue(
  settings: ClaimSettings,
  { limit, now, held }: { limit: number; now: Date; held: InFlightShares },
): Promise<{ claims: PendingDispatch[]; contended: boolean; nextTokenInMs: number | null }> {
  const fair = fairCandidates({
    shares: held,
    now,
    perEndpoint: settings.perEndpoint,
    perWorkspace: settings.perWorkspace,
    workspaceIds: settings.workspaceIds,
    limit,
    pending: PENDING,
    testEvent: TEST_EVENT,
  });
  const [result] = await rows<{ claims: SealedClaim[]; contended: boolean; nextTokenInMs: number | null }>(
    settings.db,
    `WITH ${fair.sql}, locked AS (
       SELECT d.id FROM deliveries d
       WHERE d.id IN (SELECT id FROM candidates) AND d.${PENDING} AND d.next_attempt_at <= :now
         AND (d.lease_until IS NULL OR d.lease_until < now())
       FOR NO KEY UPDATE OF d SKIP LOCKED
     ), claimed AS (
       UPDATE deliveries d SET lease_owner = :owner, lease_until = now() + :leaseMs * interval '1 millisecond'
       FROM locked l, webhook_endpoints w
       WHERE d.id = l.id AND w.id = d.endpoint_id
       RETURNING d.id AS "deliveryId", d.endpoint_id AS "endpointId", ${tenantOf('d')} AS "workspaceId", d.event, d.body, w.url, d.attempts + 1 AS attempt,
         w.secret_key_id AS "secretKeyId", encode(w.secret_sealed, 'base64') AS "secretSealed",
         -- the previous secret signs too while a rotation's overlap lasts
         CASE WHEN w.previous_secret_expires_at > now() THEN w.previous_secret_key_id END AS "previousSecretKeyId",
         CASE WHEN w.previous_secret_expires_at > now() THEN encode(w.previous_secret_sealed, 'base64') END AS "previousSecretSealed",
         -- the secret signs (v1, service-signature) unless the endpoint is ed25519's and a switch's overlap is over; the
         -- key pair signs (v1a) while it is ed25519's or that overlap lasts, the previous pair while a rotation's lasts
         (w.signature_scheme = 'hmac-sha256' OR w.previous_scheme_expires_at > now()) AS symmetric,
         CASE WHEN w.signature_scheme = 'ed25519' OR w.previous_scheme_expires_at > now() THEN w.signing_private_key_key_id END AS "privateKeyId",
         CASE WHEN w.signature_scheme = 'ed25519' OR w.previous_scheme_expires_at > now() THEN encode(w.signing_private_key_sealed, 'base64') END AS "privateKeySealed",
         CASE WHEN (w.signature_scheme = 'ed25519' OR w.previous_scheme_expires_at > now()) AND w.previous_signing_key_expires_at > now()
           THEN w.previous_signing_private_key_key_id END AS "previousPrivateKeyId",
         CASE WHEN (w.signature_scheme = 'ed25519' OR w.previous_scheme_expires_at > now()) AND w.previous_signing_key_expires_at > now()
           THEN encode(w.previous_signing_private_key_sealed, 'base64') END AS "previousPrivateKeySealed",
         -- the destinations the workspace's own setting opens, checked at connect time
         coalesce((SELECT ws.webhook_allowed_cidrs FROM workspaces ws WHERE ws.id = d.workspace_id), '{}') AS "allowedCidrs"
     ), ${RATE_TAKEN_SQL}
     -- in the fair order: the claims are sent in it
     SELECT coalesce((SELECT json_agg(c ORDER BY f.claim_order) FROM claimed c JOIN candidates f ON f.id = c."deliveryId"), '[]') AS claims,
            (SELECT count(*) FROM candidates) > (SELECT count(*) FROM claimed)
              OR ${RATE_CONTENDED_SQL} AS contended,
            ${NEXT_TOKEN_SQL}::int AS "nextTokenInMs"`,
    { ...fair.bindings, owner: settings.owner, leaseMs: settings.leaseMs },
    { prepared: true, indexPlans: true },
  );
  // An endpoint's secrets are opened once per claim (its deliveries carry the same sealed values), and kept
  // nowhere else: a rotation or a master-key change is seen by the next claim.
  const opened = new Map<string, Signers | null>();
  return {
    claims: result.claims.flatMap((claim) => openSecrets(settings.logger, claim, opened)),
    contended: result.contended,
    nextTokenInMs: result.nextTokenInMs,
  };
}

/** What signs an endpoint's attempts: its secrets (none once only its ed25519 keys sign) and its ed25519 keys. */
type Signers = Pick<PendingDispatch, 'secrets' | 'signingKeys'>;

/**
 * The claim with its signing secrets and keys opened. One whose secrets this process cannot open (its master key is
 * missing) is not attempted: its lease runs out and it is tried again, once the key is configured.
 */
function openSecrets(
  logger: Logger,
  {
    secretKeyId,
    secretSealed,
    previousSecretKeyId,
    previousSecretSealed,
    symmetric,
    privateKeyId,
    privateKeySealed,
    previousPrivateKeyId,
    previousPrivateKeySealed,
    ...claim
  }: SealedClaim,
  opened: Map<string, Signers | null>,
): PendingDispatch[] {
  const known = opened.get(claim.endpointId);
  if (known !== undefined) return known ? [{ ...claim, ...known }] : [];
  try {
    const current = { keyId: secretKeyId, sealed: Buffer.from(secretSealed, 'base64') };
    const previous =
      previousSecretKeyId && previousSecretSealed
        ? { keyId: previousSecretKeyId, sealed: Buffer.from(previousSecretSealed, 'base64') }
        : null;
    const signers: Signers = {
      secrets: symmetric ? openSigningSecrets(claim.endpointId, current, previous) : [],
      signingKeys: [
        [privateKeyId, privateKeySealed],
        [previousPrivateKeyId, previousPrivateKeySealed],
      ].flatMap(([keyId, sealed]) =>
        keyId && sealed
          ? [ed25519PrivateKey(openPrivateKey(claim.endpointId, { keyId, sealed: Buffer.from(sealed, 'base64') }))]
          : [],
      ),
    };
    opened.set(claim.endpointId, signers);
    return [{ ...claim, ...signers }];
  } catch (err) {
    opened.set(claim.endpointId, null);
    logger.error(
      { endpointId: claim.endpointId, deliveryId: claim.deliveryId, err: { message: (err as Error).message } },
      "cannot open the endpoint's signing secret; the delivery waits",
    );
    return [];
  }
}

/** Gives back the leases of claims this dispatcher will not send, so that another may take them at once. */
export async function releaseClaims({ db, logger, owner }: ClaimSettings, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  try {
    await db('deliveries')
      .whereIn('id', ids)
      .where({ lease_owner: owner })
      .update({ lease_owner: null, lease_until: null });
  } catch (err) {
    logger.warn(
      { err: { message: (err as Error).message } },
      'could not give back the leases of unsent claims; they run out',
    );
  }
}
