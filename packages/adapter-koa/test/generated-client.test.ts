/**
 * docs/openapi.yaml as a tool uses it: a client generated with openapi-typescript and openapi-fetch
 * (both with their defaults) type-checks a small program written the way a newcomer would write it,
 * and that program runs the README's flow against a real HTTP server: create an organisation, issue
 * a key with only `{"label": "ci pipeline"}` (the body's `environment` has a default, so it is not
 * required), use it, roll it, revoke the replacement, and read `last_used_at` of the issued key
 * (the issued key's type carries `last_used_at` and `revoked_at`). Every exchange is also validated
 * against the document (C-56: the roll is under `paths` like every route the server answers).
 *
 * The scratch project lives under the workspace's node_modules/.cache so that `openapi-fetch`
 * resolves from it exactly as from a project that installed it; it is removed afterwards.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect } from 'chai';
import type { ClientOptions } from 'openapi-fetch';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { OpenApiDocument, OPENAPI_PATH } from './support/openapi.js';
import { createWorld, type World } from './support/world.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The program a client author writes against the generated types (README flow, section "Quick start"). */
const PROGRAM = `
import createClient, { type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './schema.js';

type ApiKey = components['schemas']['ApiKey'];

export interface FlowOptions {
  baseUrl: string;
  platformKey: string;
  fetch: NonNullable<ClientOptions['fetch']>;
  /** Lets the server write key usage (last_used_at is written in batches). */
  afterUse: () => Promise<void>;
}

export interface FlowResult {
  orgId: string;
  issued: { id: string; key: string; last_used_at: string | null; revoked_at: string | null };
  rolled: { id: string; rolled_from: string };
  revokeStatus: number;
  afterRevokeStatus: number;
  issuedRead: ApiKey;
}

export async function readmeFlow(options: FlowOptions): Promise<FlowResult> {
  const client = createClient<paths>({ baseUrl: options.baseUrl, fetch: options.fetch });
  const as = (key: string) => ({ Authorization: \`Bearer \${key}\` });

  const org = await client.POST('/organisations', {
    body: { name: 'Acme Ltd', slug: 'acme-ltd' },
    headers: as(options.platformKey),
  });
  if (org.data === undefined) throw new Error(\`create organisation: \${org.response.status}\`);
  const orgId = org.data.id;

  // The README's body: a label only.
  const issued = await client.POST('/organisations/{org_id}/api-keys', {
    params: { path: { org_id: orgId } },
    body: { label: 'ci pipeline' },
    headers: as(options.platformKey),
  });
  if (issued.data === undefined || !('key' in issued.data)) throw new Error(\`issue: \${issued.response.status}\`);
  const key: string = issued.data.key;
  const lastUsedAt: string | null = issued.data.last_used_at;
  const revokedAt: string | null = issued.data.revoked_at;
  const issuedId = issued.data.id;

  const own = await client.GET('/organisations/{org_id}', { params: { path: { org_id: orgId } }, headers: as(key) });
  if (own.data === undefined) throw new Error(\`use: \${own.response.status}\`);
  await options.afterUse();

  const rolled = await client.POST('/organisations/{org_id}/api-keys/{key_id}/roll', {
    params: { path: { org_id: orgId, key_id: issuedId } },
    body: { grace_period_seconds: 0 },
    headers: as(key),
  });
  if (rolled.data === undefined || !('key' in rolled.data)) throw new Error(\`roll: \${rolled.response.status}\`);
  const newKey: string = rolled.data.key;

  const revoked = await client.DELETE('/organisations/{org_id}/api-keys/{key_id}', {
    params: { path: { org_id: orgId, key_id: rolled.data.id } },
    headers: as(newKey),
  });
  const afterRevoke = await client.GET('/organisations/{org_id}', { params: { path: { org_id: orgId } }, headers: as(newKey) });

  const read = await client.GET('/organisations/{org_id}/api-keys/{key_id}', {
    params: { path: { org_id: orgId, key_id: issuedId } },
    headers: as(options.platformKey),
  });
  if (read.data === undefined) throw new Error(\`read: \${read.response.status}\`);
  const issuedRead: ApiKey = read.data;
  const used: string | null = issuedRead.last_used_at;
  void used;

  return {
    orgId,
    issued: { id: issuedId, key, last_used_at: lastUsedAt, revoked_at: revokedAt },
    rolled: { id: rolled.data.id, rolled_from: rolled.data.rolled_from },
    revokeStatus: revoked.response.status,
    afterRevokeStatus: afterRevoke.response.status,
    issuedRead,
  };
}
`;

