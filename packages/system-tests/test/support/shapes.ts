/**
 * The contract's response shapes (spec §2, §7; C-3, C-4, C-9, C-10, C-16, C-20..C-22, C-51, C-52) as
 * JSON Schemas checked with ajv, and one `checkResponse` that says everything wrong with a response.
 * Records are closed (additionalProperties false) so a leaked digest or stray field is caught.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS; under NodeNext its default export is the module object.
const addFormats = (addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule;

const ajv = new Ajv({ allErrors: true, strict: true });
(addFormats as unknown as (a: Ajv) => void)(ajv);

const uuid = { type: 'string', format: 'uuid' } as const;
const timestamp = { type: 'string', pattern: '^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?Z$' } as const;
const nullableTimestamp = { anyOf: [timestamp, { type: 'null' }] } as const;

export const ERROR_CODE_BY_STATUS: Readonly<Record<number, string>> = {
  400: 'VALIDATION_ERROR',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  500: 'INTERNAL_ERROR',
  503: 'SERVICE_UNAVAILABLE',
};

const schemas = {
  standardError: {
    type: 'object',
    additionalProperties: false,
    required: ['error', 'message', 'details'],
    properties: {
      error: { type: 'string', enum: Object.values(ERROR_CODE_BY_STATUS) },
      message: { type: 'string', minLength: 1, maxLength: 1000 },
      details: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['field', 'issue'],
          properties: { field: { type: 'string', maxLength: 1000 }, issue: { type: 'string', minLength: 1, maxLength: 1000 } },
        },
      },
    },
  },
  problem429: {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'title', 'status', 'detail', 'svc_error_code', 'retry_after', 'instance'],
    properties: {
      type: { type: 'string', format: 'uri', pattern: '/rate-limit-exceeded$' },
      title: { const: 'Rate Limit Exceeded' },
      status: { const: 429 },
      detail: { type: 'string', minLength: 1 },
      svc_error_code: { const: 'RATE_LIMIT_EXCEEDED' },
      retry_after: { type: 'integer', minimum: 1, maximum: 60 },
      instance: { type: 'string', minLength: 1 },
    },
  },
  organisation: {
    type: 'object',
    additionalProperties: false,
    required: ['id', 'name', 'slug', 'industry_section', 'is_system', 'created_at', 'updated_at'],
    properties: {
      id: uuid,
      name: { type: 'string', minLength: 1, maxLength: 200 },
      slug: { type: 'string', pattern: '^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$' },
      industry_section: { anyOf: [{ type: 'string', pattern: '^[A-U]$' }, { type: 'null' }] },
      is_system: { type: 'boolean' },
      created_at: timestamp,
      updated_at: timestamp,
    },
  },
  member: {
    type: 'object',
    additionalProperties: false,
    required: ['id', 'organisation_id', 'email', 'created_at'],
    properties: { id: { type: 'string', minLength: 1 }, organisation_id: uuid, email: { type: 'string' }, created_at: timestamp },
  },
  apiKey: {
    type: 'object',
    additionalProperties: false,
    // C-22's fields, plus last_used_at and rolled_from (the key lifecycle), scopes and created_by_key_id
    // (C-60, C-61), metadata and allowed_cidrs (C-260, C-262), rate_limit_per_minute (C-290), added
    // beyond v1 (C-56: fields may be added).
    required: [
      'id',
      'organisation_id',
      'label',
      'key_prefix',
      'is_active',
      'status',
      'expires_at',
      'created_at',
      'revoked_at',
      'last_used_at',
      'rolled_from',
      'scopes',
      'created_by_key_id',
      'metadata',
      'allowed_cidrs',
      'rate_limit_per_minute',
    ],
    properties: {
      id: uuid,
      organisation_id: uuid,
      label: { type: 'string', minLength: 1, maxLength: 100 },
      key_prefix: { type: 'string', pattern: '^svc_(live|test)_[A-Za-z0-9]{3}$' },
      is_active: { type: 'boolean' },
      status: { enum: ['active', 'revoked', 'expired'] },
      expires_at: nullableTimestamp,
      created_at: timestamp,
      revoked_at: nullableTimestamp,
      last_used_at: nullableTimestamp,
      rolled_from: { anyOf: [uuid, { type: 'null' }] },
      scopes: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', pattern: '^[a-z][a-z0-9_]*:[a-z][a-z0-9_]*$' } },
      created_by_key_id: { anyOf: [uuid, { type: 'null' }] },
      metadata: { type: 'object', maxProperties: 20, additionalProperties: { type: 'string', maxLength: 500 } },
      allowed_cidrs: { anyOf: [{ type: 'array', minItems: 1, maxItems: 20, items: { type: 'string' } }, { type: 'null' }] },
      rate_limit_per_minute: { anyOf: [{ type: 'integer', minimum: 1, maximum: 1_000_000 }, { type: 'null' }] },
    },
  },
  health: {
    type: 'object',
    additionalProperties: false,
    required: ['status', 'timestamp'],
    properties: { status: { enum: ['ok', 'unavailable'] }, timestamp },
  },
  version: {
    type: 'object',
    additionalProperties: false,
    required: ['api_version', 'release', 'released_on', 'service_version'],
    properties: {
      api_version: { const: 'v1' },
      release: { const: 'v1-stable' },
      released_on: { const: '2026-06-10' },
      service_version: { type: 'string', pattern: '^\\d+\\.\\d+\\.\\d+([-+][0-9A-Za-z.+-]+)?$' },
    },
  },
} as const;

const issuedKey = {
  ...schemas.apiKey,
  required: [...schemas.apiKey.required, 'key'],
  properties: { ...schemas.apiKey.properties, key: { type: 'string', pattern: '^svc_(live|test)_[A-Za-z0-9]{48}$' } },
};

const list = (item: object): object => ({
  type: 'object',
  additionalProperties: false,
  required: ['data', 'meta'],
  properties: {
    data: { type: 'array', maxItems: 100, items: item },
    meta: {
      type: 'object',
      additionalProperties: false,
      required: ['next_cursor'],
      properties: { next_cursor: { anyOf: [{ type: 'string', minLength: 1 }, { type: 'null' }] } },
    },
  },
});

export const validators = {
  standardError: ajv.compile(schemas.standardError),
  problem429: ajv.compile(schemas.problem429),
  organisation: ajv.compile(schemas.organisation),
  organisationList: ajv.compile(list(schemas.organisation)),
  memberList: ajv.compile(list(schemas.member)),
  apiKey: ajv.compile(schemas.apiKey),
  apiKeyList: ajv.compile(list(schemas.apiKey)),
  issuedKey: ajv.compile(issuedKey),
  health: ajv.compile(schemas.health),
  version: ajv.compile(schemas.version),
} satisfies Record<string, ValidateFunction>;

export type ShapeName = keyof typeof validators;

/**
 * The twelve operations (C-1), as pathname patterns; the success shape each answers with. Beyond
 * them, the key update (C-261) on a key's path, which a request with another method may reach.
 */
