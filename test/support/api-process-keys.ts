// Run as a process of its own (test/webhooks/sealing.test.ts): settles its keys as `npm start` with FRS_ROLE=all does
// for the process serving the API, then tries every key it holds on one sealed signing secret (argv: endpoint id, key
// id, the sealed value in base64) and prints what happened, as JSON, on stdout.
import crypto from 'node:crypto';
import { apiSecretId, derivedKeys, openSealedBox, settleProcessKeys, x25519PrivateKey } from '../../src/secrets.js';
import { openSigningSecret } from '../../src/webhooks/sealing.js';
import { CURSOR_KEY_LABEL } from '../../src/http/cursors.js';
import { CSRF_KEY_LABEL } from '../../src/portal/app.js';
import { ANSWER_KEY_LABEL } from '../../src/admin/idempotency.js';

const [endpointId, keyId, sealedBase64] = process.argv.slice(2);
const sealed = Buffer.from(sealedBase64, 'base64');
const context = `webhook_endpoints.secret:${endpointId}`;
const outcome = (attempt: () => unknown) => {
  try {
    attempt();
    return 'opened';
  } catch (err) {
    return `refused: ${(err as Error).message}`;
  }
};

settleProcessKeys('all');
const held: Record<string, Buffer[]> = {
  cursors: derivedKeys(CURSOR_KEY_LABEL),
  csrf: derivedKeys(CSRF_KEY_LABEL),
  answers: derivedKeys(ANSWER_KEY_LABEL),
};
const tries: Record<string, string> = { service: outcome(() => openSigningSecret(endpointId, { keyId, sealed })) };
for (const [name, keys] of Object.entries(held)) {
  for (const key of keys) {
    // as the private key of the sealed box, and as an AES-256-GCM key over the box's ciphertext
    tries[`${name} as the sealing private key`] = outcome(() => openSealedBox(x25519PrivateKey(key), sealed, context));
    tries[`${name} as an AES key`] = outcome(() => {
      const decipher = crypto.createDecipheriv('aes-256-gcm', key, sealed.subarray(1, 13));
      decipher.setAAD(Buffer.from(context));
      decipher.setAuthTag(sealed.subarray(33, 49));
      return Buffer.concat([decipher.update(sealed.subarray(49)), decipher.final()]);
    });
  }
}
process.stdout.write(
  `${JSON.stringify({ masterKeyVariables: Object.keys(process.env).filter((name) => name.startsWith('FRS_SECRET_KEY')), apiSecret: apiSecretId(), tries })}\n`,
);
