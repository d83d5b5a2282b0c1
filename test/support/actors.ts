import type { Knex } from 'knex';
import { findWorkspace } from '../../src/core/workspaces.js';
import type { AuditContext, OperatorActor } from '../../src/core/actor.js';

// The actors tests call the core as (src/core/actor.ts): the operator, audited as the test itself.

/**
 * The name the fixtures' operator has in the audit trail. Fixtures made without an audit entry before the core's
 * actions always audited; a test that reads the trail leaves theirs out, as it read it then.
 */
export const FIXTURE_ACTOR = 'test fixture';

/** The operator, as fleet-admin would act, named FIXTURE_ACTOR in the audit trail. */
export const operator: OperatorActor = { kind: 'operator', audit: { actor: { type: 'cli', name: FIXTURE_ACTOR } } };

/** The operator acting with `audit` (a test that checks the trail names its own actor). */
export const operatorWith = (audit: AuditContext): OperatorActor => ({ kind: 'operator', audit });

/** A workspace's id by its slug, as the CLI finds it at its own edge. */
export async function idOf(db: Knex, slug: string): Promise<string> {
  return (await findWorkspace(db, slug)).id;
}
