/**
 * Validates real HTTP exchanges against docs/openapi.yaml with ajv (JSON Schema 2020-12, the
 * dialect of OpenAPI 3.1), so the document and the implementation cannot drift apart:
 * the operation must exist (or the exchange must be the 404 of an unknown path or the 405 of a
 * method a path does not have, both described in `info.description`), the status must be
 * documented for it, every required header must be present and match its schema, the
 * content type must be one the response documents, and the body must match its schema (or be
 * empty when the response documents no content).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';

type Json = Record<string, unknown>;
type ValidateFn = ((data: unknown) => boolean) & { errors?: unknown[] | null };
type AjvLike = {
  addVocabulary(keywords: string[]): void;
  addSchema(schema: object): void;
  compile(schema: object): ValidateFn;
};

// ajv and ajv-formats are CommonJS; their default export arrives one level deep under ESM.
const Ajv2020 = ((Ajv2020Module as unknown as { default?: unknown }).default ?? Ajv2020Module) as new (
  options: object,
) => AjvLike;
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: AjvLike,
) => void;

export const OPENAPI_PATH = fileURLToPath(new URL('../../../../docs/openapi.yaml', import.meta.url));
const DOC_ID = 'openapi.yaml';
/** Top-level OpenAPI keywords: known to ajv so the document can be registered as one schema resource. */
const OPENAPI_ROOT_KEYWORDS = [
  'openapi',
  'info',
  'servers',
  'paths',
  'components',
  'security',
  'tags',
  'webhooks',
  'externalDocs',
  'jsonSchemaDialect',
];
/** Paths the service answers only when configured to (info.description, "Extensions beyond v1"). */
const OPTIONAL_PATHS = new Set(['/secret-scanning/alerts']);
/** The tag of every operation beyond v1. */
export const EXTENSIONS_TAG = 'extensions';
/**
 * The response whose headers and content type a 404 for an unknown path and a 405 share with an
 * operation's 404; their bodies are the standard error with their own code and empty details.
 */
const UNMATCHED_RESPONSE = '#/components/responses/NotFound';
export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

