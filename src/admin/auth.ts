import type { Knex } from 'knex';
import type { AuthGuard } from '../http/auth-failures.js';
import { bearerToken } from '../http/bearer-token.js';
import { hashApiKey } from '../secrets.js';
import { adminTokenHolder, type AdminTokenHolder } from '../core/admin-tokens.js';
import { CredentialError, InputError } from '../errors.js';

// Authentication of the admin API: `Authorization: Bearer fra_...`, looked up by its hash (src/core/admin-tokens.ts) on
// every request, so a revoked token is refused from its next request on. Every attempt that is not a token this
// process saw work counts against the client address, as on the public API (src/http/auth-failures.ts), before the
// database is asked: a flood of guesses is refused with 429 for the price of a look-up in memory.

/**
 * Looks a credential up under the client address's failure limit (429 when the address failed too often, before the
 * database is asked): `hashText` is the credential's hash, undefined when none was sent (then undefined). A
 * CredentialError of the lookup counts against the address, unless its failure is one of `uncounted` (a credential
 * that was real: it is forgotten as good, not counted); a holder is remembered as good, so its next requests cost
 * nothing there, as is a credential whose request the core refused for what it asked (an InputError); an outage is
 * not the client's failure.
 */
export async function guardedLookup<R>(
  guard: AuthGuard,
  hashText: string | undefined,
  lookup: () => Promise<R>,
  uncounted: ReadonlyArray<CredentialError['failure']> = [],
): Promise<R | undefined> {
  const attempt = await guard.limits.attempt(guard.address, hashText);
  guard.standing = attempt.standing;
  if (hashText === undefined) return undefined;
  let held: R;
  try {
    held = await lookup();
  } catch (err) {
    if (err instanceof CredentialError) {
      guard.limits.forget(hashText);
      if (uncounted.includes(err.failure)) attempt.succeeded();
    } else {
      attempt.succeeded();
      if (err instanceof InputError) guard.limits.authenticated(hashText);
    }
    throw err;
  }
  attempt.succeeded();
  guard.limits.authenticated(hashText);
  return held;
}

/** The token's holder, or the documented 401 (429 when the address failed too often). A public API key is `unknown`. */
export async function authenticateAdmin(
  db: Knex,
  authorization: string | undefined,
  now: Date,
  guard: AuthGuard,
): Promise<AdminTokenHolder> {
  const token = bearerToken(authorization);
  const held = await guardedLookup(guard, token === undefined ? undefined : hashApiKey(token).toString('base64'), () =>
    adminTokenHolder(db, token!, now),
  );
  if (held === undefined) throw new CredentialError('admin_token', 'missing');
  return held;
}
