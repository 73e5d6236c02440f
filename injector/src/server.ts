/**
 * The webhook's HTTPS server: `POST /mutate` (AdmissionReview v1) and `GET /healthz`. The serving
 * certificate is re-read when its files change, so a rotated certificate never expires under a
 * running injector (the `caBundle` of the webhook configuration is kept in step by whoever
 * rotates them).
 */
import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createSecureContext } from 'node:tls';
import type { Logger } from 'pino';
import type { ComponentLister } from './components.ts';
import type { InjectorSettings } from './mutate.ts';
import { review } from './review.ts';

export interface InjectorServerOptions {
  port: number;
  listenAddress: string;
  certFile: string;
  keyFile: string;
  settings: InjectorSettings;
  components: ComponentLister;
  log: Logger;
  /** How often the certificate files are checked for changes. */
  certPollMs?: number;
}

export interface InjectorServer {
  port: number;
  server: Server;
  close(): Promise<void>;
}

/** Larger than any pod the API server accepts (its request limit is 3 MiB). */
const MAX_BODY = 8 * 1024 * 1024;

export async function startInjectorServer(o: InjectorServerOptions): Promise<InjectorServer> {
  const { log } = o;
  const readPair = () => ({ cert: readFileSync(o.certFile), key: readFileSync(o.keyFile) });
  const server = createServer({ ...readPair() }, (req, res) => handle(req, res));

  let lastPair = '';
  const reload = () => {
    try {
      const pair = readPair();
      const fingerprint = pair.cert.toString('base64') + pair.key.toString('base64');
      if (fingerprint === lastPair) return;
      createSecureContext(pair); // a half-written pair throws here and the old one stays
      server.setSecureContext(pair);
      if (lastPair) log.info({ certFile: o.certFile }, 'serving certificate reloaded');
      lastPair = fingerprint;
    } catch (e) {
      log.warn({ certFile: o.certFile, err: (e as Error).message }, 'serving certificate not reloaded (files unreadable or not a matching pair); keeping the current one');
    }
  };
  reload();
  const interval = o.certPollMs ?? 2000;
  // polling stat follows the symlink swaps of a mounted Secret, which fs.watch misses
  watchFile(o.certFile, { interval }, reload);
  watchFile(o.keyFile, { interval }, reload);

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      if (req.method !== 'GET' && req.method !== 'HEAD') return sendJson(res, 405, error('ERR_METHOD_NOT_ALLOWED', 'use GET /healthz'));
      if (!o.components.synced) return sendJson(res, 503, error('ERR_NOT_READY', 'the Components are not listed yet'));
      return sendJson(res, 200, { status: 'ok' });
    }
    if (path !== '/mutate') return sendJson(res, 404, error('ERR_NOT_FOUND', `no route ${path}; the webhook answers POST /mutate`));
    if (req.method !== 'POST') return sendJson(res, 405, error('ERR_METHOD_NOT_ALLOWED', 'use POST /mutate with an AdmissionReview'));
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        tooLarge = true;
        chunks.length = 0;
      } else if (!tooLarge) chunks.push(c);
    });
    req.on('error', () => res.destroy());
    req.on('end', () => {
      if (tooLarge) return sendJson(res, 413, error('ERR_MALFORMED_REQUEST', `the AdmissionReview is larger than ${MAX_BODY} bytes`));
      const t0 = performance.now();
      let out;
      try {
        out = review(Buffer.concat(chunks).toString('utf8'), o.settings, o.components);
      } catch (e) {
        // a bug must not become a 5xx the API server reads as "webhook down": deny and say so
        log.error({ err: e }, 'admission review failed');
        return sendJson(res, 200, { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: '', allowed: false, status: { code: 400, message: `rt injector: internal error: ${(e as Error).message}` } } });
      }
      const { response } = out.review;
      if (out.outcome === 'unavailable') {
        log.warn({ uid: response.uid }, `${response.status?.message}: answering 503, so the API server applies the webhook's failurePolicy`);
        return sendJson(res, 503, error('ERR_NOT_READY', response.status?.message ?? 'not ready'));
      }
      log.debug({ uid: response.uid, outcome: out.outcome, ms: +(performance.now() - t0).toFixed(2) }, `admission ${out.outcome}`);
      if (out.outcome === 'denied' || out.outcome === 'malformed') log.info({ uid: response.uid }, response.status?.message);
      sendJson(res, 200, out.review);
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.listenAddress, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as { port: number }).port;
  return {
    port,
    server,
    close: async () => {
      unwatchFile(o.certFile, reload);
      unwatchFile(o.keyFile, reload);
      server.closeIdleConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function error(errorCode: string, message: string) {
  return { errorCode, message, details: [] };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const data = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
  res.end(data);
}
