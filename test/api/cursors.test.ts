import crypto from 'node:crypto';
import { expect } from 'chai';
import { ApiError } from '../../src/http/error-catalogue.js';
import { CURSOR_KEY_LABEL, Cursors, type CursorBinding } from '../../src/http/cursors.js';
import { derivedKeys } from '../../src/secrets.js';

// The one cursor mechanism of the API's lists (src/http/cursors.ts), without HTTP: what binds a cursor, what refuses
// it, and where its key comes from. The lists' paging through HTTP: test/api/paging.test.ts, test/api/deliveries.test.ts.

const MASTER = crypto.randomBytes(32).toString('base64');
const OTHER_MASTER = crypto.randomBytes(32).toString('base64');
const WS = '5b0c2f4e-8a1d-4c3b-9e7f-1a2b3c4d5e6f';
const binding: CursorBinding = { workspaceId: WS, parameters: ['toyota', null, null] };
const position = ['Toyota', 'Camry', 'DXB "A" 1 ✓'];

/** The 400 naming `cursor` that decode() answers, or null when it accepted the cursor. */
function refusal(
  cursors: Cursors,
  cursor: string,
  list: 'vehicles' | 'receivables' | 'deliveries' = 'vehicles',
  bound = binding,
): ApiError | null {
  try {
    cursors.decode(list, bound, cursor);
    return null;
  } catch (err) {
    return err as ApiError;
  }
}

