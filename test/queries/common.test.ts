import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { createKnex } from '../../src/db/database.js';
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

  it('indexPlans: plans the statement with sequential and bitmap scans off, in its own transaction, and leaves the connection as it was', async () => {
    const { url } = await testDatabase();
    // one connection, so every statement below runs on the same session
    const single = createKnex(url, 1);
    try {
      const settings = `SELECT current_setting('enable_seqscan') AS seq, current_setting('enable_bitmapscan') AS bitmap, now() = statement_timestamp() AS own_transaction`;
      expect(await rows(single, settings, {}, { prepared: true, indexPlans: true })).to.deep.equal([{ seq: 'off', bitmap: 'off', own_transaction: false }]);
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
