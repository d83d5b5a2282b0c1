import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { createKnex } from '../../src/db/database.js';
import { jsonArrayText, jsonObjectText, jsonValue, rows } from '../../src/queries/common.js';

describe('queries: rows() and its named bindings', () => {
  it('binds :name (also as :name::type), leaves casts, times in literals and an escaped \\:name alone, prepared or not', async () => {
    const { db } = await testDatabase();
    const sql = `SELECT :a::int + :a::int AS twice, CAST(:b AS text) AS b, '2026-11-22T08:00:00Z'::timestamptz::date::text AS day,
                        '\\:b' AS escaped, :a::text || :b AS joined`;
    const expected = [{ twice: 42, b: 'x:y', day: '2026-11-22', escaped: ':b', joined: '21x:y' }];
    expect(await rows(db, sql, { a: 21, b: 'x:y' })).to.deep.equal(expected);
    expect(await rows(db, sql, { a: 21, b: 'x:y' }, { prepared: true })).to.deep.equal(expected);
    // the same text again, other values: the kept positional form is reused
    expect((await rows<{ twice: number }>(db, sql, { a: 1, b: '' }, { prepared: true }))[0].twice).to.equal(2);
  });

  it('refuses a call that lacks a value the statement was first given', async () => {
    const { db } = await testDatabase();
    const sql = `SELECT :only::int AS only_value`;
    expect(await rows(db, sql, { only: 7 })).to.deep.equal([{ only_value: 7 }]);
    let error: Error | undefined;
    try {
      await rows(db, sql, {});
    } catch (err) {
      error = err as Error;
    }
    expect(error?.message).to.equal('rows(): no value for :only');
  });

  it('indexPlans: plans the statement with sequential and bitmap scans off, in its own transaction, and leaves the connection as it was', async () => {
    const { url } = await testDatabase();
    // one connection, so every statement below runs on the same session
    const single = createKnex(url, 1);
    try {
      const settings = `SELECT current_setting('enable_seqscan') AS seq, current_setting('enable_bitmapscan') AS bitmap, now() = statement_timestamp() AS own_transaction`;
      expect(await rows(single, settings, {}, { prepared: true, indexPlans: true })).to.deep.equal([
        { seq: 'off', bitmap: 'off', own_transaction: false },
      ]);
      // SET LOCAL ended with the transaction: the next statement on the connection plans as usual, outside it
      expect(await rows(single, settings, {})).to.deep.equal([{ seq: 'on', bitmap: 'on', own_transaction: true }]);
      // a failing statement rolls its transaction back: the connection is usable at once
      let error: Error | undefined;
      try {
        await rows(single, `SELECT 1 / :zero::int AS never`, { zero: 0 }, { indexPlans: true });
      } catch (err) {
        error = err as Error;
      }
      expect(error?.message).to.equal('division by zero');
      expect(await rows(single, settings, {})).to.deep.equal([{ seq: 'on', bitmap: 'on', own_transaction: true }]);
      // it is never nested in a caller's transaction (its COMMIT would end the caller's)
      let refused: Error | undefined;
      await single.transaction(async (trx) => {
        try {
          await rows(trx, settings, {}, { indexPlans: true });
        } catch (err) {
          refused = err as Error;
        }
      });
      expect(refused?.message).to.equal('rows(): indexPlans runs its statement in a transaction of its own');
    } finally {
      await single.destroy();
    }
  });
});

describe('queries: JSON text written by concatenation', () => {
  // Every character class to_json escapes (quote, backslash, control characters, with their short forms), and
  // text it leaves as is (non-ASCII, a character outside the BMP, a slash): the bytes must be JSON.stringify's.
  const tricky = ['Zoë "Z" O\'Brien \\ /', 'tab\there\nline\r\u0008\u000c\u0001\u001f end', '車 🚗', ''];

  it('writes objects and arrays byte for byte as JSON.stringify does, NULL as null, items in the order asked', async () => {
    const { db } = await testDatabase();
    const item = jsonObjectText([
      ['id', jsonValue.plainString('t.id')],
      ['name', jsonValue.string('t.name')],
      ['amount', jsonValue.number('t.amount')],
      ['ok', jsonValue.boolean('t.amount > 10')],
      ['nested', jsonObjectText([['note', jsonValue.string('t.note')]])],
    ]);
    const sql = `SELECT ${jsonObjectText([['rows', jsonArrayText(item, 't.n')]])} AS body
      FROM (SELECT n, ('00000000-0000-4000-8000-00000000000' || n)::uuid AS id, name, n * 7 AS amount,
                   CASE WHEN n = 2 THEN NULL ELSE name END AS note
            FROM unnest(:names::text[]) WITH ORDINALITY AS u(name, n)) t`;
    const [{ body }] = await rows<{ body: string }>(db, sql, { names: [...tricky].reverse() });
    const expected = {
      rows: [...tricky].reverse().map((name, i) => ({
        id: `00000000-0000-4000-8000-00000000000${i + 1}`,
        name,
        amount: (i + 1) * 7,
        ok: (i + 1) * 7 > 10,
        nested: { note: i + 1 === 2 ? null : name },
      })),
    };
    expect(body).to.equal(JSON.stringify(expected));
  });

  it('writes an empty list as [] and refuses a key that would need quoting', async () => {
    const { db } = await testDatabase();
    const [{ body }] = await rows<{ body: string }>(
      db,
      `SELECT ${jsonObjectText([['rows', jsonArrayText(jsonObjectText([['n', jsonValue.number('n')]]), 'n')]])} AS body FROM generate_series(1, 0) n`,
      {},
    );
    expect(body).to.equal('{"rows":[]}');
    expect(() => jsonObjectText([["it's", jsonValue.number('1')]])).to.throw(
      "jsonObjectText(): key it's is not a plain name",
    );
  });
});
