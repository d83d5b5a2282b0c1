import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { createApiKey, createWorkspace } from '../../src/core/workspaces.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { recordAudit, type AuditContext } from '../../src/core/audit.js';
import { InvalidFieldError } from '../../src/errors.js';
import { createEndpoint } from '../../src/core/webhooks/endpoints.js';
import { idOf, operator, operatorWith, FIXTURE_ACTOR } from '../support/actors.js';
import { processConfig } from '../../src/config.js';

// Text a client chooses that is shaped like a key, token or signing secret: refused where it would be shown (a key's
// role, a token's name) with the field named, and never written to the audit trail as it is.
const SHAPED = `frs_${'a'.repeat(24)}`;
const actor: AuditContext = { actor: { type: 'cli', name: 'test' } };

describe('input shaped like a secret', () => {
  it('refuses a key role, an admin token name and an endpoint name shaped like a secret, naming the field, creating nothing', async () => {
    const { db } = await testDatabase();
    const slug = `shaped-${randomUUID().slice(0, 8)}`;
    const ws = await createWorkspace(db, operator, { slug });
    try {
      for (const role of [SHAPED, `reporting whsec_${'B1'.repeat(12)}`, `fra_${'Z'.repeat(30)}`]) {
        const refused = await createApiKey(db, operatorWith(actor), { workspaceId: await idOf(db, slug), role }).catch(
          (err: unknown) => err,
        );
        expect(refused, role).to.be.instanceOf(InvalidFieldError).and.to.include({ field: 'role' });
        expect((refused as Error).message).to.include('must not look like a key');
      }
      const token = await createAdminToken(db, operatorWith(actor), { name: SHAPED, workspaceId: 'every' }).catch(
        (err: unknown) => err,
      );
      expect(token).to.be.instanceOf(InvalidFieldError).and.to.include({ field: 'name' });
      expect(await db('api_keys').where({ workspace_id: ws.id }).count({ n: '*' })).to.deep.equal([{ n: 0 }]);
      expect(await db('admin_tokens').where({ name: SHAPED }).count({ n: '*' })).to.deep.equal([{ n: 0 }]);
      const endpoint = await createEndpoint(db, operator, {
        workspaceId: await idOf(db, slug),
        url: 'https://hooks.example.ae/x',
        name: `whsec_${'C'.repeat(32)}`,
        policy: processConfig().destinationPolicy,
      }).catch((err: unknown) => err);
      expect(endpoint).to.be.instanceOf(InvalidFieldError).and.to.include({ field: 'name' });
      expect(await db('webhook_endpoints').where({ workspace_id: ws.id }).count({ n: '*' })).to.deep.equal([{ n: 0 }]);
      // a role that merely starts like one is a role
      expect(
        (await createApiKey(db, operatorWith(actor), { workspaceId: await idOf(db, slug), role: 'frs_team' })).role,
      ).to.equal('frs_team');
    } finally {
      await db('workspaces').where({ id: ws.id }).delete();
    }
  });

  it('writes what is shaped like a secret to the audit trail redacted, and does not fail the change', async () => {
    const { db } = await testDatabase();
    const target = randomUUID();
    await db.transaction((trx) =>
      recordAudit(trx, actor, {
        action: 'test.shaped',
        workspaceId: null,
        target: { type: 'test', id: target },
        changes: { name: `hook ${SHAPED} x` },
      }),
    );
    const [entry] = await db('audit_entries').whereNot({ actor_name: FIXTURE_ACTOR }).where({ target_id: target });
    expect(entry.changes).to.deep.equal({ name: 'hook [redacted] x' });
    await db('audit_entries').whereNot({ actor_name: FIXTURE_ACTOR }).where({ target_id: target }).delete();
  });
});
