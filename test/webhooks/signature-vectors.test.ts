import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { ROOT_DIR } from '../../src/config.js';
import { signatureHeader, verifyWebhook } from '../../src/webhooks/signing.js';
import { verifyIndependently } from '../support/receiver.js';

interface Vector {
  description: string;
  secret: string;
  /** The secrets the service signed with, newest first, when the vector shows a rotation's overlap. */
  signingSecrets?: string[];
  body: string;
  /** `t` of the header, unix seconds (null when the header has none, or a malformed one). */
  timestamp: number | null;
  /** The receiver's clock, unix seconds. */
  now: number;
  header: string;
  valid: boolean;
  reason?: string;
}

// The file also holds Standard Webhooks cases (`scheme: "standard-webhooks"`), checked in standard-webhooks.test.ts.
const vectors: Vector[] = JSON.parse(
  fs.readFileSync(path.join(ROOT_DIR, 'openapi', 'webhook-signature-vectors.json'), 'utf8'),
).filter((v: { scheme?: string }) => v.scheme === undefined);

describe('webhooks: signature test vectors (openapi/webhook-signature-vectors.json)', () => {
  it('covers valid signatures (several v1 values among them) and every kind of invalid one', () => {
    expect(vectors.filter((v) => v.valid).length).to.be.at.least(5);
    expect(vectors.some((v) => v.valid && v.header.split('v1=').length > 2)).to.equal(true);
    const reasons = new Set(vectors.filter((v) => !v.valid).map((v) => v.reason));
    expect([...reasons]).to.include.members([
      'signature_mismatch',
      'timestamp_out_of_tolerance',
      'missing_timestamp',
      'bad_timestamp',
      'no_signature',
    ]);
    const described = vectors.map((v) => v.description).join('\n');
    for (const topic of [
      'tampered body',
      'wrong secret',
      't too old',
      't in the future',
      'missing t',
      'non-numeric t',
      'missing v1',
    ]) {
      expect(described, topic).to.include(topic);
    }
  });

  it('starts with the worked example of the document, reproduced by the signer', () => {
    const [example] = vectors;
    expect(example.header).to.equal('t=1795336201,v1=de49367ecbb1c9c7af2d0eb40d9e7d3d990dd8daca079a598380d15b7e96e379');
    expect(signatureHeader(example.secret, example.body, example.timestamp!)).to.equal(example.header);
  });

  it("shows the two-value header of a rotation's overlap, new secret first, reproduced by the signer", () => {
    const overlap = vectors.filter((v) => v.signingSecrets);
    expect(overlap.map((v) => v.secret)).to.deep.equal(overlap[0].signingSecrets);
    for (const vector of overlap)
      expect(signatureHeader(vector.signingSecrets!, vector.body, vector.timestamp!)).to.equal(vector.header);
  });

  for (const vector of vectors) {
    it(`${vector.valid ? 'accepts' : 'rejects'}: ${vector.description}`, () => {
      const expected = vector.valid ? { ok: true } : { ok: false, reason: vector.reason };
      const result = verifyWebhook(vector.body, vector.header, vector.secret, { now: vector.now * 1000 });
      expect(result.ok ? { ok: true } : result, 'verifyWebhook').to.deep.equal(expected);
      if (result.ok) expect(result.timestamp).to.equal(vector.timestamp);
      const independent = verifyIndependently(
        Buffer.from(vector.body, 'utf8'),
        vector.header,
        vector.secret,
        vector.now,
      );
      expect(independent, 'independent implementation').to.deep.equal(expected);
    });
  }
});
