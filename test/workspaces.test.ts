import { expect } from 'chai';
import { testDatabase } from './support/database.js';
import { createApiKey, createWorkspace, revokeApiKey, updateWorkspace } from '../src/core/workspaces.js';
import { InputError } from '../src/errors.js';
import { hashApiKey } from '../src/secrets.js';
import { expectRejection } from './support/assertions.js';
import { idOf, operator } from './support/actors.js';

describe('workspaces and API keys', () => {
  it('creates a workspace with the defaults and refuses a duplicate slug', async () => {
    const { db } = await testDatabase();
    const ws = await createWorkspace(db, operator, { slug: 'ws-defaults' });
    expect(ws).to.include({ slug: 'ws-defaults', status: 'active', timezone: 'Asia/Dubai', remindersAhead: 3 });
    const err = await expectRejection(createWorkspace(db, operator, { slug: 'ws-defaults' }), InputError);
    expect(err.message).to.equal('workspace "ws-defaults" already exists');
  });

  it('rejects a bad time zone and reminders outside 1 to 60, changing nothing', async () => {
    const { db } = await testDatabase();
    await createWorkspace(db, operator, { slug: 'ws-settings' });
    for (const bad of [
      { timezone: 'Mars/Olympus' },
      { remindersAhead: 0 },
      { remindersAhead: 61 },
      { remindersAhead: 2.5 },
    ]) {
      await expectRejection(
        updateWorkspace(db, operator, { workspaceId: await idOf(db, 'ws-settings'), changes: bad, now: new Date() }),
        InputError,
      );
    }
    const row = await db('workspaces').where({ slug: 'ws-settings' }).first();
    expect(row).to.include({ timezone: 'Asia/Dubai', reminders_ahead: 3 });
  });

  it('stores only the SHA-256 of a key, in the frs_ format, and revokes it once', async () => {
    const { db } = await testDatabase();
    await createWorkspace(db, operator, { slug: 'ws-keys' });
    const created = await createApiKey(db, operator, { workspaceId: await idOf(db, 'ws-keys'), role: 'reader' });
    expect(created.key).to.match(/^frs_[0-9A-Za-z]{40}$/);
    const row = await db('api_keys').where({ id: created.id }).first();
    expect(Buffer.compare(row.key_hash, hashApiKey(created.key))).to.equal(0);
    expect(JSON.stringify(row)).not.to.include(created.key);
    const first = await revokeApiKey(db, operator, { keyId: created.id, workspaceId: 'every' });
    const second = await revokeApiKey(db, operator, { keyId: created.id, workspaceId: 'every' });
    expect(second.revokedAt).to.equal(first.revokedAt);
  });
});
