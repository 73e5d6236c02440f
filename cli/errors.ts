/**
 * What a new user meets when the sidecar cannot start, said with what to do about it: the
 * start errors that have a known cause get one line naming the flag to change.
 */
import type { StartOptions } from '../sidecar/src/sidecar.ts';

/** One line for a start failure with a known cause; undefined for others (shown as they are). */
export function explainStartError(e: unknown, o: StartOptions): string | undefined {
  const err = e as NodeJS.ErrnoException & { errors?: unknown[] };
  const text = String(err?.message ?? e);
  const inUse = /EADDRINUSE[^\d]*(?:[\d.:[\]a-f]*:)?(\d+)/i.exec(text);
  if (inUse) {
    const port = Number(inUse[1]);
    // grpc-js wraps the listen error ("No address added …"), the HTTP server throws it as is
    const grpc = text.startsWith('No address added') || port === o.grpcPort;
    const [what, flag] = grpc ? ['gRPC API', 'grpc-port'] : ['HTTP API', 'http-port'];
    const env = `RT_${flag.toUpperCase().replace('-', '_')}`;
    return `port ${port} (the ${what} port) is already in use, probably by another rt or app: stop it, or choose a free port with --${flag} <port> or ${env}=<port> (0 = any free port; e.g. ${env}=0 npm start)`;
  }
  if (/resources path does not exist/.test(text)) {
    return `${text}: create the folder and put component YAML files in it, or name an existing one with --resources-path <dir> (npm start uses examples/resources)`;
  }
  return undefined;
}