const UUIDISH = '[^/]+';
export const OPERATIONS: readonly { method: string; pattern: RegExp; status: number; shape: ShapeName | null }[] = [
  { method: 'GET', pattern: /^\/v1\/health$/, status: 200, shape: 'health' },
  { method: 'GET', pattern: /^\/v1\/version$/, status: 200, shape: 'version' },
  { method: 'GET', pattern: /^\/v1\/organisations$/, status: 200, shape: 'organisationList' },
  { method: 'POST', pattern: /^\/v1\/organisations$/, status: 201, shape: 'organisation' },
  { method: 'GET', pattern: new RegExp(`^/v1/organisations/${UUIDISH}$`), status: 200, shape: 'organisation' },
  { method: 'PUT', pattern: new RegExp(`^/v1/organisations/${UUIDISH}$`), status: 200, shape: 'organisation' },
  { method: 'PATCH', pattern: new RegExp(`^/v1/organisations/${UUIDISH}$`), status: 200, shape: 'organisation' },
  { method: 'GET', pattern: new RegExp(`^/v1/organisations/${UUIDISH}/members$`), status: 200, shape: 'memberList' },
  { method: 'GET', pattern: new RegExp(`^/v1/organisations/${UUIDISH}/api-keys$`), status: 200, shape: 'apiKeyList' },
  { method: 'POST', pattern: new RegExp(`^/v1/organisations/${UUIDISH}/api-keys$`), status: 201, shape: 'issuedKey' },
  { method: 'GET', pattern: new RegExp(`^/v1/organisations/${UUIDISH}/api-keys/${UUIDISH}$`), status: 200, shape: 'apiKey' },
  { method: 'DELETE', pattern: new RegExp(`^/v1/organisations/${UUIDISH}/api-keys/${UUIDISH}$`), status: 204, shape: null },
  { method: 'PATCH', pattern: new RegExp(`^/v1/organisations/${UUIDISH}/api-keys/${UUIDISH}$`), status: 200, shape: 'apiKey' },
];

