import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { rows } from '../../src/queries/common.js';

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
