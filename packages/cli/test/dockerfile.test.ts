/**
 * The Dockerfile, checked offline (no container engine runs on these machines): linted by
 * dockerfile-utils, and parsed by dockerfile-ast so that its build stage runs the very command the
 * deploy:dir test runs (support/deploy.ts) and its runtime stage starts the very path that test
 * starts, inside the directory it copies. The two cannot drift apart.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { DockerfileParser } from 'dockerfile-ast';
import { ROOT } from './support/cli.js';
import { DEPLOY_BIN, DEPLOY_COMMAND } from './support/deploy.js';

const exec = promisify(execFile);
const DOCKERFILE = join(ROOT, 'Dockerfile');
/** The workspace's binaries first on the PATH (the devDependency dockerfile-utils). */
const BIN_PATH = { ...process.env, PATH: `${join(ROOT, 'node_modules', '.bin')}:${process.env['PATH'] ?? ''}` };

interface Step {
  keyword: string;
  args: string;
  flags: Record<string, string | null>;
}

/** The instructions of each stage (the global ARGs before the first FROM under ''), by stage name. */
function stages(text: string): { args: Step[]; byName: Record<string, Step[]> } {
  const byName: Record<string, Step[]> = {};
  const args: Step[] = [];
  let current: Step[] = args;
  for (const i of DockerfileParser.parse(text).getInstructions()) {
    const flags = 'getFlags' in i && typeof i.getFlags === 'function' ? Object.fromEntries((i.getFlags() as { getName(): string; getValue(): string | null }[]).map((f) => [f.getName(), f.getValue()])) : {};
    const step = { keyword: i.getKeyword(), args: i.getArgumentsContent() ?? '', flags };
    if (step.keyword === 'FROM') {
      const name = / AS (\S+)$/i.exec(step.args)?.[1] ?? String(Object.keys(byName).length);
      current = byName[name] = [];
    }
    current.push(step);
  }
  return { args, byName };
}

const lint = (file: string): Promise<{ code: number; output: string }> =>
  exec('dockerfile-utils', ['lint', file], { env: BIN_PATH })
    .then((r) => ({ code: 0, output: r.stdout + r.stderr }))
    .catch((e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, output: e.stdout + e.stderr }));

describe('C-184: the Dockerfile builds the tested production directory and runs it as the test does', () => {
  const text = readFileSync(DOCKERFILE, 'utf8');
  const { args, byName } = stages(text);
  const build = byName['build']!;
  const runtime = byName['runtime']!;
  const one = (steps: Step[], keyword: string): Step => {
    const found = steps.filter((s) => s.keyword === keyword);
    expect(found, keyword).to.have.length(1);
    return found[0]!;
  };

  it('dockerfile-utils finds nothing to report; an unknown instruction would fail it', async function () {
    this.timeout(30_000);
    expect(await lint(DOCKERFILE)).to.deep.equal({ code: 0, output: '' });
    const dir = mkdtempSync(join(tmpdir(), 'cos-dockerfile-'));
    try {
      writeFileSync(join(dir, 'Dockerfile'), text.replace('ENTRYPOINT [', 'ENTRYPONT ['));
      const bad = await lint(join(dir, 'Dockerfile'));
      expect(bad.code).to.equal(1);
      expect(bad.output).to.include('Unknown instruction: ENTRYPONT');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('two stages on one pinned Node 22 version: the full image builds, the slim one runs', () => {
    expect(Object.keys(byName)).to.deep.equal(['build', 'runtime']);
    const version = /^NODE_VERSION=(\d+)\.(\d+)\.(\d+)$/.exec(one(args, 'ARG').args);
    expect(version, 'NODE_VERSION pinned to major.minor.patch').to.not.equal(null);
    expect(version![1]).to.equal('22');
    expect(one(build, 'FROM').args).to.equal('node:${NODE_VERSION}-bookworm AS build');
    expect(one(runtime, 'FROM').args).to.equal('node:${NODE_VERSION}-bookworm-slim AS runtime');
  });

  it('the build stage runs the deploy:dir test\'s command into /out, after a frozen install', () => {
    const run = one(build, 'RUN').args.split('&&').map((c) => c.trim());
    expect(run).to.deep.equal(['npx -y pnpm@10 install --frozen-lockfile', `${DEPLOY_COMMAND} /out`]);
  });

  it('the runtime stage copies /out to /app and starts /app/bin/cos-admin serve (exec form), as a numeric non-root user, with a /livez health check', () => {
    const copy = one(runtime, 'COPY');
    expect(copy.flags).to.deep.equal({ from: 'build' });
    expect(copy.args).to.equal('/out /app');
    expect(JSON.parse(one(runtime, 'ENTRYPOINT').args)).to.deep.equal([`/app/${DEPLOY_BIN}`]);
    expect(JSON.parse(one(runtime, 'CMD').args)).to.deep.equal(['serve']);
    const user = one(runtime, 'USER').args;
    expect(user).to.match(/^[1-9]\d*:[1-9]\d*$/);
    const healthcheck = one(runtime, 'HEALTHCHECK');
    expect(healthcheck.args).to.match(/^CMD \[/).and.to.include("'/livez'").and.to.include('process.env.OPS_PORT');
    const env = one(runtime, 'ENV').args;
    expect(env).to.match(/\bOPS_PORT=9464\b/).and.to.match(/\bOPS_HOST=0\.0\.0\.0\b/).and.to.match(/\bDATABASE_URL=sqlite:\/data\//);
    expect(one(runtime, 'VOLUME').args).to.equal('["/data"]');
    expect(one(runtime, 'RUN').args).to.equal(`mkdir /data && chown ${user} /data`);
  });

  it('.dockerignore keeps node_modules, builds, .git, tests, data and env files out of the build context', () => {
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n').filter((l) => l !== '' && !l.startsWith('#'));
    expect(ignored).to.include.members(['**/node_modules', '**/dist', '.git', '**/test', 'data', '**/*.sqlite', '.env', 'deploy/.env']);
  });
});
