import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

// A real webhook receiver on 127.0.0.1 for the delivery tests, with its own signature check written from the
// document's instructions (deliberately not src/webhooks/signing.ts, so the two are checked against each other).

export type VerifyOutcome = { ok: true } | { ok: false; reason: string };

/**
 * Verifies `service-signature` as the document tells receivers to: parse `t` and every `v1`, reject a `t` more
 * than `toleranceSeconds` from the clock in either direction, compare HMAC-SHA256(secret, "<t>.<raw body>") in
 * constant time. Reasons use the same names as verifyWebhook.
 */
export function verifyIndependently(
  rawBody: Buffer | string,
  header: string | undefined,
  secret: string,
  nowSeconds: number,
  toleranceSeconds = 300,
): VerifyOutcome {
  if (!header) return { ok: false, reason: 'missing_header' };
  const pairs = header.split(',').map((element) => {
    const [name, ...rest] = element.split('=');
    return [name.trim(), rest.join('=').trim()] as const;
  });
  const t = pairs.find(([name]) => name === 't')?.[1];
  if (!t) return { ok: false, reason: 'missing_timestamp' };
  if (!/^[0-9]+$/.test(t) || t.length > 12) return { ok: false, reason: 'bad_timestamp' };
  if (Math.abs(nowSeconds - Number(t)) > toleranceSeconds) return { ok: false, reason: 'timestamp_out_of_tolerance' };
  const candidates = pairs.filter(([name]) => name === 'v1').map(([, value]) => value);
  if (candidates.length === 0) return { ok: false, reason: 'no_signature' };
  const signed = Buffer.concat([
    Buffer.from(`${t}.`, 'utf8'),
    Buffer.isBuffer(rawBody) ? rawBody : Buffer.from(rawBody, 'utf8'),
  ]);
  const expected = crypto.createHmac('sha256', Buffer.from(secret, 'utf8')).update(signed).digest();
  const matches = candidates.some((candidate) => {
    if (!/^[0-9a-f]{64}$/.test(candidate)) return false;
    return crypto.timingSafeEqual(Buffer.from(candidate, 'hex'), expected);
  });
  return matches ? { ok: true } : { ok: false, reason: 'signature_mismatch' };
}

export interface ReceivedRequest {
  path: string;
  deliveryId: string;
  event: string;
  contentType: string | undefined;
  /** Every request header, names in lower case. */
  headers: http.IncomingHttpHeaders;
  signature: string | undefined;
  rawBody: Buffer;
  body: any;
  /** Signature check against the secret registered for the path (undefined when none was registered). */
  verified: VerifyOutcome | undefined;
  receivedAt: number;
}

/** What to answer: a status (after an optional delay), or never answer ('hang'). */
export type Reply = { status: number; body?: string; headers?: Record<string, string>; delayMs?: number } | 'hang';

export interface Receiver {
  url: string;
  /** A new endpoint path on this receiver whose requests are checked with `secret`. */
  endpointUrl(secret?: string): string;
  /** Registers the secret of a path returned by endpointUrl (when the endpoint was created after the URL). */
  setSecret(url: string, secret: string): void;
  requests: ReceivedRequest[];
  /** Delivery ids that arrived while a request with the same id was still being answered. */
  overlaps: string[];
  maxInFlight: number;
  /** Forgets the requests, overlaps and in-flight maximum seen so far. */
  reset(): void;
  waitForRequests(count: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(
  reply: (request: ReceivedRequest) => Reply | Promise<Reply> = () => ({ status: 204 }),
): Promise<Receiver> {
  const secrets = new Map<string, string>();
  const requests: ReceivedRequest[] = [];
  const overlaps: string[] = [];
  const inFlight = new Map<string, number>();
  let inFlightTotal = 0;
  let maxInFlight = 0;
  let paths = 0;
  const waiters: Array<() => void> = [];

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const rawBody = Buffer.concat(chunks);
      const path = req.url ?? '/';
      const secret = secrets.get(path);
      const deliveryId = String(req.headers['service-delivery'] ?? '');
      const signature = req.headers['service-signature'] as string | undefined;
      let body: unknown;
      try {
        body = JSON.parse(rawBody.toString('utf8'));
      } catch {
        body = undefined;
      }
      const request: ReceivedRequest = {
        path,
        deliveryId,
        event: String(req.headers['service-event'] ?? ''),
        contentType: req.headers['content-type'],
        headers: req.headers,
        signature,
        rawBody,
        body,
        verified: secret === undefined ? undefined : verifyIndependently(rawBody, signature, secret, Date.now() / 1000),
        receivedAt: Date.now(),
      };
      if ((inFlight.get(deliveryId) ?? 0) > 0) overlaps.push(deliveryId);
      inFlight.set(deliveryId, (inFlight.get(deliveryId) ?? 0) + 1);
      maxInFlight = Math.max(maxInFlight, ++inFlightTotal);
      requests.push(request);
      waiters.splice(0).forEach((wake) => wake());
      const done = () => {
        inFlight.set(deliveryId, inFlight.get(deliveryId)! - 1);
        inFlightTotal--;
      };
      res.on('close', done);
      const answer = await reply(request);
      if (answer === 'hang') return;
      if (answer.delayMs) await new Promise((resolve) => setTimeout(resolve, answer.delayMs));
      if (res.destroyed) return;
      res.writeHead(answer.status, answer.headers ?? {});
      res.end(answer.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    endpointUrl(secret) {
      const path = `/hooks/${++paths}`;
      if (secret) secrets.set(path, secret);
      return url + path;
    },
    setSecret(endpoint, secret) {
      secrets.set(new URL(endpoint).pathname, secret);
    },
    requests,
    overlaps,
    get maxInFlight() {
      return maxInFlight;
    },
    reset() {
      requests.length = 0;
      overlaps.length = 0;
      maxInFlight = inFlightTotal;
    },
    async waitForRequests(count, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (requests.length < count) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`receiver got ${requests.length} of ${count} requests within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
