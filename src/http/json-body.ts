// A request's JSON body, read only once its route matched and its caller holds: declared as JSON, uncompressed,
// within a limit, and of a shape JSON.parse can take quickly (refused before it is parsed otherwise).
import { apiError, invalidRequest } from './error-catalogue.js';
import type { RequestContext } from './request-state.js';

/** The largest request body read by default (a workspace or a key is a few hundred bytes). */
export const BODY_LIMIT = 64 * 1024;

/**
 * The JSON body of a request that has one (at most BODY_LIMIT bytes), else undefined. A body must say it is
 * JSON and come uncompressed (415 otherwise): what is read is what the document describes, nothing to inflate.
 */
export async function readJsonBody(
  ctx: RequestContext,
  limit = BODY_LIMIT,
  limitName = `${BODY_LIMIT} bytes`,
): Promise<unknown> {
  const declared = Number(ctx.get('content-length') || 0);
  if (declared === 0 && !ctx.get('transfer-encoding')) return undefined;
  const encoding = ctx.get('content-encoding').trim().toLowerCase();
  if ((encoding !== '' && encoding !== 'identity') || !ctx.is('application/json', '+json')) {
    throw apiError('unsupported_media_type', 'Send the request body as Content-Type application/json, not compressed.');
  }
  const tooLarge = () => apiError('payload_too_large', `The request body is over ${limitName}.`);
  if (declared > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw tooLarge();
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  // Refused before JSON.parse, which would spend seconds on 8 MiB of `[[[[` or of one object's members.
  const shape = jsonShapeProblem(text);
  if (shape !== undefined) throw invalidRequest('body', shape);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw invalidRequest('body', 'The request body is not valid JSON.');
  }
  return body;
}

/** No body of the document nests nearly this deep; a deeper one is refused before anything walks it recursively. */
const MAX_BODY_DEPTH = 64;

/** No object of the document has nearly this many members (a record has a few dozen fields). */
const MAX_OBJECT_MEMBERS = 1000;

/**
 * What is wrong with a JSON text's shape, found in one pass over the text (strings skipped) before it is parsed:
 * arrays and objects nested more than MAX_BODY_DEPTH deep, or an object of more than MAX_OBJECT_MEMBERS members.
 * Text that is not JSON at all is left to JSON.parse.
 */
export function jsonShapeProblem(text: string): string | undefined {
  // Per open array or object: its members so far (an array: -1, not counted).
  const open: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // a string: to its closing quote, over escapes
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === 0x5c) i++;
        else if (s === 0x22) break;
      }
    } else if (c === 0x7b || c === 0x5b) {
      if (open.push(c === 0x7b ? 0 : -1) > MAX_BODY_DEPTH)
        return `The request body is nested more than ${MAX_BODY_DEPTH} levels deep.`;
    } else if (c === 0x7d || c === 0x5d) {
      open.pop();
    } else if (
      c === 0x3a &&
      open.length > 0 &&
      open[open.length - 1] >= 0 &&
      ++open[open.length - 1] > MAX_OBJECT_MEMBERS
    ) {
      return `An object in the request body has more than ${MAX_OBJECT_MEMBERS} members.`;
    }
  }
  return undefined;
}
