import { wholeNumberDefault } from '../config.js';

// The last answers of each API process, by ETag (src/api/revalidation.ts). A tag is a digest of everything an answer
// is made of (the code, the operation and its parameters, the caller's workspace, zone and role, and the data
// version read before the answer), so an answer kept under its tag is the answer for as long as the tag is current:
// a repeat of the same request, by any key of the workspace, is served from memory after the one statement that reads
// the version, instead of building it again. Nothing is ever invalidated: a change makes a new tag, and the old entry
// ages out. Bounded by bytes, least recently used first out.

export const ANSWER_CACHE_ENV = 'FRS_ANSWER_CACHE_MB';
/** Megabytes of answers kept per API process; today's operations of a 10,000-car fleet is about 0.5 MB. */
export const DEFAULT_ANSWER_CACHE_MB = wholeNumberDefault(ANSWER_CACHE_ENV);
/** An answer larger than this share of the cache is not kept (one answer must not push out all the others). */
const LARGEST_SHARE = 8;
/**
 * What an entry costs beside its text: its tag (27 characters), the Map's entry and the string headers, near enough;
 * counted so that many small answers (an empty search is about 50 bytes) cannot hold several times the budget.
 */
export const ENTRY_BYTES = 256;

export class AnswerCache {
  /** JSON text by tag, in the order last used (a Map keeps insertion order: a hit is deleted and set again). */
  private readonly answers = new Map<string, string>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  get(tag: string): string | undefined {
    const body = this.answers.get(tag);
    if (body !== undefined) {
      this.answers.delete(tag);
      this.answers.set(tag, body);
    }
    return body;
  }

  set(tag: string, body: string): void {
    // Two bytes a UTF-16 code unit: what the string holds in memory, near enough.
    const size = body.length * 2 + ENTRY_BYTES;
    if (size > this.maxBytes / LARGEST_SHARE || this.answers.has(tag)) return;
    this.answers.set(tag, body);
    this.bytes += size;
    for (const [oldest, kept] of this.answers) {
      if (this.bytes <= this.maxBytes) break;
      this.answers.delete(oldest);
      this.bytes -= kept.length * 2 + ENTRY_BYTES;
    }
  }
}
