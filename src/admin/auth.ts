import type { Knex } from 'knex';
import { ApiError } from '../api/errors.js';
import { bearerToken, type AuthGuard } from '../api/auth.js';
import { hashApiKey } from '../secrets.js';
import { adminTokenHolder, type AdminTokenHolder } from '../admin-tokens.js';

// Authentication of the admin API: `Authorization: Bearer fra_...`, looked up by its hash (src/admin-tokens.ts) on
// every request, so a revoked token is refused from its next request on. Every attempt that is not a token this
// process saw work counts against the client address, as on the public API (src/api/auth-failures.ts), before the
// database is asked: a flood of guesses is refused with 429 for the price of a look-up in memory.

type Failure = 'missing' | 'unknown' | 'revoked' | 'expired';

const MESSAGES: Record<Failure, string> = {
  missing: 'Send an admin token as "Authorization: Bearer <ADMIN_TOKEN>".',
  unknown: 'This admin token is not known.',
  revoked: 'This admin token was revoked.',
  expired: 'This admin token has expired.',
};

function unauthorized(reason: Failure): ApiError {
  const header = reason === 'missing'
    ? 'Bearer realm="fleet-rental-admin"'
    : `Bearer realm="fleet-rental-admin", error="invalid_token", error_description="${reason}"`;
  return new ApiError(401, 'unauthorized', MESSAGES[reason], reason, { 'WWW-Authenticate': header });
}

/**
 * Looks a credential up under the client address's failure limit (429 when the address failed too often, before the
 * database is asked): `hashText` is the credential's hash, undefined when none was sent ('missing'). A failure the
 * lookup reports (a string) counts against the address; a holder is remembered as good, so its next requests cost
 * nothing there; an outage is not the client's failure.
 */
export async function guardedLookup<R>(guard: AuthGuard, hashText: string | undefined, lookup: () => Promise<R>): Promise<R | 'missing'> {
  const attempt = await guard.limits.attempt(guard.address, hashText);
  guard.standing = attempt.standing;
  if (hashText === undefined) return 'missing';
  let held: R;
  try {
    held = await lookup();
  } catch (err) {
    attempt.succeeded();
    throw err;
  }
  if (typeof held === 'string') {
    guard.limits.forget(hashText);
    return held;
  }
  attempt.succeeded();
  guard.limits.authenticated(hashText);
  return held;
}

/** The token's holder, or the documented 401 (429 when the address failed too often). A public API key is `unknown`. */
export async function authenticateAdmin(db: Knex, authorization: string | undefined, now: Date, guard: AuthGuard): Promise<AdminTokenHolder> {
  const token = bearerToken(authorization);
  const held = await guardedLookup(guard, token === undefined ? undefined : hashApiKey(token).toString('base64'), () => adminTokenHolder(db, token!, now));
  if (typeof held === 'string') throw unauthorized(held);
  return held;
}