describe('list cursors (src/http/cursors.ts)', () => {
  const cursors = Cursors.fromApiSecret({ env: { FRS_API_SECRET: MASTER } });
  const cursor = cursors.encode('vehicles', binding, position);

  it('gives back the position it was made with, for the same list, workspace and parameters', () => {
    expect(cursor).to.match(/^[A-Za-z0-9_-]+$/);
    expect(cursors.decode('vehicles', binding, cursor)).to.deep.equal(position);
    // 1 version byte, the fields joined by NUL (the check mark is 3 bytes of UTF-8), 16 bytes of HMAC
    expect(Buffer.from(cursor, 'base64url')).to.have.length(1 + Buffer.byteLength(position.join('\0')) + 16);
  });

  it('refuses it altered in any byte or bit, cut short, extended, or written with characters outside base64url', () => {
    const bytes = Buffer.from(cursor, 'base64url');
    for (let i = 0; i < bytes.length; i++) {
      for (const bit of [0x01, 0x80]) {
        const altered = Buffer.from(bytes);
        altered[i] ^= bit;
        expect(refusal(cursors, altered.toString('base64url')), `byte ${i} ^ ${bit}`).to.be.instanceOf(ApiError);
      }
    }
    for (const text of [
      cursor.slice(0, -1),
      cursor.slice(1),
      `${cursor}A`,
      `${cursor}=`,
      `${cursor.slice(0, 5)}!${cursor.slice(5)}`,
      `${cursor.slice(0, 5)}+${cursor.slice(6)}`,
      '',
      'AQ',
    ]) {
      expect(refusal(cursors, text), text).to.be.instanceOf(ApiError);
    }
    // the last character's spare bits: another text for the same bytes is not the cursor either
    const last = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const spare = `${cursor.slice(0, -1)}${last[last.indexOf(cursor.at(-1)!) ^ 1]}`;
    if (Buffer.from(spare, 'base64url').equals(bytes)) expect(refusal(cursors, spare)).to.be.instanceOf(ApiError);
  });

  it('refuses it for another list, workspace or parameter value, with a 400 invalid_request naming cursor', () => {
    const others: Array<[string, 'vehicles' | 'receivables' | 'deliveries', CursorBinding]> = [
      ['another list', 'receivables', binding],
      ['another workspace', 'vehicles', { ...binding, workspaceId: crypto.randomUUID() }],
      ['another term', 'vehicles', { ...binding, parameters: ['toyot', null, null] }],
      [
        'a window',
        'vehicles',
        { ...binding, parameters: ['toyota', '2026-11-23T06:00:00.000Z', '2026-11-24T06:00:00.000Z'] },
      ],
      // the binding is written as JSON: no two parameter lists run together into the same text
      ['the term moved to another parameter', 'vehicles', { ...binding, parameters: [null, 'toyota', null] }],
    ];
    for (const [what, list, bound] of others) {
      const err = refusal(cursors, cursor, list, bound);
      expect(err, what).to.be.instanceOf(ApiError);
      expect({ status: err!.status, code: err!.code, reason: err!.reason }, what).to.deep.equal({
        status: 400,
        code: 'invalid_request',
        reason: 'cursor',
      });
      expect(err!.message, what).to.equal(
        'Query parameter "cursor" was altered, or was made for another list, workspace or query: a cursor is valid only as the nextCursor of a page of ' +
          'this same list, for this workspace, with the same query parameters (all but limit). Start again without "cursor".',
      );
    }
  });

  it('signs with a key derived from the API secret: the same in every process and after a restart, another for another API secret', () => {
    // another process given the same API secret (FRS_API_SECRET or a key file holding it) takes the cursor
    expect(
      Cursors.fromApiSecret({ env: { FRS_API_SECRET: MASTER } }).decode('vehicles', binding, cursor),
    ).to.deep.equal(position);
    expect(refusal(Cursors.fromApiSecret({ env: { FRS_API_SECRET: OTHER_MASTER } }), cursor)).to.be.instanceOf(
      ApiError,
    );
    // during a change of the API secret (the old one in FRS_API_SECRET_PREVIOUS) cursors signed before it still verify;
    // new ones are signed with the new key
    const rotating = Cursors.fromApiSecret({ env: { FRS_API_SECRET: OTHER_MASTER, FRS_API_SECRET_PREVIOUS: MASTER } });
    expect(rotating.decode('vehicles', binding, cursor)).to.deep.equal(position);
    expect(refusal(cursors, rotating.encode('vehicles', binding, position))).to.be.instanceOf(ApiError);
    // HKDF-SHA256 with a label of its own: neither the API secret nor the key of another label
    const [key] = derivedKeys(CURSOR_KEY_LABEL, { env: { FRS_API_SECRET: MASTER } });
    const expected = Buffer.from(
      crypto.hkdfSync('sha256', Buffer.from(MASTER, 'base64'), Buffer.alloc(0), `frs-${CURSOR_KEY_LABEL}`, 32),
    );
    expect(key.equals(expected)).to.equal(true);
    expect(key.equals(Buffer.from(MASTER, 'base64'))).to.equal(false);
    expect(derivedKeys('another-purpose', { env: { FRS_API_SECRET: MASTER } })[0].equals(key)).to.equal(false);
  });

  it('refuses to start without an API secret where none is made by itself, naming the settings', () => {
    expect(() =>
      Cursors.fromApiSecret({
        env: { DATABASE_URL: 'postgres://db.example/fleet', FRS_API_SECRET_FILE: '/nonexistent/fleet.key' },
        createIfMissing: false,
      }),
    ).to.throw(
      /^the API signs its list cursors with a key derived from its API secret, and there is no API secret: no FRS_API_SECRET and no key file \/nonexistent\/fleet\.key; set FRS_API_SECRET, or FRS_API_SECRET_FILE/,
    );
  });

  it('appends nextCursor to a page built as JSON text, null on the last page', () => {
    const json = '{"rows":[{"plate":"A"}]}';
    expect(cursors.pageJson('vehicles', binding, { json, next: null })).to.equal(
      '{"rows":[{"plate":"A"}],"nextCursor":null}',
    );
    const page = JSON.parse(cursors.pageJson('vehicles', binding, { json, next: position }));
    expect(page.rows).to.deep.equal([{ plate: 'A' }]);
    expect(cursors.decode('vehicles', binding, page.nextCursor)).to.deep.equal(position);
  });
});
