import { describeCaller } from '../auth.js';
import { ok, type EtagInputs, type Handler } from '../operation.js';

// GET /v1/me: the key's workspace and role.

export const handle: Handler = async ({ caller }) => ok(describeCaller(caller));

// the caller's workspace and role only (a change to either reaches the key cache and the caller)
export const etag: EtagInputs = {};