export interface ObservedResponse {
  readonly method: string;
  /** The path as sent (may contain a query string). */
  readonly path: string;
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

/** Words that only appear when a driver's or the runtime's error text reaches the client. */
const LEAKY_MESSAGE = /SQLITE_|knex|syntax error|relation "|violates|constraint|ECONN|ETIMEDOUT|TypeError|ReferenceError|undefined is not|Cannot read prop|stack/i;

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

function errorsOf(v: ValidateFunction): string {
  return ajv.errorsText(v.errors, { separator: '; ' });
}

/** Everything that makes this response fall outside the contract; empty when it conforms. */
export function checkResponse(r: ObservedResponse): string[] {
  const problems: string[] = [];
  const contentType = r.headers.get('content-type') ?? '';
  const pathname = r.path.split('?')[0] ?? r.path;
  const head = r.method === 'HEAD';

  if (r.status >= 500 && r.status !== 503) problems.push(`status ${r.status} (never a 5xx other than 503)`);
  if (r.headers.has('x-powered-by')) problems.push('X-Powered-By present (C-16)');
  if (!r.headers.has('x-request-id')) problems.push('X-Request-Id missing (C-15)');
  for (const h of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
    const v = r.headers.get(h);
    if (v === null || !/^\d+$/.test(v)) problems.push(`${h} missing or not a non-negative integer: ${String(v)} (C-52)`);
  }
  if (r.status >= 400 && /\bat [^\s]+ \(?[^\s]*\.(ts|js|mjs|cjs):\d+/.test(r.text)) problems.push('error body leaks a stack trace (C-15)');

  if (r.status === 429) {
    if (!contentType.startsWith('application/problem+json')) problems.push(`429 content-type ${contentType} (C-51)`);
    const retry = r.headers.get('retry-after');
    if (retry === null) problems.push('429 without Retry-After (C-52)');
    if (!head) {
      const parsed = parseJson(r.text);
      if (!parsed.ok) problems.push('429 body is not JSON');
      else if (!validators.problem429(parsed.value)) problems.push(`429 body: ${errorsOf(validators.problem429)}`);
      else {
        const body = parsed.value as { retry_after: number; instance: string };
        if (String(body.retry_after) !== retry) problems.push(`retry_after ${body.retry_after} != Retry-After ${String(retry)}`);
        if (body.instance !== pathname) problems.push(`instance ${body.instance} != path ${pathname}`);
      }
    }
    return problems;
  }

  // C-4: the health check's own 503 is its report {status:"unavailable", timestamp}.
  if (r.status === 503 && pathname === '/v1/health' && (r.method === 'GET' || head)) {
    if (head) return problems;
    const parsed = parseJson(r.text);
    if (!parsed.ok || !validators.health(parsed.value)) problems.push(`health 503 body: ${errorsOf(validators.health)}`);
    else if ((parsed.value as { status: string }).status !== 'unavailable') problems.push('health 503 with status other than "unavailable" (C-4)');
    return problems;
  }
  if (r.status >= 400) {
    const code = ERROR_CODE_BY_STATUS[r.status];
    if (code === undefined) {
      problems.push(`status ${r.status} is not one the contract uses`);
      return problems;
    }
    if (r.status === 405 && !r.headers.has('allow')) problems.push('405 without Allow (C-9)');
    if (head) return problems;
    if (!contentType.startsWith('application/json')) problems.push(`${r.status} content-type ${contentType}`);
    const parsed = parseJson(r.text);
    if (!parsed.ok) problems.push(`${r.status} body is not JSON: ${r.text.slice(0, 200)}`);
    else if (!validators.standardError(parsed.value)) problems.push(`${r.status} body: ${errorsOf(validators.standardError)}`);
    else {
      const body = parsed.value as { error: string; message: string; details: unknown[] };
      if (LEAKY_MESSAGE.test(body.message)) problems.push(`${r.status} message leaks internals (C-15): ${body.message}`);
      if (body.error !== code) problems.push(`${r.status} with error code ${body.error}, expected ${code}`);
      if (body.error !== 'VALIDATION_ERROR' && body.error !== 'CONFLICT' && body.details.length > 0)
        problems.push(`${body.error} with non-empty details`);
    }
    return problems;
  }

  // 1xx/3xx never; 2xx only for one of the twelve operations with its shape.
  if (r.status < 200 || r.status >= 300) {
    problems.push(`status ${r.status} is not one the contract uses`);
    return problems;
  }
  const method = head ? 'GET' : r.method;
  const op = OPERATIONS.find((o) => o.method === method && o.pattern.test(pathname));
  if (op === undefined) {
    problems.push(`${r.status} for ${r.method} ${pathname}, which is not one of the twelve operations`);
    return problems;
  }
  if (r.status !== op.status) problems.push(`${r.method} ${pathname} answered ${r.status}, expected ${op.status}`);
  if (head || op.shape === null) {
    if (r.text !== '') problems.push(`${r.status} for ${r.method} must have an empty body`);
    return problems;
  }
  if (!contentType.startsWith('application/json')) problems.push(`${r.status} content-type ${contentType}`);
  const parsed = parseJson(r.text);
  if (!parsed.ok) problems.push(`${r.status} body is not JSON`);
  else if (!validators[op.shape](parsed.value)) problems.push(`${op.shape}: ${errorsOf(validators[op.shape])}`);
  if (op.shape === 'issuedKey' && r.headers.get('cache-control') !== 'no-store') problems.push('issuance without Cache-Control: no-store (C-16)');
  if (r.status === 201 && !r.headers.has('location')) problems.push('201 without Location (C-2)');
  return problems;
}