export interface Exchange {
  readonly method: string;
  /** Path relative to the server url (`/v1` stripped), without the query. */
  readonly path: string;
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

export interface OperationRef {
  readonly method: string;
  readonly template: string;
  readonly operationId: string;
}

const escapePointer = (s: string): string => s.replace(/~/g, '~0').replace(/\//g, '~1');

export class OpenApiDocument {
  readonly doc: Json;
  readonly serverUrl: string;
  private readonly ajv: AjvLike;
  private readonly compiled = new Map<string, ValidateFn>();
  private readonly templates: { template: string; regex: RegExp }[];
  /** `${operationId} ${status}` pairs seen by validate(). */
  readonly seen = new Set<string>();

  private constructor(doc: Json) {
    this.doc = doc;
    const servers = doc['servers'] as { url: string }[];
    this.serverUrl = servers[0]!.url;
    this.ajv = new Ajv2020({ allErrors: true, strict: true });
    addFormats(this.ajv);
    this.ajv.addVocabulary(OPENAPI_ROOT_KEYWORDS);
    this.ajv.addSchema({ ...doc, $id: DOC_ID });
    this.templates = Object.keys(this.paths()).map((template) => ({
      template,
      regex: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
    }));
  }

  static #instance: OpenApiDocument | undefined;
  static load(): OpenApiDocument {
    OpenApiDocument.#instance ??= new OpenApiDocument(parse(readFileSync(OPENAPI_PATH, 'utf8')) as Json);
    return OpenApiDocument.#instance;
  }

  paths(): Record<string, Json> {
    return this.doc['paths'] as Record<string, Json>;
  }

  /** The operations beyond v1 (C-56): those tagged `extensions`. */
  extensionOperations(): OperationRef[] {
    return this.operations().filter((o) => this.tagsOf(o).includes(EXTENSIONS_TAG));
  }

  /** The operations of v1 (spec §4): every operation without the `extensions` tag. */
  v1Operations(): OperationRef[] {
    return this.operations().filter((o) => !this.tagsOf(o).includes(EXTENSIONS_TAG));
  }

  /** The operation object of an operation of `paths`. */
  operation(o: OperationRef): Json {
    return (this.paths()[o.template] as Record<string, Json>)[o.method.toLowerCase()]!;
  }

  private tagsOf(o: OperationRef): string[] {
    return (this.operation(o)['tags'] ?? []) as string[];
  }

  operations(): OperationRef[] {
    const out: OperationRef[] = [];
    for (const [template, item] of Object.entries(this.paths())) {
      for (const method of HTTP_METHODS) {
        const op = item[method] as Json | undefined;
        if (op !== undefined) out.push({ method: method.toUpperCase(), template, operationId: String(op['operationId']) });
      }
    }
    return out;
  }

  /** Follows `$ref: '#/…'` (one or more hops) to the referenced object. */
  deref<T = Json>(node: unknown): T {
    let current = node as Json;
    for (let hops = 0; current !== null && typeof current === 'object' && typeof current['$ref'] === 'string'; hops++) {
      if (hops > 10) throw new Error('$ref chain too long');
      current = this.pointer(current['$ref'] as string) as Json;
    }
    return current as T;
  }

  /** Resolves a local reference `#/a/b` against the document; throws when it does not exist. */
  pointer(ref: string): unknown {
    if (!ref.startsWith('#/')) throw new Error(`only local $refs are used: ${ref}`);
    let node: unknown = this.doc;
    for (const raw of ref.slice(2).split('/')) {
      const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
      if (node === null || typeof node !== 'object' || !(key in (node as Json))) throw new Error(`unresolvable $ref ${ref}`);
      node = (node as Json)[key];
    }
    return node;
  }

  /** A validator for the schema at a JSON pointer into the document. */
  validatorAt(pointer: string): ValidateFn {
    let fn = this.compiled.get(pointer);
    if (fn === undefined) {
      fn = this.ajv.compile({ $ref: `${DOC_ID}${pointer}` });
      this.compiled.set(pointer, fn);
    }
    return fn;
  }

  /** The path template of the document that a concrete relative path matches, if any. */
  templateOf(path: string): string | undefined {
    return this.templates.find((t) => t.regex.test(path))?.template;
  }

  /** Throws an Error describing every mismatch between the exchange and the document. */
  validate(x: Exchange): void {
    const where = `${x.method} ${x.path} -> ${x.status}`;
    const template = this.templateOf(x.path);
    const method = x.method.toLowerCase();
    const item = template === undefined ? undefined : this.paths()[template];
    let responsePointer: string;
    /** For a request matching no operation: the error code its standard-shape body must carry. */
    let unmatchedCode: string | undefined;
    // A path that only a configuration turns on (the secret-scanning alerts) is unknown when off.
    const off = template !== undefined && OPTIONAL_PATHS.has(template) && x.status === 404;
    if (item === undefined || (item[method] as Json | undefined) === undefined || off) {
      const expected = template === undefined || off ? '404' : '405';
      if (String(x.status) !== expected) {
        throw new Error(`${where}: a request matching no operation must answer ${expected} (info.description, "Paths")`);
      }
      // Both are the standard error with empty details and the standard headers, like NotFound;
      // a 405 also names the path's methods in `Allow`.
      responsePointer = UNMATCHED_RESPONSE;
      unmatchedCode = expected === '404' ? 'NOT_FOUND' : 'METHOD_NOT_ALLOWED';
      this.seen.add(`unmatched ${expected}`);
      if (expected === '405') {
        const allow = x.headers.get('allow');
        const methods = HTTP_METHODS.filter((m) => item![m] !== undefined).map((m) => m.toUpperCase());
        if (allow === null || allow.split(', ').sort().join() !== methods.sort().join()) {
          throw new Error(`${where}: Allow ${String(allow)} is not the path's methods ${methods.join(', ')}`);
        }
      }
    } else {
      const op = item[method] as Json;
      const responses = op['responses'] as Json;
      if (responses[String(x.status)] === undefined) {
        throw new Error(`${where}: status ${x.status} is not documented for ${String(op['operationId'])}`);
      }
      responsePointer = `#/paths/${escapePointer(template!)}/${method}/responses/${x.status}`;
      const direct = responses[String(x.status)] as Json;
      if (typeof direct['$ref'] === 'string') responsePointer = direct['$ref'];
      this.seen.add(`${String(op['operationId'])} ${x.status}`);
    }
    const response = this.deref(this.pointer(responsePointer));
    const problems: string[] = [];

    // Headers: every required one present, every documented one that is present matches its schema.
    const headers = (response['headers'] ?? {}) as Record<string, Json>;
    for (const [name, headerNode] of Object.entries(headers)) {
      const header = this.deref(headerNode);
      const value = x.headers.get(name);
      if (value === null) {
        if (header['required'] === true) problems.push(`missing required header ${name}`);
        continue;
      }
      const schema = header['schema'] as Json;
      const typed = schema['type'] === 'integer' ? (/^-?\d+$/.test(value) ? Number(value) : value) : value;
      const headerRef = typeof headerNode['$ref'] === 'string' ? (headerNode['$ref'] as string) : `${responsePointer}/headers/${escapePointer(name)}`;
      const check = this.validatorAt(`${headerRef}/schema`);
      if (!check(typed)) problems.push(`header ${name}: ${JSON.stringify(value)} ${JSON.stringify(check.errors)}`);
    }

    // Body.
    const content = response['content'] as Record<string, Json> | undefined;
    const contentType = x.headers.get('content-type');
    if (x.method === 'HEAD') {
      // A HEAD response has no body by definition (its headers were checked above).
      if (x.text.length !== 0) problems.push('HEAD response with a body');
    } else if (content === undefined) {
      if (x.text.length !== 0) problems.push(`documented without content, got a body: ${x.text.slice(0, 200)}`);
    } else {
      const mediaType = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
      if (content[mediaType] === undefined) {
        problems.push(`content type ${String(contentType)} is not one of ${Object.keys(content).join(', ')}`);
      } else {
        let body: unknown;
        try {
          body = JSON.parse(x.text);
        } catch {
          problems.push(`body is not JSON: ${x.text.slice(0, 200)}`);
        }
        if (body !== undefined && unmatchedCode !== undefined) {
          const check = this.validatorAt('#/components/schemas/Error');
          if (!check(body)) problems.push(`body ${JSON.stringify(body)} fails the schema: ${JSON.stringify(check.errors)}`);
          const { error, details } = body as { error?: unknown; details?: unknown };
          if (error !== unmatchedCode || !Array.isArray(details) || details.length !== 0) {
            problems.push(`body ${JSON.stringify(body)} is not ${unmatchedCode} with empty details`);
          }
        } else if (body !== undefined) {
          const check = this.validatorAt(`${responsePointer}/content/${escapePointer(mediaType)}/schema`);
          if (!check(body)) problems.push(`body ${JSON.stringify(body)} fails the schema: ${JSON.stringify(check.errors)}`);
        }
      }
    }
    if (problems.length > 0) throw new Error(`${where} does not match docs/openapi.yaml:\n  - ${problems.join('\n  - ')}`);
  }
}
