import pino from 'pino';
import { processConfig } from './config.js';

/**
 * The service's logger. Authorization and Cookie headers, API keys, CSRF tokens and signing secrets never reach a log line: request logs
 * carry no headers, and these paths are redacted wherever they appear anyway.
 */
export function createLogger(
  level = processConfig().service.logLevel,
  destination?: pino.DestinationStream,
): pino.Logger {
  return pino(
    {
      level,
      base: { service: 'fleet-rental' },
      // ISO 8601 (UTC, milliseconds) rather than epoch milliseconds: readable by people and by log tools alike.
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          'authorization',
          'headers.authorization',
          'req.headers.authorization',
          '*.authorization',
          'cookie',
          'headers.cookie',
          '*.cookie',
          'csrfToken',
          '*.csrfToken',
          'key',
          'secret',
          'secrets',
          '*.key',
          '*.secret',
          '*.secrets',
        ],
        censor: '[redacted]',
      },
    },
    destination ?? pino.destination(1),
  );
}
