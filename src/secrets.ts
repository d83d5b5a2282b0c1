import crypto from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniformly random base62 string (rejection sampling, so no character is more likely than another). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of crypto.randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export const API_KEY_PREFIX = 'frs_';
export const SIGNING_SECRET_PREFIX = 'whsec_';

/** A new API key: `frs_` + 40 base62 characters (~238 bits). Shown once; only its SHA-256 hash is stored. */
export function newApiKey(): string {
  return API_KEY_PREFIX + randomBase62(40);
}

/** A new webhook signing secret: `whsec_` + 40 base62 characters. */
export function newSigningSecret(): string {
  return SIGNING_SECRET_PREFIX + randomBase62(40);
}

export function hashApiKey(key: string): Buffer {
  return crypto.createHash('sha256').update(key, 'utf8').digest();
}
