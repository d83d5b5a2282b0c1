import crypto from 'node:crypto';
import { derivedKeys, MasterKeyError, type KeyringOptions } from '../secrets.js';
import { invalidRequest, type ApiError } from './error-catalogue.js';

// The lists' cursors of both APIs (GET /v1/vehicles, /v1/receivables, /v1/webhooks/{id}/deliveries, /v1/events, and the admin API's
// lists): one mechanism for all. A cursor is a position in a list's order, signed. It lives in the HTTP kit, not beside
// the queries: the query modules (which the CLI calls too, with no caller and no HTTP) take and return plain positions,
// the keys of the order; what makes a position a cursor (which caller and which query it belongs to, the signature, the
// 400 naming `cursor`) is the API's. The signing key is derived from the API process's own secret (src/secrets.ts): it
// opens nothing, and the API process holds no master key.
//
// Format: base64url( version (1 byte) | the position's fields, UTF-8, joined by NUL | HMAC-SHA256, first 16 bytes ).
// The HMAC covers the version and the fields, and a binding that the cursor does not carry: the list's name, the
// workspace and the query parameters that decide which rows the list holds and in which order. So a cursor of
// another list, workspace or query, or one altered in any byte, fails the check, and nothing about it is used. The
// position is not secret (the caller saw its row), only opaque: clients must not build or read cursors. The fields
// cannot contain NUL (PostgreSQL text never does), so the join is unambiguous; so is the binding, written as JSON.

const VERSION = 1;
/** 128 bits of the HMAC: far beyond guessing, and a cursor stays short enough for a URL. */
const MAC_BYTES = 16;
/** The HKDF label of the cursor key (see derivedKeys()): a key of its own, derived from the API secret. */
export const CURSOR_KEY_LABEL = 'api-list-cursors-v1';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The lists that page by cursor, each with the shape of its position's fields (a check after the signature's). */
const LISTS = {
  /** make, model, plate */
  vehicles: [/^/, /^/, /^/],
  /** outstanding (a bigint), name, customer id */
  receivables: [/^-?\d{1,19}$/, /^/, UUID],
  /** created_at in epoch microseconds, delivery id */
  deliveries: [/^\d{1,17}$/, UUID],
  /** the admin API's deliveries of a workspace (src/core/webhooks/deliveries.ts): created_at in epoch microseconds, delivery id */
  workspaceDeliveries: [/^\d{1,17}$/, UUID],
  /** the admin API's audit trail (src/core/audit.ts): at in epoch microseconds, entry id */
  audit: [/^\d{1,17}$/, UUID],
  /** the event feed (src/webhooks/event-feed.ts): the recording transaction's id, created_at in epoch microseconds, event id */
  events: [/^\d{1,20}$/, /^\d{1,17}$/, UUID],
} satisfies Record<string, RegExp[]>;

export type CursorList = keyof typeof LISTS;

/**
 * What a cursor is bound to besides its list: the caller's workspace and the query parameters that change which rows
 * the list holds or their order (null for one not given), in a fixed order per list. `limit` is not among them: a
 * client may change the page size between pages.
 */
export interface CursorBinding {
  workspaceId: string;
  parameters: Array<string | null>;
}

/** `parameter`: the query parameter that carries the cursor (`cursor`; the event feed's `after`). */
const refused = (message: string, parameter: string): ApiError =>
  invalidRequest(
    parameter,
    `Query parameter "${parameter}" ${message}: a cursor is valid only as the nextCursor of a page of this same list, for this workspace, ` +
      `with the same query parameters (all but limit). Start again without "${parameter}".`,
  );

/** Signs and checks list cursors with keys derived from the API secret (the current one signs; any of them checks). */
export class Cursors {
  constructor(private readonly keys: Buffer[]) {
    if (keys.length === 0) throw new Error('Cursors: no key');
  }

  /**
   * The keys every API process derives alike from the API secret it is given (FRS_API_SECRET or its key file);
   * `options`: another environment's (tests).
   */
  static fromApiSecret(options?: KeyringOptions): Cursors {
    try {
      return new Cursors(derivedKeys(CURSOR_KEY_LABEL, options));
    } catch (err) {
      if (err instanceof MasterKeyError)
        throw new MasterKeyError(
          `the API signs its list cursors with a key derived from its API secret, and ${err.message}`,
        );
      throw err;
    }
  }

  encode(list: CursorList, binding: CursorBinding, position: readonly string[]): string {
    if (position.length !== LISTS[list].length || position.some((field) => field.includes('\0')))
      throw new Error(`Cursors.encode: not a ${list} position`);
    const body = Buffer.concat([Buffer.from([VERSION]), Buffer.from(position.join('\0'), 'utf8')]);
    return Buffer.concat([body, this.mac(this.keys[0], list, binding, body)]).toString('base64url');
  }

  /** The position a cursor of this list, workspace and query carries; else the 400 naming `parameter`. */
  decode(list: CursorList, binding: CursorBinding, cursor: string, parameter = 'cursor'): string[] {
    const bytes = Buffer.from(cursor, 'base64url');
    // Node's decoder skips characters outside the alphabet and ignores spare bits: only the canonical text is one.
    if (bytes.toString('base64url') !== cursor || bytes.length < 1 + MAC_BYTES || bytes[0] !== VERSION)
      throw refused('is not a cursor this service made', parameter);
    const body = bytes.subarray(0, bytes.length - MAC_BYTES);
    const mac = bytes.subarray(bytes.length - MAC_BYTES);
    if (!this.keys.some((key) => crypto.timingSafeEqual(this.mac(key, list, binding, body), mac))) {
      throw refused('was altered, or was made for another list, workspace or query', parameter);
    }
    const position = body.subarray(1).toString('utf8').split('\0');
    const shape = LISTS[list];
    if (position.length !== shape.length || position.some((field, i) => !shape[i].test(field)))
      throw refused('is not a cursor of this list', parameter);
    return position;
  }

  /**
   * A page's answer with `nextCursor` appended: its JSON text (an object, built by PostgreSQL) with the key added at
   * its end, the cursor made from the page's `next` (null on the last page). Node never parses the rows.
   */
  pageJson(list: CursorList, binding: CursorBinding, page: { json: string; next: readonly string[] | null }): string {
    if (!page.json.endsWith('}')) throw new Error('Cursors.pageJson: the answer is not a JSON object');
    const next = page.next === null ? 'null' : JSON.stringify(this.encode(list, binding, page.next));
    return `${page.json.slice(0, -1)},"nextCursor":${next}}`;
  }

  private mac(key: Buffer, list: CursorList, binding: CursorBinding, body: Buffer): Buffer {
    const bound = JSON.stringify([list, binding.workspaceId, ...binding.parameters]);
    return crypto
      .createHmac('sha256', key)
      .update(bound, 'utf8')
      .update(Buffer.from([0]))
      .update(body)
      .digest()
      .subarray(0, MAC_BYTES);
  }
}
