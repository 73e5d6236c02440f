// ssh2's own modules, imported by path in ssh2.ts (@types/ssh2 declares the package index only)
declare module 'ssh2/lib/client.js' {
  const Client: typeof import('ssh2').Client;
  export default Client;
}
declare module 'ssh2/lib/protocol/keyParser.js' {
  const keyParser: { parseKey: typeof import('ssh2').utils.parseKey };
  export default keyParser;
}
