import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { ROOT_DIR } from '../../src/config.js';
import crypto from 'node:crypto';
import {
  asymmetricSignatures,
  ed25519PrivateKey,
  newSigningKeyPair,
  publicKeyText,
  signatureHeader,
  verifyWebhook,
} from '../../src/webhooks/signing.js';
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

interface AsymmetricVector {
  scheme: 'v1a';
  description: string;
  /** The 32-byte seed (hex) of the key pair that signed, or the seeds of a rotation's overlap, newest first. */
  seed?: string;
  signingSeeds?: string[];
  /** The key pair as Standard Webhooks writes it, when the vector gives it. */
  privateKey?: string;
  /** The public key the receiver verifies with. */
  publicKey: string;
  id: string;
  body: string;
  timestamp: number;
  header: string;
  valid: boolean;
}

const asymmetric: AsymmetricVector[] = JSON.parse(
  fs.readFileSync(path.join(ROOT_DIR, 'openapi', 'webhook-signature-vectors.json'), 'utf8'),
).filter((v: { scheme?: string }) => v.scheme === 'v1a');

/** A receiver's check, from the Standard Webhooks text and Node's ed25519 alone: any `v1a` entry may match. */
function verifiesV1a(v: AsymmetricVector): boolean {
  const raw = Buffer.from(v.publicKey.slice('whpk_'.length), 'base64');
  const key = crypto.createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') },
    format: 'jwk',
  });
  const signed = Buffer.from(`${v.id}.${v.timestamp}.${v.body}`, 'utf8');
  return v.header
    .split(' ')
    .filter((entry) => entry.startsWith('v1a,'))
    .some((entry) => crypto.verify(null, signed, key, Buffer.from(entry.slice(4), 'base64')));
}

describe('webhooks: v1a (ed25519) test vectors (openapi/webhook-signature-vectors.json)', () => {
  it('cover valid signatures (a rotation among them) and a tampered body, another key and another id', () => {
    expect(asymmetric.filter((v) => v.valid).length).to.be.at.least(3);
    expect(asymmetric.some((v) => v.valid && v.header.split(' ').length === 2)).to.equal(true);
    const described = asymmetric.map((v) => v.description).join('\n');
    for (const topic of ['tampered body', 'another public key', 'another webhook-id'])
      expect(described).to.include(topic);
  });

  it('the seed of RFC 8032 test 1 gives its public key, written whpk_ + base64 of the raw 32 bytes', () => {
    const [first] = asymmetric;
    const pair = newSigningKeyPair(Buffer.from(first.seed!, 'hex'));
    expect(pair.publicKey.toString('hex')).to.equal('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a');
    expect(publicKeyText(pair.publicKey)).to.equal(first.publicKey);
    expect(pair.privateKey).to.equal(first.privateKey);
  });

  for (const v of asymmetric) {
    it(`${v.valid ? 'accepts' : 'rejects'}: ${v.description}`, () => {
      expect(verifiesV1a(v), 'crypto.verify').to.equal(v.valid);
      const seeds = v.signingSeeds ?? (v.seed ? [v.seed] : []);
      if (v.valid) {
        // the service's signer produces exactly the vector's header (ed25519 is deterministic)
        const keys = seeds.map((seed) => ed25519PrivateKey(newSigningKeyPair(Buffer.from(seed, 'hex')).privateKey));
        expect(asymmetricSignatures(keys, v.id, v.body, v.timestamp)).to.equal(v.header);
      }
    });
  }
});
