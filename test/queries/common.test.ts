import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
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
    expect(() => jsonObjectText([["it's", jsonValue.number('1')]])).to.throw('jsonObjectText(): key it\'s is not a plain name');
  });
});
