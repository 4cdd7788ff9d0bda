/** @cos/adapter-koa: the v1 REST API of the Compliance Organisation Service over the core. */
export { createKoaApp, createV1Router, DEFAULT_ERRORS_URL, V1_PREFIX, type HttpDeps, type HttpOptions } from './app.js';
export {
  ERROR_TABLE,
  HttpError,
  JSON_CONTENT_TYPE,
  PROBLEM_CONTENT_TYPE,
  renderError,
  type ErrorMapping,
  type HttpErrorCode,
  type HttpOnlyErrorCode,
  type ProblemBody,
  type RenderContext,
  type RenderedError,
  type StandardErrorBody,
} from './errors.js';
export { DEFAULT_BODY_LIMIT_BYTES } from './body.js';
export { mountAt } from './mount.js';
export {
  clientErrorAnswer,
  createClientErrorResponder,
  createConnectResponder,
  refusedRequestAnswer,
  type ClientErrorAnswer,
  type ClientErrorResponder,
} from './client-error.js';
export type { CosRequestState } from './state.js';
export {
  SECRET_SCANNING_PATH,
  DEFAULT_ALERT_BODY_LIMIT_BYTES,
  INVALID_SIGNATURE_MESSAGE,
  KEY_IDENTIFIER_HEADER,
  SIGNATURE_HEADER,
  type SecretScanningOptions,
} from './routes/secret-scanning.js';
