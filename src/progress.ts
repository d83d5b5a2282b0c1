import cliProgress from 'cli-progress';

// Progress of long operations (the import, the large seed), below the CLI that asks for it and the modules that report it.

/** How a long command (seed large, import) shows it is moving. */
export interface ProgressOptions {
  /** Show progress on stderr (or `progressStream`): a bar on a terminal, else a line every `progressIntervalMs` (5 s). */
  progress?: boolean;
  progressStream?: NodeJS.WriteStream;
  progressIntervalMs?: number;
}

export interface Progress {
  /** `units` more are done; `stage` names what is being done now. */
  step(stage: string, units: number): void;
  stop(): void;
}

/**
 * Progress of `label` over `total` `unit`s: a bar redrawn in place on a terminal; elsewhere (a log file, CI, a pipe)
 * one line every interval, and a last one at the end if any was written, so a long run is seen to move.
 */
export function progressReporter(label: string, unit: string, total: number, options: ProgressOptions): Progress {
  if (options.progress !== true) return { step: () => undefined, stop: () => undefined };
  const stream = options.progressStream ?? process.stderr;
  const intervalMs = options.progressIntervalMs ?? 5000;
  if (!stream.isTTY) {
    const started = Date.now();
    let done = 0;
    let stage = 'starting';
    let wrote = false;
    let last = started;
    const line = () => {
      const seconds = Math.round((Date.now() - started) / 1000);
      const percent = total > 0 ? Math.floor((done / total) * 100) : 100;
      stream.write(
        `${label}: ${percent}% | ${stage} | ${done.toLocaleString('en-US')}/${total.toLocaleString('en-US')} ${unit} | ${Math.floor(seconds / 60)}m ${String(seconds % 60).padStart(2, '0')}s\n`,
      );
      wrote = true;
      last = Date.now();
    };
    // Steps can be far apart (one statement may run for a minute): a timer writes the line, not the steps.
    const timer = setInterval(line, intervalMs);
    timer.unref();
    return {
      step: (name, units) => {
        stage = name;
        done += units;
        if (Date.now() - last >= intervalMs) line();
      },
      stop: () => {
        clearInterval(timer);
        if (wrote) line();
      },
    };
  }
  const bar = new cliProgress.SingleBar(
    {
      stream,
      format: `${label} [{bar}] {percentage}% | {stage} | {value}/{total} ${unit} | {duration_formatted}`,
      hideCursor: true,
      clearOnComplete: false,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0, { stage: 'starting' });
  return {
    step: (stage, units) => bar.increment(units, { stage }),
    stop: () => bar.stop(),
  };
}
