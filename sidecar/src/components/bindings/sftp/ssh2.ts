/**
 * ssh2's client and key parser, loaded with the first SFTP component. Not through the package
 * index: it also loads ssh2's SSH server, agent, key generator and HTTP agents, which an SFTP
 * client never uses (3 MB of a sidecar's RSS; bench/README.md `### startup`).
 */
import type * as Ssh2 from 'ssh2';

/** What the binding uses of ssh2. */
export interface Ssh2Module {
  Client: typeof Ssh2.Client;
  utils: { parseKey: typeof Ssh2.utils.parseKey };
}

export async function loadSsh2(): Promise<Ssh2Module> {
  const [client, keys] = await Promise.all([import('ssh2/lib/client.js'), import('ssh2/lib/protocol/keyParser.js')]);
  // CommonJS modules: their module.exports is the default export
  return { Client: client.default, utils: { parseKey: keys.default.parseKey } };
}
