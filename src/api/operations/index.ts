// The public API's operations by the document's operationId, one file each, named by the
// operationId in kebab-case (test/api/operations.test.ts holds the file names to the document's operation ids).
import type { PublicOperation } from '../operation.js';
import * as getMe from './get-me.js';
import * as listFleets from './list-fleets.js';
import * as getFleetSummary from './get-fleet-summary.js';
import * as searchVehicles from './search-vehicles.js';
import * as getOperationsToday from './get-operations-today.js';
import * as getBookingSummary from './get-booking-summary.js';
import * as getFinanceOverview from './get-finance-overview.js';
import * as getReceivables from './get-receivables.js';
import * as listWebhookEndpoints from './list-webhook-endpoints.js';
import * as sendTestDelivery from './send-test-delivery.js';
import * as listWebhookDeliveries from './list-webhook-deliveries.js';
import * as getWebhookDelivery from './get-webhook-delivery.js';
import * as listEvents from './list-events.js';
import * as getHealth from './get-health.js';
import * as getReadiness from './get-readiness.js';

/** Handlers, with what each GET's ETag depends on. Parameters arrive validated against the document, defaults applied. */
export const publicOperations: Record<string, PublicOperation> = {
  getMe,
  listFleets,
  getFleetSummary,
  searchVehicles,
  getOperationsToday,
  getBookingSummary,
  getFinanceOverview,
  getReceivables,
  listWebhookEndpoints,
  sendTestDelivery,
  listWebhookDeliveries,
  getWebhookDelivery,
  listEvents,
  getHealth,
  getReadiness,
};
