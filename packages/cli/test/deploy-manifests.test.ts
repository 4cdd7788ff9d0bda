/**
 * deploy/compose.yaml and deploy/kubernetes/*.yaml, validated offline (no engine or cluster runs
 * here):
 * - every Kubernetes object against the API schema of Kubernetes 1.36 (kubernetes-models 5: its
 *   validator compiled from that version's OpenAPI document checks types, enums and required
 *   fields), and its field names against the same version's types: each object is type-checked by
 *   tsc as an object literal of its kubernetes-models interface, where an unknown field (a typo) is
 *   an error, which the OpenAPI schemas alone would let through;
 * - compose.yaml against the Compose Specification schema, by dclint (which bundles that schema and
 *   lints the file too);
 * - a misspelt field name in each fails (the mutations below);
 * - what the operations guide promises of them: probes on the operations port, the memory limit
 *   equal to MEMORY_LIMIT_MB, the "restricted" pod security settings, the migration before the API,
 *   secrets only as empty templates.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { ROOT } from './support/cli.js';

const exec = promisify(execFile);
const K8S_DIR = join(ROOT, 'deploy', 'kubernetes');
const COMPOSE = join(ROOT, 'deploy', 'compose.yaml');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
/** The workspace's binaries first on the PATH (the devDependency dclint). */
const BIN_PATH = { ...process.env, PATH: `${join(ROOT, 'node_modules', '.bin')}:${process.env['PATH'] ?? ''}` };

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  [field: string]: any;
}

const files = readdirSync(K8S_DIR).filter((f) => f.endsWith('.yaml')).sort();
const objects: { file: string; object: K8sObject }[] = files.flatMap((file) =>
  parseAllDocuments(readFileSync(join(K8S_DIR, file), 'utf8')).map((d) => ({ file, object: d.toJS() as K8sObject })),
);
const byKind = (kind: string): K8sObject => {
  const found = objects.filter((o) => o.object.kind === kind);
  expect(found, kind).to.have.length(1);
  return found[0]!.object;
};

/** kubernetes-models' module and interface of an object: `apps/v1` + `Deployment` -> kubernetes-models/apps/v1/Deployment, IDeployment. */
const modelPath = (o: K8sObject): string => `kubernetes-models/${o.apiVersion}/${o.kind}`;

/** A TypeScript module declaring each object as a literal of its interface. */
function typedModule(list: readonly K8sObject[]): string {
  const imports = [...new Set(list.map((o) => `import type { I${o.kind} } from '${modelPath(o)}';`))];
  const consts = list.map((o, i) => `export const object${i}: I${o.kind} = ${JSON.stringify(o, null, 2)};`);
  return [...imports, '', ...consts, ''].join('\n');
}

/** tsc over the given modules (inside the workspace, so kubernetes-models resolves): its error lines by file. */
async function typeCheck(modules: Record<string, string>): Promise<Record<string, string[]>> {
  const dir = mkdtempSync(join(ROOT, 'deploy', '.check-'));
  try {
    for (const [name, text] of Object.entries(modules)) writeFileSync(join(dir, name), text);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: true, types: [] },
        files: Object.keys(modules),
      }),
    );
    const result = await exec(process.execPath, [TSC, '-p', join(dir, 'tsconfig.json')], { cwd: dir }).catch((e: { stdout: string }) => e);
    const errors: Record<string, string[]> = Object.fromEntries(Object.keys(modules).map((m) => [m, []]));
    for (const line of result.stdout.split('\n')) {
      const m = /^([^(]+)\(\d+,\d+\): error (.*)$/.exec(line);
      if (m !== null) (errors[m[1]!] ??= []).push(m[2]!);
    }
    return errors;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function dclint(file: string): Promise<{ code: number; output: string }> {
  return exec('dclint', [file], { cwd: ROOT, env: BIN_PATH })
    .then((r) => ({ code: 0, output: r.stdout + r.stderr }))
    .catch((e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, output: e.stdout + e.stderr }));
}

