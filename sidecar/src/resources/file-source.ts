/**
 * Resources from files and folders, re-read when one of them changes (fs.watch, debounced), so a
 * change to a Component file reaches a running `rt run` without a restart. A file that no longer
 * parses is reported and the last good state is kept; a read that a change overlaps is dropped
 * (it may have caught the file half-written) and the next re-read applies. What the loader skips
 * as not being a resource (a folder's files that are not YAML, YAML documents without kind or
 * apiVersion) is logged as a warning once, not on every re-read.
 */
import { type FSWatcher, watch } from 'node:fs';
import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { type LoadOptions, loadResources } from './loader.ts';
import type { ResourceSource } from './source.ts';
import type { Resources } from './types.ts';

const DEBOUNCE_MS = 150;

export class FileSource implements ResourceSource {
  readonly description: string;
  private readonly watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;
  private lastError: string | undefined;
  private closed = false;
  /** what was said skipped, so that a re-read does not say it again */
  private readonly warned = new Set<string>();

  private readonly paths: string[];
  private readonly opts: LoadOptions;
  private readonly log: Logger;

  constructor(paths: string[], opts: LoadOptions, log: Logger) {
    this.paths = paths;
    this.opts = opts;
    this.log = log;
    this.description = paths.length === 0 ? 'no resource files' : `files in ${paths.join(', ')}`;
  }

  list(): Promise<Resources> {
    return loadResources(this.paths, {
      ...this.opts,
      skipped: (message) => {
        if (this.warned.has(message)) return;
        this.warned.add(message);
        this.log.warn(message);
      },
    });
  }

  watch(onChange: (desired: Resources) => void): void {
    /** change events seen so far: a read is applied only when none came while it ran */
    let changes = 0;
    const reload = () => {
      changes++;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => {
        if (this.closed) return;
        const seen = changes;
        // A change during the read may mean the read caught a file half-written (a writer truncates, then
        // writes; a timer already running fires in between): its result is dropped, and the re-read that
        // change scheduled applies the settled file. This also keeps results in order.
        const current = () => changes === seen && !this.closed;
        // settled in the check phase, after the watch events of the same loop turn have been seen
        const settled = <T>(f: (v: T) => void) => (v: T) => void setImmediate(() => current() && f(v));
        this.list().then(
          settled((r: Resources) => {
            this.lastError = undefined;
            onChange(r);
          }),
          settled((e: Error) => {
            this.lastError = e.message;
            this.log.error(`resource files not applied, the last good state is kept: ${e.message}`);
          }),
        );
      }, DEBOUNCE_MS);
    };
    const installed = this.paths.map((p) =>
      stat(p)
        .then((s) => {
          if (this.closed) return;
          // a single file is watched through its folder: editors replace files (rename), which ends a file watch
          const w = watch(s.isDirectory() ? p : dirname(p), { persistent: false }, reload);
          w.on('error', (e) => this.log.warn({ err: e, path: p }, 'watching resource files failed'));
          this.watchers.push(w);
        })
        .catch((e: Error) => this.log.warn({ path: p }, `cannot watch resources path: ${e.message}`)),
    );
    // a change made between the first read and the watch would be missed: read once more (a no-op when unchanged)
    if (installed.length > 0) void Promise.all(installed).then(reload);
  }

  problem(): string | undefined {
    return this.lastError;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    for (const w of this.watchers.splice(0)) w.close();
  }
}
