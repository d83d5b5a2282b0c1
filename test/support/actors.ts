import type { AuditContext, OperatorActor } from '../../src/core/actor.js';

// The actors tests call the core as (src/core/actor.ts): the operator, audited as the test itself.

/** The operator, as fleet-admin would act, named `test` in the audit trail. */
export const operator: OperatorActor = { kind: 'operator', audit: { actor: { type: 'cli', name: 'test' } } };

/** The operator acting with `audit` (a test that checks the trail names its own actor). */
export const operatorWith = (audit: AuditContext): OperatorActor => ({ kind: 'operator', audit });