interface FlowResult {
  orgId: string;
  issued: { id: string; key: string; last_used_at: string | null; revoked_at: string | null };
  rolled: { id: string; rolled_from: string };
  revokeStatus: number;
  afterRevokeStatus: number;
  issuedRead: { id: string; status: string; last_used_at: string | null; revoked_at: string | null };
}
/** What openapi-fetch calls to send a request: the flow's exchanges pass through it. */
type FetchFn = NonNullable<ClientOptions['fetch']>;
type Flow = (options: {
  baseUrl: string;
  platformKey: string;
  fetch: FetchFn;
  afterUse: () => Promise<void>;
}) => Promise<FlowResult>;

/**
 * Type-checks the scratch project's files as `tsc --strict --noEmit` would (one program), with the
 * DOM library for fetch's types as a browser or Node client would have; diagnostics by file name.
 */
function typeCheck(dir: string, files: string[]): Map<string, string[]> {
  const program = ts.createProgram(
    files.map((f) => join(dir, f)),
    {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
      types: [],
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      skipLibCheck: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
    },
  );
  const out = new Map<string, string[]>(files.map((f) => [f, []]));
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const file = d.file === undefined ? files[0]! : d.file.fileName.slice(dir.length + 1);
    (out.get(file) ?? out.set(file, []).get(file)!).push(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  }
  return out;
}

describe('adapter-koa: a client generated from docs/openapi.yaml (openapi-typescript + openapi-fetch)', function () {
  // Generating the types and type-checking one program take about 2 s of CPU together; on this
  // 2-core machine under other suites' load the type-check took up to 9 s of wall time.
  this.timeout(60_000);
  let dir: string;
  let world: World;

  before(async () => {
    const cache = join(ROOT, 'node_modules', '.cache');
    mkdirSync(cache, { recursive: true });
    dir = mkdtempSync(join(cache, 'cos-generated-client-'));
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    const ast = await openapiTS(pathToFileURL(OPENAPI_PATH));
    writeFileSync(join(dir, 'schema.ts'), astToString(ast));
    writeFileSync(join(dir, 'flow.ts'), PROGRAM);
    world = await createWorld();
  });

  after(async () => {
    await world?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('the generated types: the issue body needs only `label`, the issued key carries last_used_at and revoked_at, the roll is an operation', () => {
    // A program that leaves out `label` must not type-check: the generated types are not `any`.
    writeFileSync(
      join(dir, 'wrong.ts'),
      `import createClient from 'openapi-fetch';\nimport type { paths } from './schema.js';\n` +
        `const c = createClient<paths>({ baseUrl: 'http://x' });\n` +
        `void c.POST('/organisations/{org_id}/api-keys', { params: { path: { org_id: 'o' } }, body: { environment: 'test' } });\n`,
    );
    const diagnostics = typeCheck(dir, ['flow.ts', 'wrong.ts']);
    expect(diagnostics.get('flow.ts')).to.deep.equal([]);
    expect(diagnostics.get('wrong.ts')!.join('\n')).to.match(/'label' is missing/);
    expect([...diagnostics.keys()].sort()).to.deep.equal(['flow.ts', 'wrong.ts']);
  });

  it("runs the README's flow through the generated client against a real server: issue, use, roll, revoke, last_used_at", async () => {
    const js = ts.transpileModule(PROGRAM, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    writeFileSync(join(dir, 'flow.mjs'), js);
    const { readmeFlow } = (await import(pathToFileURL(join(dir, 'flow.mjs')).href)) as { readmeFlow: Flow };

    // Every exchange of the generated client is validated against the document like the suite's own.
    const doc = OpenApiDocument.load();
    const validating: FetchFn = async (request) => {
      const response = await fetch(request);
      const text = await response.clone().text();
      const path = new URL(request.url).pathname.slice(doc.serverUrl.length);
      doc.validate({ method: request.method, path, status: response.status, headers: response.headers, text });
      return response;
    };
    let usedAt: string | undefined;
    const result = await readmeFlow({
      baseUrl: `${world.listening.baseUrl}/v1`,
      platformKey: world.platform.key,
      fetch: validating,
      afterUse: async () => {
        world.tc.clock.advance(60_000);
        await world.tc.core.keyUsage.flushIfDue();
        usedAt = world.tc.clock.now().toISOString();
      },
    });

    expect(result.issued.key).to.match(/^svc_live_[A-Za-z0-9]{48}$/);
    expect(result.issued).to.deep.include({ last_used_at: null, revoked_at: null });
    expect(result.rolled.rolled_from).to.equal(result.issued.id);
    expect(result.revokeStatus).to.equal(204);
    expect(result.afterRevokeStatus).to.equal(401);
    // The issued key was used once (then rolled with grace 0: revoked at once).
    expect(result.issuedRead.id).to.equal(result.issued.id);
    expect(result.issuedRead.status).to.equal('revoked');
    expect(result.issuedRead.revoked_at).to.be.a('string');
    expect(usedAt).to.be.a('string');
    expect(Date.parse(result.issuedRead.last_used_at!)).to.be.within(Date.parse(usedAt!) - 60_000, Date.parse(usedAt!));
  });
});