describe('C-182: deploy/kubernetes against the Kubernetes 1.36 API (kubernetes-models), deploy/compose.yaml against the Compose Specification (dclint)', function () {
  // tsc over kubernetes-models' declarations: about 10 s here, more under load.
  this.timeout(120_000);

  it('the directory holds the objects the operations guide lists, one of each kind', () => {
    expect(objects.map((o) => o.object.kind).sort()).to.deep.equal(
      ['ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'Job', 'NetworkPolicy', 'PodDisruptionBudget', 'Secret', 'Service'].sort(),
    );
  });

  it('every object passes the schema validation of its kubernetes-models class; a field of the wrong type fails it', async () => {
    for (const { file, object } of objects) {
      const model = (await import(modelPath(object))) as Record<string, new (data: unknown) => { validate(): void }>;
      expect(() => new model[object.kind]!(object).validate(), `${file}: ${object.kind}`).not.to.throw();
    }
    const { Deployment } = (await import('kubernetes-models/apps/v1/Deployment')) as { Deployment: new (data: unknown) => { validate(): void } };
    const wrong = structuredClone(byKind('Deployment'));
    wrong['spec'].replicas = 'two';
    expect(() => new Deployment(wrong).validate()).to.throw(/replicas must be integer/);
  });

  it('every field name is one the Kubernetes 1.36 types know; a misspelt one (readinesProbe) fails', async () => {
    const mutated = structuredClone(byKind('Deployment'));
    const container = mutated['spec'].template.spec.containers[0];
    container.readinesProbe = container.readinessProbe;
    delete container.readinessProbe;
    const errors = await typeCheck({ 'manifests.ts': typedModule(objects.map((o) => o.object)), 'mutated.ts': typedModule([mutated]) });
    expect(errors['manifests.ts']).to.deep.equal([]);
    expect(errors['mutated.ts']).to.have.length(1);
    expect(errors['mutated.ts']![0], errors['mutated.ts']![0]).to.match(/^TS2353: Object literal may only specify known properties, and '"readinesProbe"' does not exist in type 'IContainer'/);
  });

  it('compose.yaml passes dclint (the Compose Specification schema, and its lint rules); a misspelt field (depend_on) fails', async () => {
    const good = await dclint(COMPOSE);
    expect(good, good.output).to.deep.include({ code: 0 });
    const dir = mkdtempSync(join(tmpdir(), 'cos-compose-'));
    try {
      const mutatedFile = join(dir, 'compose.yaml');
      const text = readFileSync(COMPOSE, 'utf8');
      expect(text).to.include('    depends_on:\n      migrate:');
      writeFileSync(mutatedFile, text.replace('    depends_on:\n      migrate:', '    depend_on:\n      migrate:'));
      const bad = await dclint(mutatedFile);
      expect(bad.code).to.equal(1);
      expect(bad.output).to.match(/instancePath="\/services\/api", schemaPath="#\/additionalProperties"/).and.to.include('invalid-schema');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('C-183: what the manifests promise', () => {
  const config = byKind('ConfigMap')['data'] as Record<string, string>;
  const deployment = byKind('Deployment');
  const job = byKind('Job');
  const pod = deployment['spec'].template.spec;
  const container = pod.containers[0];

  it('the Deployment: 2 replicas, probes on the operations port (OPS_PORT), a preStop pause, a grace period above the drain', () => {
    expect(deployment['spec'].replicas).to.equal(2);
    expect(deployment['spec'].strategy.rollingUpdate).to.deep.equal({ maxUnavailable: 0, maxSurge: 1 });
    const ops = container.ports.find((p: { name: string }) => p.name === 'ops');
    expect(String(ops.containerPort)).to.equal(config['OPS_PORT']);
    expect(config['OPS_HOST']).to.equal('0.0.0.0');
    expect(container.readinessProbe.httpGet).to.deep.equal({ path: '/readyz', port: 'ops' });
    expect(container.livenessProbe.httpGet).to.deep.equal({ path: '/livez', port: 'ops' });
    expect(container.lifecycle.preStop.sleep.seconds).to.be.within(3, 10);
    expect(pod.terminationGracePeriodSeconds).to.be.above(container.lifecycle.preStop.sleep.seconds + 13);
    expect(container.args).to.deep.equal(['serve']);
  });

  it('the memory limit is MEMORY_LIMIT_MB (the request equals it: a guaranteed budget)', () => {
    expect(container.resources.limits.memory).to.equal(`${config['MEMORY_LIMIT_MB']}Mi`);
    expect(container.resources.requests.memory).to.equal(container.resources.limits.memory);
    expect(container.envFrom).to.deep.include({ configMapRef: { name: 'cos' } });
  });

  it('every pod meets the "restricted" pod security standard, with a read-only root filesystem and /tmp in memory', () => {
    for (const spec of [pod, job['spec'].template.spec]) {
      expect(spec.securityContext).to.deep.include({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
      expect(spec.securityContext.runAsUser).to.be.above(0);
      expect(spec.automountServiceAccountToken).to.equal(false);
      for (const c of spec.containers) {
        expect(c.securityContext).to.deep.equal({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ['ALL'] } });
        expect(c.volumeMounts).to.deep.include({ name: 'tmp', mountPath: '/tmp' });
      }
    }
  });

  it('the migration Job runs `migrate` with the same image and secret; the Service exposes the API port only; PDB and HPA keep 2 replicas', () => {
    const migrate = job['spec'].template.spec.containers[0];
    expect(migrate.args).to.deep.equal(['migrate']);
    expect(migrate.image).to.equal(container.image);
    expect(migrate.envFrom).to.deep.include({ secretRef: { name: 'cos' } });
    expect(job['spec'].template.spec.restartPolicy).to.equal('Never');
    expect(byKind('Service')['spec'].ports).to.deep.equal([{ name: 'http', port: 80, targetPort: 'http' }]);
    expect(byKind('PodDisruptionBudget')['spec'].minAvailable).to.equal(1);
    expect(byKind('HorizontalPodAutoscaler')['spec'].minReplicas).to.equal(2);
  });

  it('the NetworkPolicy lets the pods reach DNS, Postgres, Redis and HTTPS webhooks, nothing else', () => {
    const egressPorts = (byKind('NetworkPolicy')['spec'].egress as { ports: { protocol: string; port: number }[] }[]).flatMap((r) => r.ports.map((p) => `${p.protocol}/${p.port}`));
    expect(egressPorts.sort()).to.deep.equal(['TCP/443', 'TCP/5432', 'TCP/53', 'TCP/6379', 'UDP/53'].sort());
  });

  it('the Secret is a template: its keys without values', () => {
    const secret = byKind('Secret');
    expect(secret['data']).to.equal(undefined);
    expect(Object.keys(secret['stringData']).sort()).to.deep.equal(['DATABASE_URL', 'REDIS_URL', 'WEBHOOK_SECRET_ENCRYPTION_KEY']);
    expect(Object.values(secret['stringData'])).to.deep.equal(['', '', '']);
  });

  it('compose.yaml: Postgres 16 and Redis 7 with health checks, a one-shot migrate, two API replicas after it, the ops port, secrets only from deploy/.env', async () => {
    const text = readFileSync(COMPOSE, 'utf8');
    const compose = parseYaml(text) as { services: Record<string, any> };
    const { postgres, redis, migrate, api } = compose.services;
    expect(postgres.image).to.match(/^postgres:16\b/);
    expect(redis.image).to.match(/^redis:7\b/);
    for (const s of [postgres, redis]) expect(s.healthcheck.test[0]).to.equal('CMD-SHELL');
    expect(migrate.command).to.deep.equal(['migrate']);
    expect(migrate.restart).to.equal('no');
    expect(api.command).to.deep.equal(['serve']);
    expect(api.deploy.replicas).to.equal(2);
    expect(api.depends_on.migrate).to.deep.equal({ condition: 'service_completed_successfully' });
    expect(api.environment.OPS_PORT).to.equal('9464');
    expect(api.ports).to.include('127.0.0.1:9464-9465:9464');
    expect(api.environment.MEMORY_LIMIT_MB).to.equal(String(Number.parseInt(api.mem_limit, 10)));
    for (const s of [migrate, api]) expect(s).to.deep.include({ read_only: true, init: true, cap_drop: ['ALL'], tmpfs: ['/tmp'] });
    // Every required variable is in the committed example, without a value; deploy/.env is ignored by git.
    const required = [...new Set([...text.matchAll(/\$\{([A-Z_]+):\?/g)].map((m) => m[1]!))].sort();
    expect(required).to.deep.equal(['POSTGRES_PASSWORD', 'REDIS_PASSWORD', 'WEBHOOK_SECRET_ENCRYPTION_KEY']);
    const example = Object.fromEntries(
      readFileSync(join(ROOT, 'deploy', '.env.example'), 'utf8')
        .split('\n')
        .filter((l) => /^[A-Z_]+=/.test(l))
        .map((l) => l.split('=', 2) as [string, string]),
    );
    for (const v of required) expect(example[v], v).to.equal('');
    expect(Object.values(example).filter((v) => v !== '')).to.deep.equal([]);
    const ignored = await exec('git', ['check-ignore', '-q', 'deploy/.env'], { cwd: ROOT }).then(() => true, () => false);
    expect(ignored, 'deploy/.env is ignored by git').to.equal(true);
  });
});
