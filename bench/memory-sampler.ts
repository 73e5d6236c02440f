/**
 * What a benchmarked child's RSS is made of: SAMPLER, given to the child as
 * `NODE_OPTIONS=--import=<SAMPLER>`, appends `process.memoryUsage()` every 10 ms to the file named
 * by RT_BENCH_MEMORY_SAMPLES, one line `<epoch ms> <rss> <heapTotal> <heapUsed> <external>
 * <arrayBuffers>` (bytes). It is plain JavaScript in a data: URL: importing a .ts file would load
 * Node's type stripping into a compiled child and add to what is measured.
 */
const source = `
import { appendFileSync } from 'node:fs';
const file = process.env.RT_BENCH_MEMORY_SAMPLES;
if (file) setInterval(() => {
  const m = process.memoryUsage();
  appendFileSync(file, Date.now() + ' ' + m.rss + ' ' + m.heapTotal + ' ' + m.heapUsed + ' ' + m.external + ' ' + m.arrayBuffers + '\\n');
}, 10).unref();
`;
export const SAMPLER = `data:text/javascript,${encodeURIComponent(source)}`;

export interface MemorySample {
  at: number;
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

/** The samples in `text` (the file's content) taken between `from` and `to` (epoch ms). */
export function samplesBetween(text: string, from: number, to: number): MemorySample[] {
  const out: MemorySample[] = [];
  for (const line of text.split('\n')) {
    const [at, rss, heapTotal, heapUsed, external, arrayBuffers] = line.split(' ').map(Number);
    if (at === undefined || !(at >= from && at <= to)) continue;
    out.push({ at, rss: rss!, heapTotal: heapTotal!, heapUsed: heapUsed!, external: external!, arrayBuffers: arrayBuffers! });
  }
  return out;
}
