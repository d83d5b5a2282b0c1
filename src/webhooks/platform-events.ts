// Operational events: what the platform's own receivers ("operational endpoints") are told, made by the database
// triggers of migration 20261128002400 in the transaction of the change they report. Their endpoints, events and
// deliveries are rows of the usual tables with workspace_id NULL, so no workspace ever sees them; the engine sends them
// as any other delivery.

/** The operational events, as admin.yaml's `webhooks` section names them. */
export const OPERATIONAL_EVENTS = ['endpoint.disabled', 'endpoint.enabled', 'delivery.exhausted'] as const;
export type OperationalEvent = (typeof OPERATIONAL_EVENTS)[number];

/**
 * The tenant id the platform's deliveries count under in the fair claim (fairness.ts) and a dispatcher's shares: a
 * tenant of its own, so that no workspace's backlog holds its deliveries back, nor its backlog a workspace's. The nil
 * UUID, which gen_random_uuid() never makes a workspace's id.
 */
export const PLATFORM_TENANT = '00000000-0000-0000-0000-000000000000';

/** A delivery's or endpoint's tenant as SQL (`alias`.workspace_id, the platform's for NULL). */
export const tenantOf = (alias: string) => `coalesce(${alias}.workspace_id, '${PLATFORM_TENANT}'::uuid)`;
