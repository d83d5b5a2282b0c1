import { BOOKING_SUMMARY_NEXT_CHANGE, bookingSummary } from '../../queries/bookings.js';
import { ok, type EtagInputs, type Handler } from '../operation.js';

// GET /v1/bookings/summary: the bookings' figures.

export const handle: Handler = async ({ db, caller, now }) => ok(await bookingSummary(db, caller.workspace, now));

export const etag: EtagInputs = { inputs: { area: 'records', day: true, clock: BOOKING_SUMMARY_NEXT_CHANGE } };
