import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { allowLongBody } from '../../http/http-limits.js';
import { apiError } from '../../http/error-catalogue.js';
import { ImportError } from '../../core/import/import-document.js';
import { writeRecords } from '../../core/import/records.js';
import { cancelImport, getImport, startImport } from '../../core/import/jobs.js';
import { ingestOf, pathWorkspace, type AdminAction } from './context.js';

// Keeping the service current (src/core/import/records.ts, jobs.ts): batch writes, and import jobs streamed from the
// request's body, through the ingest role's connections.

export const importOperations: Record<string, AdminAction> = {
  async writeRecords(c) {
    const { id } = pathWorkspace(c);
    return await c.once(
      c.body ?? null,
      async (trx) => ({
        status: 200,
        body: await writeRecords(trx, c.actor, { workspaceId: id, body: c.body ?? {}, metrics: c.metrics }),
      }),
      ingestOf(c),
    );
  },

  async createImport(c) {
    const { id } = pathWorkspace(c);
    const type = (c.contentType ?? '').split(';')[0].trim().toLowerCase();
    const format = type === 'application/json' ? 'json' : type === 'application/x-ndjson' ? 'ndjson' : undefined;
    if (format === undefined)
      throw apiError(
        'unsupported_media_type',
        'Send the import as Content-Type application/json (an import document) or application/x-ndjson (one {"key", "record"} a line).',
      );
    if (!c.request) throw new Error('createImport: no request stream given');
    // The job reads the body as it arrives; the 202 goes out once it is all read (an HTTP server throws away what is
    // left of a body once it has answered), with the job as it stands: getImport follows it from then on (or meanwhile,
    // from another connection).
    // Through a pipe: a job that stops early drops its side, never the request itself (nor the connection with it).
    const request = c.request;
    const body = request.pipe(new PassThrough());
    // (the job reads the body's error as it iterates; between two reads there may be no listener)
    body.on('error', () => undefined);
    // A cut-off upload (the client gone, the connection closed) never ends the pipe: the job is told, and fails.
    const cutOff = () => {
      if (!(request as IncomingMessage).complete)
        body.destroy(new ImportError('the upload was cut off before the body ended; nothing was written'));
    };
    request.once('aborted', cutOff);
    request.once('close', cutOff);
    // An upload may honestly take longer than the listener's request time-out; the job fails one that stalls instead.
    allowLongBody(request as IncomingMessage);
    const ingest = ingestOf(c);
    const { job, done, received } = await startImport(ingest, c.actor, {
      workspaceId: id,
      body,
      format,
      metrics: c.metrics,
      logger: c.logger,
    });
    await received;
    // What the job left unread (it failed or was canceled early) is read and dropped, so the client's upload ends.
    void done.then(
      () => {
        request.unpipe(body);
        request.resume();
      },
      () => undefined,
    );
    return { status: 202, body: await getImport(ingest, c.actor, { workspaceId: id, importId: job.id }) };
  },

  async getImport(c) {
    const input = { workspaceId: pathWorkspace(c).id, importId: c.params.importId };
    return { status: 200, body: await getImport(ingestOf(c), c.actor, input) };
  },

  async cancelImport(c) {
    const input = { workspaceId: pathWorkspace(c).id, importId: c.params.importId };
    return { status: 200, body: await cancelImport(ingestOf(c), c.actor, input) };
  },
};
